"""A run's and a node's status values: plain constants, importable without the database layer (the
CLI's parser lists them in `thoughtmap list --status`'s choices before anything else is loaded)."""

from __future__ import annotations


class RunStatus:
    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    DONE = "done"
    FAILED = "failed"
    STOPPED = "stopped"  # by the user, or by the budget (see stop_reason)
    INTERRUPTED = "interrupted"  # its process died; resumable

    ACTIVE = (QUEUED, RUNNING, PAUSED)
    RESUMABLE = (INTERRUPTED, STOPPED, FAILED, PAUSED, QUEUED)
    ALL = (QUEUED, RUNNING, PAUSED, DONE, FAILED, STOPPED, INTERRUPTED)


class NodeStatus:
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    PRUNED = "pruned"

    UNFINISHED = (PENDING, RUNNING)
