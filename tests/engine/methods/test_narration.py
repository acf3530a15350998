"""Live narration on the scripted fake LLM: every LLM call made for a node is a `step` in the
words its method declares, every search says what was searched, where and how much came back, a
failed node says why in plain words, steering commands go queued -> applying -> applied, the run's
lifecycle is logged, and active time leaves out a pause."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engine import narration
from engine.contract import CommandRejected
from engine.graph import RunGraph
from engine.llm.fake import named
from engine.methods.deot.kinds import STEPS as DEOT_STEPS
from engine.methods.omnithink.kinds import STEPS as OMNITHINK_STEPS
from engine.methods.registry import METHODS
from engine.narration import Phase, active_seconds, plain_failure
from storage.models import CommandStatus, NodeStatus, RunEvent, RunStatus
from tests.engine.methods.deot.deot_scripts import INVALID, QUESTION, SMALL, SUMMARY, Gate, about, by_label, start_run
from tests.engine.methods.omnithink.omnithink_scripts import SMALL as OMNI_SMALL
from tests.engine.methods.omnithink.omnithink_scripts import TOPIC
from tests.support.fixtures_engine import release_and_finish, run_to_end

DEOT = {"optimize_query": False, **SMALL}
# What a reader must never see in the step log's words.
INTERNAL = ("Field required", "NodeSummary", "deot.", "omnithink.", "validation error", "Traceback")


def events(services, run_id: str) -> list[RunEvent]:
    return list(reversed(services.repo.list_events(run_id)))  # oldest first


def phases(evts: list[RunEvent]) -> list[str]:
    return [e.data["phase"] for e in evts if e.kind == narration.RUN]


def assert_plain(evts: list[RunEvent]) -> None:
    for event in evts:
        assert not any(word in event.text for word in INTERNAL), event.text


def test_a_deot_run_narrates_its_steps_searches_and_lifecycle(services):
    run_id = run_to_end(services, QUESTION, "deot", DEOT)
    assert services.repo.get_run(run_id).status == RunStatus.DONE
    log = events(services, run_id)
    assert phases(log) == [Phase.STARTED, Phase.FINISHED]
    assert log[0].text == "the run started" and log[-1].text == "finished"

    root = services.repo.list_nodes(run_id)[0]
    root_steps = [e.text for e in log if e.kind == narration.STEP and e.node_id == root.id]
    # In the words DEoT declares, in the order the work happens.
    assert root_steps[0] == "planning the tasks"
    assert "summarising what the sources say" in root_steps
    assert root_steps.index("planning the tasks") < root_steps.index("summarising what the sources say")
    assert {e.data["prompt"] for e in log if e.kind == narration.STEP} <= set(DEOT_STEPS)
    # The report is the run's own step (no node).
    assert [e.text for e in log if e.kind == narration.STEP and e.node_id is None] == ["writing the report"]

    searches = [e for e in log if e.kind == narration.SEARCH]
    assert searches and all(e.node_id is not None for e in searches)
    first = searches[0]
    assert (
        first.text.startswith("searched ")
        and first.text.endswith(f"{first.data['found']} sources came back")
        or first.text.endswith("1 source came back")
    )
    assert first.data["query"] in first.text
    assert services.searcher("local").description.split(" (")[0] in first.text
    assert_plain(log)


def test_an_omnithink_run_narrates_its_steps_and_searches(services):
    run_id = run_to_end(services, TOPIC, "omnithink", OMNI_SMALL)
    assert services.repo.get_run(run_id).status == RunStatus.DONE
    log = events(services, run_id)
    assert phases(log) == [Phase.STARTED, Phase.FINISHED]
    steps = {e.text for e in log if e.kind == narration.STEP}
    assert {"deciding how to expand this topic", "drafting the outline", "writing a section"} <= steps
    assert {e.data["prompt"] for e in log if e.kind == narration.STEP} <= set(OMNITHINK_STEPS)
    tree = {n.id for n in services.repo.list_nodes(run_id)}
    searches = [e for e in log if e.kind == narration.SEARCH]
    assert searches and {e.node_id for e in searches} <= tree
    assert all("came back" in e.text for e in searches)
    assert_plain(log)


def test_a_failed_node_says_why_in_plain_words(services, fake_llm):
    fake_llm.when(SUMMARY, INVALID)  # every summary fails validation
    run_id = run_to_end(services, QUESTION, "deot", DEOT)
    failed = [e for e in events(services, run_id) if e.kind == narration.FAILED]
    assert failed, "a failed node must be in the log"
    assert failed[0].text == "the model's answer did not have the expected form, even after 3 tries"
    assert "NodeSummary" in failed[0].data["error"]  # the technical text stays in the data
    node = services.repo.get_node(failed[0].node_id)
    assert node.status == NodeStatus.FAILED
    # The re-asks are narrated as such.
    assert any("asking again" in e.text for e in events(services, run_id) if e.node_id == node.id)
    run_events = events(services, run_id)
    assert phases(run_events)[-1] == Phase.FAILED
    assert run_events[-1].text == "the run failed: nothing was answered"
    assert_plain(run_events)


def _gated_deot(services, fake_llm):
    """A DEoT run held while it plans ALPHA (layer 1), with BETA not solved yet; (run id, gate, BETA)."""
    from tests.engine.methods.deot.deot_scripts import BREADTH, PLANNER, BreadthScript, depth_follow_up
    from tests.engine.methods.deot.test_deot_steering import ALPHA, ASPECTS, BETA  # the scripted aspects

    fake_llm.when(BREADTH, BreadthScript({QUESTION: ASPECTS}))
    fake_llm.when(named("deot.depth"), depth_follow_up)
    gate = Gate()
    fake_llm.when(about(PLANNER, ALPHA), gate, times=1)
    run_id = start_run(services, QUESTION, {"optimize_query": False, "max_layers": 3, "max_nodes": 15})
    gate.wait_reached()
    services.runner.store_gathered(run_id)  # the run as it stands at the held call
    return run_id, gate, by_label(services, run_id, BETA)


def test_steering_shows_queued_then_applying_then_applied_and_no_duplicate(services, fake_llm):
    run_id, gate, beta = _gated_deot(services, fake_llm)
    command = services.runner.steer(run_id, "prune", {"node_id": beta.id})
    queued = [e for e in events(services, run_id) if e.kind == narration.STEER]
    assert [(e.node_id, e.text, e.data["phase"]) for e in queued] == [(beta.id, "Prune queued", narration.QUEUED)]
    with pytest.raises(CommandRejected, match="already on its way"):
        services.runner.steer(run_id, "prune", {"node_id": beta.id})
    assert len(services.repo.list_commands(run_id)) == 1

    command = release_and_finish(services, run_id, gate, command.id)
    assert command.status == CommandStatus.DONE
    steer = [e for e in events(services, run_id) if e.kind == narration.STEER]
    assert [e.data["phase"] for e in steer] == [narration.QUEUED, narration.APPLYING, narration.APPLIED]
    assert [e.text for e in steer] == ["Prune queued", "applying Prune", "Prune applied"]
    assert {e.data["command_id"] for e in steer} == {command.id}


def test_a_command_refused_when_applied_says_why(services, fake_llm):
    from tests.engine.methods.deot.test_deot_steering import BETA

    fake_llm.when(about(SUMMARY, BETA), INVALID)  # BETA, still being solved, will fail
    run_id, gate, beta = _gated_deot(services, fake_llm)
    # Accepted while BETA is unfinished (it may be done by then); checked again when applied.
    command = services.runner.steer(run_id, "expand", {"node_id": beta.id, "n": 1})
    command = release_and_finish(services, run_id, gate, command.id)
    assert command.status == CommandStatus.FAILED
    steer = [e for e in events(services, run_id) if e.kind == narration.STEER]
    assert [e.data["phase"] for e in steer] == [narration.QUEUED, narration.APPLYING, narration.REFUSED]
    assert steer[-1].text == f"Expand refused: {command.error}" and "failed" in command.error


def test_a_pause_is_logged_and_left_out_of_active_time(services, fake_llm):
    gate = Gate()
    fake_llm.when(named("direct.answer"), gate, times=1)
    run = services.runner.create_run(question=QUESTION, method="direct", llm_info=services.llm_info("fake"))
    services.runner.pause(run.id)  # seen at the first checkpoint
    services.runner.start(run.id)
    while services.repo.get_run(run.id).status != RunStatus.PAUSED:
        services.runner.wait(run.id, timeout=0.05)
    services.runner.resume(run.id)
    gate.wait_reached()
    gate.opened.set()
    assert services.runner.wait(run.id, timeout=30).status == RunStatus.DONE
    log = [e for e in events(services, run.id) if e.kind == narration.RUN]
    assert phases(log) == [Phase.STARTED, Phase.PAUSED, Phase.RESUMED, Phase.FINISHED]
    started, paused, resumed, finished = (e.created_at for e in log)
    assert active_seconds(log) == pytest.approx(
        (paused - started).total_seconds() + (finished - resumed).total_seconds()
    )
    assert active_seconds(log) < (finished - started).total_seconds()


T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _event(seconds: float, kind: str = narration.RUN, phase: str | None = None, event_id: int = 0) -> RunEvent:
    return RunEvent(
        id=event_id,
        run_id="r",
        kind=kind,
        text="",
        created_at=T0 + timedelta(seconds=seconds),
        data={"phase": phase} if phase else {},
    )


def test_active_time_counts_segments_from_start_or_resume_to_their_end():
    log = [
        _event(0, phase=Phase.STARTED),
        _event(10, phase=Phase.PAUSED),
        _event(100, phase=Phase.RESUMED),
        _event(130, phase=Phase.FINISHED),
        _event(2000, phase=Phase.RESUMED),
        _event(2005, phase=Phase.STOPPED),
    ]
    assert active_seconds(log) == 10 + 30 + 5
    assert active_seconds(list(reversed(log))) == 45  # newest first, as listed, gives the same


def test_an_interrupted_segment_ends_at_its_last_event_and_a_live_one_at_now():
    log = [_event(0, phase=Phase.STARTED), _event(42, kind=narration.STEP)]
    assert active_seconds(log) == 42  # the process died after its last event
    assert active_seconds(log, now=T0 + timedelta(seconds=60)) == 60  # still executing
    assert active_seconds([]) == 0


def test_failures_are_said_plainly():
    assert plain_failure(
        "the model's answer did not match NodeSummary after 3 attempts (evidence_and_data: Field required)"
    ) == ("the model's answer did not have the expected form, even after 3 tries")
    assert plain_failure("1 validation error for X\nfoo\n  Field required") == (
        "the model's answer did not have the expected form"
    )
    assert plain_failure("every task of the plan failed: t1: boom") == "every task of its plan failed"
    unknown = plain_failure("KeyError: 'x'")
    assert "KeyError" not in unknown and "node's data" in unknown


def test_narrate_takes_the_declared_kinds_and_skips_a_repeated_step(services):
    run = services.runner.create_run(question=QUESTION, method="deot", llm_info=services.llm_info("fake"))
    graph = RunGraph(services.repo, run.id, METHODS["deot"].contract())
    graph.narrate("proposals dropped: both repeated the question", kind=narration.DROPPED, count=2)
    graph.narrate_call("deot.plan_tasks", node_id=None)
    graph.narrate_call("deot.plan_tasks", node_id=None)  # the same step again: not news
    graph.narrate_call("deot.plan_tasks", node_id=None, attempt=2)
    graph.narrate_call("some.undeclared_prompt", node_id=None)
    with pytest.raises(ValueError, match="unknown event kind"):
        graph.narrate("x", kind="chatter")
    texts = [(e.kind, e.text) for e in events(services, run.id)]
    assert texts == [
        ("dropped", "proposals dropped: both repeated the question"),
        ("step", "planning the tasks"),
        ("step", "planning the tasks (asking again: the last answer did not have the expected form)"),
        ("step", "asking the model"),
    ]
    assert events(services, run.id)[0].data == {"count": 2}
