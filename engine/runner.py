"""Runs execute in background threads: start, pause, resume, stop, steer, recover.

Control goes through the run's persisted command queue, so a command given from another process
(the web app, the CLI) reaches the worker, and nothing is lost if a process dies. The method is
told about commands only at its checkpoints, between steps.

With a `dispatch` (distributed execution, THOUGHTMAP_EXECUTION=queue) this process executes
nothing itself: `start` marks the run queued and hands it to the task queue, and a worker process
executes it with `execute_here` (engine/worker.py). Everything else is the same code path.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from engine import narration
from engine.contract import CommandRejected, UnsupportedCommand
from engine.graph import RunGraph
from engine.llm.accounting import Budget, RunLLM, SharedBudget, budget_short
from engine.llm.pricing import PriceTable
from engine.llm.protocol import LLM, BudgetExceeded, LLMError
from engine.methods.base import Method, MethodParams, RunContext
from engine.methods.registry import METHODS, RegisteredMethods, get_method
from engine.methods.steering import apply as apply_command
from engine.methods.steering import apply_and_record, check
from engine.questions import clean_question
from engine.redact import redact_secrets
from engine.run_services import RunServices
from engine.search.protocol import Searcher, SearchError
from engine.steering_events import SteeringEvents
from engine.team_config import SPENDING_WINDOW
from engine.write_behind import DEFAULT_DELAY_S, RunJournal
from storage.models import Command, CommandStatus, Run, stored_id, utcnow
from storage.repository import Repository, RunNotFound
from storage.rows_batch import EventRecord, RunEnding
from storage.statuses import NodeStatus, RunStatus
from storage.unwritable import DatabaseUnwritable

log = logging.getLogger("thoughtmap.runner")

CONTROL_COMMANDS = frozenset({"pause", "resume", "stop"})


def narrate_run(repo: Repository, run_id: str, phase: str, text: str, **data: str) -> None:
    """A lifecycle event of the run (the step log, and what active time is computed from)."""
    repo.add_event(run_id, narration.RUN, text, data={"phase": phase, **data})


def run_line(phase: str, text: str, **data: str) -> EventRecord:
    """`narrate_run`'s line, to be stored with the status it tells of (`Repository.set_status`)."""
    return EventRecord(kind=narration.RUN, text=text, data={"phase": phase, **data})


@dataclass(frozen=True)
class HeldRun:
    """How a stopped or failed run stood when a steering command reopened it: if every command is
    refused, the run goes back to this (a person's Stop holds). Carried to a worker in the job."""

    status: str  # a RunStatus value
    stop_reason: str | None = None
    error: str | None = None

    @classmethod
    def of(cls, run: Run) -> HeldRun | None:
        if run.status not in (RunStatus.STOPPED, RunStatus.FAILED):
            return None  # a finished run just grows what the command adds
        return cls(run.status, run.stop_reason, run.error)

    def as_job(self) -> dict[str, str | None]:
        return {"status": self.status, "stop_reason": self.stop_reason, "error": self.error}

    @classmethod
    def from_job(cls, data: dict[str, Any] | None) -> HeldRun | None:
        return cls(data["status"], data.get("stop_reason"), data.get("error")) if data else None


def describe_owner(owner: str) -> str:
    """Which process executes a run, in words ("host, process 1234"), from its `owner`."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    return f"{host}, process {pid}" if pid else host


class RunStopped(Exception):
    """The run stops at a checkpoint. `interrupted`: not by the user but because its process is
    shutting down; the run ends `interrupted` (resumable) instead of `stopped`."""

    def __init__(self, reason: str, interrupted: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.interrupted = interrupted


class RunnerError(RuntimeError):
    """A run cannot be started/resumed in its current state; the message says why."""


# How many runs created and not started yet a runner remembers (`Runner._created`).
_CREATED_KEPT = 64


class RunControl:
    """Pause/stop state of one executing run, shared by its worker threads."""

    def __init__(self, repo: Repository, run_id: str, *, poll_s: float, heartbeat_s: float) -> None:
        self.repo = repo
        self.run_id = run_id
        self.poll_s = poll_s
        self.heartbeat_s = heartbeat_s
        self._lock = threading.Lock()
        self._paused = False
        self._stop_reason: str | None = None
        self._interrupted = False
        # The claim that comes with every control (`claim_run`) stores a heartbeat: the next is due after it.
        self._last_heartbeat = time.monotonic()
        self._last_poll = float("-inf")
        # Whether steering commands may be queued: the run's steps read the steering queue only
        # then. Set by a poke (a command queued in this process) and by each poll (whether commands
        # other than controls are queued, one from another process included); at first, unknown.
        self._steering_waiting = True
        # The execution's journal (`Runner._context` sets it): what it gathered is stored before
        # this control writes a line of its own.
        self.journal: RunJournal | None = None

    def poke(self) -> None:
        """A command was queued in this process: read the queue at the very next checkpoint."""
        with self._lock:
            self._last_poll = float("-inf")
            self._steering_waiting = True

    def steering_due(self) -> bool:
        """Whether the steering queue is worth reading now (see `_steering_waiting`); once said,
        not again until a poll or a poke says so."""
        with self._lock:
            due, self._steering_waiting = self._steering_waiting, False
            return due

    def expect_steering(self) -> None:
        """The next `steering_due` says yes: a read the runner makes whatever the polls saw (the
        commands a step missed, at the run's end)."""
        with self._lock:
            self._steering_waiting = True

    def claimed(self, commands_queued: bool) -> None:
        """The run was claimed for this control; `commands_queued`: whether the claim saw commands
        waiting. None waited: the first poll is due `poll_s` from now, as every later one, and no
        step reads the steering queue until a poll or a poke says one came (a command queued here
        after the claim pokes this control: `Runner.start` claims and registers under one lock)."""
        if not commands_queued:
            with self._lock:
                self._last_poll = time.monotonic()
                self._steering_waiting = False

    def request_stop(self, reason: str, *, interrupt: bool = False) -> None:
        with self._lock:
            self._stop_reason = reason
            self._interrupted = interrupt

    @property
    def paused(self) -> bool:
        with self._lock:
            return self._paused

    def _poll(self) -> None:
        now = time.monotonic()
        # Checkpoints come often (every node, every task); the command queue is read at most
        # every `poll_s`, which is as soon as a person can notice a pause or a stop.
        if not self._paused and now - self._last_poll < self.poll_s:
            return
        self._last_poll = now
        if now - self._last_heartbeat >= self.heartbeat_s:
            self.repo.heartbeat(self.run_id)
            self._last_heartbeat = now
        controls, others = self.repo.poll_commands(self.run_id, CONTROL_COMMANDS)
        # What the queue holds now (a poke waits for this lock: one after the read comes after it).
        self._steering_waiting = others
        for command in controls:
            if command.kind == "stop":
                self._stop_reason = "stopped by the user"
            elif command.kind == "pause" and not self._paused:
                self._paused = True
                self._set_status(RunStatus.PAUSED, run_line(narration.Phase.PAUSED, "paused by the user"))
            elif command.kind == "resume" and self._paused:
                self._paused = False
                self._set_status(RunStatus.RUNNING, run_line(narration.Phase.RESUMED, "resumed"))
            self.repo.complete_command(stored_id(command))

    def _set_status(self, status: str, line: EventRecord) -> None:
        """The status and its step-log line, after the lines the run's journal gathered (so the log
        keeps its order)."""
        if self.journal is not None:
            self.journal.flush()
        self.repo.set_status(self.run_id, status, event=line)

    def checkpoint(self) -> None:
        while True:
            with self._lock:
                self._poll()
                if self._stop_reason is not None:
                    raise RunStopped(self._stop_reason, interrupted=self._interrupted)
                if not self._paused:
                    return
            time.sleep(self.poll_s)


@dataclass(frozen=True)
class ExecutionDied:
    """This process's execution of a run ended without recording how the run ended: the database
    refused the writes (its disk is full, or it is read-only), the run was deleted under it, or an
    error escaped the runner's own handling. The stored status may still say `running`: whoever
    waits on the run (the CLI, the app) reads this instead (`Runner.execution_died`)."""

    run_id: str
    what: str  # what happened, in words ("the disk holding the database (...) is full")
    fix: str = ""  # what a person does before resuming ("free space on that disk"); "" when nothing
    resumable: bool = True  # False: the run is gone


@dataclass
class _Execution:
    run_id: str
    thread: threading.Thread
    control: RunControl
    finished: threading.Event = field(default_factory=threading.Event)
    died: ExecutionDied | None = None  # set before `finished` when the end could not be recorded
    death_recorded: bool = False  # the run is stored `interrupted` with why (see `execution_died`)


class Runner:
    """Executes runs. One per process is typical; it owns the worker pool shared by all runs."""

    def __init__(
        self,
        repo: Repository,
        *,
        llm_for: Callable[[Run], LLM],
        searcher_for: Callable[[Run], Searcher],
        prices: PriceTable,
        methods: Mapping[str, type[Method[Any]]] = METHODS,
        max_workers: int = 16,
        poll_s: float = 0.2,
        heartbeat_s: float = 5.0,
        stale_after: timedelta = timedelta(minutes=2),
        services: RunServices | None = None,
        default_reranker: str = "none",
        dispatch: Callable[[str, bool, HeldRun | None], object] | None = None,
        write_delay_s: float = DEFAULT_DELAY_S,
        person_cost_cap: float | None = None,
    ) -> None:
        self.repo = repo
        # Multi-user mode's THOUGHTMAP_USER_MAX_COST: what one person's runs may spend over 30 days.
        # Applied to every execution (a start, a resume, a steering reopen, on any worker), so no door
        # gets round it.
        self.person_cost_cap = person_cost_cap
        self._person_budgets: dict[int, SharedBudget] = {}  # one per person whose runs ran here
        # A running run's step log, calls and node updates are stored together this long after
        # they are made (engine/write_behind.py); 0 writes each at once.
        self.write_delay_s = write_delay_s
        self.llm_for = llm_for
        self.searcher_for = searcher_for
        self.prices = prices
        # Its own registry (a test may add a method to it), the methods still loaded when first run.
        self.methods = methods.copy() if isinstance(methods, RegisteredMethods) else dict(methods)
        self.poll_s = poll_s
        self.heartbeat_s = heartbeat_s
        self.stale_after = stale_after
        # Handed to every run's context, asked by type (`ctx.service(Embedder)`): engine/run_services.py.
        self.services = services if services is not None else RunServices()
        self.default_reranker = default_reranker  # THOUGHTMAP_RERANKER (ctx.default_reranker)
        # Distributed execution: (run id, retry failed nodes, how a steered stopped run stood) ->
        # the run is queued for a worker.
        self.dispatch = dispatch
        # Node-level work of every run shares this pool: one process-wide bound on parallelism.
        self.executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="node")
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._executions: dict[str, _Execution] = {}
        # Runs this runner created and has not started yet, as created: a start right after the
        # creation (what the app, the CLI and the APIs do) needs no read of the run. Bounded: a run
        # created and never started here is forgotten after a while, and read when it starts.
        self._created: OrderedDict[str, Run] = OrderedDict()
        self._lock = threading.Lock()

    # ----------------------------------------------------------- lifecycle

    def create_run(
        self,
        *,
        question: str,
        method: str,
        params: MethodParams | dict[str, Any] | None = None,
        llm_info: dict[str, Any] | None = None,
        search_mode: str = "local",
        max_tokens: int | None = None,
        max_cost: float | None = None,
        search_exclusions: dict[str, Any] | None = None,
        run_id: str | None = None,
        user_id: int | None = None,
    ) -> Run:
        """A new run, stored, not started; `run_id`: the id chosen beforehand (`Repository.create_run`);
        `user_id`: whose run (the local user by default)."""
        question = clean_question(question)  # QuestionError (a ValueError) says what to change
        method_cls = get_method(method, self.methods)
        if not isinstance(params, MethodParams):
            params = method_cls.Params.model_validate(params or {})
        run = self.repo.create_run(
            question=question,
            method=method,
            params=params.model_dump(mode="json"),
            llm_info=llm_info or {},
            search_mode=search_mode,
            max_tokens=max_tokens,
            max_cost=max_cost,
            search_exclusions=search_exclusions,
            run_id=run_id,
            user_id=user_id,
        )
        with self._lock:
            self._created[run.id] = run.model_copy()
            while len(self._created) > _CREATED_KEPT:
                self._created.popitem(last=False)
        return run

    def store_gathered(self, run_id: str) -> None:
        """Store now what the run's execution in this process has gathered (its journal stores it
        within `write_delay_s` anyway): for a reader that must see the run as it stands this
        moment, such as a test holding it at a call."""
        with self._lock:
            execution = self._executions.get(run_id)
        journal = execution.control.journal if execution is not None else None
        if journal is not None:
            journal.flush()

    def is_active(self, run_id: str) -> bool:
        with self._lock:
            execution = self._executions.get(run_id)
            return execution is not None and not execution.finished.is_set()

    def start(
        self, run_id: str, *, reopen: bool = False, retry_failed: bool = False, steered_from: HeldRun | None = None
    ) -> None:
        """Execute (or continue) a run in a background thread. With `reopen` (to apply steering),
        a run already executing, in this process or another live one, is left alone: it will see
        the command. With
        `retry_failed`, its failed nodes are tried again. `steered_from`: see `_execute`."""
        asked = steered_from
        with self._lock:
            created = self._created.pop(run_id, None)
        # Created here and not started: as created, unless another process started it since (the
        # claim below then claims nothing, and the start begins again from the stored run).
        run = created if created is not None else self.repo.get_run(run_id)
        if reopen and steered_from is None:
            # The caller's view of the run may predate its stop (a command sent as it stopped).
            steered_from = HeldRun.of(run)
        with self._lock:
            current = self._executions.get(run_id)
            if current is not None and not current.finished.is_set():
                if reopen:
                    return
                raise RunnerError(f"run {run_id} is already running in this process")
            if (
                run.status in (RunStatus.RUNNING, RunStatus.PAUSED)
                and self._owner_alive(run)
                and run.owner != self.owner
            ):
                if reopen:
                    # Another process took it up meanwhile (a worker ending the run saw the command
                    # queued and went on with it): it applies the command there.
                    return
                raise RunnerError(
                    f"run {run_id} is {run.status} in another process ({run.owner.split(':')[1] if ':' in run.owner else run.owner}); "
                    "stop it there first"
                )
            if self.dispatch is not None:
                # A worker will execute it; until one takes it, the run says it is waiting.
                self.repo.mark_queued(run_id)
            else:
                control = RunControl(self.repo, run_id, poll_s=self.poll_s, heartbeat_s=self.heartbeat_s)
                # Claim before the thread starts so a quick `wait` sees the run as running; and
                # before it is registered, so a claim the database refuses leaves nothing active.
                # The execution starts from the run as claimed; never claimed before, it never ran.
                claim = self.repo.claim_run(run_id, self.owner, never_started=created is not None)
                if claim is None:
                    thread = None  # another process started the run this runner created: look again
                else:
                    control.claimed(claim.commands_queued)
                    thread = threading.Thread(
                        target=self._execute,
                        args=(run_id, control, retry_failed),
                        kwargs={"steered_from": steered_from, "claimed": claim.run, "first": run.started_at is None},
                        name=f"run-{run_id}",
                        daemon=True,
                    )
                    self._executions[run_id] = _Execution(run_id=run_id, thread=thread, control=control)
        if self.dispatch is not None:
            self.dispatch(run_id, retry_failed, steered_from)
            return
        if thread is None:
            self.start(run_id, reopen=reopen, retry_failed=retry_failed, steered_from=asked)
            return
        thread.start()

    def execute_here(self, run_id: str, *, retry_failed: bool = False, steered_from: HeldRun | None = None) -> None:
        """Execute a run in the calling thread until it ends (a worker's job). Steering queued
        while it was ending is applied here too, so the run never waits for another job."""
        while True:
            control = RunControl(self.repo, run_id, poll_s=self.poll_s, heartbeat_s=self.heartbeat_s)
            with self._lock:
                claim = self.repo.claim_run(run_id, self.owner)  # first: a refused claim leaves nothing active
                control.claimed(claim.commands_queued)
                self._executions[run_id] = _Execution(run_id=run_id, thread=threading.current_thread(), control=control)
            self._execute(run_id, control, retry_failed, reopen=False, steered_from=steered_from, claimed=claim.run)
            if self.execution_died(run_id) is not None:
                return  # its end could not be recorded (logged): a resume continues it
            retry_failed = False
            final = self._ended_with_steering_queued(run_id)
            if final is None:
                return
            steered_from = HeldRun.of(final)

    def resume(self, run_id: str, *, max_tokens: int | None = None, max_cost: float | None = None) -> None:
        run = self.repo.get_run(run_id)
        held_elsewhere = (
            self.dispatch is not None and run.status in (RunStatus.RUNNING, RunStatus.PAUSED) and self._owner_alive(run)
        )
        active = self.is_active(run_id) or held_elsewhere
        if not active:
            self.check_resumable(run)
        self.raise_budget(run_id, max_tokens=max_tokens, max_cost=max_cost)
        if active:
            self.repo.enqueue_command(run_id, "resume")
            self._poke(run_id)
            return
        # A stop or pause still queued was meant for the execution that ended (it stopped before it
        # read it); resuming overrides it, or the new execution would stop again at once.
        self._supersede_controls(run_id, why="the run was resumed")
        # Resuming also retries what failed: a transient error must not be final for a node.
        self.start(run_id, retry_failed=True)

    def check_resumable(self, run: Run) -> None:
        """RunnerError when a run not executing here cannot be resumed from here: another process
        executes it (without the task queue, which passes the resume on), or it is done with no
        failed node. Checked before anything about the run is changed."""
        if (
            self.dispatch is None
            and run.status in (RunStatus.RUNNING, RunStatus.PAUSED)
            and self._owner_alive(run)
            and run.owner != self.owner
        ):
            raise RunnerError(
                f"run {run.id} is {run.status} in another process "
                f"({describe_owner(run.owner)}); resume or stop it there"
            )
        if run.status == RunStatus.DONE and not self.retryable(run):
            raise RunnerError(f"run {run.id} is already done and none of its nodes failed; there is nothing to resume")

    def retryable(self, run: Run) -> bool:
        """A done run with failed nodes, which a resume tries again. A done run's warning may be about
        its answer instead (FGDIP: no candidate passed the Answer Evaluator), which no resume changes."""
        return (
            run.status == RunStatus.DONE
            and bool(run.warning)
            and bool(self.repo.list_nodes(run.id, status=NodeStatus.FAILED))
        )

    def raise_budget(self, run_id: str, *, max_tokens: int | None = None, max_cost: float | None = None) -> None:
        """Set the run's token and/or cost budget (None keeps that one as it is): before a resume,
        or on a finished run that a steering command needs more for."""
        if max_tokens is None and max_cost is None:
            return
        run = self.repo.get_run(run_id)
        self.repo.set_budget(
            run_id,
            max_tokens=max_tokens if max_tokens is not None else run.max_tokens,
            max_cost=max_cost if max_cost is not None else run.max_cost,
        )

    def _poke(self, run_id: str) -> None:
        with self._lock:
            execution = self._executions.get(run_id)
        if execution is not None:
            execution.control.poke()

    def pause(self, run_id: str) -> None:
        self.repo.enqueue_command(run_id, "pause")
        self._poke(run_id)

    def stop(self, run_id: str) -> None:
        self.repo.enqueue_command(run_id, "stop")
        self._poke(run_id)
        with self._lock:
            execution = self._executions.get(run_id)
        if execution is None or execution.finished.is_set():  # no execution here to read the Stop
            run = self.repo.get_run(run_id)
            if run.status in (RunStatus.QUEUED, RunStatus.PAUSED, RunStatus.INTERRUPTED) and not self._owner_alive(run):
                # Stopped here, not by an execution: the Stop is applied, and what waited with it
                # is dropped as an execution's stop drops it (left queued, it would outlive both).
                self.repo.set_status(run_id, RunStatus.STOPPED, stop_reason="stopped by the user")
                for command in self.repo.take_commands(run_id, ("stop",)):
                    self.repo.complete_command(stored_id(command))
                self._drop_pending_steering(run_id, None, "the run was stopped before it could apply this")
                narrate_run(self.repo, run_id, narration.Phase.STOPPED, "stopped by the user")

    def interrupt_all(self, reason: str) -> dict[str, bool]:
        """Stop every run executing in this process at its next checkpoint, as `interrupted` with
        `reason` (resumable, finished nodes kept): a worker shutting down hands its runs on.
        Returns run id -> whether the run was paused (its next execution should pause again)."""
        with self._lock:
            executing = [e for e in self._executions.values() if not e.finished.is_set()]
        paused = {e.run_id: e.control.paused for e in executing}
        for execution in executing:
            execution.control.request_stop(reason, interrupt=True)
        return paused

    def delete(self, run_id: str) -> None:
        """Delete a run and everything stored with it. Refused while it executes or waits to, in this
        process or another one (a worker in queue mode): deleting under a live execution would leave
        it writing to a run that no longer exists. Stop it first."""
        run = self.repo.get_run(run_id)
        executing = self.is_active(run_id) or (
            run.status in (RunStatus.RUNNING, RunStatus.PAUSED) and self._owner_alive(run)
        )
        waiting = run.status == RunStatus.QUEUED and (self.dispatch is not None or self._owner_alive(run))
        if executing or waiting:
            where = "" if self.is_active(run_id) or run.owner == self.owner else " (in another process)"
            state = "waiting for a worker" if waiting else f"{run.status}{where}"
            raise RunnerError(f"the run is {state}: stop it before deleting it")
        self.repo.delete_run(run_id)

    def steer(self, run_id: str, kind: str, payload: dict[str, Any] | None = None) -> Command:
        """Queue a steering command; a run that is not executing is reopened to apply it."""
        run = self.repo.get_run(run_id)
        method_cls = get_method(run.method, self.methods)
        # Checked before it is queued: a bad command is refused at once and stores nothing.
        parsed = check(method_cls.contract(), RunGraph(self.repo, run_id, method_cls.contract()), kind, payload)
        wanted = parsed.model_dump(mode="json")
        # The same command on the same node while one is on its way (a double click, a second
        # press before the panel showed the first): refused, so it is not applied twice.
        if any(
            c.kind == kind and c.payload == wanted and c.status in (CommandStatus.QUEUED, CommandStatus.TAKEN)
            for c in self.repo.list_commands(run_id)
        ):
            label = method_cls.contract().commands[kind].label
            raise CommandRejected(
                f"'{label}' is already on its way (queued or being applied); it is applied once, at the run's next step"
            )
        spec = method_cls.contract().commands[kind]
        # Applied, its growth (or a report the model writes) would stop at the first call, half done.
        needs_model = not (spec.report_only and method_cls.report_without_model)
        short = budget_short(run) if needs_model and run.status not in RunStatus.ACTIVE else None
        if short is not None:
            first = (
                "raise its budget first (Raise budget, under the run on Explore)"
                if run.status == RunStatus.DONE
                else "resume it with a larger budget first"
            )
            raise CommandRejected(f"the run's budget is spent ({short}); {first}, then send '{spec.label}'")
        command = self.repo.enqueue_command(run_id, kind, wanted)
        SteeringEvents(self.repo, run_id, method_cls.contract()).queued(command)
        self._poke(run_id)  # executing here: its next step reads the queue
        if not self.is_active(run_id) and not (run.status in RunStatus.ACTIVE and self._owner_alive(run)):
            # A stopped or failed run is continued only if the command applies (a finished one
            # just grows what the command adds), here or on a worker.
            self.start(run_id, reopen=True, steered_from=HeldRun.of(run))
        return command

    def wait(self, run_id: str, timeout: float | None = None) -> Run:
        with self._lock:
            execution = self._executions.get(run_id)
        if execution is not None:
            execution.finished.wait(timeout)
        elif self.dispatch is not None:
            # Executed by a worker: watch the stored status.
            deadline = None if timeout is None else time.monotonic() + timeout
            while (run := self.repo.get_run(run_id)).status in RunStatus.ACTIVE:
                if deadline is not None and time.monotonic() >= deadline:
                    break
                time.sleep(self.poll_s if deadline is None else max(0.0, min(self.poll_s, deadline - time.monotonic())))
            return run
        return self.repo.get_run(run_id)

    def shutdown(self, *, wait: bool = True) -> None:
        self.executor.shutdown(wait=wait, cancel_futures=True)

    # ----------------------------------------------------------- recovery

    def _owner_alive(self, run: Run) -> bool:
        if not run.owner:
            return False
        host, _, rest = run.owner.partition(":")
        pid_text, _, token = rest.partition(":")
        if run.owner == self.owner:
            return self.is_active(run.id)
        if host == socket.gethostname():
            try:
                pid = int(pid_text)
            except ValueError:
                return False
            if pid == os.getpid():
                return True  # another Runner of this very process owns it
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                return True
            return True
        # Another machine: trust its heartbeat.
        heartbeat = run.heartbeat_at
        if heartbeat is None:
            return False
        if heartbeat.tzinfo is None:
            heartbeat = heartbeat.replace(tzinfo=utcnow().tzinfo)
        return utcnow() - heartbeat < self.stale_after

    def recover_interrupted(self) -> list[str]:
        """Mark runs whose process died as `interrupted` (call at start-up). A database that takes
        no writes now (disk full, read-only) is left as it is: reading it still works, and the next
        start-up marks them."""
        try:
            return self.repo.mark_dead_runs_interrupted(self._owner_alive)
        except DatabaseUnwritable as exc:
            log.info("runs left running by a process that ended are not marked interrupted yet: %s", exc)
            return []

    # ----------------------------------------------------------- execution

    def _person_budget(self, run: Run) -> SharedBudget | None:
        """The spending limit the run's person shares across all their runs in this process
        (`person_cost_cap` over `SPENDING_WINDOW`), or None: every call of theirs reserves from it,
        against their spending as stored, so runs of theirs at once share one remainder."""
        if self.person_cost_cap is None or run.user_id is None:
            return None
        user_id, cap = run.user_id, self.person_cost_cap
        with self._lock:
            if user_id not in self._person_budgets:
                self._person_budgets[user_id] = SharedBudget(
                    cap,
                    lambda: self.repo.spent_by(user_id, since=utcnow() - SPENDING_WINDOW),
                    why=f"your spending limit of ${cap:.2f} over 30 days (THOUGHTMAP_USER_MAX_COST)",
                    hint="An admin can raise THOUGHTMAP_USER_MAX_COST; older spending leaves the 30 days.",
                )
            return self._person_budgets[user_id]

    def _context(self, run: Run, method: Method[Any], control: RunControl) -> RunContext[Any]:
        params = method.Params.model_validate(run.params)
        journal = RunJournal(self.repo, run.id, delay_s=self.write_delay_s) if self.write_delay_s > 0 else None
        control.journal = journal
        graph = RunGraph(self.repo, run.id, method.contract(), journal=journal)
        # Every LLM call is told to the step log, in the words the method declares for its prompt.
        llm = RunLLM(
            self.llm_for(run),
            journal or self.repo,
            run.id,
            self.prices,
            Budget(max_tokens=run.max_tokens, max_cost=run.max_cost),
            on_call=graph.narrate_call,
            shared=self._person_budget(run),
        )
        steering = SteeringEvents(journal or self.repo, run.id, method.contract())

        def take_steering() -> list[Command]:
            # Only when some may be queued: a step's read would find the queue empty almost always
            # (the control's poll, a read every `poll_s`, says when one came from another process).
            if not control.steering_due():
                return []
            return steering.taken(self.repo.take_commands(run.id, method.steering))

        def complete_command(command_id: int, ok: bool = True, error: str = "") -> None:
            # What the command changed is stored before it says so: a reader that sees it applied
            # must see its effect (the journal would store it up to `write_delay_s` later).
            if journal is not None:
                journal.flush()
            self.repo.complete_command(command_id, ok=ok, error=error)
            steering.completed(command_id, ok=ok, error=error)

        return RunContext(
            run_id=run.id,
            question=run.question,
            params=params,
            llm=llm,
            searcher=self.searcher_for(run),
            graph=graph,
            checkpoint=control.checkpoint,
            take_steering=take_steering,
            executor=self.executor,
            complete_command=complete_command,
            services=self.services,
            default_reranker=self.default_reranker,
            sources_only=(run.llm_info or {}).get("kind") == "local",
        )

    @staticmethod
    def _take_steering(ctx: RunContext[Any], control: RunControl) -> list[Command]:
        """The steering queue, read whatever the polls saw."""
        control.expect_steering()
        return ctx.take_steering()

    def _apply_steering(self, ctx: RunContext[Any], method: Method[Any], control: RunControl) -> None:
        # Until the queue is empty: a command may arrive while another one is being applied.
        while commands := self._take_steering(ctx, control):
            for command in commands:
                ctx.checkpoint()
                method.steer(ctx, command)  # records the command's outcome itself

    def _drop_pending_steering(self, run_id: str, ctx: RunContext[Any] | None, why: str) -> None:
        """The run ends without applying the steering still queued: each command says so (a
        person sends it again; left queued, it would sit unseen, block the same command, and reopen
        the run as it ended). Without a context (the run failed setting up), straight in storage."""
        pending = [
            c
            for c in self.repo.list_commands(run_id)
            if c.kind not in CONTROL_COMMANDS and c.status in (CommandStatus.QUEUED, CommandStatus.TAKEN)
        ]
        error = f"{why}; send it again (it resumes the run)"
        for command in pending:
            if ctx is not None:
                ctx.complete_command(stored_id(command), ok=False, error=error)
            else:
                self.repo.complete_command(stored_id(command), ok=False, error=error)

    def _hold(self, ctx: RunContext[Any], method: Method[Any], held: HeldRun, control: RunControl) -> bool:
        """Apply the commands that reopened a stopped or failed run; True when it stays as it was
        (every command refused, or all they asked is its outputs again: a rewrite is not Resume)."""
        # A Stop or Pause still queued from before the command that reopened the run was meant for
        # the execution that ended (it ended before reading it).
        waiting = [
            stored_id(c)
            for c in self.repo.list_commands(ctx.run_id, status=CommandStatus.QUEUED)
            if c.kind not in CONTROL_COMMANDS
        ]
        if waiting:
            self._supersede_controls(ctx.run_id, before=min(waiting), why="the run had ended")
        if held.status == RunStatus.FAILED and method.report_unwritten(ctx.graph):
            return False  # it failed only for its report: finishing it is what any command needs
        growing = method.contract().growing_commands
        while commands := self._take_steering(ctx, control):  # again: more may come while a report is written
            applied = [
                stored_id(c) for c in commands if c.kind in growing and apply_and_record(ctx, method, c) is not None
            ]
            if applied:
                # The rewrites go back in the queue: the run takes them with what it grows and writes
                # what they ask for at its end.
                self.repo.requeue_taken_commands(ctx.run_id)
                # A Stop pressed before what it grows was meant for the rewrite under way then.
                self._supersede_controls(ctx.run_id, before=min(applied), why="a later command reopened the run")
                return False
            rewrites = [c for c in commands if c.kind not in growing]
            if rewrites:
                self._rewrite_held_outputs(ctx, method, rewrites, held)
        # A Stop or Pause pressed meanwhile was meant for this short execution: it is over.
        self._supersede_controls(ctx.run_id, why=f"the run stayed {held.status}")
        return True

    def _supersede_controls(self, run_id: str, *, why: str, before: int | None = None) -> None:
        """Queued stops and pauses (those sent before command `before`) no longer apply."""
        for command in self.repo.list_commands(run_id, status=CommandStatus.QUEUED):
            if command.kind in ("stop", "pause") and (before is None or stored_id(command) < before):
                self.repo.complete_command(stored_id(command), ok=False, error=f"superseded: {why}")

    @staticmethod
    def _rewrite_held_outputs(
        ctx: RunContext[Any], method: Method[Any], commands: list[Command], held: HeldRun
    ) -> None:
        """The outputs the commands ask for, written from the graph as it stands and marked partial
        with why the run ended; each command says whether they were written."""
        reason = held.stop_reason or held.error or f"the run {held.status}"
        accepted, rewrite = [], set()
        for command in commands:
            try:
                rewrite |= apply_command(ctx, method, command)
            except (UnsupportedCommand, LookupError, ValueError) as exc:
                ctx.complete_command(command.id, ok=False, error=str(exc))
            else:
                accepted.append(command)
        if not accepted:
            return
        error = ""
        if not any(n.status == NodeStatus.DONE for n in ctx.graph.nodes() if n.kind in method.answer_kinds):
            error = "the run has no answer yet to write a report from; press Resume to continue it"
        else:
            try:
                with ctx.graph.partial_reports(reason):
                    method.write_outputs(ctx, rewrite)
            except BudgetExceeded as exc:
                error = f"the run's budget is spent ({exc}); raise it and press Resume to continue the run"
            except LLMError as exc:
                error = f"the model could not write the report: {redact_secrets(str(exc))}"
        # Completed once written (a rewrite makes no report outdated, so the order does not matter).
        for command in accepted:
            ctx.complete_command(command.id, ok=not error, error=error)

    def _ended_with_steering_queued(self, run_id: str) -> Run | None:
        """The run, when it has ended and steering is queued for it (to reopen it with); else None.
        The queue is read first: the run's status only when something waits (RunNotFound: deleted)."""
        queued = self.repo.list_commands(run_id, status=CommandStatus.QUEUED)
        if all(c.kind in CONTROL_COMMANDS for c in queued):
            return None
        final = self.repo.get_run(run_id)
        if final.status in (RunStatus.DONE, RunStatus.STOPPED, RunStatus.FAILED) and self.has_queued_steering(final):
            return final
        return None

    def has_queued_steering(self, run: Run) -> bool:
        steering = get_method(run.method, self.methods).steering
        return any(c.kind in steering for c in self.repo.list_commands(run.id, status=CommandStatus.QUEUED))

    def _write_stopped_report(self, method: Method[Any] | None, ctx: RunContext[Any] | None, reason: str) -> None:
        """What a stopped run found so far, as a partial report (`Method.write_stopped_report`); a
        failure here is logged and leaves the run as it is: stopped, with its graph."""
        if method is None or ctx is None:
            return
        try:
            method.write_stopped_report(ctx, reason)
        except (DatabaseUnwritable, RunNotFound):
            raise  # the stop cannot be recorded either: `_execute` says why
        except Exception:  # noqa: BLE001 - the stop is recorded already; the report is a courtesy
            log.exception("run %s: the partial report could not be written", ctx.run_id)

    def _execute(
        self,
        run_id: str,
        control: RunControl,
        retry_failed: bool = False,
        *,
        reopen: bool = True,
        steered_from: HeldRun | None = None,
        claimed: Run | None = None,
        first: bool = False,
    ) -> None:
        """Execute the run and record how it ended. When that cannot be recorded (`ExecutionDied`),
        the execution still ends, saying why, so no one waits on it: an exception here would end
        the thread with a traceback and leave the run `running` in storage, watched forever."""
        died = None
        broke = False
        try:
            self._execute_and_record(run_id, control, retry_failed, steered_from, claimed, first)
        except BaseException as exc:  # noqa: BLE001 - nothing is left to record it: it is said instead
            broke = True
            died = self._died(run_id, exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            with self._lock:
                execution = self._executions.get(run_id)
            if execution is not None:
                execution.died = died
                execution.finished.set()
        if broke:
            return  # nothing is reopened on a database that just refused a write
        # A steering command queued between the last look at the queue and the end of the run
        # found the run still active and did not reopen it: reopen it now.
        if not reopen:
            return  # execute_here looks itself
        try:
            final = self._ended_with_steering_queued(run_id)
        except RunNotFound:
            return  # deleted the moment it ended (it was no longer active): nothing to reopen
        if final is not None:
            self.start(run_id, reopen=True, steered_from=HeldRun.of(final))

    def _died(self, run_id: str, exc: BaseException) -> ExecutionDied | None:
        """Why the run's end could not be recorded, in words; the run is stored `interrupted` with it
        if the database takes that write. Only an error no one foresaw is logged with its traceback.
        None when its end was recorded after all (a write after its final status failed): the stored
        status says how it ended, and no one should be told to resume a finished run."""
        if self._ended(run_id):
            log.info("run %s ended and its status is stored; a write after it failed: %s", run_id, exc)
            return None
        if isinstance(exc, DatabaseUnwritable):
            died = ExecutionDied(run_id, f"{exc}; what was saved before is kept", fix=exc.fix)
        elif not self._stored(run_id):
            died = ExecutionDied(run_id, "the run was deleted while it executed", resumable=False)
        else:
            log.error("run %s: its execution ended on an error it could not record", run_id, exc_info=exc)
            died = ExecutionDied(
                run_id, f"its execution ended on an unexpected error ({redact_secrets(f'{type(exc).__name__}: {exc}')})"
            )
        # Info, not a warning: the CLI prints warnings, and says this itself in one line.
        log.info("run %s stopped: %s", run_id, died.what)
        with self._lock:
            execution = self._executions.get(run_id)
        if execution is not None:
            execution.death_recorded = self._record_death(died)
        return died

    def _record_death(self, died: ExecutionDied) -> bool:
        """Store the run as `interrupted` with why, if this process still holds it; whether nothing
        is left to try (False: the database refused this write too)."""
        if not died.resumable:
            return True  # no run left to record it on
        reason = died.what + (f"; {died.fix}, then resume it" if died.fix else "")
        try:
            self.repo.interrupt_run(died.run_id, owner=self.owner, reason=reason)
        except Exception:  # noqa: BLE001 - still unwritable: tried again at the next look
            return False
        return True

    def execution_died(self, run_id: str) -> ExecutionDied | None:
        """Why this process's last execution of the run ended without recording how it ended, or
        None (it executes, it ended normally, or none ran here). What the CLI's wait and the app's
        run view read instead of a stored status stuck at `running`. Until the run is stored
        `interrupted`, each look tries again to store it, so storage catches up once the database
        takes writes again."""
        with self._lock:
            execution = self._executions.get(run_id)
        if execution is None or not execution.finished.is_set() or execution.died is None:
            return None
        if not execution.death_recorded:
            execution.death_recorded = self._record_death(execution.died)
        return execution.died

    def _ended(self, run_id: str) -> bool:
        """Whether the run's stored status is a final one (done, stopped, failed). A database that
        cannot answer tells nothing: False."""
        try:
            return self.repo.get_run(run_id).status in (RunStatus.DONE, RunStatus.STOPPED, RunStatus.FAILED)
        except Exception:  # noqa: BLE001 - deleted or unreadable: the caller says which
            return False

    def _stored(self, run_id: str) -> bool:
        """Whether the run's row is still there (False: it was deleted under its execution). A
        database that cannot answer tells nothing: True."""
        try:
            self.repo.get_run(run_id)
        except RunNotFound:
            return False
        except Exception:  # noqa: BLE001 - the caller handles the error it met itself
            return True
        return True

    def _execute_and_record(
        self,
        run_id: str,
        control: RunControl,
        retry_failed: bool,
        steered_from: HeldRun | None,
        claimed: Run | None = None,
        first: bool = False,
    ) -> None:
        """`steered_from`: the run as it was when a steering command reopened it, stopped or failed;
        its commands are applied first, and when every one is refused, or all they ask is its report
        again, it stays as it was. Raises when the run's end cannot be recorded (see `_died`)."""
        repo = self.repo
        method: Method[Any] | None = None
        ctx: RunContext[Any] | None = None
        ending: RunEnding | None = None  # how the run ended, when it answered: stored as it settles
        ended = False
        try:
            try:
                run = claimed if claimed is not None else repo.get_run(run_id)
                method = get_method(run.method, self.methods)()
                # Started once; every later execution (resume, retry, steering a finished run) resumes.
                started_before = repo.open_execution(
                    run_id, has_nodes=run.node_count > 0, started_kind=narration.RUN, first=first
                )
                ctx = self._context(run, method, control)
                if run.node_count == 0:
                    ctx.graph.has_no_nodes(first_execution=not started_before)
                if steered_from is not None and self._hold(ctx, method, steered_from, control):
                    # The person stopped it (or it failed): a refused command or a rewrite must not run it on.
                    ctx.graph.settle()
                    repo.set_status(
                        run_id, steered_from.status, stop_reason=steered_from.stop_reason, error=steered_from.error
                    )
                    return
                # What it searches with (`searcher`: "... by BM25 + built-in all-MiniLM-L6-v2 (CPU) +
                # hops", or the fallback and why) is kept with each start, as the model is with the run:
                # the retrieval setting can change between a start and a resume.
                searched_with = ctx.searcher.description
                # Gathered with the run's first writes (a line of its own would be a transaction).
                if started_before:
                    ctx.graph.narrate(
                        "resumed", kind=narration.RUN, phase=narration.Phase.RESUMED, searcher=searched_with
                    )
                else:
                    ctx.graph.narrate(
                        "the run started", kind=narration.RUN, phase=narration.Phase.STARTED, searcher=searched_with
                    )
                if (
                    retry_failed
                    and method.reset_failed(ctx)
                    and ctx.graph.has_report()
                    and "regenerate_report" in method.steering
                ):
                    # The report was written without the retried nodes: write it again after them.
                    repo.enqueue_command(run_id, "regenerate_report")
                method.run(ctx)
                self._apply_steering(ctx, method, control)
                # Read while the graph still remembers the run: what it holds is what is stored.
                outcome = method.assess(ctx)
                if outcome.ok:  # stored with the run's last batch, in one transaction
                    ending = repo.run_ending(
                        RunStatus.DONE,
                        stop_reason="",
                        warning=outcome.warning,
                        event=run_line(
                            narration.Phase.FINISHED,
                            "finished" + (f", with a warning: {outcome.warning}" if outcome.warning else ""),
                        ),
                    )
            finally:
                if ctx is not None:  # what the run gathered is stored before how it ended is
                    ended = ctx.graph.settle(ending)
        except RunStopped as stop:
            repo.reset_unfinished_nodes(run_id)
            if not stop.interrupted:  # an interrupted run is picked up again on its own
                self._write_stopped_report(method, ctx, stop.reason)
                self._drop_pending_steering(run_id, ctx, "the run was stopped before it could apply this")
            repo.set_status(
                run_id,
                RunStatus.INTERRUPTED if stop.interrupted else RunStatus.STOPPED,
                stop_reason=stop.reason,
                event=run_line(narration.Phase.STOPPED, stop.reason),
            )
        except BudgetExceeded as exc:
            repo.reset_unfinished_nodes(run_id)
            self._write_stopped_report(method, ctx, exc.user_message)  # before the status a reader waits for
            self._drop_pending_steering(run_id, ctx, "the run stopped (its budget) before it could apply this")
            repo.set_status(
                run_id,
                RunStatus.STOPPED,
                stop_reason=exc.user_message,
                event=run_line(narration.Phase.STOPPED, f"stopped: {exc.user_message}"),
            )
        except (LLMError, SearchError) as exc:  # the endpoint, or the corpus a worker cannot open: no bug
            repo.reset_unfinished_nodes(run_id)
            self._drop_pending_steering(run_id, ctx, "the run failed before it could apply this")
            error = redact_secrets(exc.user_message)
            repo.set_status(
                run_id,
                RunStatus.FAILED,
                error=error,
                event=run_line(narration.Phase.FAILED, f"the run failed: {error}"),
            )
        except Exception as exc:  # a bug or an unexpected backend failure: keep the app alive
            if isinstance(exc, DatabaseUnwritable) or not self._stored(run_id):
                raise  # nothing of the run can be recorded any more: `_execute` says why
            log.exception("run %s failed", run_id)
            repo.reset_unfinished_nodes(run_id)
            # Failed, not reopened for them: the same error would fail it again, and again.
            self._drop_pending_steering(run_id, ctx, "the run failed on an unexpected error before it could apply this")
            error = redact_secrets(f"{type(exc).__name__}: {exc}")
            repo.set_status(
                run_id,
                RunStatus.FAILED,
                error=error,
                event=run_line(
                    narration.Phase.FAILED,
                    "the run failed on an unexpected error (the run's error says which)",
                    error=error,
                ),
            )
        else:
            # The status tells the truth: a run that answered nothing has failed, whatever ran.
            if ending is not None:
                if not ended:
                    repo.end_run(run_id, ending)
                # A Stop or Pause that came too late (no step was left to read it) must not stop
                # the next command this finished run is steered with.
                self._supersede_controls(run_id, why="the run had finished")
            else:
                self._drop_pending_steering(run_id, ctx, "the run failed before it could apply this")
                # The reason may quote a node's technical error: the words say it plainly.
                repo.set_status(
                    run_id,
                    RunStatus.FAILED,
                    error=outcome.reason,
                    warning="",
                    event=run_line(
                        narration.Phase.FAILED, "the run failed: nothing was answered", error=outcome.reason
                    ),
                )
