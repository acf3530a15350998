"""A run's live events, for the HTTP API's event stream and the Python API's `events()`: fed by what
the runner already stores, with no new writes.

One `RunWatch` per watched run reads the run's change counter (`Reads.run_version`, one indexed
SELECT) every `poll_s`; when it moved, it reads the run's graph and its new step-log lines once
and turns the difference into events for every subscriber:

- `log`: a step-log line (`RunEvent`: narration, searches, steering outcomes, the run's lifecycle),
  in the order stored;
- `node`: a node added or changed (status, label, content, error);
- `edge`: an edge added;
- `status`: the run's status, stop reason, error, warning, node count and usage, when they change;
- `end`: the run is no longer active; the stream ends after it.

Resuming: every event carries `cursor`, the id of the last step-log line delivered with or before
it (the SSE `id:`). A subscriber that passes it back (`Last-Event-ID`) gets every step-log line
after it from the database, then the current state of the run, its nodes and edges (a node's
intermediate states while the client was away are not kept anywhere, its latest is), then the live
events. Nothing stored is missed. On PostgreSQL two transactions of one run that commit out of
their id order could hide a line from a reader in between; the run's version bump, which both
take on the run's row, makes that order the commit order in practice.

Many subscribers of one run cost one poll: the watch reads once and fans out."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from engine import narration
from engine.reads import (
    CommandStatus,
    Edge,
    GraphSnapshot,
    Node,
    Reads,
    Run,
    RunEvent,
    RunNotFound,
    RunStatus,
    utcnow,
)

# How often a watched run's change counter is read: the latency from a write to its event.
DEFAULT_POLL_S = 0.05


@dataclass(frozen=True)
class FeedEvent:
    """One event of a run's stream: `kind` (log, node, edge, status, end), its JSON-able `data`, and
    the resume cursor (the id of the last step-log line delivered with or before it)."""

    kind: str
    data: dict[str, Any]
    cursor: int


def node_data(node: Node) -> dict[str, Any]:
    return {
        "id": node.id,
        "parent_id": node.parent_id,
        "kind": node.kind,
        "label": node.label,
        "status": node.status,
        "depth": node.depth,
        "content": node.content,
        "error": node.error,
    }


def edge_data(edge: Edge) -> dict[str, Any]:
    return {"id": edge.id, "src": edge.src, "dst": edge.dst, "kind": edge.kind}


def status_data(run: Run) -> dict[str, Any]:
    return {
        "status": run.status,
        "stop_reason": run.stop_reason,
        "error": run.error,
        "warning": run.warning,
        "node_count": run.node_count,
        "llm_calls": run.llm_calls,
        "tokens": run.prompt_tokens + run.completion_tokens,
        "cost": run.cost,
    }


def log_data(event: RunEvent) -> dict[str, Any]:
    return {
        "id": event.id,
        "kind": event.kind,
        "text": event.text,
        "node_id": event.node_id,
        "data": event.data,
        "created_at": event.created_at.isoformat(),
    }


# How long after a run's end is stored its closing step-log line may still come (the runner stores
# the status, then says how the run ended); a run that never says it is taken as over after this.
END_GRACE_S = 2.0
_CLOSING = frozenset({narration.Phase.STOPPED, narration.Phase.FINISHED, narration.Phase.FAILED})


def _over(reads: Reads, run: Run) -> bool:
    """The run is not active, and no steering command waits to reopen it (the runner records `done`,
    then reopens a run whose command came meanwhile)."""
    if run.status in RunStatus.ACTIVE:
        return False
    return not any(
        c.status in (CommandStatus.QUEUED, CommandStatus.TAKEN) and c.kind not in ("pause", "stop")
        for c in reads.list_commands(run.id)
    )


class Subscription:
    """One subscriber's place in a run's events: what it must catch up on, then the watch's live
    events from where it joined. `poll()` takes what is there; `wait()` blocks for more."""

    def __init__(
        self, watch: RunWatch, catch_up: Sequence[FeedEvent], position: int, on_new: Callable[[], None] | None
    ) -> None:
        self._watch = watch
        self._pending: deque[FeedEvent] = deque(catch_up)
        self._position = position
        self.on_new = on_new
        self.closed = False

    def has_new(self) -> bool:
        return bool(self._pending) or self._watch.length() > self._position

    def finished(self) -> bool:
        """Its watch ended and everything it produced was taken: no more will come."""
        return self._watch.ended and not self.has_new()

    def poll(self) -> list[FeedEvent]:
        taken = list(self._pending)
        self._pending.clear()
        live, self._position = self._watch.since(self._position)
        return taken + live

    def wait(self, timeout: float | None = None) -> list[FeedEvent]:
        """The next events, waiting up to `timeout` seconds for some (an empty list if none came)."""
        self._watch.wait_for(self.has_new, timeout)
        return self.poll()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._watch.unsubscribe(self)


class RunWatch:
    """One run watched for its subscribers by a thread of its own, while it has any."""

    def __init__(self, reads: Reads, run_id: str, *, poll_s: float, on_idle: Callable[[RunWatch], None]) -> None:
        self._reads = reads
        self.run_id = run_id
        self._poll_s = poll_s
        self._on_idle = on_idle
        self._cond = threading.Condition()  # guards the state below; never held over a database read
        self._ticking = threading.Lock()  # one read of the run at a time
        self._history: list[FeedEvent] = []
        self._subscribers: list[Subscription] = []
        self._thread: threading.Thread | None = None
        self._loaded = False
        self._version = -1
        self._last_log_id = 0
        self._nodes: dict[int, dict[str, Any]] = {}
        self._edges: dict[int, dict[str, Any]] = {}
        self._status: dict[str, Any] = {}
        self._said_end = False  # the last `run` line closed a segment (finished, stopped, failed)
        self._over_since: float | None = None  # when the run was first read as over
        self.ended = False

    # ------------------------------------------------------------------ subscribers

    def subscribe(self, after: int | None, on_new: Callable[[], None] | None = None) -> Subscription:
        """A subscriber from `after` (the cursor it last saw; None: from the run's first line).
        RunNotFound when the run does not exist."""
        if not self._loaded:
            self._tick()
        with self._cond:
            position, last_log = len(self._history), self._last_log_id
            state: list[FeedEvent] = [FeedEvent("status", dict(self._status), last_log)]
            state += [FeedEvent("node", dict(data), last_log) for data in self._nodes.values()]
            state += [FeedEvent("edge", dict(data), last_log) for data in self._edges.values()]
            ended = self.ended
        # The lines it missed, up to where the watch is: read outside the lock (the watch goes on).
        lines = [
            e
            for e in reversed(self._reads.list_events(self.run_id, after_id=after or 0))
            if e.id is not None and e.id <= last_log
        ]
        catch_up = [FeedEvent("log", log_data(e), e.id or 0) for e in lines] + state
        if ended:
            catch_up.append(FeedEvent("end", {"status": self._status.get("status")}, last_log))
        subscription = Subscription(self, catch_up, position, on_new)
        with self._cond:
            self._subscribers.append(subscription)
            if not self.ended and self._thread is None:
                self._thread = threading.Thread(target=self._loop, daemon=True, name=f"feed-{self.run_id}")
                self._thread.start()
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        with self._cond:
            if subscription in self._subscribers:
                self._subscribers.remove(subscription)
            self._cond.notify_all()

    def idle(self) -> bool:
        """No subscriber and no thread: nothing holds this watch."""
        with self._cond:
            return not self._subscribers and self._thread is None

    def length(self) -> int:
        with self._cond:
            return len(self._history)

    def since(self, position: int) -> tuple[list[FeedEvent], int]:
        with self._cond:
            return self._history[position:], len(self._history)

    def wait_for(self, predicate: Callable[[], bool], timeout: float | None) -> None:
        with self._cond:
            self._cond.wait_for(lambda: predicate() or self.ended, timeout)

    # ------------------------------------------------------------------ watching

    def _loop(self) -> None:
        while True:
            with self._cond:
                if not self._subscribers or self.ended:
                    self._thread = None
                    break
            try:
                self._tick()
            except Exception:  # noqa: BLE001 - a database hiccup: read again at the next poll
                pass
            with self._cond:
                self._cond.wait(self._poll_s)
        self._on_idle(self)

    def _tick(self) -> None:
        """Read the run if its counter moved, and append what changed. The database is read with no
        lock that subscribers wait on (`_ticking` keeps ticks one at a time)."""
        with self._ticking:
            try:
                version = self._reads.run_version(self.run_id)
            except RunNotFound:
                if not self._loaded:
                    raise
                with self._cond:
                    self._append(FeedEvent("end", {"status": "deleted"}, self._last_log_id))
                    self.ended = True
                return
            if version == self._version and self._over_since is None:
                return
            # The graph before the lines: a run's status is stored after all its other writes but
            # the line saying how it ended, which `_apply` waits for.
            snapshot = self._reads.snapshot(self.run_id)
            lines = list(reversed(self._reads.list_events(self.run_id, after_id=self._last_log_id)))
            over = _over(self._reads, snapshot.run)
            with self._cond:
                self._apply(version, snapshot, lines, over)

    def _apply(self, version: int, snapshot: GraphSnapshot, lines: list[RunEvent], over: bool) -> None:
        """What one read found, turned into events (with `_cond` held)."""
        self._version = version
        first = not self._loaded
        self._loaded = True
        for event in lines:
            self._last_log_id = max(self._last_log_id, event.id or 0)
            if event.kind == narration.RUN:
                self._said_end = (event.data or {}).get("phase") in _CLOSING
            if not first:
                self._append(FeedEvent("log", log_data(event), self._last_log_id))
        # Over, and its closing line stored (or long enough ago that none will come): it ended.
        now = time.monotonic()
        if over and self._over_since is None:
            self._over_since = now
        if not over:
            self._over_since = None
        finished = snapshot.run.finished_at
        long_ago = (
            finished is not None
            and (utcnow() - (finished if finished.tzinfo else finished.replace(tzinfo=UTC))).total_seconds()
            >= END_GRACE_S
        )
        ended = over and (self._said_end or long_ago or now - (self._over_since or now) >= END_GRACE_S)
        status = status_data(snapshot.run)
        changed_status = status != self._status
        self._status = status
        for node in snapshot.nodes:
            data = node_data(node)
            if self._nodes.get(node.id or 0) != data:
                self._nodes[node.id or 0] = data
                if not first:
                    self._append(FeedEvent("node", data, self._last_log_id))
        for edge in snapshot.edges:
            if (edge.id or 0) not in self._edges:
                self._edges[edge.id or 0] = edge_data(edge)
                if not first:
                    self._append(FeedEvent("edge", edge_data(edge), self._last_log_id))
        if changed_status and not first:
            self._append(FeedEvent("status", dict(status), self._last_log_id))
        if ended:
            if not first:
                self._append(FeedEvent("end", {"status": snapshot.run.status}, self._last_log_id))
            self.ended = True

    def _append(self, event: FeedEvent) -> None:
        self._history.append(event)
        self._cond.notify_all()
        for subscription in list(self._subscribers):
            if subscription.on_new is not None:
                try:
                    subscription.on_new()
                except Exception:  # noqa: BLE001 - one subscriber gone (its loop closed) stops no other
                    subscription.on_new = None


class RunFeed:
    """The watches of one process: one per run with subscribers, made on the first, dropped after
    the last leaves (or the run ends)."""

    def __init__(self, reads: Reads, *, poll_s: float = DEFAULT_POLL_S) -> None:
        self._reads = reads
        self.poll_s = poll_s
        self._watches: dict[str, RunWatch] = {}
        self._lock = threading.Lock()

    def subscribe(
        self, run_id: str, after: int | None = None, on_new: Callable[[], None] | None = None
    ) -> Subscription:
        with self._lock:
            watch = self._watches.get(run_id)
            if watch is None or watch.ended:
                watch = RunWatch(self._reads, run_id, poll_s=self.poll_s, on_idle=self._drop)
                self._watches[run_id] = watch
        try:
            subscription = watch.subscribe(after, on_new)
        except RunNotFound:
            self._drop(watch)
            raise
        if watch.ended:  # a finished run: nothing to watch, nothing to keep
            self._drop(watch)
        return subscription

    def _drop(self, watch: RunWatch) -> None:
        with self._lock:
            # A subscriber that came as its thread stopped keeps it (and restarted the thread).
            if self._watches.get(watch.run_id) is watch and (watch.ended or watch.idle()):
                del self._watches[watch.run_id]

    def watched(self) -> int:
        with self._lock:
            return len(self._watches)
