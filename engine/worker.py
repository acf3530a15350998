"""`thoughtmap worker`: a process that executes queued runs (THOUGHTMAP_EXECUTION=queue).

A procrastinate worker takes "execute run R" jobs from the queue (engine/run_queue.py) and runs
each in a thread of its own with the runner's ordinary code path (`Runner.execute_here`), holding
the run's lease for the whole execution, so no two processes ever execute one run. A worker that
dies (SIGKILL, machine lost) stops sending procrastinate's heartbeat; after `stalled_after_s` any
other worker puts its jobs back in the queue, and the next one to take the job resumes the run
from its stored graph (finished nodes are kept). Pause, resume, stop and steering reach the run
through its stored command queue, wherever they are sent from.

Shutting a worker down (SIGTERM, or Ctrl-C) hands its runs on instead of waiting for them, which
could take hours: each run stops at its next checkpoint as `interrupted` (finished nodes kept; a
call in flight is let finish), is queued again (paused again if it was paused) and the worker
exits; another worker resumes it. A second signal exits at once: the other workers find the jobs
stalled and queue them again, as for a worker that died.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.run_queue import QUEUE, TASK, build_app
from engine.runner import HeldRun
from engine.safe_text import one_line, terminal_text
from storage.leases import RunLease
from storage.models import Run
from storage.repository import RunNotFound
from storage.statuses import RunStatus

if TYPE_CHECKING:  # only for annotations: procrastinate is imported where first used
    from procrastinate.worker import Worker as QueueWorker

    from engine.services import Services

log = logging.getLogger("thoughtmap.worker")

HAND_ON_REASON = "its worker was shut down; another worker continues it"

# Statuses a job finds its run in when there is something to execute: waiting, left by a dead
# worker (running/paused with no one holding the lease), or marked interrupted since.
_EXECUTABLE = (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.PAUSED, RunStatus.INTERRUPTED)


class RunHeld(Exception):
    """The run's lease is held by another process: the job is tried again later."""


@dataclass
class WorkerOptions:
    concurrency: int = 2
    name: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    # A worker silent this long is taken for dead and its jobs are queued again.
    stalled_after_s: float = 30.0
    # How often this worker says it is alive (must be well under stalled_after_s).
    heartbeat_s: float = 5.0
    # Wait before trying again a run that another process holds (procrastinate waits whole seconds).
    retry_held_s: int = 2


class Worker:
    def __init__(self, services: Services, options: WorkerOptions) -> None:
        if options.concurrency < 1:
            raise ValueError(f"--concurrency must be at least 1 (got {options.concurrency})")
        if options.heartbeat_s >= options.stalled_after_s:
            raise ValueError("the heartbeat interval must be shorter than --stalled-after")
        self.services = services
        self.options = options
        self.lease = RunLease(services.db)
        self.app = build_app(services.db)
        # One thread per job: a run blocks its thread for its whole execution.
        self.threads = ThreadPoolExecutor(max_workers=options.concurrency, thread_name_prefix="job")
        # Shutting down: run id -> whether it was paused, for every run handed on to other workers.
        self.stopping = threading.Event()
        self._handed_on: dict[str, bool] = {}
        self._queue_worker: QueueWorker | None = None
        from procrastinate import RetryStrategy

        self.app.task(
            name=TASK, queue=QUEUE, retry=RetryStrategy(wait=options.retry_held_s, retry_exceptions={RunHeld})
        )(self._job)

    async def _job(self, run_id: str, retry_failed: bool = False, steered_from: dict[str, Any] | None = None) -> None:
        await asyncio.get_running_loop().run_in_executor(
            self.threads, self.execute, run_id, retry_failed, HeldRun.from_job(steered_from)
        )

    # ------------------------------------------------------------ one job

    def execute(self, run_id: str, retry_failed: bool = False, steered_from: HeldRun | None = None) -> None:
        """Execute a run if it needs it, holding its lease; RunHeld when another process has it."""
        repo = self.services.repo
        with self.lease.hold(run_id) as taken:
            if not taken:
                log.info(
                    "run %s is being executed by another process; trying again in %.0f s",
                    run_id,
                    self.options.retry_held_s,
                )
                raise RunHeld(run_id)
            try:
                run = repo.get_run(run_id)
            except RunNotFound:
                log.info("run %s was deleted; nothing to do", run_id)
                return
            if self.stopping.is_set():  # taken just as the worker began to shut down
                if self._needs_execution(run):
                    self._hand_on(run_id, paused=run.status == RunStatus.PAUSED)
                return
            if not self._needs_execution(run):
                log.info("run %s is %s; nothing to do", run_id, run.status)
                return
            if run.status in (RunStatus.RUNNING, RunStatus.PAUSED):
                # We hold the lease, so whoever had it is gone: its worker died mid-run.
                log.warning(
                    "run %s was left %s by %s, which is gone; resuming it from its stored graph",
                    run_id,
                    run.status,
                    run.owner or "a worker",
                )
                if run.status == RunStatus.PAUSED:
                    repo.enqueue_command(run_id, "pause")  # it stays paused where it was
            log.info(
                "running run %s (%s): %s",
                run_id,
                terminal_text(run.method),
                terminal_text(one_line(run.question)[:100]),
            )
            self.services.runner.execute_here(run_id, retry_failed=retry_failed, steered_from=steered_from)
            final = repo.get_run(run_id)
            if run_id in self._handed_on and final.status == RunStatus.INTERRUPTED:
                self._hand_on(run_id, paused=self._handed_on[run_id])
            log.info(
                "run %s ended: %s%s",
                run_id,
                final.status,
                f" ({terminal_text(one_line(final.stop_reason or final.error)[:160])})"
                if final.stop_reason or final.error
                else "",
            )

    def _hand_on(self, run_id: str, *, paused: bool) -> None:
        """Queue the run again for another worker (this one is shutting down)."""
        if paused:
            self.services.repo.enqueue_command(run_id, "pause")  # it stays paused where it was
        assert self.services.queue is not None  # a worker serves the queue: cmd_worker starts none without one
        self.services.queue.enqueue(run_id)
        log.info("run %s handed on: queued again for another worker", run_id)

    def shut_down(self, why: str = "asked to stop") -> None:
        """Stop taking jobs and hand the runs executing here on to other workers (see the module)."""
        if self.stopping.is_set():
            log.warning(
                "worker %s: stopping now (%s again); its runs are queued again by the other workers "
                "once they notice it is gone",
                self.options.name,
                why,
            )
            os._exit(1)  # the documented hard stop: nothing here may wait any longer
        self.stopping.set()
        self._handed_on.update(self.services.runner.interrupt_all(HAND_ON_REASON))
        log.info("worker %s: %s; handing %d run(s) on to other workers", self.options.name, why, len(self._handed_on))
        if self._queue_worker is not None:
            self._queue_worker.stop()  # type: ignore[no-untyped-call]  # procrastinate leaves it unannotated

    def _needs_execution(self, run: Run) -> bool:
        if run.status in _EXECUTABLE:
            return True
        # A finished run reopened by steering whose job came after the run ended.
        return run.status == RunStatus.DONE and self.services.runner.has_queued_steering(run)

    # ------------------------------------------------------------ the loop

    async def _requeue_stalled(self) -> None:
        """Put back in the queue the jobs of workers that stopped sending their heartbeat."""
        manager = self.app.job_manager
        every = max(0.5, self.options.stalled_after_s / 4)
        while True:
            try:
                stalled = await manager.get_stalled_jobs(
                    queue=QUEUE, task_name=TASK, seconds_since_heartbeat=self.options.stalled_after_s
                )
                for job in stalled:
                    try:
                        await manager.retry_job(job)
                    except Exception as exc:  # another worker retried it first, or a run job is waiting
                        log.debug("job %s not queued again: %s", job.id, exc)
                    else:
                        log.warning(
                            "run %s: its worker stopped answering; the run is queued again",
                            job.task_kwargs.get("run_id"),
                        )
            except Exception:  # the database went away for a moment: try again next round
                log.exception("could not look for stalled jobs")
            await asyncio.sleep(every)

    async def run_async(self, *, wait: bool = True) -> None:
        log.info(
            "worker %s: executing up to %d run(s) at a time from %s",
            self.options.name,
            self.options.concurrency,
            self.services.db.display_url,
        )
        from procrastinate.worker import Worker as QueueWorker

        async with self.app.open_async():
            # Our own signal handling (procrastinate's would wait for every run to finish).
            self._queue_worker = QueueWorker(
                app=self.app,
                queues=[QUEUE],
                name=self.options.name,
                concurrency=self.options.concurrency,
                wait=wait,
                update_heartbeat_interval=self.options.heartbeat_s,
                stalled_worker_timeout=self.options.stalled_after_s,
                fetch_job_polling_interval=1.0,
                delete_jobs="successful",
                install_signal_handlers=False,
            )
            loop = asyncio.get_running_loop()
            handled = []
            if threading.current_thread() is threading.main_thread():
                for signum in (signal.SIGTERM, signal.SIGINT):
                    loop.add_signal_handler(signum, self.shut_down, f"got {signal.Signals(signum).name}")
                    handled.append(signum)
            reaper = asyncio.create_task(self._requeue_stalled(), name="requeue stalled jobs")
            try:
                await self._queue_worker.run()  # type: ignore[no-untyped-call]  # procrastinate leaves it unannotated
            finally:
                reaper.cancel()
                for signum in handled:
                    loop.remove_signal_handler(signum)
        log.info("worker %s stopped", self.options.name)

    def run(self) -> None:
        try:
            asyncio.run(self.run_async())
        finally:
            self.threads.shutdown(wait=False, cancel_futures=True)
            self.lease.dispose()
