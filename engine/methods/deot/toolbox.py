"""The Analysis Toolbox (paper 3.4.3): news search, information search, event extractor, history
analyzer, direct reasoning. Searches go through the run's Searcher (web when online, the local
corpus otherwise); every source is stored and linked to the node at once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.citations import source_blocks
from engine.methods.base import RunContext
from engine.methods.deot import prompts
from storage.models import Node, Source


class NodeSources:
    """The sources one node has gathered, numbered 1..N in the order found (shared by its tasks)."""

    def __init__(self, ctx: RunContext, node: Node, initial: list[Source] | None = None) -> None:
        self._ctx = ctx
        self._node = node
        self._lock = threading.Lock()
        self._sources: list[Source] = []
        self._number_of: dict[int, int] = {}
        for source in initial or []:
            self._append(source)

    def _append(self, source: Source) -> int:
        if source.id not in self._number_of:
            self._sources.append(source)
            self._number_of[source.id] = len(self._sources)
        return self._number_of[source.id]

    def search(self, query: str, k: int) -> list[int]:
        hits = self._ctx.searcher.search(query, k=k)
        stored = self._ctx.graph.add_sources(hits, node=self._node)
        with self._lock:
            return [self._append(source) for source in stored]

    @property
    def all(self) -> list[Source]:
        with self._lock:
            return list(self._sources)

    def blocks(self, numbers: list[int] | None = None) -> str:
        with self._lock:
            chosen = sorted(set(numbers)) if numbers is not None else list(range(1, len(self._sources) + 1))
            return source_blocks([self._sources[n - 1] for n in chosen], numbers=chosen, max_chars=1200)


@dataclass
class TaskResult:
    task_id: str
    tool: str
    status: str  # success | failure | skipped
    output: str = ""
    error: str = ""
    source_numbers: list[int] = field(default_factory=list)
    started_at: str | None = None
    finished_at: str | None = None

    def as_prompt_text(self) -> str:
        if self.status != "success":
            return f"[{self.task_id} · {self.tool}] FAILED: {self.error or self.status}"
        return f"[{self.task_id} · {self.tool}]\n{self.output}"


@dataclass
class ToolCall:
    task: dict[str, Any]
    dependencies: list[TaskResult]
    node: Node
    sources: NodeSources

    @property
    def dependency_text(self) -> str:
        done = [d for d in self.dependencies if d.status == "success"]
        if not done:
            return ""
        return "Results of earlier tasks:\n\n" + "\n\n".join(d.as_prompt_text() for d in done) + "\n\n"

    @property
    def dependency_sources(self) -> list[int]:
        return sorted({n for d in self.dependencies for n in d.source_numbers})


def news_search(ctx: RunContext, call: ToolCall) -> tuple[str, list[int]]:
    numbers = call.sources.search(call.task["input"], k=call.task.get("max_results", 3))
    if not numbers:
        return "No articles found.", []
    by_number = {i + 1: s for i, s in enumerate(call.sources.all)}
    articles = []
    for n in numbers:
        source = by_number[n]
        summary = (source.snippet or source.text)[:500].strip()
        articles.append(f"### [{n}] {source.title}\nSource: {source.url or source.ref}\nSummary: {summary}")
    return "\n\n".join(articles), numbers


def info_search(ctx: RunContext, call: ToolCall) -> tuple[str, list[int]]:
    numbers = call.sources.search(call.task["input"], k=call.task.get("max_results", 3))
    if not numbers:
        return "No information found for this request.", []
    text = ctx.llm.text(prompts.INFO_SEARCH.render(sources=call.sources.blocks(numbers), input=call.task["input"]),
                        purpose="tool", node_id=call.node.id, max_tokens=min(500, ctx.params.tool_max_tokens))
    return text.strip(), numbers


def _analysis_tool(prompt) -> Callable[[RunContext, ToolCall], tuple[str, list[int]]]:
    def run(ctx: RunContext, call: ToolCall) -> tuple[str, list[int]]:
        numbers = call.dependency_sources
        block = f"Sources:\n\n{call.sources.blocks(numbers)}\n\n" if numbers else ""
        text = ctx.llm.text(prompt.render(sources_block=block, dependencies=call.dependency_text, input=call.task["input"]),
                            purpose="tool", node_id=call.node.id, max_tokens=ctx.params.tool_max_tokens)
        return text.strip(), numbers

    return run


TOOLS: dict[str, Callable[[RunContext, ToolCall], tuple[str, list[int]]]] = {
    "news_search": news_search,
    "info_search": info_search,
    "event_extractor": _analysis_tool(prompts.EVENT_EXTRACTOR),
    "history_analyzer": _analysis_tool(prompts.HISTORY_ANALYZER),
    "direct_reasoning": _analysis_tool(prompts.DIRECT_REASONING),
}
