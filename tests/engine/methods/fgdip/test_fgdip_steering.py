"""FGDIP steering (issue 15): force-explore a branch, mark a node impossible, add an entity, edit the
error memory; each on a finished run (which reopens it) and each refusing what it cannot do."""

from __future__ import annotations

import re

from engine.llm.fake import request_text
from engine.methods.fgdip.kinds import ErrorMemory
from engine.methods.fgdip.method import FgdipMethod
from storage.models import CommandStatus, NodeStatus
from tests.engine.methods.fgdip.fgdip_scripts import (
    EVALUATE_ANSWER,
    EXTRACT,
    GENERATE,
    QUESTION,
    answers_by_branch,
    entities,
    judged_answer,
    nodes_of,
    numbered_steps,
)
from tests.support.fixtures_engine import refused_before_queueing, run_to_end, steer_and_wait, steer_refused

ARTHUR, FIRST = "Arthur's Magazine", "First for Women"


def finished(services, fake_llm, params: dict | None = None) -> str:
    fake_llm.when(EXTRACT, entities(ARTHUR, FIRST))
    fake_llm.when(GENERATE, numbered_steps(answer=answers_by_branch))
    return run_to_end(services, QUESTION, "fgdip", params)


def entity(services, run_id: str, name: str):
    return next(n for n in nodes_of(services, run_id, "entity") if n.data["entity"] == name)


def memory(services, run_id: str) -> ErrorMemory:
    state = services.repo.latest_run_state(run_id, "error_memory")
    return ErrorMemory.model_validate(state.data) if state else ErrorMemory()


def test_force_explore_takes_a_branch_the_search_left(services, fake_llm):
    run_id = finished(services, fake_llm)
    untaken = entity(services, run_id, FIRST)
    assert untaken.data.get("explored_order") is None  # the first branch's answer was accepted

    command = steer_and_wait(services, run_id, "force_explore", {"node_id": untaken.id})
    assert command.status == CommandStatus.DONE, command.error
    taken = services.repo.get_node(untaken.id)
    assert taken.data["forced"] and taken.data["explored_order"] is not None
    children = [n for n in nodes_of(services, run_id, "step") if n.parent_id == taken.id]
    assert len(children) == 3 and all(n.status == NodeStatus.DONE for n in children)
    # Exploring it went through the backtrack to it, drawn as such.
    assert any(e.dst == taken.id for e in services.repo.list_edges(run_id, kind="backtrack"))
    # A node already explored is refused with the reason.
    assert "already explored" in steer_refused(services, run_id, "force_explore", {"node_id": taken.id})


def test_mark_impossible_prunes_what_was_not_explored_and_is_refused_twice(services, fake_llm):
    run_id = finished(services, fake_llm)
    first = entity(services, run_id, ARTHUR)
    children = [n for n in nodes_of(services, run_id, "step") if n.parent_id == first.id]
    untaken = [n for n in children if n.data.get("explored_order") is None]
    assert untaken

    command = steer_and_wait(services, run_id, "mark_impossible", {"node_id": first.id})
    assert command.status == CommandStatus.DONE, command.error
    marked = services.repo.get_node(first.id)
    assert (marked.data["verdict"], marked.data["judged_by"]) == ("impossible", "you")
    assert all(services.repo.get_node(n.id).status == NodeStatus.PRUNED for n in untaken)
    taken = [n for n in children if n.data.get("explored_order") is not None]
    assert all(services.repo.get_node(n.id).status == NodeStatus.DONE for n in taken)
    assert "already marked impossible" in steer_refused(services, run_id, "mark_impossible", {"node_id": first.id})
    # The app does not offer it there again (Explore next still can reopen the node).
    offered = [c.name for c in services.method("fgdip").contract().commands_for(services.repo.get_node(first.id))]
    assert "mark_impossible" not in offered and "force_explore" in offered
    # A pruned node takes no command.
    assert "pruned" in steer_refused(services, run_id, "force_explore", {"node_id": untaken[0].id})


def test_marking_a_step_of_the_accepted_answers_path_impossible_rejects_it_and_searches_on(services, fake_llm):
    run_id = finished(services, fake_llm)
    [accepted] = [a for a in nodes_of(services, run_id, "answer") if a.data.get("verdict") == "accepted"]
    assert services.repo.latest_report(run_id).data["short_answer"] == accepted.data["short_answer"]

    steer_and_wait(services, run_id, "mark_impossible", {"node_id": entity(services, run_id, ARTHUR).id})
    before = services.repo.get_node(accepted.id)
    assert before.data["verdict"] == "rejected" and "impossible" in before.data["error_analysis"]
    assert [e.node_id for e in memory(services, run_id).entries] == [accepted.id]  # the search learned it
    # The search went on to the next branch, and the report gives its answer.
    assert entity(services, run_id, FIRST).data.get("explored_order") is not None
    report = services.repo.latest_report(run_id).data
    assert report["short_answer"] != accepted.data["short_answer"] and report["verified"]


def test_add_entity_opens_a_new_branch_explored_at_once(services, fake_llm):
    run_id = finished(services, fake_llm)
    command = steer_and_wait(services, run_id, "add_entity", {"entity": "  Women's magazines  "})
    assert command.status == CommandStatus.DONE, command.error
    added = entity(services, run_id, "Women's magazines")
    assert added.data["user"] and added.data["observation"] and added.data["explored_order"] is not None
    assert [n for n in nodes_of(services, run_id, "step") if n.parent_id == added.id]
    # Explored down to an answer, not one layer: the new branch's answer is the report's now.
    [reached] = [
        a for a in nodes_of(services, run_id, "answer") if a.data["short_answer"] == "answer from Women's magazines"
    ]
    assert reached.data["verdict"] == "accepted"
    assert services.repo.latest_report(run_id).data["answer_node"] == reached.id
    # Starred on the map as the report's answer; an answer accepted before it is not any more.
    answers = nodes_of(services, run_id, "answer")
    starred = [a for a in answers if a.label.startswith("★ ")]
    assert [a.id for a in starred] == [reached.id] and starred[
        0
    ].label == "★ accepted answer: answer from Women's magazines"
    assert [a.id for a in answers if a.data.get("reported")] == [reached.id]
    assert any(a.data.get("verdict") == "accepted" and a.data.get("reported") is False for a in answers)
    # The answer accepted before is told apart from the report's: "earlier", not a second "accepted".
    earlier = [a for a in answers if a.data.get("verdict") == "accepted" and not a.data.get("reported")]
    assert earlier and all(a.label.startswith("earlier accepted answer: ") and a.data["superseded"] for a in earlier)
    assert all(
        "not the report's answer: a later one is" in FgdipMethod.contract().kind("answer").read(a).caption()
        for a in earlier
    )
    report = services.repo.latest_report(run_id).markdown
    expanded = sum(1 for n in services.repo.list_nodes(run_id) if (n.data or {}).get("explored_order") is not None)
    assert re.search(
        rf"_The search generated \d+ steps and expanded {expanded} nodes, the question first \(the map "
        r"numbers them in that order\); it backtracked \d+ times?, and its error memory holds ",
        report,
    ), report
    assert "already a branch" in steer_refused(services, run_id, "add_entity", {"entity": "women's MAGAZINES"})
    assert steer_refused(services, run_id, "add_entity", {"entity": ""})  # refused by the payload model


def test_the_error_memory_can_be_edited_and_later_steps_are_given_the_edit(services, fake_llm):
    fake_llm.when(EVALUATE_ANSWER, judged_answer(False, "The founding year was not checked."), times=1)
    run_id = finished(services, fake_llm)
    assert [e.analysis for e in memory(services, run_id).entries] == ["The founding year was not checked."]

    steer_and_wait(services, run_id, "edit_error_memory", {"number": 1, "analysis": "Compare founding years."})
    steer_and_wait(services, run_id, "edit_error_memory", {"analysis": "LESSON-YOURS: check 1844."})
    entries = memory(services, run_id).entries
    assert [(e.analysis, e.by_user) for e in entries] == [
        ("Compare founding years.", True),
        ("LESSON-YOURS: check 1844.", True),
    ]
    # Said at once, before it is queued: the memory holds 2 lessons.
    assert "there is no lesson 5: the memory holds 2 (entries 1 to 2), and 0 adds one" in refused_before_queueing(
        services, run_id, "edit_error_memory", {"number": 5, "analysis": "x"}
    )
    assert "needs its text" in steer_refused(services, run_id, "edit_error_memory", {"analysis": "  "})
    # Queued when it was right, applied when it no longer is (a lesson removed in between): the same
    # check runs again before the method applies it, and the command fails with the reason.
    from engine.runner import HeldRun

    late = services.repo.enqueue_command(run_id, "edit_error_memory", {"number": 5, "analysis": "x"})
    services.runner.start(run_id, reopen=True, steered_from=HeldRun.of(services.repo.get_run(run_id)))
    services.runner.wait(run_id, timeout=30)
    late = next(c for c in services.repo.list_commands(run_id) if c.id == late.id)
    assert late.status == CommandStatus.FAILED and "there is no lesson 5" in late.error, late
    assert steer_refused(services, run_id, "edit_error_memory", {"number": -1})  # the payload model refuses

    # Exploring again: the node generator is given the edited memory.
    generated = len(fake_llm.calls_for(GENERATE))
    untaken = next(
        n
        for n in nodes_of(services, run_id)
        if n.kind in ("entity", "step")
        and n.status == NodeStatus.DONE
        and n.data.get("explored_order") is None
        and n.data.get("action") != "finish"
    )
    steer_and_wait(services, run_id, "force_explore", {"node_id": untaken.id})
    later = [request_text(r) for r in fake_llm.calls_for(GENERATE)[generated:]]
    assert later and all("LESSON-YOURS" in text and "Compare founding years." in text for text in later)

    steer_and_wait(services, run_id, "edit_error_memory", {"number": 1, "analysis": ""})
    assert [e.analysis for e in memory(services, run_id).entries] == ["LESSON-YOURS: check 1844."]


def test_what_a_node_you_marked_impossible_had_generated_is_out_of_the_search():
    from engine.methods.fgdip.explore import Tree, next_node
    from storage.models import Node

    def node(id, kind, parent, **data):
        return Node(id=id, run_id="r", kind=kind, parent_id=parent, status=NodeStatus.DONE, data=data)

    question = node(1, "question", None)
    marked = node(2, "entity", 1, verdict="impossible", judged_by="you", explored_order=1, expanded=True)
    child = node(3, "step", 2, verdict="sure")  # generated before you marked its parent
    grandchild_parent = node(4, "step", 2, verdict="sure", explored_order=2, expanded=True)
    grandchild = node(5, "step", 4, verdict="sure")
    other = node(6, "entity", 1, verdict="maybe")
    tree = Tree.of([question, marked, child, grandchild_parent, grandchild, other])
    assert next_node(tree).id == 6  # not 3 or 5, though they are "sure" and 6 only "maybe"
    assert next_node(Tree.of([question, marked, child, grandchild_parent, grandchild])) is None
    # Unless you ask for one of them yourself.
    forced = node(5, "step", 4, verdict="sure", forced=True)
    assert next_node(Tree.of([question, marked, child, grandchild_parent, forced, other])).id == 5
    # Only your mark reaches down the tree: the Step Evaluator's "impossible" keeps its own rule (that
    # node is not explored, so it normally has no children to exclude).
    judged = node(2, "entity", 1, verdict="impossible", judged_by="evaluator", explored_order=1, expanded=True)
    assert next_node(Tree.of([question, judged, child, other])).id == 3


def test_mark_impossible_rejects_an_answer_not_judged_yet_instead_of_letting_it_pass_later(services, fake_llm):
    """A run that failed between choosing a finishing node and judging its answer: ruling its path
    out must not leave the answer to be judged, accepted and reported as verified (review 14)."""
    from engine.llm.protocol import LLMConnectionError
    from tests.engine.methods.fgdip.fgdip_scripts import WRITE_ANSWER

    fake_llm.when(WRITE_ANSWER, LLMConnectionError("the endpoint went away"), times=1)
    run_id = finished(services, fake_llm, {"siblings": 1})
    [pending] = nodes_of(services, run_id, "answer")
    assert pending.status != NodeStatus.DONE and services.repo.get_run(run_id).status == "failed"
    branch = entity(services, run_id, ARTHUR)
    steer_and_wait(services, run_id, "mark_impossible", {"node_id": branch.id})
    ruled_out = services.repo.get_node(pending.id)
    assert (ruled_out.status, ruled_out.data["verdict"]) == (NodeStatus.DONE, "rejected")
    assert "impossible" in ruled_out.data["error_analysis"]
    assert any(e.node_id == pending.id for e in memory(services, run_id).entries)
    data = services.repo.latest_report(run_id).data
    assert data["answer_node"] != pending.id and data["short_answer"] == f"answer from {FIRST}"


def test_an_entity_added_to_a_full_tree_still_reaches_an_answer(services, fake_llm):
    """The tree is full (max_nodes): the added entity's children must finish, or none of them could
    be taken and the command would pay for a layer that ends nowhere (review 14c)."""
    from tests.engine.methods.fgdip.fgdip_scripts import candidate_of

    fake_llm.when(EXTRACT, entities(ARTHUR, FIRST))
    fake_llm.when(GENERATE, numbered_steps(finish_at=100, answer=answers_by_branch))  # finishes only when it must
    fake_llm.when(EVALUATE_ANSWER, lambda r: judged_answer("Women's magazines" in candidate_of(r), "Scripted."))
    run_id = run_to_end(services, QUESTION, "fgdip", {"siblings": 2, "max_nodes": 6, "max_backtracks": 5})
    assert len([n for n in nodes_of(services, run_id) if n.kind in ("entity", "step")]) == 6
    steer_and_wait(services, run_id, "add_entity", {"entity": "Women's magazines"})
    reached = [a for a in nodes_of(services, run_id, "answer") if a.data["verdict"] == "accepted"]
    assert [a.data["short_answer"] for a in reached] == ["answer from Women's magazines"]
    assert services.repo.latest_report(run_id).data["verified"] is True


def test_the_reports_answer_keeps_its_star_when_its_path_is_ruled_out(services, fake_llm):
    """Ruled out through Mark impossible, the only answer is still the report's (the last one
    rejected): relabelled "rejected", it keeps its star (review of session 17)."""
    from tests.engine.methods.fgdip.fgdip_scripts import EXTRACT, answers_by_branch, entities, numbered_steps

    fake_llm.when(EXTRACT, entities("Arthur's Magazine"))
    fake_llm.when(GENERATE, numbered_steps(answer=answers_by_branch))
    run_id = run_to_end(services, QUESTION, "fgdip", {"max_nodes": 4})
    [answer] = nodes_of(services, run_id, "answer")
    assert answer.label.startswith("★ accepted answer: ") and answer.data["reported"] is True
    entity = nodes_of(services, run_id, "entity")[0]
    steer_and_wait(services, run_id, "mark_impossible", {"node_id": entity.id})
    [answer] = nodes_of(services, run_id, "answer")
    assert services.repo.latest_report(run_id).data["answer_node"] == answer.id
    assert answer.data["verdict"] == "rejected" and answer.label.startswith("★ rejected answer: "), answer.label
