"""Scripting helpers for the DEoT tests: prompt markers, scripted answers for the fake LLM, a gate
to hold a run mid-way, and small readers of the stored graph."""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from engine.llm.fake import FakeLLM, default_answer, request_text
from engine.llm.protocol import ChatRequest
from engine.llm.structured import DEFAULT_MAX_REASKS
from storage.models import Node

QUESTION = "How did the Apollo program shape later space exploration?"

# A distinctive piece of each DEoT prompt's system text.
CONTROLLER = "You steer an analysis tree"
BREADTH = "You map the different aspects"
DEPTH = "You write exactly one follow-up question"
PLANNER = "You break a research query into tasks"
PLAN_VALIDATOR = "You review task plans"
SUMMARY = "You condense the results"
FACT_CHECK = "You verify factual accuracy"
FINAL_REPORT = "You write the final analytical report"
PROMPTER = "You refine research questions before analysis. Today"  # the first attempt only
PROMPTER_ANY = "You refine research questions before analysis"  # first attempt and error handling
PROMPTER_REPAIR = "and your previous attempt failed"
INFO_SEARCH = "You compile factual information"
EVENT_EXTRACTOR = "You extract the key events"
HISTORY_ANALYZER = "You are a historian"
DIRECT_REASONING = "You reason carefully and clearly"

# A structured answer that never validates, and how many times it must be given for the
# structured-output layer to give up (first try plus the re-asks).
INVALID = {"wrong": "shape"}
ATTEMPTS_TO_FAIL = DEFAULT_MAX_REASKS + 1

# Small trees for tests that do not need the paper's defaults: the root and three aspects.
SMALL = {"max_layers": 1, "max_nodes": 4}


# ---------------------------------------------------------------------- reading prompts


def text_of(request: ChatRequest) -> str:
    return request_text(request)


def layer_of(request: ChatRequest) -> int:
    """The layer a controller prompt is about ("Current layer: N of at most M")."""
    match = re.search(r"Current layer: (\d+)", request_text(request))
    assert match, "not a controller prompt"
    return int(match.group(1))


def query_of(request: ChatRequest) -> str:
    """The node query a DEoT prompt is about: its "Question: ..." line."""
    match = re.search(r"^Question: (.*)$", request_text(request), re.MULTILINE)
    assert match, "the prompt has no Question: line"
    return match.group(1).strip()


def at_most(request: ChatRequest) -> int:
    """How many aspects a breadth prompt asks for."""
    return int(re.search(r"Give at most (\d+) aspects", request_text(request)).group(1))


def prompts_with(fake: FakeLLM, marker: str) -> list[str]:
    """The full text of every request whose messages contain `marker` (first try only)."""
    return [request_text(r) for r in fake.calls
            if marker in request_text(r) and "That answer was not valid" not in request_text(r)]


def about(marker: str, query: str) -> re.Pattern[str]:
    """A rule pattern for the `marker` prompt about the node whose query is `query`."""
    return re.compile(re.escape(marker) + r".*^Question: " + re.escape(query) + r"$", re.DOTALL | re.MULTILINE)


# ---------------------------------------------------------------------- scripted answers


def decision(choice: str, reasoning: str = "", unresolved: list[str] | None = None) -> dict[str, Any]:
    return {"decision": choice, "reasoning": reasoning or f"{choice} is the right step here",
            "unresolved_points": unresolved or []}


def controller_by_layer(choose: Callable[[int], str]) -> Callable[[ChatRequest], dict[str, Any]]:
    """A controller that decides from the node's layer; the reasoning names the layer."""

    def respond(request: ChatRequest) -> dict[str, Any]:
        layer = layer_of(request)
        choice = choose(layer)
        return decision(choice, f"layer {layer}: {choice.lower()} chosen",
                        ["an open point"] if choice == "DEPTH" else [])

    return respond


def task(task_id: str, tool: str, input: str, depends_on: list[str] | None = None) -> dict[str, Any]:
    return {"id": task_id, "description": f"{tool} for {input}", "tool": tool, "input": input,
            "max_results": 3, "reason": f"{tool} suits this", "depends_on": depends_on or []}


def plan(*tasks: dict[str, Any]) -> dict[str, Any]:
    return {"tasks": list(tasks)}


def aspect(query: str, priority: str = "HIGH", name: str = "") -> dict[str, Any]:
    return {"aspect": name or query.split("?")[0][:40], "category": "Historical",
            "reasoning": f"{query} matters", "query": query, "priority": priority}


def aspects(*items: dict[str, Any]) -> dict[str, Any]:
    return {"aspects": list(items)}


class BreadthScript:
    """Breadth answers: the scripted queries the first time a given parent is expanded, unique
    generated ones for every other call (as many as the prompt allows), so no proposal repeats an
    existing label (a repeated label would not create a node)."""

    def __init__(self, by_parent: dict[str, list[str]] | None = None) -> None:
        self.by_parent = dict(by_parent or {})
        self._counter = itertools.count(1)
        self._lock = threading.Lock()

    def __call__(self, request: ChatRequest) -> dict[str, Any]:
        with self._lock:
            scripted = self.by_parent.pop(query_of(request), None)
            numbers = [next(self._counter) for _ in range(at_most(request))]
        if scripted is not None:
            return aspects(*(aspect(q) for q in scripted[:at_most(request)]))
        return aspects(*(aspect(f"Which extra aspect number {k} matters here?") for k in numbers))


def depth_follow_up(request: ChatRequest) -> dict[str, Any]:
    """A depth answer naming its parent, so each follow-up label is unique."""
    return {"question": f"What lies deeper behind: {query_of(request)}", "reasoning": "an open point",
            "priority": "HIGH"}


class Gate:
    """A responder that blocks the run at one call until the test opens it (to act mid-run).

    `fake.when(pattern, gate)` before other rules for that prompt; afterwards it answers with the
    fake's default (or with `then`)."""

    def __init__(self, then: Any = None) -> None:
        self.reached = threading.Event()
        self.opened = threading.Event()
        self.then = then

    def __call__(self, request: ChatRequest) -> Any:
        self.reached.set()
        if not self.opened.wait(20):
            raise AssertionError("the gate was never opened")
        if self.then is None:
            return default_answer(request)
        return self.then(request) if callable(self.then) else self.then

    def wait_reached(self, timeout: float = 20) -> None:
        assert self.reached.wait(timeout), "the run never reached the gate"


class Sleep:
    """A responder that answers after a pause (the default answer unless `then` is given)."""

    def __init__(self, seconds: float, then: Any = None) -> None:
        self.seconds = seconds
        self.then = then

    def __call__(self, request: ChatRequest) -> Any:
        time.sleep(self.seconds)
        return default_answer(request) if self.then is None else self.then


# ---------------------------------------------------------------------- reading the graph


def questions(services, run_id: str) -> list[Node]:
    return services.repo.list_nodes(run_id, kind="question")


def by_label(services, run_id: str, label: str) -> Node:
    matches = [n for n in questions(services, run_id) if n.label == label]
    assert len(matches) == 1, f"{len(matches)} nodes labelled {label!r}"
    return matches[0]


def root_of(services, run_id: str) -> Node:
    return next(n for n in questions(services, run_id) if n.parent_id is None)


def children_of(services, run_id: str, node: Node) -> list[Node]:
    return [n for n in questions(services, run_id) if n.parent_id == node.id]


def graph_state(services, run_id: str) -> list[tuple]:
    """What steering may change: every node's identity, place, status, content and data."""
    return [(n.id, n.parent_id, n.depth, n.label, n.status, n.content, n.data, n.finished_at)
            for n in services.repo.list_nodes(run_id)]


def ts(value: str) -> datetime:
    return datetime.fromisoformat(value)


def wait_for(predicate: Callable[[], bool], timeout: float = 20.0, interval: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError("condition not reached in time")


def start_run(services, question: str = QUESTION, params: dict | None = None) -> str:
    run = services.runner.create_run(question=question, method="deot", params=params or {},
                                     llm_info=services.llm_info("fake"))
    services.runner.start(run.id)
    return run.id
