"""The task queue that carries runs to worker processes (THOUGHTMAP_EXECUTION=queue).

procrastinate on the PostgreSQL database the runs are stored in: no broker besides it. A job is
"execute this run" (`TASK`: the run id, whether to retry failed nodes, and how a stopped run a
steering command reopened stood, so a refused command leaves it stopped); everything else about the run (its graph,
its commands, its budget) is already in the database, so any worker can take any job. At most one
job per run waits in the queue at a time (procrastinate's `queueing_lock`); a run is never
executed twice at once because the worker holds the run's lease (storage/leases.py) for the whole
execution.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy.engine import make_url

from storage.db import Database
from storage.queue_schema import ensure_queue_schema

if TYPE_CHECKING:  # procrastinate is imported where first used: a process not queueing never loads it
    from procrastinate import App
    from procrastinate.types import JSONValue

TASK = "thoughtmap.execute_run"
QUEUE = "thoughtmap_runs"


def libpq_url(sqlalchemy_url: str) -> str:
    """`postgresql+psycopg://...` (SQLAlchemy's) as the `postgresql://...` psycopg connects to."""
    return make_url(sqlalchemy_url).set(drivername="postgresql").render_as_string(hide_password=False)


@dataclass(frozen=True)
class QueueDepth:
    """Jobs of the run queue: waiting for a worker, and being executed by one."""

    waiting: int
    running: int


def build_app(db: Database) -> App:
    """A procrastinate App on `db` (its tables created on first use)."""
    from procrastinate import App, PsycopgConnector
    from procrastinate.schema import SchemaManager

    ensure_queue_schema(db, SchemaManager.get_schema())
    return App(connector=PsycopgConnector(conninfo=libpq_url(db.url), min_size=1, max_size=4))


class RunQueue:
    """The producer side, used by the app and the CLI: enqueue runs, count the queue."""

    def __init__(self, db: Database) -> None:
        self.app = build_app(db)
        self._opened = False
        self._lock = threading.Lock()

    def _open(self) -> App:
        with self._lock:
            if not self._opened:
                self.app.open()  # a synchronous pool, opened on first use
                self._opened = True
        return self.app

    def enqueue(
        self, run_id: str, *, retry_failed: bool = False, steered_from: dict[str, str | None] | None = None
    ) -> bool:
        """Queue the run for a worker; False when a job for it is already waiting (that one will
        execute it).

        With `steered_from` (a steering command reopened a stopped or failed run), a job already
        waiting is stale: it was queued before the run stopped (a Stop applied to a run that waited
        for a worker leaves its job behind) and carries no such state, so a worker taking it would
        run the whole run on. It is replaced by this one, with this one's
        `retry_failed`: a Resume's retry that the Stop cancelled stays cancelled."""
        from procrastinate.exceptions import AlreadyEnqueued

        app = self._open()
        # Only when set: a worker of the release before it, still draining the queue, takes the rest.
        # Copied into a dict of procrastinate's JSON values: a dict of strings is not one (dicts are invariant).
        held: dict[str, JSONValue] = {"steered_from": dict(steered_from)} if steered_from is not None else {}
        task = app.configure_task(TASK, queue=QUEUE, queueing_lock=run_id)
        try:
            task.defer(run_id=run_id, retry_failed=retry_failed, **held)
        except AlreadyEnqueued:
            if steered_from is None or not self._cancel_waiting(run_id):
                return False
            try:
                task.defer(run_id=run_id, retry_failed=retry_failed, **held)
            except AlreadyEnqueued:  # another job was queued in between: it reopens the run itself
                return False
        return True

    def _cancel_waiting(self, run_id: str) -> bool:
        """Delete the jobs of `run_id` that wait for a worker (not one a worker already took: that
        one finds the run reopened and executes it); whether any was."""
        manager = self._open().job_manager
        waiting = manager.list_jobs(queue=QUEUE, queueing_lock=run_id, status="todo")
        return any([manager.cancel_job_by_id(job.id, delete_job=True) for job in waiting if job.id is not None])

    def depth(self) -> QueueDepth:
        rows = list(self._open().job_manager.list_queues(queue=QUEUE))
        return QueueDepth(waiting=sum(r["todo"] for r in rows), running=sum(r["doing"] for r in rows))

    def close(self) -> None:
        with self._lock:
            if self._opened:
                self.app.close()
                self._opened = False
