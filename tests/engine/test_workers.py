"""Distributed execution (issue 18): runs enqueued by the app's services, executed by two real
`thoughtmap worker` processes on the PostgreSQL server scripts/test starts, on the scripted fake
(slowed by THOUGHTMAP_FAKE_LATENCY so a run is still going when a test acts on it).

- 20 runs all complete, each executed once, by one worker;
- a run whose lease another process holds is not executed until the lease is free;
- pause, steering and resume sent from this process reach a run a worker executes;
- a worker killed with SIGKILL mid-run: the other worker finishes the run, no finished node redone.
The tests share the two workers (module scope) to stay light; the kill comes last.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from engine import narration
from engine.config import load_settings
from engine.services import build_services
from storage.leases import RunLease
from storage.models import CommandStatus, NodeStatus, RunStatus
from tests.support.db_backends import _fresh_postgres_database, _postgres_url

pytestmark = [pytest.mark.postgres, pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")]

_SCRIPT = Path(sys.executable).with_name("thoughtmap")
THOUGHTMAP = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "engine.cli"]
QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
WAIT_S = 240  # generous: start-up and runs on a busy two-core CI machine; never a timing assertion
STALLED_AFTER_S = 3


def wait_for(condition: Callable[[], object], what: str, timeout: float = WAIT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


class WorkerProcess:
    """One `thoughtmap worker` subprocess, its log in a file."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        self._file = log.open("w")
        self.proc = subprocess.Popen(
            [
                *THOUGHTMAP,
                "worker",
                "--concurrency",
                "3",
                "--stalled-after",
                str(STALLED_AFTER_S),
                "--heartbeat",
                "0.5",
            ],
            env=env,
            stdout=self._file,
            stderr=subprocess.STDOUT,
            text=True,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def text(self) -> str:
        return self.log.read_text()

    def ran(self) -> list[str]:
        """Run ids this worker started executing, in order."""
        return re.findall(r"running run ([0-9a-f]+) ", self.text())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)
        self._file.close()


@pytest.fixture(scope="module")
def queue_env(tmp_path_factory) -> dict[str, str]:
    base = _postgres_url()
    if not base:
        pytest.skip("no PostgreSQL test server (run the tests through scripts/test)")
    home = tmp_path_factory.mktemp("workers-home")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "THOUGHTMAP_"))}
    env.update(
        THOUGHTMAP_HOME=str(home),
        THOUGHTMAP_DATABASE_URL=_fresh_postgres_database(base),
        THOUGHTMAP_EXECUTION="queue",
        THOUGHTMAP_LLM="fake",
        THOUGHTMAP_FAKE_LATENCY="0.25",
        THOUGHTMAP_LLM_CONCURRENCY="4",
        PYTHONUNBUFFERED="1",
    )
    return env


@pytest.fixture(scope="module")
def services(queue_env):
    """The app's services in this (test) process: they enqueue, they execute nothing."""
    services = build_services(load_settings(queue_env))
    yield services
    services.close()


@pytest.fixture(scope="module")
def workers(queue_env, services, tmp_path_factory):
    logs = tmp_path_factory.mktemp("worker-logs")
    procs = [WorkerProcess(queue_env, logs / f"worker-{i}.log") for i in (1, 2)]
    try:
        wait_for(lambda: all("executing up to" in p.text() for p in procs), "both workers to start")
        yield procs
    finally:
        for proc in procs:
            proc.stop()


def create(services, method: str = "direct", **params):
    run = services.runner.create_run(
        question=QUESTION, method=method, params=params, llm_info=services.llm_info("fake"), search_mode="none"
    )
    services.runner.start(run.id)
    return run.id


def finished(services, run_id: str):
    run = services.repo.get_run(run_id)
    return run if run.status not in RunStatus.ACTIVE else None


def run_phases(services, run_id: str) -> Counter:
    return Counter(e.data.get("phase") for e in services.repo.list_events(run_id, kinds=[narration.RUN]))


def test_twenty_runs_enqueued_by_the_app_all_complete_each_on_one_worker(services, workers):
    run_ids = [create(services) for _ in range(20)]
    for run_id in run_ids:
        wait_for(lambda: finished(services, run_id), f"run {run_id} to finish")
    assert [services.repo.get_run(r).status for r in run_ids] == [RunStatus.DONE] * 20
    # Each run was executed once, by one worker: one start, never resumed, one "running" log line.
    executions = Counter(r for w in workers for r in w.ran())
    assert all(executions[r] == 1 for r in run_ids), executions
    for run_id in run_ids:
        assert run_phases(services, run_id)[narration.Phase.STARTED] == 1
        assert run_phases(services, run_id)[narration.Phase.RESUMED] == 0
    assert services.queue_depth().waiting == 0


def test_a_benchmark_in_queue_mode_waits_for_its_runs_on_the_workers(services, workers):
    """Its items run on the workers; each item waits for its run, so the benchmark finishes in one
    go with every item scored (it once queued them all and ended "stopped with N runs left")."""
    from engine.evaluate.runner import BenchmarkRunner, BenchmarkSpec
    from storage.evaluation import ItemStatus

    runner = BenchmarkRunner(services)
    bench = runner.create(
        BenchmarkSpec(dataset="hotpotqa-autoact", methods=["direct"], limit=3, llm="fake", search_mode="none")
    )
    final = runner.execute(bench.id)
    rows = runner.store.list_items(bench.id)
    assert final.status == "done", final.note
    assert [r.status for r in rows] == [ItemStatus.SCORED] * 3
    ran = {r for w in workers for r in w.ran()}
    assert {r.run_id for r in rows} <= ran  # executed by the workers, not in this process


def test_a_run_whose_lease_is_held_elsewhere_waits_for_it(services, workers):
    lease = RunLease(services.db)
    run = services.runner.create_run(
        question=QUESTION, method="direct", llm_info=services.llm_info("fake"), search_mode="none"
    )
    try:
        with lease.hold(run.id) as taken:
            assert taken
            services.runner.start(run.id)
            # A worker takes the job, finds the run held, and leaves it for later: nothing executed.
            wait_for(
                lambda: any(f"run {run.id} is being executed by another process" in w.text() for w in workers),
                "a worker to find the run held",
            )
            assert services.repo.get_run(run.id).status == RunStatus.QUEUED
            assert services.repo.list_nodes(run.id) == []
        done = wait_for(lambda: finished(services, run.id), "the run to finish once the lease is free")
        assert done.status == RunStatus.DONE
        assert sum(w.ran().count(run.id) for w in workers) == 1
    finally:
        lease.dispose()


def _executing_worker(services, workers, run_id: str):
    def holder():
        run = services.repo.get_run(run_id)
        if run.status != RunStatus.RUNNING or not run.owner:
            return None
        pid = int(run.owner.split(":")[1])
        return next((w for w in workers if w.pid == pid), None)

    return wait_for(holder, f"a worker to execute run {run_id}")


def test_pause_steer_and_resume_from_another_process_reach_the_worker(services, workers):
    run_id = create(services, "deot", max_nodes=8)
    worker = _executing_worker(services, workers, run_id)
    services.runner.pause(run_id)
    wait_for(lambda: services.repo.get_run(run_id).status == RunStatus.PAUSED, "the worker to pause the run")
    root = next(n for n in services.repo.list_nodes(run_id) if n.parent_id is None)
    follow_up = "When was First for Women first published?"
    command = services.runner.steer(run_id, "ask", {"node_id": root.id, "question": follow_up})
    services.runner.resume(run_id)
    done = wait_for(lambda: finished(services, run_id), "the steered run to finish")
    assert done.status == RunStatus.DONE, done.error
    applied = next(c for c in services.repo.list_commands(run_id) if c.id == command.id)
    assert applied.status == CommandStatus.DONE, applied.error
    asked = [n for n in services.repo.list_nodes(run_id) if n.label == follow_up]
    assert len(asked) == 1 and asked[0].status == NodeStatus.DONE and asked[0].parent_id == root.id
    # The same worker kept the run all along: paused and resumed in place, never re-executed.
    assert sum(w.ran().count(run_id) for w in workers) == 1 and worker.ran().count(run_id) == 1
    assert run_phases(services, run_id)[narration.Phase.PAUSED] == 1


def test_a_command_to_a_stopped_run_replaces_the_stale_job_that_waited_for_it():
    """A Stop applied to a run that waited for a worker leaves that job queued. A command sent to
    the stopped run then must not be dropped as "already queued": the stale job carries no
    `steered_from`, and a worker taking it would run the whole run on. No worker runs here, so the
    jobs stay waiting for the test to read."""
    from engine.run_queue import QUEUE, RunQueue
    from storage.db import open_database

    base = _postgres_url()
    if not base:
        pytest.skip("no PostgreSQL test server (run the tests through scripts/test)")
    db = open_database(_fresh_postgres_database(base))
    queue = RunQueue(db)
    try:
        assert queue.enqueue("run-a", retry_failed=True)
        assert not queue.enqueue("run-a")  # an ordinary job defers to the one waiting
        held = {"status": "stopped", "stop_reason": "stopped by the user", "error": None}
        assert queue.enqueue("run-a", steered_from=held)
        assert queue.enqueue("run-b")  # another run's job is left alone
        waiting = queue.app.job_manager.list_jobs(queue=QUEUE, status="todo")
        assert sorted(
            (j.queueing_lock, j.task_kwargs.get("steered_from"), j.task_kwargs["retry_failed"]) for j in waiting
        ) == [("run-a", held, False), ("run-b", None, False)]
        # A second command while the reopening job waits: that job already carries how the run stood.
        assert not queue.enqueue("run-a")
        assert queue.depth().waiting == 2
    finally:
        queue.close()
        db.dispose()


def test_a_refused_command_leaves_a_run_stopped_on_a_worker_stopped(services, workers):
    """The rule embedded execution keeps (a person's Stop holds unless a command applies) holds on a
    worker too: the job carries how the run stood, and a refused command puts it back."""
    run_id = create(services, "fgdip")
    _executing_worker(services, workers, run_id)
    root = wait_for(
        lambda: next((n for n in services.repo.list_nodes(run_id) if n.parent_id is None), None), "the question node"
    )
    branch = wait_for(
        lambda: next(
            (n for n in services.repo.list_nodes(run_id) if n.parent_id == root.id and (n.data or {}).get("entity")),
            None,
        ),
        "a first entity branch",
    )
    services.runner.stop(run_id)
    stopped = wait_for(lambda: finished(services, run_id), "the worker to stop the run")
    assert stopped.status == RunStatus.STOPPED, stopped.error
    # Accepted when queued, refused when applied (it is a branch already): the worker runs nothing.
    command = services.runner.steer(run_id, "add_entity", {"entity": branch.data["entity"].upper()})
    refused = wait_for(
        lambda: next(
            (c for c in services.repo.list_commands(run_id) if c.id == command.id and c.status == CommandStatus.FAILED),
            None,
        ),
        "the worker to refuse the command",
    )
    assert "already a branch" in refused.error
    after = wait_for(lambda: finished(services, run_id), "the run to be held again")
    assert (after.status, after.stop_reason, after.llm_calls) == (
        RunStatus.STOPPED,
        stopped.stop_reason,
        stopped.llm_calls,
    )


def test_a_killed_worker_leaves_its_run_to_the_other_without_redoing_finished_nodes(services, workers):
    run_id = create(services, "deot", max_nodes=8)
    victim = _executing_worker(services, workers, run_id)
    survivor = next(w for w in workers if w is not victim)
    wait_for(lambda: len(services.repo.list_nodes(run_id, status=NodeStatus.DONE)) >= 2, "two finished nodes")
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait(timeout=30)
    # What was finished when the worker died (nothing can change it after the kill), and the
    # purposes of the calls that produced each finished node. Work DEoT does on a node after
    # finishing it (controller, engines) may be redone if the kill interrupted it; the node's own
    # work may not (the same rule as the contract suite's kill test).
    before = {n.id: n for n in services.repo.list_nodes(run_id, status=NodeStatus.DONE)}
    calls_before = services.repo.list_llm_calls(run_id)
    seen = {c.id for c in calls_before}
    solved_by = {
        node_id: {c.purpose for c in calls_before if c.node_id == node_id and c.created_at <= node.finished_at}
        for node_id, node in before.items()
    }
    assert services.repo.get_run(run_id).status == RunStatus.RUNNING  # nobody could say otherwise

    done = wait_for(lambda: finished(services, run_id), "the other worker to finish the run")
    assert done.status == RunStatus.DONE, done.error
    assert survivor.ran().count(run_id) == 1
    assert f"run {run_id} was left running" in survivor.text()
    for node_id, node in before.items():
        after = services.repo.get_node(node_id)
        assert (after.status, after.finished_at, after.content) == (NodeStatus.DONE, node.finished_at, node.content), (
            f"finished node {node_id} was computed again"
        )
    redone = [
        (c.node_id, c.purpose)
        for c in services.repo.list_llm_calls(run_id)
        if c.id not in seen and c.node_id in before and c.purpose in solved_by[c.node_id]
    ]
    assert not redone, f"calls after the kill redid finished nodes' work: {redone}"
    assert run_phases(services, run_id)[narration.Phase.RESUMED] == 1


def test_a_worker_shut_down_hands_its_runs_on_without_redoing_finished_nodes(queue_env, services, workers, tmp_path):
    # A third worker, so that one stays after the shut down whatever the tests before did.
    extra = WorkerProcess(queue_env, tmp_path / "worker-3.log")
    try:
        wait_for(lambda: "executing up to" in extra.text(), "the third worker to start")
        everyone = [*workers, extra]
        run_id = create(services, "deot", max_nodes=8)
        leaving = _executing_worker(services, everyone, run_id)
        wait_for(lambda: len(services.repo.list_nodes(run_id, status=NodeStatus.DONE)) >= 2, "two finished nodes")
        leaving.proc.send_signal(signal.SIGTERM)
        # It hands the run on and exits without waiting for the run to finish.
        assert leaving.proc.wait(timeout=WAIT_S) == 0, leaving.text()
        assert f"run {run_id} handed on: queued again for another worker" in leaving.text()
        left = services.repo.get_run(run_id)
        before = {n.id: (n.finished_at, n.content) for n in services.repo.list_nodes(run_id, status=NodeStatus.DONE)}
        assert left.status in (RunStatus.INTERRUPTED, RunStatus.RUNNING, RunStatus.DONE), left.status
        done = wait_for(
            lambda: (
                finished(services, run_id) if services.repo.get_run(run_id).status != RunStatus.INTERRUPTED else None
            ),
            "another worker to finish the run",
        )
        assert done.status == RunStatus.DONE, done.error
        assert sum(w.ran().count(run_id) for w in everyone if w is not leaving) == 1
        for node_id, (finished_at, content) in before.items():
            after = services.repo.get_node(node_id)
            assert (after.finished_at, after.content) == (finished_at, content), f"node {node_id} was computed again"
        assert any(
            e.text.endswith("its worker was shut down; another worker continues it")
            for e in services.repo.list_events(run_id, kinds=[narration.RUN])
        )
    finally:
        extra.stop()


def test_a_worker_needs_queue_mode_and_queue_mode_needs_postgresql(monkeypatch, capsys):
    from engine import cli

    assert cli.main(["worker"]) == cli.EXIT_USAGE  # embedded (the default): nothing to take
    assert "THOUGHTMAP_EXECUTION=queue" in capsys.readouterr().err
    monkeypatch.setenv("THOUGHTMAP_EXECUTION", "queue")  # on the default SQLite database
    assert cli.main(["list"]) == cli.EXIT_USAGE
    assert "needs PostgreSQL" in capsys.readouterr().err
