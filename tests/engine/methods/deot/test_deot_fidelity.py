"""DEoT against its paper and its authors' code (issue 17, items 1-4), as traces on the scripted fake:
layers counted with the question as layer 1; Result Validation that writes an INVALID summary again
with the issues, then flags (or drops) the node; the search tools as agents whose answers carry
dates and sources (News Search asking the web first); the paper's controller and breadth engine one
switch away."""

from __future__ import annotations

import re

from engine.citations import cited_source_ids
from engine.llm.fake import named, request_text
from engine.search.combined import CombinedSearcher, WebFirstSearcher, web_first
from engine.search.dates import date_in
from engine.search.exclusion import ExcludingSearcher, SearchExclusions
from engine.search.protocol import Hit
from storage.models import NodeStatus, RunStatus
from tests.engine.methods.deot.deot_scripts import (
    BREADTH,
    CONTROLLER,
    FACT_CHECK,
    INFO_SEARCH,
    PLANNER,
    QUESTION,
    SUMMARY,
    aspect,
    aspects,
    at_most,
    decision,
    layer_of,
    plan,
    questions,
    root_of,
    task,
)
from tests.support.fixtures_engine import run_to_end

REVISE_SUMMARY = named("deot.revise_summary")
NEWS_SEARCH = named("deot.news_search")
PAPER_CONTROLLER = named("deot.controller_paper")
LEAN = {"optimize_query": False, "validate_plans": False}


def _run(services, params: dict, *, search: str = "local") -> str:
    run_id = run_to_end(services, QUESTION, "deot", {**LEAN, **params}, search=search)
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.DONE, (run.status, run.error)
    return run_id


def _check(status: str, issues: list[str] | None = None) -> dict:
    return {"tasks": [], "summary": {"status": status, "confidence": "HIGH", "issues": issues or [], "evidence": []}}


# ---------------------------------------------------------------------- 1. layers


def test_max_layers_counts_the_question_as_layer_one(services, fake_llm):
    fake_llm.when(CONTROLLER, decision("BREADTH"))
    fake_llm.when(
        BREADTH, lambda request: aspects(*(aspect(f"{layer_of_breadth(request)} aspect {i}?") for i in (1, 2)))
    )
    run_id = _run(services, {"max_layers": 3, "max_nodes": 40, "max_aspects": 2})
    nodes = questions(services, run_id)
    # The paper's max_layers 3: the question (layer 1) and two levels below it, no more.
    assert max(n.depth for n in nodes) == 2 and len(nodes) == 1 + 2 + 4
    for node in nodes:
        if node.depth == 2:
            assert node.data["expansion"]["decision"] == "STOP" and node.data["expansion"]["by"] == "rule"
            assert "maximum layer" in node.data["expansion"]["reasoning"]
    # The controller is told the layer as the paper counts it, and never asked at the last layer.
    assert sorted({layer_of(r) for r in fake_llm.calls_for(CONTROLLER)}) == [1, 2]
    assert all("of at most 3" in request_text(r) for r in fake_llm.calls_for(CONTROLLER))


def layer_of_breadth(request) -> str:
    return re.search(r"^Question: (.*)$", request_text(request), re.MULTILINE).group(1)[:30]


def test_max_layers_one_answers_the_question_only(services, fake_llm):
    run_id = _run(services, {"max_layers": 1})
    (root,) = questions(services, run_id)
    assert root.data["expansion"]["decision"] == "STOP" and not fake_llm.calls_for(CONTROLLER)


# ---------------------------------------------------------------------- 2. result validation


def test_an_invalid_summary_is_written_again_with_the_issues_then_flagged(services, fake_llm):
    error = "The Apollo program did not end in 1959; it ended in 1972."
    fake_llm.when(FACT_CHECK, _check("INVALID", [error]))
    run_id = _run(services, {"max_nodes": 1, "max_summary_attempts": 3})
    root = root_of(services, run_id)
    # One summary, then two rewrites, each given the fact check's issues; three checks in all.
    assert len(fake_llm.calls_for(SUMMARY, first_try_only=True)) == 1
    rewrites = fake_llm.calls_for(REVISE_SUMMARY, first_try_only=True)
    assert len(rewrites) == 2 and all(error in request_text(r) for r in rewrites)
    assert all("Previous summary:" in request_text(r) for r in rewrites)
    assert len(fake_llm.calls_for(FACT_CHECK, first_try_only=True)) == 3
    assert [a["summary"]["status"] for a in root.data["validation_attempts"]] == ["INVALID"] * 3
    # Flagged, not dropped: the node is done, its issues beside its summary, and the report writer sees them.
    assert root.status == NodeStatus.DONE and root.data["validation_flagged"] == [error]
    assert "Fact check: disputed" in root.content and error in root.content
    events = [e.text for e in services.repo.list_events(run_id)]
    assert any("writing it again with them as feedback (2 of 3)" in t for t in events)


def test_a_summary_corrected_after_feedback_passes(services, fake_llm):
    fake_llm.when(FACT_CHECK, _check("INVALID", ["the date is wrong"]), times=1)
    fake_llm.when(FACT_CHECK, _check("VALID"))
    run_id = _run(services, {"max_nodes": 1})
    root = root_of(services, run_id)
    assert len(fake_llm.calls_for(REVISE_SUMMARY, first_try_only=True)) == 1
    assert [a["summary"]["status"] for a in root.data["validation_attempts"]] == ["INVALID", "VALID"]
    assert not root.data.get("validation_flagged") and "disputed" not in root.content


def test_drop_fails_a_node_whose_summary_stays_invalid(services, fake_llm):
    fake_llm.when(FACT_CHECK, _check("INVALID", ["wrong year"]))
    fake_llm.when(BREADTH, aspects(aspect("Which missions followed Apollo?")))
    fake_llm.when(CONTROLLER, decision("BREADTH"))
    run_id = run_to_end(
        services, QUESTION, "deot", {**LEAN, "max_nodes": 2, "max_summary_attempts": 2, "invalid_summary": "drop"}
    )
    root = root_of(services, run_id)
    assert root.status == NodeStatus.FAILED and "wrong year" in root.error
    assert len(fake_llm.calls_for(REVISE_SUMMARY, first_try_only=True)) == 1
    # A dropped node is not expanded and reaches no report: the run answered nothing.
    assert len(questions(services, run_id)) == 1
    assert services.repo.get_run(run_id).status == RunStatus.FAILED


# ---------------------------------------------------------------------- 3. the search agents


def test_search_tools_answer_with_dates_and_sources(services, fake_llm):
    fake_llm.when(
        PLANNER, plan(task("task1", "news_search", "Apollo program"), task("task2", "info_search", "Apollo 11"))
    )
    run_id = _run(services, {"max_nodes": 1})
    root = root_of(services, run_id)
    linked = {s.id: s for s in services.repo.sources_for_node(root.id)}
    today = services.repo.get_run(run_id).created_at.date().isoformat()
    for record, prompt in zip(root.data["tasks"], (NEWS_SEARCH, INFO_SEARCH)):
        assert record["status"] == "success"
        output = record["output"]
        # Dated: when it searched, and each source's date (or that it gives none).
        assert output.startswith("Searched local corpus") and today in output.split("\n")[0]
        listing = output.split("Sources:\n", 1)[1].splitlines()
        assert listing and all("date: " in line for line in listing)
        # Sourced: every source it was given is listed with its stored marker, and is the node's.
        cited = cited_source_ids(output)
        assert cited and set(cited) <= set(linked) and set(record["source_ids"]) <= set(cited)
        for sid in record["source_ids"]:
            assert linked[sid].title in output
        (asked,) = fake_llm.calls_for(prompt, first_try_only=True)
        assert f"Today is {today}" in request_text(asked) and "Date: " in request_text(asked)


class _Backend:
    def __init__(self, name: str, kind: str) -> None:
        self.name, self.hit_kind, self.queries = name, kind, []

    @property
    def description(self) -> str:
        return self.name

    def search(self, query: str, k: int = 5) -> list[Hit]:
        self.queries.append(query)
        return [
            Hit(
                title=f"{self.name} {i} on 2024-03-0{i + 1}",
                ref=f"{self.name}/{query}/{i}",
                snippet=query,
                text=query,
                kind="web" if self.hit_kind == "web" else "corpus",
            )
            for i in range(2)
        ]


def test_news_asks_the_web_first_and_keeps_exclusions():
    web, local = _Backend("web", "web"), _Backend("corpus", "corpus")
    both = CombinedSearcher([local, web])
    first = web_first(both)
    assert isinstance(first, WebFirstSearcher) and first.description == "web, then corpus"
    hits = first.search("moon", k=3)
    assert [h.ref for h in hits] == ["web/moon/0", "web/moon/1", "corpus/moon/0"]
    assert web_first(local) is local  # nothing to prefer
    excluding = ExcludingSearcher(both, SearchExclusions(titles=["web 0 on 2024-03-01"]))
    assert [h.ref for h in web_first(excluding).search("moon", k=2)] == ["web/moon/1", "corpus/moon/0"]
    assert date_in(hits[0].title) == "2024-03-01" and date_in("on May 3, 2024 and 4 June 2023") == "2024-05-03"


# ---------------------------------------------------------------------- 4. the paper's engines


def test_paper_engines_switch_gives_the_papers_controller_and_breadth(services, fake_llm):
    fake_llm.when(PAPER_CONTROLLER, {"wrong": "shape"})  # never usable: the paper defaults to BREADTH
    run_id = _run(services, {"paper_engines": True, "max_layers": 2, "max_nodes": 4})
    root = root_of(services, run_id)
    assert root.data["expansion"]["decision"] == "BREADTH" and root.data["expansion"]["by"] == "default"
    (breadth,) = fake_llm.calls_for(BREADTH, first_try_only=True)
    assert "Give exactly 3 aspects" in request_text(breadth) and at_most(breadth) == 3
    assert not fake_llm.calls_for(CONTROLLER)
    controller = fake_llm.calls_for(PAPER_CONTROLLER, first_try_only=True)[0]
    assert "STOP" not in request_text(controller) and "STOP" not in str(controller.json_schema)


def test_ours_stops_a_branch_on_an_unusable_controller_answer(services, fake_llm):
    fake_llm.when(CONTROLLER, {"wrong": "shape"})
    run_id = _run(services, {"max_layers": 2, "max_nodes": 4})
    root = root_of(services, run_id)
    assert root.data["expansion"]["decision"] == "STOP" and root.data["expansion"]["by"] == "error"
    assert len(questions(services, run_id)) == 1
