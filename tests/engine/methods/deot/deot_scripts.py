"""Scripting helpers for the DEoT tests: which prompt is which (by prompt name, not wording),
scripted answers for the fake LLM, a gate to hold a run mid-way, and small readers of the stored
graph."""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from engine.llm.fake import FakeLLM, PromptMatch, default_answer, named, request_text
from engine.llm.protocol import ChatRequest
from engine.llm.structured import DEFAULT_MAX_REASKS
from storage.models import Node

QUESTION = "How did the Apollo program shape later space exploration?"

# Each DEoT prompt by its name (engine/methods/deot/prompts.py), so rewording a prompt does not
# change which rule answers it. Use as `fake.when(CONTROLLER, ...)`, `prompts_with(fake, SUMMARY)`,
# `fake.calls_for(PLANNER)`, or narrowed to one node with `about(PLANNER, query)`.
CONTROLLER = named("deot.controller")
BREADTH = named("deot.breadth")
DEPTH = named("deot.depth")
FOLLOW_UPS_RETRY = named("deot.follow_ups_retry")  # asked when an engine only repeated asked questions
PLAN_FIRST = named("deot.plan_tasks")  # a node's first plan
PLAN_REVISION = named("deot.revise_plan")  # a plan redone after the review's feedback
PLANNER = named("deot.plan_tasks", "deot.revise_plan")  # both
PLAN_VALIDATOR = named("deot.validate_plan")
SUMMARY = named("deot.summarize_results")
PLAIN_SUMMARY = named("deot.summarize_plain")  # asked when every structured summary was cut off
FACT_CHECK = named("deot.fact_check")
FINAL_REPORT = named("deot.final_report")
PROMPTER = named("deot.optimize_query")  # the first attempt only
PROMPTER_REPAIR = named("deot.repair_query")  # the error-handling path
PROMPTER_ANY = named("deot.optimize_query", "deot.repair_query")  # both
INFO_SEARCH = named("deot.info_search")
EVENT_EXTRACTOR = named("deot.event_extractor")
HISTORY_ANALYZER = named("deot.history_analyzer")
DIRECT_REASONING = named("deot.direct_reasoning")
ALL_PROMPTS = named("deot.*")

# A structured answer that never validates, and how many times it must be given for the
# structured-output layer to give up (first try plus the re-asks).
INVALID = {"wrong": "shape"}
ATTEMPTS_TO_FAIL = DEFAULT_MAX_REASKS + 1

# Small trees for tests that do not need the paper's defaults: the root and three aspects.
SMALL = {"max_layers": 2, "max_nodes": 4}


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
    return int(re.search(r"Give (?:at most|exactly) (\d+) aspects", request_text(request)).group(1))


def prompts_with(fake: FakeLLM, prompt: PromptMatch | str) -> list[str]:
    """The full text of every request rendered from `prompt` (first try only: no re-asks).

    A plain string is still taken as a piece of wording to look for (prefer the prompt names)."""
    if isinstance(prompt, str):
        return [request_text(r) for r in fake.calls if r.attempt == 1 and prompt in request_text(r)]
    return [request_text(r) for r in fake.calls_for(prompt, first_try_only=True)]


def about(prompt: PromptMatch, query: str) -> PromptMatch:
    """The `prompt` requests about the node whose query is `query` (their "Question: ..." line);
    a rule for `fake.when`, and `.search(text)` tells whether a prompt's text is about it."""
    return prompt.where(re.compile(r"^Question: " + re.escape(query) + r"$", re.MULTILINE))


# ---------------------------------------------------------------------- scripted answers


def decision(choice: str, reasoning: str = "", unresolved: list[str] | None = None) -> dict[str, Any]:
    return {
        "decision": choice,
        "reasoning": reasoning or f"{choice} is the right step here",
        "unresolved_points": unresolved or [],
    }


def controller_by_layer(choose: Callable[[int], str]) -> Callable[[ChatRequest], dict[str, Any]]:
    """A controller that decides from the node's layer; the reasoning names the layer."""

    def respond(request: ChatRequest) -> dict[str, Any]:
        layer = layer_of(request)
        choice = choose(layer)
        return decision(
            choice, f"layer {layer}: {choice.lower()} chosen", ["an open point"] if choice == "DEPTH" else []
        )

    return respond


def task(task_id: str, tool: str, input: str, depends_on: list[str] | None = None) -> dict[str, Any]:
    return {
        "id": task_id,
        "description": f"{tool} for {input}",
        "tool": tool,
        "input": input,
        "max_results": 3,
        "reason": f"{tool} suits this",
        "depends_on": depends_on or [],
    }


def plan(*tasks: dict[str, Any]) -> dict[str, Any]:
    return {"tasks": list(tasks)}


def aspect(query: str, priority: str = "HIGH", name: str = "") -> dict[str, Any]:
    return {
        "aspect": name or query.split("?")[0][:40],
        "category": "Historical",
        "reasoning": f"{query} matters",
        "query": query,
        "priority": priority,
    }


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
            return aspects(*(aspect(q) for q in scripted[: at_most(request)]))
        return aspects(*(aspect(f"Which extra aspect number {k} matters here?") for k in numbers))


def depth_follow_up(request: ChatRequest) -> dict[str, Any]:
    """A depth answer naming its parent, so each follow-up label is unique."""
    return {
        "question": f"What lies deeper behind: {query_of(request)}",
        "reasoning": "an open point",
        "priority": "HIGH",
    }


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
    return [
        (n.id, n.parent_id, n.depth, n.label, n.status, n.content, n.data, n.finished_at)
        for n in services.repo.list_nodes(run_id)
    ]


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
    run = services.runner.create_run(
        question=question, method="deot", params=params or {}, llm_info=services.llm_info("fake")
    )
    services.runner.start(run.id)
    return run.id
