"""Scripting helpers for the OmniThink tests: which prompt is which (by prompt name), scripted
answers for the fake LLM (expansion decisions, reflections, outlines, sections), a counting
searcher and small readers of the stored information tree and report versions."""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

from engine.llm.fake import FakeLLM, PromptMatch, named, request_text
from engine.llm.protocol import ChatRequest
from engine.search.protocol import Hit
from storage.models import Node, NodeStatus

# A FreshWiki topic (data/datasets/freshwiki/freshwiki_articles_100.jsonl): the bundled corpus
# holds its article, so retrieval for it finds real passages.
TOPIC = "2022 AFL Grand Final"

# Each OmniThink prompt by its name (engine/methods/omnithink/prompts.py), so rewording a prompt
# does not change which rule answers it.
EXPAND = named("omnithink.expand")
REFLECT = named("omnithink.reflect")
DRAFT_OUTLINE = named("omnithink.draft_outline")
POLISH_OUTLINE = named("omnithink.polish_outline")
WRITE_SECTION = named("omnithink.write_section")
POLISH_ARTICLE = named("omnithink.polish_article")
ALL_PROMPTS = named("omnithink.*")

TREE_KINDS = ("topic", "subtopic")
POOL, OUTLINE, ARTICLE = "concept_pool", "outline", "final"

# Small trees for tests that do not need the paper's defaults: the root, 2 children, 4 grandchildren.
SMALL = {"subnodes": 2, "max_depth": 2}
# The root and its two children only.
FLAT = {"subnodes": 2, "max_depth": 1}


# ---------------------------------------------------------------------- reading prompts


def prompts_with(fake: FakeLLM, prompt: PromptMatch | str) -> list[str]:
    """The full text of every request rendered from `prompt` (first try only: no re-asks).

    A plain string is still taken as a piece of wording to look for (prefer the prompt names)."""
    if isinstance(prompt, str):
        return [request_text(r) for r in fake.calls if r.attempt == 1 and prompt in request_text(r)]
    return [request_text(r) for r in fake.calls_for(prompt, first_try_only=True)]


def expand_of(label: str) -> PromptMatch:
    """The expand requests about the node `label` (their "Node: ..." line)."""
    return EXPAND.where(re.compile(r"^Node: " + re.escape(label) + r"$", re.MULTILINE))


def reflect_about(label: str) -> PromptMatch:
    """The reflections over the information of the node `label` (its "## label" heading)."""
    return REFLECT.where(re.compile(r"^## " + re.escape(label) + r"$", re.MULTILINE))


def node_of(request: ChatRequest | str) -> str:
    """The node an expand prompt is about (its "Node: ..." line)."""
    text = request if isinstance(request, str) else request_text(request)
    match = re.search(r"^Node: (.*)$", text, re.MULTILINE)
    assert match, "not an expand prompt"
    return match.group(1).strip()


def k_of(request: ChatRequest) -> int:
    """How many categories an expand prompt allows ("name up to N broad categories")."""
    return int(re.search(r"name up to (\d+) broad categories", request_text(request)).group(1))


def section_of(prompt: str) -> str:
    """The section a write-section prompt is about (its "Section to write: ..." line)."""
    match = re.search(r"^Section to write: (.*)$", prompt, re.MULTILINE)
    assert match, "not a write-section prompt"
    return match.group(1).strip()


def listed_titles(prompt: str) -> list[str]:
    """The titles of the numbered source blocks (`[n] Title`) of a write-section prompt."""
    sources = prompt.split("Sources:\n\n", 1)[1].split("\n\nTopic of the page:", 1)[0]
    # Blocks are separated by a blank line (a body has none); a body line may itself start with
    # "[n] ..." (FreshWiki articles carry their own reference lists), so only block heads count.
    heads = [re.match(r"\[(\d+)\] (.+)", block) for block in sources.split("\n\n")]
    assert all(heads), "a source block without a [n] Title head"
    assert [int(h.group(1)) for h in heads] == list(range(1, len(heads) + 1))
    return [h.group(2) for h in heads]


# ---------------------------------------------------------------------- scripted answers


def subtopic(category: str, *keywords: str) -> dict[str, Any]:
    return {"category": category, "keywords": list(keywords) or [category]}


def expansion(*subtopics: dict[str, Any]) -> dict[str, Any]:
    return {"expand": bool(subtopics), "subtopics": list(subtopics)}


class ExpandScript:
    """Expansion decisions by node label: the scripted subtopics for a listed node (an empty list:
    expand=false), otherwise generated ones (as many as the prompt allows, or `fresh` when it is a
    number). Generated labels follow the node's place, not the order of the calls, so a run is
    deterministic although leaves are expanded concurrently: the root's are "Aspect 1", "Aspect 2",
    ..., those of "Aspect 1" are "Aspect 1.1", ... Thread-safe; `asked` lists the nodes asked about.
    With a `barrier`, the calls for which `barrier_for(label)` holds wait for each other first."""

    def __init__(
        self,
        by_node: dict[str, list[dict[str, Any]]] | None = None,
        fresh: int | None = None,
        barrier: threading.Barrier | None = None,
        barrier_for: Callable[[str], bool] | None = None,
    ) -> None:
        self.by_node = dict(by_node or {})
        self.fresh = fresh
        self.barrier = barrier
        self.barrier_for = barrier_for or (lambda label: True)
        self.met_at_barrier: list[bool] = []
        self.asked: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, request: ChatRequest) -> dict[str, Any]:
        label = node_of(request)
        if self.barrier is not None and self.barrier_for(label):
            try:
                self.barrier.wait(timeout=5)
                met = True
            except threading.BrokenBarrierError:
                met = False
            with self._lock:
                self.met_at_barrier.append(met)
        with self._lock:
            self.asked.append(label)
            if label in self.by_node:
                return expansion(*self.by_node[label])
        count = self.fresh if self.fresh is not None else k_of(request)
        if _is_root(request, label):
            prefix = ""
        else:
            prefix = label.removeprefix("Aspect ") + "."
        codes = [f"{prefix}{i}" for i in range(1, count + 1)]
        return expansion(
            *(subtopic(f"Aspect {code}", f"aspect {code} premiership", f"aspect {code} season") for code in codes)
        )


def _is_root(request: ChatRequest, label: str) -> bool:
    return re.search(r"^Subject: (.*)$", request_text(request), re.MULTILINE).group(1).strip() == label


class Reflections:
    """Reflections given in order (one reflection per step); after the scripted ones, fresh
    unique insights with sufficient=false."""

    def __init__(self, *answers: tuple[list[str], bool]) -> None:
        self.answers = list(answers)
        self._counter = itertools.count(1)
        self._lock = threading.Lock()

    def __call__(self, request: ChatRequest) -> dict[str, Any]:
        with self._lock:
            if self.answers:
                insights, sufficient = self.answers.pop(0)
                return {"insights": insights, "sufficient": sufficient}
            n = next(self._counter)
        return {"insights": [f"Generated insight number {n} about the grand final."], "sufficient": False}


def outline(*sections: str | tuple[str, list[str]]) -> dict[str, Any]:
    rows = []
    for section in sections:
        title, subs = (section, []) if isinstance(section, str) else section
        rows.append({"title": title, "subsections": subs})
    return {"sections": rows}


def section_writer(extra: str = "") -> Callable[[ChatRequest], str]:
    """A section writer citing every source it is shown, once each ([1], [2], ...), plus `extra`."""

    def respond(request: ChatRequest) -> str:
        text = request_text(request)
        title = section_of(text).split(" (subsections:", 1)[0]
        numbers = re.findall(r"^\[(\d+)\] ", text.split("Sources:\n\n", 1)[1], re.MULTILINE)
        claims = " ".join(f"Claim {n} about {title} [{n}]." for n in numbers) or "Nothing sourced."
        return f"## {title}\n\n{claims}{extra}"

    return respond


def article_in(request: ChatRequest) -> str:
    """The numbered article a polish prompt carries."""
    return request_text(request).split("Article to polish:\n\n", 1)[1]


# ---------------------------------------------------------------------- searching


class CountingSearcher:
    """Wraps a searcher and records every query (thread-safe)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.queries: list[str] = []
        self._lock = threading.Lock()

    @property
    def description(self) -> str:
        return self.inner.description

    def search(self, query: str, k: int = 5) -> list[Hit]:
        with self._lock:
            self.queries.append(query)
        return self.inner.search(query, k=k)


def count_searches(services, mode: str = "local") -> CountingSearcher:
    """Install a counting wrapper as the services' `mode` searcher (before the run starts)."""
    counting = CountingSearcher(services.searcher(mode))
    with services._lock:
        services._searchers[mode] = counting
    return counting


# ---------------------------------------------------------------------- reading the graph


def tree(services, run_id: str) -> list[Node]:
    return [n for n in services.repo.list_nodes(run_id) if n.kind in TREE_KINDS]


def live(services, run_id: str) -> list[Node]:
    return [n for n in tree(services, run_id) if n.status != NodeStatus.PRUNED]


def root_of(services, run_id: str) -> Node:
    return next(n for n in tree(services, run_id) if n.parent_id is None)


def children_of(services, run_id: str, node: Node) -> list[Node]:
    return [n for n in tree(services, run_id) if n.parent_id == node.id]


def by_label(services, run_id: str, label: str) -> Node:
    matches = [n for n in tree(services, run_id) if n.label == label]
    assert len(matches) == 1, f"{len(matches)} nodes labelled {label!r}"
    return matches[0]


def source_ids(services, nodes: Sequence[Node]) -> set[int]:
    return {s.id for n in nodes for s in services.repo.sources_for_node(n.id)}


def versions(services, run_id: str, kind: str):
    """Every stored version of a run state (the pool, the outline) or of a report (the article)."""
    if kind in (POOL, OUTLINE):
        return services.repo.list_run_states(run_id, kind)
    return [r for r in services.repo.list_reports(run_id) if r.kind == kind]


def graph_state(services, run_id: str) -> list[tuple]:
    """What steering may change: every node's identity, place, status, content, data and sources."""
    return [
        (
            n.id,
            n.parent_id,
            n.depth,
            n.label,
            n.status,
            n.content,
            n.data,
            n.finished_at,
            [s.id for s in services.repo.sources_for_node(n.id)],
        )
        for n in services.repo.list_nodes(run_id)
    ]


def start_run(services, question: str = TOPIC, params: dict | None = None, **budget) -> str:
    run = services.runner.create_run(
        question=question, method="omnithink", params=params or {}, llm_info=services.llm_info("fake"), **budget
    )
    services.runner.start(run.id)
    return run.id
