"""DEoT run traces on the scripted fake LLM: the tree's shape and limits (paper defaults), what
each node records, planning and plan validation, the executor's ordering and failure handling,
the Base Prompter's paths, the controller's STOP, the report's citations, layer parallelism,
node-level failures and determinism."""

from __future__ import annotations

import re
import threading

import pytest

from engine.citations import cited_source_ids
from engine.llm.fake import default_answer, request_text
from engine.llm.protocol import LLMRequestError
from engine.methods.deot.params import DeotParams
from engine.methods.deot.planner import format_problems
from engine.methods.deot.schemas import PRIORITY_WEIGHT
from engine.report import render_markdown
from engine.search.embeddings import Embedder
from storage.models import NodeStatus, RunStatus
from tests.engine.methods.deot.deot_scripts import (
    ATTEMPTS_TO_FAIL,
    BREADTH,
    CONTROLLER,
    DEPTH,
    EVENT_EXTRACTOR,
    FINAL_REPORT,
    FOLLOW_UPS_RETRY,
    INFO_SEARCH,
    INVALID,
    PLAN_VALIDATOR,
    PLANNER,
    PROMPTER,
    PROMPTER_ANY,
    PROMPTER_REPAIR,
    QUESTION,
    SMALL,
    SUMMARY,
    BreadthScript,
    Sleep,
    about,
    aspect,
    aspects,
    by_label,
    children_of,
    controller_by_layer,
    decision,
    depth_follow_up,
    plan,
    prompts_with,
    query_of,
    questions,
    root_of,
    task,
    ts,
)
from tests.support.fixtures_embedder import RememberingWords
from tests.support.fixtures_engine import run_to_end

ALL_TOOLS = DeotParams().enabled_tools()
ROOT_ONLY = {"max_nodes": 1}  # the root is solved, then the node budget stops the tree
CHILDREN = [
    "Which engineering legacies did Apollo leave?",
    "How did Apollo change NASA's budget politics?",
    "What did the Apollo samples teach planetary science?",
]


def _done_run(services, params: dict | None = None, question: str = QUESTION) -> str:
    run_id = run_to_end(services, question, "deot", params)
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.DONE, (run.status, run.error)
    return run_id


# ---------------------------------------------------------------------- tree shape, defaults


def test_default_run_respects_paper_limits_and_records_every_step(services, fake_llm):
    # BREADTH on the first two layers, DEPTH below: both engines run, and the node budget bites.
    # (Layers as the paper counts them: the question is layer 1, so four layers are depths 0-3.)
    fake_llm.when(CONTROLLER, controller_by_layer(lambda layer: "BREADTH" if layer < 3 else "DEPTH"))
    # Unique proposals: the fake's templates would repeat some nodes' own questions, which are dropped.
    fake_llm.when(BREADTH, BreadthScript())
    fake_llm.when(DEPTH, depth_follow_up)
    run_id = _done_run(services, {"max_layers": 4})  # and the defaults: max_nodes=15, max_aspects=3
    nodes = questions(services, run_id)
    by_id = {n.id: n for n in nodes}
    root = root_of(services, run_id)

    assert len(nodes) <= 15 and len(nodes) == 15  # 1 + 3 + 9 + 2 (budget-limited depth layer)
    assert max(n.depth for n in nodes) == 3
    assert {n.data["engine"] for n in nodes} == {"root", "breadth", "depth"}
    assert all(n.status == NodeStatus.DONE for n in nodes)

    for node in nodes:
        # Layer and engine: a child is one layer below its parent, from the engine its parent chose.
        if node.id != root.id:
            parent = by_id[node.parent_id]
            assert node.depth == parent.depth + 1
            assert node.data["engine"] == parent.data["expansion"]["decision"].lower()
            assert node.data["priority_label"] in PRIORITY_WEIGHT
            assert node.priority == PRIORITY_WEIGHT[node.data["priority_label"]]
            assert node.data["reasoning"]
        # Controller decision and reasoning.
        expansion = node.data["expansion"]
        assert expansion["decision"] in ("BREADTH", "DEPTH", "STOP") and expansion["reasoning"]
        if expansion["by"] == "controller":
            assert expansion["reasoning"].startswith(f"layer {node.depth + 1}:")
        children = [c for c in nodes if c.parent_id == node.id]
        assert sorted(c.id for c in children) == sorted(expansion["created"])
        assert len(expansion["created"]) + len(expansion.get("dropped_for_budget", [])) == len(expansion["proposals"])
        if expansion["decision"] == "BREADTH":
            assert 1 <= len(expansion["proposals"]) <= 3
            assert len(children) <= 3 and all(c.data["engine"] == "breadth" for c in children)
        elif expansion["decision"] == "DEPTH":
            assert len(expansion["proposals"]) == 1
            assert len(children) <= 1 and all(c.data["engine"] == "depth" for c in children)
        else:
            assert children == []
        if node.depth == 3:
            assert expansion == {**expansion, "decision": "STOP", "by": "rule"}
            assert "maximum layer" in expansion["reasoning"]
        # Plan: 1-3 tasks with valid dependencies, accepted by the validator.
        assert 1 <= len(node.data["plan"]) <= 3
        assert format_problems(node.data["plan"], ALL_TOOLS) == []
        assert node.data["plan_accepted"] is True and node.data["plan_attempts"]
        # Tool tasks with status and timestamps.
        tasks = node.data["tasks"]
        assert [t["id"] for t in tasks] == [t["id"] for t in node.data["plan"]]
        for t in tasks:
            assert t["status"] == "success" and t["tool"] in ALL_TOOLS
            assert ts(t["started_at"]) <= ts(t["finished_at"])
        # Validation results.
        assert node.data["validation"]["summary"]["status"] in ("VALID", "INVALID")
        # Sources linked to the node, including every source its answer cites.
        linked = {s.id for s in services.repo.sources_for_node(node.id)}
        assert linked, f"node {node.id} has no sources"
        assert set(cited_source_ids(node.content)) <= linked

    assert root.data["expansion"]["decision"] == "BREADTH"
    # Layer 2 has nine nodes and room for two more: only the two best-priority nodes consult the
    # engines; the other seven stop by rule instead of spending calls on children that cannot fit.
    layer2 = [n for n in nodes if n.depth == 2]
    asked = [n for n in layer2 if n.data["expansion"]["by"] == "controller"]
    budget_stops = [n for n in layer2 if n.data["expansion"]["by"] == "rule"]
    assert len(layer2) == 9 and len(asked) == 2 and len(budget_stops) == 7
    assert all("higher-priority" in n.data["expansion"]["reasoning"] for n in budget_stops)
    assert sum(len(n.data["expansion"].get("dropped_for_budget", [])) for n in nodes) == 0
    depth_nodes = [n for n in nodes if n.data["engine"] == "depth"]
    assert len(depth_nodes) == 2 and all(n.depth == 3 for n in depth_nodes)
    metrics = services.repo.latest_report(run_id).data["metrics"]
    assert metrics == {"total_nodes": 15, "max_depth": 3, "breadth_analyses": 4, "depth_analyses": 2}


def test_higher_priority_proposals_win_a_short_budget(services, fake_llm):
    low, high, medium = "Low priority aspect?", "High priority aspect?", "Medium priority aspect?"
    fake_llm.when(BREADTH, aspects(aspect(low, "LOW"), aspect(high, "HIGH"), aspect(medium, "MEDIUM")))
    run_id = _done_run(services, {"max_nodes": 3})
    root = root_of(services, run_id)
    children = children_of(services, run_id, root)
    assert [c.label for c in children] == [high, medium]  # created best first
    assert [c.priority for c in children] == [PRIORITY_WEIGHT["HIGH"], PRIORITY_WEIGHT["MEDIUM"]]
    expansion = root.data["expansion"]
    assert expansion["dropped_for_budget"] == [0]
    assert expansion["proposals"][0]["query"] == low
    assert len(questions(services, run_id)) == 3
    assert all(
        c.data["expansion"]["by"] == "rule" and "maximum number of nodes" in c.data["expansion"]["reasoning"]
        for c in children
    )


# ---------------------------------------------------------------------- planning and executing


def test_dependent_task_waits_while_independent_tasks_overlap(services, fake_llm):
    fake_llm.when(
        PLANNER,
        plan(
            task("task1", "info_search", "Apollo program moon landing"),
            task("task2", "direct_reasoning", "What do the Apollo facts imply?", ["task1"]),
            task("task3", "info_search", "Saturn V rocket"),
        ),
    )
    fake_llm.when(INFO_SEARCH, Sleep(0.3, then="The Apollo program landed astronauts on the Moon [1]."))
    run_id = _done_run(services, ROOT_ONLY)
    root = root_of(services, run_id)
    assert format_problems(root.data["plan"], ALL_TOOLS) == []
    t1, t2, t3 = root.data["tasks"]
    assert [t["status"] for t in (t1, t2, t3)] == ["success"] * 3
    assert ts(t2["started_at"]) >= ts(t1["finished_at"])  # dependency order
    assert ts(t1["started_at"]) < ts(t3["finished_at"]) and ts(t3["started_at"]) < ts(t1["finished_at"])  # overlap
    reasoning = prompts_with(fake_llm, "You reason carefully and clearly")
    assert len(reasoning) == 1 and "[task1 · info_search]" in reasoning[0]
    assert "landed astronauts on the Moon" in reasoning[0]
    assert "[[S" in t1["output"]  # the tool's [1] became a stored citation


def test_a_plans_searches_are_embedded_while_the_model_reviews_it(services, fake_llm):
    """The searches embed their query (the dense first stage, the relevance floor); the plan's
    queries are embedded while the validator is asked, so the searches after it find their vectors
    made. The validator here answers only once they are embedded: asked one after the other, the
    run would wait on it."""
    queries = ["Apollo program moon landing", "Saturn V rocket"]
    embedded = threading.Event()
    embedder = RememberingWords(embedded, set(queries))
    services.runner.services.provide(Embedder, embedder)
    fake_llm.when(
        PLANNER,
        plan(
            task("task1", "info_search", queries[0]),
            task("task2", "direct_reasoning", "What does it imply?", ["task1"]),
            task("task3", "info_search", queries[1]),
        ),
    )

    def review(request):
        assert embedded.wait(timeout=120), "the plan's searches were not embedded while it was reviewed"
        return {"verdict": "approve", "feedback": ""}

    fake_llm.when(PLAN_VALIDATOR, review)
    run_id = _done_run(services, ROOT_ONLY)
    root = root_of(services, run_id)
    assert [t["status"] for t in root.data["tasks"]] == ["success"] * 3
    assert root.data["plan_attempts"][-1]["verdict"] == "approve"
    # Embedded once, together, before the searches' own hits.
    assert embedder.computed[:2] == queries and embedder.computed.count(queries[0]) == 1


def _valid_plan(marker: str) -> dict:
    return plan(
        task("task1", "news_search", f"Apollo {marker}"),
        task("task2", "direct_reasoning", f"Reason about {marker}", ["task1"]),
    )


@pytest.mark.parametrize("failure", ["format", "validator"])
def test_rejected_plan_is_regenerated(services, fake_llm, failure):
    if failure == "format":
        fake_llm.when(PLANNER, plan(task("task1", "news_search", "Apollo", ["task9"])), times=1)
    else:
        fake_llm.when(PLANNER, _valid_plan("first plan"), times=1)
        fake_llm.when(
            PLAN_VALIDATOR,
            {"verdict": "revise", "completeness_issues": ["misses the budget"], "feedback": "add the budget angle"},
            times=1,
        )
    fake_llm.when(PLANNER, _valid_plan("second plan"))
    run_id = _done_run(services, ROOT_ONLY)
    root = root_of(services, run_id)
    attempts = root.data["plan_attempts"]
    assert [a["verdict"] for a in attempts] == ["revise", "approve"]
    if failure == "format":
        assert any("task9" in p for p in attempts[0]["format_problems"])
        assert "review" not in attempts[0]  # format failures never reach the validator
    else:
        assert attempts[0]["format_problems"] == [] and attempts[0]["review"]["verdict"] == "revise"
    assert root.data["plan_accepted"] is True
    assert root.data["plan"] == attempts[1]["tasks"]
    assert root.data["plan"][0]["input"] == "Apollo second plan"
    assert root.status == NodeStatus.DONE
    revision = [p for p in prompts_with(fake_llm, PLANNER) if "A previous plan was rejected" in p]
    assert len(revision) == 1
    assert ("task9" in revision[0]) if failure == "format" else ("add the budget angle" in revision[0])


def test_plan_that_never_validates_still_runs_unaccepted(services, fake_llm):
    fake_llm.when(
        PLANNER,
        plan(
            task("task1", "news_search", "Apollo legacy"),
            task("task2", "direct_reasoning", "Reason on it", ["task1", "task7"]),
        ),
    )
    run_id = _done_run(services, {**ROOT_ONLY, "max_plan_attempts": 2})
    root = root_of(services, run_id)
    assert root.status == NodeStatus.DONE
    assert root.data["plan_accepted"] is False
    assert len(root.data["plan_attempts"]) == 2
    assert all(a["verdict"] == "revise" and a["format_problems"] for a in root.data["plan_attempts"])
    assert root.data["plan"][1]["depends_on"] == ["task1"]  # the impossible dependency was dropped
    assert format_problems(root.data["plan"], ALL_TOOLS) == []
    assert [t["status"] for t in root.data["tasks"]] == ["success", "success"]


def test_validator_rejecting_every_plan_still_runs_unaccepted(services, fake_llm):
    fake_llm.when(PLAN_VALIDATOR, {"verdict": "revise", "feedback": "never good enough"})
    run_id = _done_run(services, ROOT_ONLY)
    root = root_of(services, run_id)
    assert root.status == NodeStatus.DONE and root.data["plan_accepted"] is False
    assert [a["verdict"] for a in root.data["plan_attempts"]] == ["revise"] * 3  # max_plan_attempts default


def test_failed_task_does_not_stop_independent_tasks(services, fake_llm):
    fake_llm.when(
        PLANNER,
        plan(
            task("task1", "event_extractor", "Apollo 11 events"),
            task("task2", "direct_reasoning", "Why did Apollo end?"),
            task("task3", "history_analyzer", "Compare with earlier programs", ["task1"]),
        ),
    )
    fake_llm.when(EVENT_EXTRACTOR, LLMRequestError("boom"))
    run_id = _done_run(services, ROOT_ONLY)
    root = root_of(services, run_id)
    assert root.status == NodeStatus.DONE
    t1, t2, t3 = root.data["tasks"]
    assert (t1["status"], t2["status"], t3["status"]) == ("failure", "success", "skipped")
    assert "boom" in t1["error"] and "task1" in t3["error"]
    assert not prompts_with(fake_llm, "You are a historian")  # the skipped task never ran
    summary_prompt = prompts_with(fake_llm, SUMMARY)[0]
    assert "[task1 · event_extractor] FAILED" in summary_prompt


def test_node_whose_every_task_fails_is_failed_and_so_is_a_run_with_nothing_else(services, fake_llm):
    fake_llm.when(PLANNER, plan(task("task1", "event_extractor", "Apollo 11 events")))
    fake_llm.when(EVENT_EXTRACTOR, LLMRequestError("boom"))
    run_id = run_to_end(services, QUESTION, "deot", ROOT_ONLY)
    root = root_of(services, run_id)
    assert root.status == NodeStatus.FAILED and "every task of the plan failed" in root.error
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.FAILED and "every task of the plan failed" in run.error
    assert root.data["tasks"][0]["status"] == "failure"


# ---------------------------------------------------------------------- Base Prompter


def test_base_prompter_optimizes_the_root_query(services, fake_llm):
    refined = "How did NASA's Apollo program (1961-1972) shape space exploration after 1972?"
    fake_llm.when(
        PROMPTER, {"optimized_query": refined, "original_query": QUESTION, "modifications": ["added the time frame"]}
    )
    run_id = _done_run(services, ROOT_ONLY)
    root = root_of(services, run_id)
    record = root.data["query_optimization"]
    assert record["path"] == "optimize" and record["optimized_query"] == refined
    assert record["modifications"] == ["added the time frame"]
    assert root.data["effective_query"] == refined and root.label == QUESTION
    assert f"Question: {refined}" in prompts_with(fake_llm, PLANNER)[0]


@pytest.mark.parametrize("first_output", ["not json at all", {"optimized_query": "", "original_query": QUESTION}])
def test_base_prompter_error_handling_path(services, fake_llm, first_output):
    fake_llm.when(PROMPTER, first_output)
    repaired = "How did the Apollo program (1961-1972) influence later space missions?"
    fake_llm.when(
        PROMPTER_REPAIR,
        {
            "optimized_query": repaired,
            "original_query": QUESTION,
            "original_error": "bad output",
            "correction_explanation": "fixed",
            "previous_attempt_analysis": "it was not JSON",
        },
    )
    run_id = _done_run(services, ROOT_ONLY)
    root = root_of(services, run_id)
    record = root.data["query_optimization"]
    assert record["path"] == "error_handling" and record["optimized_query"] == repaired
    assert root.data["effective_query"] == repaired
    repair_prompt = prompts_with(fake_llm, PROMPTER_REPAIR)[0]
    assert f"Original question: {QUESTION}" in repair_prompt


def test_base_prompter_falls_back_to_the_original_question(services, fake_llm):
    fake_llm.when(PROMPTER_ANY, INVALID)  # the first attempt and the error-handling path both fail
    run_id = _done_run(services, ROOT_ONLY)
    root = root_of(services, run_id)
    record = root.data["query_optimization"]
    assert record["path"] == "fallback" and record["optimized_query"] == QUESTION and record["error"]
    assert root.data["effective_query"] == QUESTION
    assert root.status == NodeStatus.DONE


# ---------------------------------------------------------------------- termination


def test_controller_stop_ends_expansion_at_the_root(services, fake_llm):
    fake_llm.when(CONTROLLER, decision("STOP", "the question is answered"))
    run_id = _done_run(services)
    nodes = questions(services, run_id)
    assert len(nodes) == 1
    expansion = nodes[0].data["expansion"]
    assert (expansion["decision"], expansion["by"], expansion["reasoning"]) == (
        "STOP",
        "controller",
        "the question is answered",
    )
    assert not prompts_with(fake_llm, BREADTH) and not prompts_with(fake_llm, DEPTH)
    report = services.repo.latest_report(run_id)
    assert report is not None and "## Analysis metrics" in report.markdown
    assert report.data["metrics"]["total_nodes"] == 1


@pytest.mark.parametrize(
    "params, total, max_depth, rule",
    [
        ({"max_layers": 2, "max_nodes": 15}, 4, 1, "maximum layer"),
        ({"max_layers": 4, "max_nodes": 4}, 4, 1, "maximum number of nodes"),
        ({"max_layers": 3, "max_nodes": 6}, 6, 2, "maximum layer"),
        ({"max_layers": 1, "max_nodes": 15}, 1, 0, "maximum layer"),
    ],
)
def test_termination_by_max_layers_and_max_nodes(services, params, total, max_depth, rule):
    run_id = _done_run(services, params)
    nodes = questions(services, run_id)
    assert len(nodes) == total
    assert max(n.depth for n in nodes) == max_depth
    leaves = [n for n in nodes if n.depth == max_depth]
    assert all(n.data["expansion"]["by"] == "rule" and rule in n.data["expansion"]["reasoning"] for n in leaves)
    assert services.repo.latest_report(run_id).data["metrics"]["total_nodes"] == total


# ---------------------------------------------------------------------- the report


def test_report_cites_only_stored_sources_and_shows_metrics(services, fake_llm):
    # The report writer invents a citation it was never shown: it must not survive.
    fake_llm.when(FINAL_REPORT, lambda request: default_answer(request) + "\n\nAn unsupported claim [999].")
    run_id = _done_run(services, SMALL)
    report = services.repo.latest_report(run_id)
    run_sources = {s.id for s in services.repo.list_sources(run_id)}
    cited = cited_source_ids(report.markdown)
    assert cited and set(cited) <= run_sources
    assert 999 in report.data["invalid_citations"]
    assert "## Analysis metrics" in report.markdown
    assert "- Question nodes analysed: 4" in report.markdown and "- Maximum depth: 1" in report.markdown

    rendered = render_markdown(services.repo, run_id)
    body, _, source_list = rendered.partition("\n## Sources\n")
    listed = {int(n) for n in re.findall(r"^\[(\d+)\] ", source_list, re.MULTILINE)}
    used = {int(n) for n in re.findall(r"\[(\d+)\]", body)}
    assert listed and used and used <= listed
    assert listed == set(range(1, len(listed) + 1))


# ---------------------------------------------------------------------- parallelism and failures


def test_nodes_of_a_layer_are_solved_concurrently(services, fake_llm):
    # Each layer-1 summary waits at a barrier for its two siblings: only concurrent solving passes.
    barrier = threading.Barrier(3, timeout=10)
    passed: list[str] = []

    def summarize(request):
        if query_of(request) != QUESTION:  # not the root
            barrier.wait()
            passed.append("ok")
        return default_answer(request)

    fake_llm.when(SUMMARY, summarize)
    run_id = _done_run(services, {**SMALL, "optimize_query": False})
    assert passed == ["ok"] * 3
    layer1 = [n for n in questions(services, run_id) if n.depth == 1]
    assert len(layer1) == 3 and all(n.status == NodeStatus.DONE for n in layer1)
    for a in layer1:
        for b in layer1:
            assert a.started_at < b.finished_at  # every pair of siblings overlaps in time


def test_structured_output_failure_fails_the_node_not_the_run(services, fake_llm):
    fake_llm.when(BREADTH, aspects(*(aspect(q) for q in CHILDREN)))
    fake_llm.when(about(SUMMARY, CHILDREN[1]), INVALID)
    run_id = _done_run(services, SMALL)
    failed = by_label(services, run_id, CHILDREN[1])
    assert failed.status == NodeStatus.FAILED and "did not match NodeSummary" in failed.error
    assert failed.data["last_output"] and failed.data["plan"]  # what happened before is kept
    others = [n for n in questions(services, run_id) if n.id != failed.id]
    assert len(others) == 3 and all(n.status == NodeStatus.DONE for n in others)
    final_prompt = prompts_with(fake_llm, FINAL_REPORT)[-1]
    assert CHILDREN[1] not in final_prompt and CHILDREN[0] in final_prompt
    assert services.repo.latest_report(run_id).data["metrics"]["total_nodes"] == 3


def test_root_that_cannot_be_summarised_fails_and_the_run_says_so(services, fake_llm):
    fake_llm.when(SUMMARY, INVALID)
    run_id = run_to_end(services, QUESTION, "deot")
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.FAILED and "did not match NodeSummary" in run.error
    nodes = questions(services, run_id)
    assert len(nodes) == 1 and nodes[0].status == NodeStatus.FAILED
    assert len(fake_llm.calls_for(SUMMARY)) == ATTEMPTS_TO_FAIL
    assert "No question node was answered" in services.repo.latest_report(run_id).markdown


def test_a_summary_cut_off_at_every_attempt_is_written_as_plain_text(services, fake_llm):
    """A slow machine's lowered output cap can cut even the compact form: the node, with its sources in
    hand, is answered in prose rather than failed (issue 43)."""
    from engine.llm.fake import FakeReply
    from tests.engine.methods.deot.deot_scripts import PLAIN_SUMMARY

    fake_llm.when(SUMMARY, FakeReply('{"key_findings": "The press spread across Europe [1] and then', cut_off=True))
    fake_llm.when(PLAIN_SUMMARY, "Gutenberg's press spread printing across Europe within decades.")
    run_id = run_to_end(services, QUESTION, "deot", ROOT_ONLY)
    assert services.repo.get_run(run_id).status == RunStatus.DONE
    [root] = questions(services, run_id)
    assert root.status == NodeStatus.DONE and "cut off by the length limit" in root.data["summary_fallback"]
    assert root.data["summary"]["conclusion"] == "Gutenberg's press spread printing across Europe within decades."
    assert "Gutenberg's press spread printing" in root.content
    assert len(fake_llm.calls_for(SUMMARY)) == ATTEMPTS_TO_FAIL and len(fake_llm.calls_for(PLAIN_SUMMARY)) == 1


def test_a_summary_that_repeats_its_instructions_at_every_attempt_is_written_as_plain_text(services, fake_llm):
    """The built-in model now and then fills the form with its instructions, three times running (a
    fresh clone's `scripts/test` failed so): the node is answered in prose rather than failed."""
    from tests.engine.methods.deot.deot_scripts import PLAIN_SUMMARY

    copied = "a conclusion that answers the query in one or two sentences"
    fake_llm.when(
        SUMMARY,
        {
            "key_findings": "Printing spread.",
            "evidence_and_data": ["Presses ran in 200 cities [1]."],
            "analysis": "It spread.",
            "conflicting_information": [],
            "conclusion": copied,
        },
    )
    fake_llm.when(PLAIN_SUMMARY, "Gutenberg's press spread printing across Europe within decades.")
    run_id = run_to_end(services, QUESTION, "deot", ROOT_ONLY)
    assert services.repo.get_run(run_id).status == RunStatus.DONE
    [root] = questions(services, run_id)
    assert root.status == NodeStatus.DONE and "repeats the instructions" in root.data["summary_fallback"]
    assert root.data["summary"]["conclusion"] == "Gutenberg's press spread printing across Europe within decades."
    assert len(fake_llm.calls_for(SUMMARY)) == ATTEMPTS_TO_FAIL and len(fake_llm.calls_for(PLAIN_SUMMARY)) == 1


def test_a_plain_summary_that_repeats_its_instructions_too_fails_the_node(services, fake_llm):
    from tests.engine.methods.deot.deot_scripts import PLAIN_SUMMARY

    fake_llm.when(
        SUMMARY,
        {
            "key_findings": "Printing spread.",
            "evidence_and_data": ["Presses ran in 200 cities [1]."],
            "analysis": "It spread.",
            "conflicting_information": [],
            "conclusion": "a conclusion that answers the query in one or two sentences",
        },
    )
    fake_llm.when(PLAIN_SUMMARY, "You answer one research query from the numbered sources and the results.")
    run_id = run_to_end(services, QUESTION, "deot", ROOT_ONLY)
    [root] = questions(services, run_id)
    assert root.status == NodeStatus.FAILED and "repeats the instructions" in root.error
    assert services.repo.get_run(run_id).status == RunStatus.FAILED


def test_a_fact_check_that_cannot_be_read_leaves_the_summary_standing_unchecked(services, fake_llm):
    from tests.engine.methods.deot.deot_scripts import FACT_CHECK

    fake_llm.when(FACT_CHECK, INVALID)
    run_id = run_to_end(services, QUESTION, "deot", {**ROOT_ONLY, "validate_results": True})
    [root] = questions(services, run_id)
    assert root.status == NodeStatus.DONE and root.data["summary"]
    assert "the fact check's answer could not be read" in root.data["validation_error"]
    assert len(fake_llm.calls_for(FACT_CHECK)) == ATTEMPTS_TO_FAIL


def test_same_question_gives_the_same_tree(services):
    shapes, labels = [], []
    for _ in range(2):
        run_id = _done_run(services)
        nodes = questions(services, run_id)
        # Labels included: a follow-up named after a thing the findings mention is labelled from the
        # node's text, which is the same because a node's sources are numbered in plan order, not in
        # the order its parallel searches came back (toolbox.SearchTurns).
        shapes.append([(n.depth, n.data["engine"], n.data["expansion"]["decision"], n.label) for n in nodes])
        labels.append([n.label for n in nodes])
    assert shapes[0] == shapes[1] and len(shapes[0]) >= 10
    assert all(len(run) == len(set(run)) for run in labels)  # a proposal repeating a question is dropped


def test_proposals_repeating_a_question_in_the_tree_are_dropped():
    """Small models often propose the question they were given again (seen with the built-in 0.5B)."""
    from engine.methods.deot.engines import Proposal
    from engine.methods.deot.method import novel_proposals

    lineage = ["Which river flows through Paris?"]
    proposals = [
        Proposal(engine="breadth", query="which river flows through  Paris", reasoning="", priority="HIGH"),
        Proposal(engine="breadth", query="How long is the Seine?", reasoning="", priority="HIGH"),
        Proposal(engine="breadth", query="How long is the Seine ?", reasoning="", priority="HIGH"),
        Proposal(engine="breadth", query="Which river flows through Paris today?", reasoning="", priority="HIGH"),
        Proposal(engine="breadth", query="Where does the Loire rise?", reasoning="", priority="HIGH"),
    ]
    kept, repeats = novel_proposals(proposals, lineage, elsewhere=["Where does the loire rise"])
    assert [p.query for p in kept] == ["How long is the Seine?"]
    assert repeats == [
        "which river flows through  Paris",
        "How long is the Seine ?",
        "Which river flows through Paris today?",
        "Where does the Loire rise?",
    ]


@pytest.mark.parametrize(
    "question, asked, repeat",
    [
        ("WHICH RIVER FLOWS THROUGH PARIS", "Which river flows through Paris?", True),
        (
            "Which animated comedy by the creator of Wallace & Gromit matched zoo animals with people talking "
            "about their homes?",
            "Which animation comedy by the creator of Wallace and Gromit matched zoo animals "
            "with people talking about their homes?",
            True,
        ),  # a word changed: the same question
        (
            "Who is the creator of Wallace and Gromit?",
            "Which animation comedy by the creator of Wallace and "
            "Gromit matched zoo animals with people talking about their homes?",
            False,
        ),  # narrower
        (
            "How did the Apollo program shape later space exploration in Europe and Asia?",
            "How did the Apollo program shape later space exploration?",
            False,
        ),  # two new things
        ("What was the population of Lyon in 2020?", "What was the population of Lyon in 2010?", False),  # a new date
    ],
)
def test_a_repeat_is_the_same_question_give_or_take_a_word(question, asked, repeat):
    from engine.methods.deot.method import is_repeat

    assert is_repeat(question, asked) is repeat


SUMMARY_NAMING = {
    "key_findings": "Apollo 11 landed in 1969 [1]. Margaret Hamilton led the Apollo Guidance "
    "Computer software team at the MIT Instrumentation Laboratory [1].",
    "evidence_and_data": ["Apollo 11 landed on 20 July 1969 [1]."],
    "analysis": "The software of Margaret Hamilton set patterns for later missions [1].",
    "conflicting_information": [],
    "conclusion": "Apollo shaped later exploration [1].",
}


def test_a_breadth_answer_that_only_repeats_the_question_is_asked_again_differently(services, fake_llm):
    fake_llm.when(CONTROLLER, controller_by_layer(lambda layer: "BREADTH" if layer < 2 else "STOP"))
    fake_llm.when(SUMMARY, SUMMARY_NAMING)
    fake_llm.when(BREADTH, lambda request: aspects(aspect(QUESTION.upper()), aspect(QUESTION[:-1] + " today?")))
    fake_llm.when(
        FOLLOW_UPS_RETRY,
        {
            "things": [
                {"name": "Apollo Guidance Computer", "kind": "other"},
                {"name": "organisations", "kind": "organisation"},  # the prompt's own word, not in the text
                {"name": "Margaret Hamilton.", "kind": "person"},
            ]
        },
    )
    run_id = _done_run(services, {"max_layers": 2, "max_nodes": 4, "optimize_query": False})
    nodes = questions(services, run_id)
    # Only names the findings hold; each becomes a question written in code.
    assert [n.label for n in nodes[1:]] == [
        "What is known about Apollo Guidance Computer?",
        "Who is Margaret Hamilton?",
    ]
    assert nodes[1].data["engine"] == "breadth" and nodes[1].data["aspect"] == "Apollo Guidance Computer"
    expansion = nodes[0].data["expansion"]
    assert expansion["dropped_repeats"] == [QUESTION.upper(), QUESTION[:-1] + " today?"]
    assert expansion["asked_differently"] is True
    assert "dropped 2 proposed question(s) that repeated one already asked" in expansion["reasoning"]
    # A different task, not the same prompt again.
    assert len(fake_llm.calls_for(BREADTH)) == 1
    retry = fake_llm.calls_for(FOLLOW_UPS_RETRY)
    assert len(retry) == 1 and f"Question: {QUESTION}" in request_text(retry[0])
    # The step log says it, in words.
    dropped = [e for e in services.repo.list_events(run_id, kinds=["dropped"]) if "repeated" in e.text]
    assert [e.text for e in dropped] == [
        f"dropped 2 proposed questions that repeated a question already asked (“{QUESTION.upper()}”); "
        "asked again differently: 2 new question(s)"
    ]
    assert dropped[0].node_id == nodes[0].id


def test_when_the_retry_names_nothing_usable_the_findings_names_are_followed_up(services, fake_llm):
    """The built-in 0.5B model answered the retry with the prompt's own words ("people", "organisations")."""
    fake_llm.when(CONTROLLER, controller_by_layer(lambda layer: "BREADTH" if layer < 2 else "STOP"))
    fake_llm.when(SUMMARY, SUMMARY_NAMING)
    fake_llm.when(BREADTH, lambda request: aspects(aspect(QUESTION)))
    fake_llm.when(FOLLOW_UPS_RETRY, {"things": [{"name": "people", "kind": "person"}]})
    run_id = _done_run(services, {"max_layers": 2, "max_nodes": 3, "optimize_query": False, "max_aspects": 2})
    labels = [n.label for n in questions(services, run_id)[1:]]
    assert labels == ["What is known about Margaret Hamilton?", "What is known about Apollo Guidance Computer?"]


def test_names_in_a_text():
    from engine.methods.deot.engines import names_in

    text = (
        "**Key findings.** Creature Comforts is a 1989 British comedy by Nick Park [[S1]]. The Bank of "
        "England agreed. Nick Park also made Wallace and Gromit. Creature Comforts won an Oscar."
    )
    assert names_in(text, exclude="Which comedy matched zoo animals with Wallace and Gromit?") == [
        "Creature Comforts",
        "Nick Park",
        "Bank of England",
        "Oscar",
    ]  # "British" is an adjective


def test_a_node_whose_retry_also_repeats_stops_and_says_why(services, fake_llm):
    fake_llm.when(CONTROLLER, controller_by_layer(lambda layer: "BREADTH" if layer < 2 else "STOP"))
    fake_llm.when(BREADTH, lambda request: aspects(aspect(QUESTION)))
    fake_llm.when(FOLLOW_UPS_RETRY, {"things": [{"name": QUESTION, "kind": "other"}]})  # not a name
    # ... and the findings name nothing to follow up either.
    fake_llm.when(
        SUMMARY,
        {
            "key_findings": "it went well [1].",
            "evidence_and_data": ["it did [1]."],
            "analysis": "it mattered [1].",
            "conflicting_information": [],
            "conclusion": "it shaped what came later [1].",
        },
    )
    run_id = _done_run(services, {"max_layers": 2, "max_nodes": 3, "optimize_query": False})
    nodes = questions(services, run_id)
    assert len(nodes) == 1
    expansion = nodes[0].data["expansion"]
    assert expansion["dropped_repeats"] == [QUESTION] and expansion["asked_differently"]
    said = [e.text for e in services.repo.list_events(run_id, kinds=["dropped"]) if "repeated" in e.text]
    assert said == [
        f"dropped 1 proposed question that repeated a question already asked (“{QUESTION}”); "
        "asked again differently, and nothing new came: this branch stops here"
    ]


def test_root_breadth_opens_with_the_breadth_engine_without_asking_the_controller(services, fake_llm):
    fake_llm.when(CONTROLLER, controller_by_layer(lambda layer: "STOP"))
    run_id = _done_run(services, {"max_layers": 2, "max_nodes": 3, "optimize_query": False, "root_breadth": True})
    nodes = questions(services, run_id)
    assert len(nodes) == 3 and nodes[0].data["expansion"]["by"] == "rule"
    assert nodes[0].data["expansion"]["decision"] == "BREADTH"
    assert not [r for r in fake_llm.calls_for(CONTROLLER) if query_of(r) == nodes[0].label]


def test_a_report_that_cites_nothing_keeps_the_trees_cited_findings(services, fake_llm):
    """Small models often write the final report without one citation; the evidence must not vanish."""
    fake_llm.when(FINAL_REPORT, lambda request: "Apollo shaped later exploration in many ways.")
    run_id = _done_run(services, {"max_layers": 2, "max_nodes": 3, "optimize_query": False})
    report = services.repo.latest_report(run_id)
    assert report.markdown.startswith("Apollo shaped later exploration in many ways.")
    assert "## Key findings from the tree" in report.markdown and report.data["findings_appended"] is True
    rendered = render_markdown(services.repo, run_id)
    body, _, sources = rendered.partition("\n## Sources\n")
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", body.split("## Key findings from the tree")[1])}
    listed = {int(n) for n in re.findall(r"^\[(\d+)\] ", sources, flags=re.MULTILINE)}
    assert cited and cited <= listed


def test_without_the_llm_planner_a_node_runs_one_search_of_its_own_query(services, fake_llm):
    run_id = _done_run(services, {"max_layers": 2, "max_nodes": 2, "optimize_query": False, "llm_planner": False})
    assert not fake_llm.calls_for(PLANNER)
    for node in questions(services, run_id):
        assert [(t["tool"], t["input"]) for t in node.data["plan"]] == [("info_search", node.label)]
        assert node.data["plan_accepted"] is True and node.status == NodeStatus.DONE


class _SlowFirstSearch:
    """The first task's search comes back only once the second task has numbered its sources (it
    is asking the model about them), or after `patience` seconds: with plan-order numbering the
    second task cannot number before the first, so the first search waits out its patience."""

    def __init__(self, inner, slow_query: str, second_numbered: threading.Event, patience: float = 2.0) -> None:
        self.inner, self.slow_query, self.second_numbered, self.patience = inner, slow_query, second_numbered, patience

    @property
    def description(self) -> str:
        return self.inner.description

    def search(self, query: str, k: int = 5):
        if query == self.slow_query:
            self.second_numbered.wait(self.patience)
        return self.inner.search(query, k)


def test_a_nodes_sources_are_numbered_in_plan_order_whatever_order_its_searches_finish(services, fake_llm):
    slow, fast = "Apollo program moon landing", "Saturn V rocket"
    second_numbered = threading.Event()

    def answer_second(request):
        second_numbered.set()
        return "The Saturn V launched the Apollo missions [1]."

    fake_llm.when(INFO_SEARCH.where(re.compile(re.escape(fast))), answer_second)
    fake_llm.when(PLANNER, plan(task("task1", "info_search", slow), task("task2", "info_search", fast)))
    services._searchers["local"] = _SlowFirstSearch(services.searcher("local"), slow, second_numbered)
    run_id = _done_run(services, ROOT_ONLY)
    numbers = {}
    for text in prompts_with(fake_llm, INFO_SEARCH):
        query = slow if slow in text else fast
        numbers[query] = [int(n) for n in re.findall(r"^\[(\d+)\] ", text, re.M)]
    assert numbers[slow] and numbers[fast], numbers
    # The first task of the plan numbers first although its search finished last, so the same
    # question always shows the model the same numbering (and `--llm fake` stays deterministic).
    assert numbers[slow] == list(range(1, len(numbers[slow]) + 1))
    first = len(numbers[slow]) + 1  # the second task's own sources come next (a shared one keeps its number)
    own = sorted(set(numbers[fast]) - set(numbers[slow]))
    assert own and own == list(range(first, first + len(own)))
    assert [t["status"] for t in root_of(services, run_id).data["tasks"]] == ["success", "success"]
