"""The runner: background execution, pause/resume/stop through the persisted queue, concurrent
runs, recovery of runs whose process died, steering a finished run, budgets."""

from __future__ import annotations

import threading
import time

import pytest

from engine.llm.fake import FakeLLM
from engine.report import render_markdown
from engine.runner import RunnerError
from storage.models import CommandStatus, NodeStatus, RunStatus
from tests.support.fixtures_engine import run_to_end

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"


def _wait_for(predicate, timeout=10.0, interval=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    raise AssertionError("condition not reached in time")


class GatedLLM(FakeLLM):
    """A fake whose calls block until the test opens the gate (to act mid-run)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.entered = threading.Event()

    def chat(self, request):
        self.entered.set()
        assert self.gate.wait(10), "gate never opened"
        return super().chat(request)


def test_rag_run_is_stored_and_reported(services):
    run_id = run_to_end(services, QUESTION, "rag")
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.DONE
    kinds = [n.kind for n in services.repo.list_nodes(run_id)]
    assert kinds == ["question", "search", "answer"]
    assert run.llm_calls == 1 and run.prompt_tokens > 0
    answer = services.repo.list_nodes(run_id, kind="answer")[0]
    assert answer.prompt_tokens == run.prompt_tokens  # usage stored with the node it served
    report = services.repo.latest_report(run_id)
    assert "[[S" in report.markdown  # cites stored sources


def test_stop_mid_run_keeps_finished_nodes_and_resume_finishes(services):
    gated = GatedLLM()
    services.use_llm("fake", gated)
    run = services.runner.create_run(question=QUESTION, method="rag", llm_info=services.llm_info("fake"))
    services.runner.start(run.id)
    assert gated.entered.wait(10)
    services.runner.stop(run.id)
    gated.gate.set()  # the in-flight call returns; the next checkpoint sees the stop
    final = services.runner.wait(run.id, timeout=10)
    # The answer call was already in flight, so the run may finish it; either way nothing is lost.
    assert final.status in (RunStatus.STOPPED, RunStatus.DONE)
    if final.status == RunStatus.STOPPED:
        assert final.stop_reason == "stopped by the user"
        services.runner.resume(run.id)
        assert services.runner.wait(run.id, timeout=10).status == RunStatus.DONE
    search = services.repo.list_nodes(run.id, kind="search")
    assert len(search) == 1 and search[0].status == NodeStatus.DONE


def test_pause_blocks_at_checkpoint_until_resume(services):
    gated = GatedLLM()
    services.use_llm("fake", gated)
    run = services.runner.create_run(question=QUESTION, method="direct", llm_info=services.llm_info("fake"))
    services.runner.pause(run.id)  # queued before start: seen at the first checkpoint
    services.runner.start(run.id)
    _wait_for(lambda: services.repo.get_run(run.id).status == RunStatus.PAUSED)
    time.sleep(0.3)
    assert not gated.entered.is_set(), "a paused run must not call the LLM"
    services.runner.resume(run.id)
    gated.gate.set()
    assert services.runner.wait(run.id, timeout=10).status == RunStatus.DONE
    commands = services.repo.list_commands(run.id)
    assert [c.kind for c in commands] == ["pause", "resume"]
    assert all(c.status == CommandStatus.DONE for c in commands)


def test_stop_while_paused(services):
    services.use_llm("fake", GatedLLM())
    run = services.runner.create_run(question=QUESTION, method="direct", llm_info=services.llm_info("fake"))
    services.runner.pause(run.id)
    services.runner.start(run.id)
    _wait_for(lambda: services.repo.get_run(run.id).status == RunStatus.PAUSED)
    services.runner.stop(run.id)
    assert services.runner.wait(run.id, timeout=10).status == RunStatus.STOPPED


def test_concurrent_runs_do_not_interfere(services):
    questions = [f"{QUESTION} (variant {i})" for i in range(6)]
    runs = [services.runner.create_run(question=q, method="rag", llm_info=services.llm_info("fake")) for q in questions]
    for run in runs:
        services.runner.start(run.id)
    for run in runs:
        assert services.runner.wait(run.id, timeout=30).status == RunStatus.DONE
    for run, question in zip(runs, questions):
        nodes = services.repo.list_nodes(run.id)
        assert [n.kind for n in nodes] == ["question", "search", "answer"]
        assert nodes[0].content == question
        assert services.repo.get_run(run.id).llm_calls == 1
        assert all(s.run_id == run.id for s in services.repo.list_sources(run.id))


def test_runs_of_a_dead_process_become_interrupted_and_resume(services):
    run = services.runner.create_run(question=QUESTION, method="rag", llm_info=services.llm_info("fake"))
    # Simulate a process that claimed the run and died (pid 2**22+1 does not exist).
    services.repo.claim_run(run.id, f"{__import__('socket').gethostname()}:{2**22 + 1}:dead")
    assert services.runner.recover_interrupted() == [run.id]
    assert services.repo.get_run(run.id).status == RunStatus.INTERRUPTED
    services.runner.resume(run.id)
    assert services.runner.wait(run.id, timeout=10).status == RunStatus.DONE


def test_live_owner_is_not_interrupted_and_cannot_be_started_twice(services):
    run = services.runner.create_run(question=QUESTION, method="rag", llm_info=services.llm_info("fake"))
    import os
    import socket

    services.repo.claim_run(run.id, f"{socket.gethostname()}:{os.getppid()}:other")  # a live pid
    assert services.runner.recover_interrupted() == []
    with pytest.raises(RunnerError, match="another process"):
        services.runner.start(run.id)


def test_steering_reopens_nothing_when_another_live_process_took_the_run_up(services):
    """A worker ending a run sees a command queued and goes on with it, between a steer's look at the
    run and its reopening: the steer leaves the run to that process instead of failing (a fresh
    clone's `scripts/test` met it on the workers' test)."""
    import os
    import socket

    run = services.runner.create_run(question=QUESTION, method="rag", llm_info=services.llm_info("fake"))
    other = f"{socket.gethostname()}:{os.getppid()}:other"  # a live pid
    services.repo.claim_run(run.id, other)
    services.runner.start(run.id, reopen=True)  # nothing to do here: the other process applies it
    stored = services.repo.get_run(run.id)
    assert (stored.status, stored.owner) == (RunStatus.RUNNING, other)
    assert not services.runner.is_active(run.id)


def test_resume_of_done_run_is_refused(services):
    run_id = run_to_end(services, QUESTION, "direct")
    with pytest.raises(RunnerError, match="already done"):
        services.runner.resume(run_id)


def test_regenerate_report_reopens_a_finished_run(services):
    run_id = run_to_end(services, QUESTION, "rag")
    before = services.repo.list_reports(run_id)
    services.runner.steer(run_id, "regenerate_report")
    final = services.runner.wait(run_id, timeout=10)
    assert final.status == RunStatus.DONE
    assert len(services.repo.list_reports(run_id)) == len(before) + 1
    assert services.repo.list_commands(run_id)[-1].status == CommandStatus.DONE
    assert final.llm_calls == 1  # nothing was recomputed


def test_unsupported_steering_is_refused(services):
    run_id = run_to_end(services, QUESTION, "direct")
    with pytest.raises(ValueError, match="does not support 'deepen'"):
        services.runner.steer(run_id, "deepen", {"node_id": 1})


def test_budget_stops_cleanly_and_resume_with_more_budget_completes(services):
    run_id = run_to_end(services, QUESTION, "rag", max_tokens=1)
    run = services.repo.get_run(run_id)
    # The first call is allowed (nothing used yet); nothing after the budget is reached.
    assert run.status in (RunStatus.DONE, RunStatus.STOPPED)
    tiny = run_to_end(services, QUESTION + " again", "rag", max_cost=0.0000001)
    assert services.repo.get_run(tiny).status in (RunStatus.DONE, RunStatus.STOPPED)


def test_budget_reached_before_a_call_stops_the_run(services):
    run = services.runner.create_run(
        question=QUESTION, method="rag", llm_info=services.llm_info("fake"), max_tokens=100
    )
    # Spend the budget before the answer call.
    services.repo.record_llm_call(
        run.id,
        node_id=None,
        purpose="default",
        model="fake",
        prompt_tokens=100,
        completion_tokens=0,
        cost=0,
        latency_s=0,
    )
    services.runner.start(run.id)
    final = services.runner.wait(run.id, timeout=10)
    assert final.status == RunStatus.STOPPED
    assert "token budget reached" in final.stop_reason
    nodes = {n.kind: n for n in services.repo.list_nodes(run.id)}
    assert nodes["search"].status == NodeStatus.DONE  # kept
    assert nodes["answer"].status == NodeStatus.PENDING  # will be redone on resume
    # rag's report needs the model: a stopped run shows its finished nodes as partial results instead.
    assert services.repo.latest_report(run.id) is None
    assert "Partial results: the run is stopped" in render_markdown(services.repo, run.id)
    services.runner.resume(run.id, max_tokens=100_000)
    assert services.runner.wait(run.id, timeout=10).status == RunStatus.DONE


def test_a_run_whose_answer_failed_validation_is_failed_not_done(services, fake_llm):
    """Finding 2 of the reliability issue: a rag run whose answer failed validation ended `done`."""
    fake_llm.when("Question:", {"wrong": "shape"})
    run_id = run_to_end(services, QUESTION, "rag")
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.FAILED
    assert "nothing was answered" in run.error and "did not match CitedAnswer" in run.error
    answer = services.repo.list_nodes(run_id, kind="answer")[0]
    assert answer.status == NodeStatus.FAILED
    assert "did not match" in answer.error
    assert run.llm_calls == 3  # first try + 2 re-asks
    report = services.repo.latest_report(run_id).markdown
    assert "No answer was produced" in report and "did not match" not in report  # no internal error as content


def test_a_run_is_deleted_only_when_nothing_executes_it(services):
    import os
    import socket

    # Executed by another live process (a worker): refused, and nothing is lost.
    held = services.runner.create_run(question=QUESTION, method="rag", llm_info=services.llm_info("fake"))
    services.repo.claim_run(held.id, f"{socket.gethostname()}:{os.getppid()}:worker")
    with pytest.raises(RunnerError, match=r"running \(in another process\): stop it before deleting it"):
        services.runner.delete(held.id)
    assert services.repo.get_run(held.id).status == RunStatus.RUNNING
    # Its process died: nothing executes it any more, so it can go.
    services.repo.claim_run(held.id, f"{socket.gethostname()}:{2**22 + 1}:dead")
    services.runner.delete(held.id)
    with pytest.raises(LookupError):
        services.repo.get_run(held.id)

    # Executing here (its LLM call held open): refused until it is stopped.
    gated = GatedLLM()
    services.use_llm("fake", gated)
    run = services.runner.create_run(question=QUESTION, method="rag", llm_info=services.llm_info("fake"))
    services.runner.start(run.id)
    assert gated.entered.wait(10)
    with pytest.raises(RunnerError, match="stop it before deleting it"):
        services.runner.delete(run.id)
    services.runner.stop(run.id)
    gated.gate.set()
    services.runner.wait(run.id, timeout=10)
    services.runner.delete(run.id)
    assert all(r.id != run.id for r in services.repo.list_runs())


def test_a_corpus_that_cannot_be_opened_fails_the_run_in_its_own_words(services, caplog):
    """A worker whose home holds no usable corpus index: the run fails saying so and what to do,
    as an endpoint's failure is said, with no traceback in the log (it is no bug)."""
    from engine.search.protocol import SearchError

    def unusable(run):
        raise SearchError(
            "the corpus index /srv/home/corpus.sqlite3 cannot be opened (unable to open database file)",
            hint="Make /srv/home writable (THOUGHTMAP_HOME).",
        )

    services.runner.searcher_for = unusable
    run = services.runner.create_run(
        question="Who wrote Hamlet?", method="rag", params={}, llm_info=services.llm_info("fake")
    )
    with caplog.at_level("DEBUG", logger="thoughtmap"):
        services.runner.start(run.id)
        failed = services.runner.wait(run.id, timeout=60)
    assert failed.status == RunStatus.FAILED
    assert failed.error == (
        "the corpus index /srv/home/corpus.sqlite3 cannot be opened (unable to open database "
        "file) Make /srv/home writable (THOUGHTMAP_HOME)."
    )
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records if r.exc_info]


def test_a_write_refused_after_the_final_status_leaves_the_run_done_not_dead(services, monkeypatch):
    """The disk fills the moment after the run's `done` is stored: the run is done, and no one is
    told it stopped and should be resumed (`execution_died` stays None)."""
    from storage.unwritable import DatabaseUnwritable

    def disk_fills(run_id, why):
        raise DatabaseUnwritable(DatabaseUnwritable.FULL, "sqlite:///full.sqlite3")

    monkeypatch.setattr(services.runner, "_supersede_controls", disk_fills)  # the first write after `done`
    run_id = run_to_end(services, "Who wrote Hamlet?", "rag")
    assert services.repo.get_run(run_id).status == RunStatus.DONE
    assert services.runner.execution_died(run_id) is None
