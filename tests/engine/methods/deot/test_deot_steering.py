"""DEoT steering: expand, deepen, prune, ask, retry and regenerate_report change the stored graph
(and the report) both on a finished run, which is reopened to apply them, and on a running run,
which takes them between layers; bad commands fail with a clear error and change nothing."""

from __future__ import annotations

import pytest

from engine.methods.base import UnsupportedCommand
from storage.models import CommandStatus, NodeStatus, RunStatus
from tests.engine.methods.deot.deot_scripts import (
    ATTEMPTS_TO_FAIL,
    BREADTH,
    CONTROLLER,
    DEPTH,
    FINAL_REPORT,
    FOLLOW_UPS_RETRY,
    INVALID,
    PLANNER,
    QUESTION,
    SMALL,
    SUMMARY,
    BreadthScript,
    Gate,
    about,
    aspect,
    aspects,
    by_label,
    children_of,
    controller_by_layer,
    depth_follow_up,
    graph_state,
    prompts_with,
    questions,
    root_of,
    start_run,
)
from tests.support.fixtures_engine import command_of, release_and_finish, run_to_end, steer_and_wait, steer_refused

ALPHA = "Which engineering legacies did Apollo leave?"
BETA = "How did Apollo change NASA's budget politics?"
GAMMA = "What did the Apollo samples teach planetary science?"
ASPECTS = [ALPHA, BETA, GAMMA]
FOLLOW_UP = "Which Apollo technologies reached consumer products?"


@pytest.fixture
def scripted(fake_llm):
    """The root's breadth answer is ALPHA, BETA, GAMMA; any other breadth call gets fresh aspects;
    depth follow-ups name their parent (so every label is unique). The controller is the fake's
    default: always BREADTH."""
    fake_llm.when(BREADTH, BreadthScript({QUESTION: ASPECTS}))
    fake_llm.when(DEPTH, depth_follow_up)
    return fake_llm


def _finished(services, params: dict | None = None) -> str:
    # optimize_query off: the root's query is the question itself, which the scripts key on.
    run_id = run_to_end(services, QUESTION, "deot", {"optimize_query": False, **(params or SMALL)})
    assert services.repo.get_run(run_id).status == RunStatus.DONE
    return run_id


def _reports(services, run_id: str) -> int:
    return len(services.repo.list_reports(run_id))


def _gated_run(services, fake_llm, gate_pattern, params: dict | None = None, gate: Gate | None = None):
    """Start a run that blocks at the first call matching `gate_pattern`; return (run id, gate)."""
    gate = gate or Gate()
    fake_llm.when(gate_pattern, gate, times=1)
    run_id = start_run(services, QUESTION, {"optimize_query": False, **(params or SMALL)})
    gate.wait_reached()
    services.runner.store_gathered(run_id)  # the run as it stands at the held call
    return run_id, gate


# ---------------------------------------------------------------------- expand


def test_expand_finished_run(services, scripted):
    run_id = _finished(services)
    alpha = by_label(services, run_id, ALPHA)
    reports = _reports(services, run_id)
    command = steer_and_wait(services, run_id, "expand", {"node_id": alpha.id, "n": 2})
    assert command.status == CommandStatus.DONE, command.error
    new = children_of(services, run_id, alpha)
    assert len(new) == 2
    assert all(c.data["engine"] == "breadth" and c.data["steered"] and c.status == NodeStatus.DONE for c in new)
    assert all(c.depth == alpha.depth + 1 for c in new)
    assert by_label(services, run_id, ALPHA).data["steered_analyses"] == ["BREADTH"]
    assert _reports(services, run_id) == reports + 1
    report = services.repo.latest_report(run_id)
    assert {c.id for c in new} <= {node_id for node_id, _ in report.data["signature"]}
    assert report.data["metrics"]["total_nodes"] == 6


def test_expand_running_run(services, scripted):
    run_id, gate = _gated_run(services, scripted, about(PLANNER, ALPHA))
    root = root_of(services, run_id)
    command = services.runner.steer(run_id, "expand", {"node_id": root.id, "n": 2})
    assert command.status == CommandStatus.QUEUED
    command = release_and_finish(services, run_id, gate, command.id)
    assert command.status == CommandStatus.DONE, command.error
    children = children_of(services, run_id, root)
    steered = [c for c in children if c.data.get("steered")]
    assert len(children) == 5 and len(steered) == 2
    assert all(c.data["engine"] == "breadth" and c.status == NodeStatus.DONE for c in steered)
    report = services.repo.latest_report(run_id)
    assert report.data["metrics"]["total_nodes"] == 6 and report.data["metrics"]["breadth_analyses"] == 2


# ---------------------------------------------------------------------- deepen


def test_deepen_finished_run(services, scripted):
    run_id = _finished(services)
    beta = by_label(services, run_id, BETA)
    reports = _reports(services, run_id)
    command = steer_and_wait(services, run_id, "deepen", {"node_id": beta.id})
    assert command.status == CommandStatus.DONE, command.error
    [child] = children_of(services, run_id, beta)
    assert child.data["engine"] == "depth" and child.status == NodeStatus.DONE and child.depth == 2
    assert child.label == f"What lies deeper behind: {BETA}"
    assert by_label(services, run_id, BETA).data["steered_analyses"] == ["DEPTH"]
    assert len(questions(services, run_id)) == 5
    assert _reports(services, run_id) == reports + 1
    assert services.repo.latest_report(run_id).data["metrics"]["depth_analyses"] == 1


def test_deepen_running_run(services, scripted):
    run_id, gate = _gated_run(services, scripted, about(PLANNER, BETA))
    root = root_of(services, run_id)
    command = services.runner.steer(run_id, "deepen", {"node_id": root.id})
    command = release_and_finish(services, run_id, gate, command.id)
    assert command.status == CommandStatus.DONE, command.error
    depth_children = [c for c in children_of(services, run_id, root) if c.data["engine"] == "depth"]
    assert len(depth_children) == 1 and depth_children[0].status == NodeStatus.DONE
    assert len(questions(services, run_id)) == 5


# ---------------------------------------------------------------------- prune


def test_prune_finished_run(services, scripted):
    # Layer 1 deepens: ALPHA, BETA and GAMMA each get one depth child.
    scripted.when(CONTROLLER, controller_by_layer(lambda layer: "BREADTH" if layer == 1 else "DEPTH"))
    run_id = _finished(services, {"max_layers": 3, "max_nodes": 7})
    beta = by_label(services, run_id, BETA)
    [beta_child] = children_of(services, run_id, beta)
    reports = _reports(services, run_id)
    assert BETA in prompts_with(scripted, FINAL_REPORT)[-1]
    command = steer_and_wait(services, run_id, "prune", {"node_id": beta.id})
    assert command.status == CommandStatus.DONE, command.error
    for node_id in (beta.id, beta_child.id):
        node = services.repo.get_node(node_id)
        assert node.status == NodeStatus.PRUNED and node.data["status_before_prune"] == NodeStatus.DONE
    others = [n for n in questions(services, run_id) if n.id not in (beta.id, beta_child.id)]
    assert len(others) == 5 and all(n.status == NodeStatus.DONE for n in others)
    # The report is rewritten without the pruned branch.
    assert _reports(services, run_id) == reports + 1
    final_prompt = prompts_with(scripted, FINAL_REPORT)[-1]
    assert BETA not in final_prompt and beta_child.label not in final_prompt and ALPHA in final_prompt
    assert f"### Node {beta.id} " not in final_prompt
    assert services.repo.latest_report(run_id).data["metrics"]["total_nodes"] == 5
    # Nothing grows under a pruned node afterwards.
    assert "pruned" in steer_refused(services, run_id, "ask", {"node_id": beta.id, "question": "Anything else?"})
    assert children_of(services, run_id, beta) == [services.repo.get_node(beta_child.id)]


def _beta_branch(services, scripted):
    """A finished run whose layer-1 node BETA has one depth child: (run, BETA, its child)."""
    scripted.when(CONTROLLER, controller_by_layer(lambda layer: "BREADTH" if layer == 1 else "DEPTH"))
    run_id = _finished(services, {"max_layers": 3, "max_nodes": 7})
    beta = by_label(services, run_id, BETA)
    [beta_child] = children_of(services, run_id, beta)
    return run_id, beta, beta_child


def test_restore_brings_a_pruned_branch_back_and_nothing_pruned_on_its_own(services, scripted):
    run_id, beta, beta_child = _beta_branch(services, scripted)
    # The child is pruned first, on its own; then its parent.
    assert steer_and_wait(services, run_id, "prune", {"node_id": beta_child.id}).status == CommandStatus.DONE
    assert steer_and_wait(services, run_id, "prune", {"node_id": beta.id}).status == CommandStatus.DONE
    assert "(restore it first)" in steer_refused(services, run_id, "ask", {"node_id": beta.id, "question": "More?"})
    # Restoring the child first is refused: it sits under a pruned node.
    assert f"restore node {beta.id} first" in steer_refused(services, run_id, "restore", {"node_id": beta_child.id})
    reports = _reports(services, run_id)
    command = steer_and_wait(services, run_id, "restore", {"node_id": beta.id})
    assert command.status == CommandStatus.DONE, command.error
    restored = services.repo.get_node(beta.id)
    assert restored.status == NodeStatus.DONE
    assert restored.data.get("status_before_prune") is None and restored.data.get("pruned_with") is None
    assert services.repo.get_node(beta_child.id).status == NodeStatus.PRUNED  # pruned on its own: stays
    # The report is written again with the branch back in it.
    assert _reports(services, run_id) == reports + 1
    assert BETA in prompts_with(scripted, FINAL_REPORT)[-1]
    assert services.runner.wait(run_id, timeout=30).status == RunStatus.DONE
    # A node that is not pruned has nothing to restore.
    assert "restore" in steer_refused(services, run_id, "restore", {"node_id": beta.id}).lower()
    assert steer_and_wait(services, run_id, "restore", {"node_id": beta_child.id}).status == CommandStatus.DONE
    assert services.repo.get_node(beta_child.id).status == NodeStatus.DONE


def test_a_node_pruned_with_its_parent_is_restored_with_it(services, scripted):
    run_id, beta, beta_child = _beta_branch(services, scripted)
    assert steer_and_wait(services, run_id, "prune", {"node_id": beta.id}).status == CommandStatus.DONE
    assert services.repo.get_node(beta_child.id).data["pruned_with"] == beta.id
    assert f"pruned with node {beta.id}: restore node {beta.id}" in steer_refused(
        services, run_id, "restore", {"node_id": beta_child.id}
    )
    assert steer_and_wait(services, run_id, "restore", {"node_id": beta.id}).status == CommandStatus.DONE
    assert {services.repo.get_node(n).status for n in (beta.id, beta_child.id)} == {NodeStatus.DONE}


def test_prune_running_run_before_its_children_exist(services, scripted):
    # All BREADTH: layer 1 would grow three aspects under each of ALPHA, BETA and GAMMA.
    run_id, gate = _gated_run(services, scripted, about(PLANNER, ALPHA), {"max_layers": 3, "max_nodes": 15})
    beta = by_label(services, run_id, BETA)
    assert children_of(services, run_id, beta) == []
    command = services.runner.steer(run_id, "prune", {"node_id": beta.id})
    command = release_and_finish(services, run_id, gate, command.id)
    assert command.status == CommandStatus.DONE, command.error
    beta = services.repo.get_node(beta.id)
    assert beta.status == NodeStatus.PRUNED and "expansion" not in beta.data
    assert children_of(services, run_id, beta) == []
    for label in (ALPHA, GAMMA):
        kids = children_of(services, run_id, by_label(services, run_id, label))
        assert len(kids) == 3 and all(k.status == NodeStatus.DONE for k in kids)
    assert not [p for p in prompts_with(scripted, CONTROLLER) if f"Question: {BETA}\n" in p]
    final_prompt = prompts_with(scripted, FINAL_REPORT)[-1]
    assert BETA not in final_prompt and ALPHA in final_prompt
    assert services.repo.latest_report(run_id).data["metrics"]["total_nodes"] == 9


# ---------------------------------------------------------------------- ask


def test_ask_finished_run(services, scripted):
    run_id = _finished(services)
    gamma = by_label(services, run_id, GAMMA)
    reports = _reports(services, run_id)
    command = steer_and_wait(services, run_id, "ask", {"node_id": gamma.id, "question": FOLLOW_UP})
    assert command.status == CommandStatus.DONE, command.error
    [child] = children_of(services, run_id, gamma)
    assert child.label == FOLLOW_UP and child.data["engine"] == "user" and child.data["steered"]
    assert child.status == NodeStatus.DONE and child.depth == 2
    assert _reports(services, run_id) == reports + 1
    assert FOLLOW_UP in prompts_with(scripted, FINAL_REPORT)[-1]


def test_ask_running_run(services, scripted):
    run_id, gate = _gated_run(services, scripted, about(PLANNER, GAMMA))
    root = root_of(services, run_id)
    command = services.runner.steer(run_id, "ask", {"node_id": root.id, "question": FOLLOW_UP})
    command = release_and_finish(services, run_id, gate, command.id)
    assert command.status == CommandStatus.DONE, command.error
    child = by_label(services, run_id, FOLLOW_UP)
    assert child.parent_id == root.id and child.data["engine"] == "user" and child.status == NodeStatus.DONE


# ---------------------------------------------------------------------- retry


def test_retry_finished_run(services, scripted):
    scripted.when(about(SUMMARY, BETA), INVALID, times=ATTEMPTS_TO_FAIL)
    run_id = _finished(services)
    beta = by_label(services, run_id, BETA)
    assert beta.status == NodeStatus.FAILED
    reports = _reports(services, run_id)
    command = steer_and_wait(services, run_id, "retry", {"node_id": beta.id})
    assert command.status == CommandStatus.DONE, command.error
    beta = services.repo.get_node(beta.id)
    assert beta.status == NodeStatus.DONE and beta.error == "" and beta.content
    assert _reports(services, run_id) == reports + 1
    assert BETA in prompts_with(scripted, FINAL_REPORT)[-1]
    assert services.repo.latest_report(run_id).data["metrics"]["total_nodes"] == 4


def test_retry_running_run(services, scripted):
    scripted.when(about(SUMMARY, BETA), INVALID, times=ATTEMPTS_TO_FAIL)
    # Held while layer 1 is solved: BETA fails meanwhile; the retry is applied after the layer.
    run_id, gate = _gated_run(services, scripted, about(PLANNER, GAMMA))
    beta = by_label(services, run_id, BETA)
    command = services.runner.steer(run_id, "retry", {"node_id": beta.id})
    command = release_and_finish(services, run_id, gate, command.id)
    assert command.status == CommandStatus.DONE, command.error
    assert services.repo.get_node(beta.id).status == NodeStatus.DONE
    beta_summaries = [p for p in prompts_with(scripted, SUMMARY) if about(SUMMARY, BETA).search(p)]
    assert len(beta_summaries) == 2  # the failed one (re-asks aside) and the retried one
    assert services.repo.latest_report(run_id).data["metrics"]["total_nodes"] == 4


# ---------------------------------------------------------------------- regenerate_report


def _solve_calls(fake) -> int:
    return len(prompts_with(fake, PLANNER)) + len(prompts_with(fake, SUMMARY))


def test_regenerate_report_finished_run(services, scripted):
    run_id = _finished(services)
    before, reports, solves = graph_state(services, run_id), _reports(services, run_id), _solve_calls(scripted)
    command = steer_and_wait(services, run_id, "regenerate_report")
    assert command.status == CommandStatus.DONE, command.error
    assert _reports(services, run_id) == reports + 1
    assert graph_state(services, run_id) == before
    assert _solve_calls(scripted) == solves  # no node was solved again


def test_regenerate_report_running_run(services, scripted):
    # Held at the final report: the command arrives after the tree is done and is applied last.
    run_id, gate = _gated_run(services, scripted, FINAL_REPORT)
    before, solves = graph_state(services, run_id), _solve_calls(scripted)
    command = services.runner.steer(run_id, "regenerate_report")
    command = release_and_finish(services, run_id, gate, command.id)
    assert command.status == CommandStatus.DONE, command.error
    assert _reports(services, run_id) == 2
    assert len(prompts_with(scripted, FINAL_REPORT)) == 2
    assert graph_state(services, run_id) == before
    assert _solve_calls(scripted) == solves


# ---------------------------------------------------------------------- bad steering


BAD = [
    ("expand", lambda ids: {"node_id": 987654}, "no node with id 987654"),
    ("deepen", lambda ids: {}, "node_id: Field required"),
    ("expand", lambda ids: {"node_id": ids["alpha"], "n": 0}, "greater than or equal to 1"),
    ("expand", lambda ids: {"node_id": ids["beta"], "n": 2}, "pruned"),
    ("retry", lambda ids: {"node_id": ids["alpha"]}, "'Retry' needs a node that is failed"),
    ("ask", lambda ids: {"node_id": ids["alpha"], "question": "   "}, "question is empty"),
    ("deepen", lambda ids: {"node_id": ids["other_run"]}, "belongs to another run"),
]


@pytest.mark.parametrize("kind, payload, error", BAD, ids=[f"{k}-{e.split()[0]}" for k, _, e in BAD])
def test_bad_steering_fails_and_changes_nothing(services, scripted, kind, payload, error):
    other_run = _finished(services, {"max_nodes": 1})
    run_id = _finished(services)
    beta = by_label(services, run_id, BETA)
    assert steer_and_wait(services, run_id, "prune", {"node_id": beta.id}).status == CommandStatus.DONE
    ids = {"alpha": by_label(services, run_id, ALPHA).id, "beta": beta.id, "other_run": root_of(services, other_run).id}
    before, reports, calls = graph_state(services, run_id), _reports(services, run_id), scripted.call_count
    assert error in steer_refused(services, run_id, kind, payload(ids))
    assert graph_state(services, run_id) == before
    assert _reports(services, run_id) == reports and scripted.call_count == calls


def test_bad_steering_on_a_running_run_fails_and_the_run_goes_on(services, scripted):
    run_id, gate = _gated_run(services, scripted, about(PLANNER, ALPHA))
    root = root_of(services, run_id)
    with pytest.raises(ValueError, match="'Retry' needs a node that is failed"):
        services.runner.steer(run_id, "retry", {"node_id": root.id})
    command = services.runner.steer(run_id, "regenerate_report")
    command = release_and_finish(services, run_id, gate, command.id)
    assert command.status == CommandStatus.DONE, command.error
    assert len(questions(services, run_id)) == 4
    assert all(n.status == NodeStatus.DONE for n in questions(services, run_id))


def test_unsupported_steering_kind_is_refused(services, scripted):
    run_id = _finished(services, {"max_nodes": 1})
    with pytest.raises(UnsupportedCommand, match="does not support 'merge'"):
        services.runner.steer(run_id, "merge", {"node_id": root_of(services, run_id).id})
    assert services.repo.list_commands(run_id) == []
    assert services.repo.get_run(run_id).status == RunStatus.DONE


@pytest.mark.parametrize("kind", ["expand", "deepen"])
def test_engine_failure_fails_the_command_not_the_run(services, fake_llm, kind):
    fake_llm.when(BREADTH, aspects(*(aspect(q) for q in ASPECTS)), times=1)  # the root's expansion
    fake_llm.when(BREADTH, INVALID)
    fake_llm.when(DEPTH, INVALID)
    run_id = _finished(services)
    alpha = by_label(services, run_id, ALPHA)
    before, reports = graph_state(services, run_id), _reports(services, run_id)
    payload = {"node_id": alpha.id, "n": 2} if kind == "expand" else {"node_id": alpha.id}
    command = steer_and_wait(services, run_id, kind, payload)
    assert command.status == CommandStatus.FAILED and "did not match" in command.error
    assert graph_state(services, run_id) == before and _reports(services, run_id) == reports


def test_engine_failure_on_a_running_run_fails_the_command_only(services, fake_llm):
    fake_llm.when(BREADTH, aspects(*(aspect(q) for q in ASPECTS)), times=1)
    fake_llm.when(BREADTH, INVALID)
    run_id, gate = _gated_run(services, fake_llm, about(PLANNER, ALPHA))
    root = root_of(services, run_id)
    command = services.runner.steer(run_id, "expand", {"node_id": root.id, "n": 2})
    command = release_and_finish(services, run_id, gate, command.id)
    assert command.status == CommandStatus.FAILED and "breadth engine gave no usable answer" in command.error
    nodes = questions(services, run_id)
    assert len(nodes) == 4 and all(n.status == NodeStatus.DONE for n in nodes)
    assert "steered_analyses" not in root_of(services, run_id).data


# ---------------------------------------------------------------------- edge cases fixed later


def test_retry_forgets_what_the_failed_attempt_left(services, scripted):
    scripted.when(about(SUMMARY, BETA), INVALID, times=ATTEMPTS_TO_FAIL)
    run_id = _finished(services)
    beta = by_label(services, run_id, BETA)
    assert beta.status == NodeStatus.FAILED and "last_output" in beta.data
    command = steer_and_wait(services, run_id, "retry", {"node_id": beta.id})
    assert command.status == CommandStatus.DONE, command.error
    beta = services.repo.get_node(beta.id)
    assert beta.status == NodeStatus.DONE
    assert "last_output" not in beta.data  # only the new attempt's detail remains
    assert beta.data["engine"] == "breadth" and beta.data["summary"]


def test_expand_that_only_repeats_existing_questions_fails_the_command(services, fake_llm):
    # The breadth engine always proposes the same two questions, so expanding the root again
    # would only repeat its existing children; asked differently, the model names no thing.
    fake_llm.when(BREADTH, aspects(aspect(ALPHA), aspect(BETA)))
    fake_llm.when(FOLLOW_UPS_RETRY, {"things": [{"name": ALPHA, "kind": "other"}]})  # a sentence: no name
    # ... and the findings name nothing either.
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
    run_id = _finished(services)
    root = root_of(services, run_id)
    assert {c.label for c in children_of(services, run_id, root)} == {ALPHA, BETA}
    before = graph_state(services, run_id)
    command = steer_and_wait(services, run_id, "expand", {"node_id": root.id, "n": 2})
    assert command.status == CommandStatus.FAILED
    assert "only proposed questions already in the tree (2 dropped, also after asking differently)" in command.error
    assert graph_state(services, run_id) == before


def test_expand_whose_proposals_repeat_asks_differently_and_keeps_the_new_ones(services, fake_llm):
    fake_llm.when(BREADTH, aspects(aspect(ALPHA), aspect(BETA)))
    fake_llm.when(FOLLOW_UPS_RETRY, {"things": [{"name": "Lunar Roving Vehicle", "kind": "other"}]})
    fake_llm.when(
        SUMMARY,
        {
            "key_findings": "The Lunar Roving Vehicle carried crews far [1].",
            "evidence_and_data": ["It flew on three missions [1]."],
            "analysis": "It mattered [1].",
            "conflicting_information": [],
            "conclusion": "It extended the missions [1].",
        },
    )
    run_id = _finished(services)
    root = root_of(services, run_id)
    command = steer_and_wait(services, run_id, "expand", {"node_id": root.id, "n": 2})
    assert command.status == CommandStatus.DONE, command.error
    labels = [c.label for c in children_of(services, run_id, root)]
    assert sorted(labels) == sorted([ALPHA, BETA, "What is known about Lunar Roving Vehicle?"])


def test_go_deeper_never_makes_a_child_that_copies_its_parent(services, fake_llm):
    """Seen on the built-in model: "Go deeper" made a child labelled exactly like its parent."""
    fake_llm.when(BREADTH, aspects(aspect(ALPHA), aspect(BETA)))
    run_id = _finished(services)
    alpha = by_label(services, run_id, ALPHA)
    fake_llm.when(DEPTH, {"question": ALPHA, "reasoning": "dig in", "priority": "HIGH"})
    fake_llm.when(FOLLOW_UPS_RETRY, {"things": [{"name": "Saturn V", "kind": "other"}]})
    command = steer_and_wait(services, run_id, "deepen", {"node_id": alpha.id})
    assert command.status == CommandStatus.DONE, command.error
    children = children_of(services, run_id, alpha)
    assert len(children) == 1 and children[0].label != ALPHA and children[0].data["engine"] == "depth"
    assert children[0].data["aspect"] in alpha.content  # a name the parent's findings hold


def test_go_deeper_that_finds_nothing_new_says_so(services, fake_llm):
    fake_llm.when(BREADTH, aspects(aspect(ALPHA), aspect(BETA)))
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
    run_id = _finished(services)
    alpha = by_label(services, run_id, ALPHA)
    fake_llm.when(DEPTH, {"question": ALPHA, "reasoning": "dig in", "priority": "HIGH"})
    fake_llm.when(FOLLOW_UPS_RETRY, {"things": [{"name": "people", "kind": "person"}]})
    before = graph_state(services, run_id)
    command = steer_and_wait(services, run_id, "deepen", {"node_id": alpha.id})
    assert command.status == CommandStatus.FAILED
    assert "the depth engine only proposed questions already in the tree" in command.error
    assert "ask your own follow-up" in command.error
    assert graph_state(services, run_id) == before


def test_commands_queued_while_steering_is_applied_are_all_applied(services, scripted):
    run_id = _finished(services)
    alpha, gamma = by_label(services, run_id, ALPHA), by_label(services, run_id, GAMMA)
    first = services.runner.steer(run_id, "ask", {"node_id": alpha.id, "question": FOLLOW_UP})
    # Queued while the first is (or may be) being applied: it must not be left behind.
    second = services.repo.enqueue_command(run_id, "ask", {"node_id": gamma.id, "question": FOLLOW_UP + " (2)"})
    import time

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        statuses = [command_of(services, run_id, c.id).status for c in (first, second)]
        if all(s in (CommandStatus.DONE, CommandStatus.FAILED) for s in statuses):
            break
        time.sleep(0.05)
    services.runner.wait(run_id, timeout=20)
    assert [command_of(services, run_id, c.id).status for c in (first, second)] == [CommandStatus.DONE] * 2
    assert {c.label for c in children_of(services, run_id, gamma)} >= {FOLLOW_UP + " (2)"}
