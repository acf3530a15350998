"""The Analysis Toolbox (paper 3.4.3): news search, information search, event extractor, history
analyzer, direct reasoning. The two search tools are agents, as in the paper: they search through the
run's Searcher (News Search asks its web backends first when the run's search has them) and the model
writes a short dated answer from the results, citing each source by its number; every source is stored
and linked to the node at once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.citations import number_citations, source_blocks, to_stored_markers
from engine.methods.base import RunContext
from engine.methods.deot import prompts
from engine.methods.deot.params import DeotParams
from engine.prompting import Prompt
from engine.safe_text import one_line
from engine.search.combined import web_first
from engine.search.dates import source_date
from engine.search.relevance import nothing_found, relevant_hits
from storage.models import Node, Source, stored_id


class SearchTurns:
    """Numbers a wave's search results in plan order, whatever order the searches finish in.

    The tasks of a wave search concurrently; without this, a node's sources were numbered in the
    order the searches came back, so the same question could give the model "[1]" and "[2]" the
    other way round (and the scripted fake a different text). Each task waits for the tasks before
    it in the wave to number their sources (or to end without searching) before numbering its own.
    Deadlock-free because `engine/parallel.py` starts a wave's calls in list order: every earlier
    task has started, and none of them waits for a later one."""

    def __init__(self, task_ids: list[str]) -> None:
        self._order = list(task_ids)
        self._done: set[str] = set()
        self._changed = threading.Condition()

    def wait_for_turn(self, task_id: str) -> None:
        earlier = self._order[: self._order.index(task_id)] if task_id in self._order else []
        with self._changed:
            self._changed.wait_for(lambda: all(t in self._done for t in earlier))

    def finish(self, task_id: str) -> None:
        """The task numbered its sources, or ended (failed, searched nothing): the next may go."""
        with self._changed:
            self._done.add(task_id)
            self._changed.notify_all()


class NodeSources:
    """The sources one node has gathered, numbered 1..N in the order found (shared by its tasks).

    `initial` restores a numbering stored earlier (a resumed solve). Text is stored with run-wide
    `[[S<id>]]` markers (`to_stored`) and shown to the model with this numbering (`to_prompt`)."""

    def __init__(self, ctx: RunContext[DeotParams], node: Node, initial: list[Source] | None = None) -> None:
        self._ctx = ctx
        self._node = node
        self._lock = threading.Lock()
        self._sources: list[Source] = []
        self._number_of: dict[int, int] = {}
        # Hits left out as unrelated to their query, and queries that kept nothing (node data).
        self.dropped: list[dict[str, Any]] = []
        self.unanswered_queries: list[str] = []
        for source in initial or []:
            self._append(source)

    def _append(self, source: Source) -> int:
        source_id = stored_id(source)
        if source_id not in self._number_of:
            self._sources.append(source)
            self._number_of[source_id] = len(self._sources)
        return self._number_of[source_id]

    def search(
        self, query: str, k: int, *, turn: tuple[SearchTurns, str] | None = None, prefer_web: bool = False
    ) -> list[int]:
        """Search, keep only the hits about the query, store and number them (in the wave's plan
        order when `turn` says which task of which wave this is). `prefer_web`: the run's web
        backends first when its search has them (`combined.web_first`)."""
        searcher = web_first(self._ctx.searcher) if prefer_web else None
        hits = self._ctx.search(query, k=k, node=self._node, searcher=searcher)
        relevant = relevant_hits(query, hits, floor=self._ctx.params.relevance_floor, embedder=self._ctx.embedder)
        self._ctx.note_unrelated(query, relevant, self._node)
        # Web results: the article's passage about the query, not its snippet (the tools quote 1,200 characters).
        kept = self._ctx.read_pages(
            query, relevant.kept, limit=self._ctx.params.read_pages, max_chars=1200, node=self._node
        ).hits
        stored = self._ctx.graph.add_sources(kept, node=self._node) if kept else []
        if turn is not None:
            turns, task_id = turn
            turns.wait_for_turn(task_id)
        try:
            with self._lock:
                self.dropped.extend(relevant.dropped_summary())
                if not stored:
                    self.unanswered_queries.append(query)
                return [self._append(source) for source in stored]
        finally:
            if turn is not None:
                turns.finish(task_id)

    def nothing_found(self) -> str:
        return nothing_found(self._ctx.searcher.description)

    @property
    def all(self) -> list[Source]:
        with self._lock:
            return list(self._sources)

    def to_stored(self, text: str) -> tuple[str, list[int]]:
        """The model's `[n]` as run-wide `[[S<id>]]` markers, and the numbers it was never shown."""
        return to_stored_markers(text, self.all)

    def to_prompt(self, stored: str) -> str:
        """Stored `[[S<id>]]` markers as this node's `[n]` (markers of other sources are dropped)."""
        with self._lock:
            numbering = dict(self._number_of)
        return number_citations(stored, numbering.keys(), start=numbering).text

    def ids_of(self, numbers: list[int]) -> list[int]:
        with self._lock:
            return [stored_id(self._sources[n - 1]) for n in numbers if 1 <= n <= len(self._sources)]

    def numbers_of(self, source_ids: list[int]) -> list[int] | None:
        """The numbers of these sources; None if one of them is not numbered here."""
        with self._lock:
            if not all(i in self._number_of for i in source_ids):
                return None
            return [self._number_of[i] for i in source_ids]

    def blocks(self, numbers: list[int] | None = None, *, dated: bool = False) -> str:
        """The sources as numbered blocks for a prompt; `dated` adds the date each one gives, if any."""
        with self._lock:
            chosen = sorted(set(numbers)) if numbers is not None else list(range(1, len(self._sources) + 1))
            sources = [self._sources[n - 1] for n in chosen]
        if not dated:
            return source_blocks(sources, numbers=chosen, max_chars=1200)
        return "\n\n".join(
            f"{source_blocks([source], numbers=[n], max_chars=1200)}\nDate: {source_date(source) or 'not given'}"
            for n, source in zip(chosen, sources)
        )

    def listing(self, numbers: list[int]) -> str:
        """The numbered list of these sources, each with where it is and its date: what an agent's
        answer ends with, so every source it drew on stays citable and dated."""
        with self._lock:
            chosen = [(n, self._sources[n - 1]) for n in sorted(set(numbers)) if 1 <= n <= len(self._sources)]
        lines = [
            f"- [{n}] {one_line(source.title)} ({source.url or source.ref}; date: {source_date(source) or 'not given'})"
            for n, source in chosen
        ]
        return "\n".join(lines)


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
    turns: SearchTurns | None = None

    def search(self, *, prefer_web: bool = False) -> list[int]:
        """This task's search of its input, numbered in its wave's plan order."""
        turn = (self.turns, self.task["id"]) if self.turns is not None else None
        return self.sources.search(
            self.task["input"], k=self.task.get("max_results", 3), turn=turn, prefer_web=prefer_web
        )

    @property
    def dependency_text(self) -> str:
        done = [d for d in self.dependencies if d.status == "success"]
        if not done:
            return ""
        return "Results of earlier tasks:\n\n" + "\n\n".join(d.as_prompt_text() for d in done) + "\n\n"

    @property
    def dependency_sources(self) -> list[int]:
        return sorted({n for d in self.dependencies for n in d.source_numbers})


def _search_agent(
    prompt: Prompt, *, prefer_web: bool, max_tokens: int | None = None
) -> Callable[[RunContext[DeotParams], ToolCall], tuple[str, list[int]]]:
    """A search agent of the paper's toolbox (News Search, Information Search): search, then a
    short answer the model writes from the results, each fact with its source number and the dates
    the sources give; the answer opens with when and where it searched and ends with the sources it
    was given (number, where, date), so the summary and the report can cite every one."""

    def run(ctx: RunContext[DeotParams], call: ToolCall) -> tuple[str, list[int]]:
        numbers = call.search(prefer_web=prefer_web)
        if not numbers:
            return call.sources.nothing_found(), []
        cap = min(max_tokens, ctx.params.tool_max_tokens) if max_tokens else ctx.params.tool_max_tokens
        values = dict(
            today=ctx.today.isoformat(),
            sources=call.sources.blocks(numbers, dated=True),
            input=call.task["input"],
            count=len(numbers),
        )
        text = ctx.llm.text(
            prompt.render(**{k: v for k, v in values.items() if k in prompt.placeholders()}),
            purpose="tool",
            node_id=call.node.id,
            max_tokens=cap,
        )
        where = web_first(ctx.searcher).description if prefer_web else ctx.searcher.description
        return (
            f"Searched {where} on {ctx.today.isoformat()}.\n\n{text.strip()}\n\n"
            f"Sources:\n{call.sources.listing(numbers)}"
        ), numbers

    return run


news_search = _search_agent(prompts.NEWS_SEARCH, prefer_web=True)
info_search = _search_agent(prompts.INFO_SEARCH, prefer_web=False, max_tokens=500)


def _analysis_tool(prompt: Prompt) -> Callable[[RunContext[DeotParams], ToolCall], tuple[str, list[int]]]:
    def run(ctx: RunContext[DeotParams], call: ToolCall) -> tuple[str, list[int]]:
        numbers = call.dependency_sources
        block = f"Sources:\n\n{call.sources.blocks(numbers)}\n\n" if numbers else ""
        text = ctx.llm.text(
            prompt.render(sources_block=block, dependencies=call.dependency_text, input=call.task["input"]),
            purpose="tool",
            node_id=call.node.id,
            max_tokens=ctx.params.tool_max_tokens,
        )
        return text.strip(), numbers

    return run


# The tools that search (and so number sources); only they take turns in a wave (SearchTurns).
SEARCH_TOOLS = ("news_search", "info_search")

TOOLS: dict[str, Callable[[RunContext[DeotParams], ToolCall], tuple[str, list[int]]]] = {
    "news_search": news_search,
    "info_search": info_search,
    "event_extractor": _analysis_tool(prompts.EVENT_EXTRACTOR),
    "history_analyzer": _analysis_tool(prompts.HISTORY_ANALYZER),
    "direct_reasoning": _analysis_tool(prompts.DIRECT_REASONING),
}
