"""Group commit for a running run: its LLM calls, step-log lines, node updates, reports and run
states are gathered and stored together, a moment after they are made, in one transaction
(`Repository.write_batch`).

Why: a step makes its writes in bursts (a call ends; its usage, the node's checkpoint and the next
step's narration follow within milliseconds). Written one by one, each cost three statements and a
COMMIT on the step's own thread, on the run's critical path, and contended for the run's row with
the run's other threads. Gathered, a burst is one transaction, written by one thread beside them.

What a reader sees stays true, only later by at most `delay_s` (0.2 s; the live view polls once a
second):
- a method never reads its own past: its executing `RunGraph` answers reads of nodes from what it
  read once and wrote since (and a read that goes to storage stores the gathered node updates
  first, `flush_nodes`);
- the run's budget counts what is stored plus what is gathered (`run_usage`);
- the runner flushes and closes the journal before it records how the run ended, so the final
  status comes after every write of the run.
A process killed mid-run loses at most the last `delay_s` of writes: the calls and lines not
stored yet, and checkpoints a resumed run redoes. A write the database refuses is raised in the
run's own thread at its next write (the batch stays gathered, and a flush tries it again), so the
run ends as it does when a direct write is refused."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from storage.models import Report
from storage.repository import Repository
from storage.rows_batch import CallRecord, EventRecord, RunEnding, RunWrites, StateRecord

# How long a write waits for others to share its transaction.
DEFAULT_DELAY_S = 0.2


class RunJournal:
    """One run's writes, gathered and stored by a thread of its own every `delay_s` while there are
    any. After `close()` it writes through (each write at once), as the repository does."""

    def __init__(self, repo: Repository, run_id: str, *, delay_s: float = DEFAULT_DELAY_S) -> None:
        self._repo = repo
        self.run_id = run_id
        self._delay_s = delay_s
        self._pending = RunWrites()
        self._lock = threading.Condition()  # guards `_pending`, `_closed`, `_error`, `_flusher`
        self._flushing = threading.Lock()  # one batch at a time, in order
        self._closed = False
        self._error: BaseException | None = None
        self._flusher: threading.Thread | None = None

    # ------------------------------------------------------------------ writes

    def record_llm_call(
        self,
        run_id: str,
        *,
        node_id: int | None,
        purpose: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        cost: float,
        latency_s: float,
        attempts: int = 1,
        ok: bool = True,
        error: str = "",
    ) -> None:
        """`UsageStore.record_llm_call`, gathered."""
        self._check_run(run_id)
        call = CallRecord(
            node_id=node_id,
            purpose=purpose,
            model=model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost=cost,
            latency_s=latency_s,
            attempts=attempts,
            ok=ok,
            error=error,
        )
        self._gather(lambda pending: pending.calls.append(call))

    def add_event(
        self, run_id: str, kind: str, text: str, *, node_id: int | None = None, data: Mapping[str, Any] | None = None
    ) -> None:
        """`Repository.add_event`, gathered."""
        self._check_run(run_id)
        event = EventRecord(kind=kind, text=text, node_id=node_id, data=dict(data or {}))
        self._gather(lambda pending: pending.events.append(event))

    def update_node(self, node_id: int, values: Mapping[str, Any]) -> None:
        """Set a node's columns (`data` as its whole new value), over what is gathered for it."""
        update = dict(values)

        def add(pending: RunWrites) -> None:
            pending.nodes[node_id] = {**pending.nodes.get(node_id, {}), **update}

        self._gather(add)

    def bump(self) -> None:
        """Bump the run's version with the next batch: a write made beside the journal (sources, edges, reports)
        that readers of the run learn of from its version."""
        self._gather(lambda pending: setattr(pending, "bump", True))

    def count_nodes(self, added: int) -> None:
        """Nodes were stored beside the journal (their ids were needed at once): the next batch adds
        them to the run's node count and bumps its version."""
        self._gather(lambda pending: setattr(pending, "nodes_added", pending.nodes_added + added))

    def link_sources(self, node_id: int, source_ids: Sequence[int]) -> None:
        """`Repository.link_sources`, gathered (ranked by first position; a link already there kept)."""
        first: dict[int, int] = {}
        for position, source_id in enumerate(source_ids):
            first.setdefault(source_id, position)
        links = [(node_id, source_id, rank) for source_id, rank in first.items()]
        if links:
            self._gather(lambda pending: pending.links.extend(links))

    def add_report(self, report: Report) -> None:
        """`Repository.save_report`, gathered: a new version of one of the run's reports."""
        self._gather(lambda pending: pending.reports.append(report))

    def save_state(self, name: str, data: Mapping[str, Any], schema: int = 1) -> None:
        """`Repository.save_run_state`, gathered: the next version of one of the run's states."""
        state = StateRecord(name=name, data=dict(data), schema=schema)
        self._gather(lambda pending: pending.states.append(state))

    def run_usage(self, run_id: str) -> tuple[int, float]:
        """`UsageStore.run_usage`: what is stored plus what is gathered, (tokens, cost)."""
        self._check_run(run_id)
        with self._flushing:  # no batch half-way: counted once, stored or gathered
            tokens, cost = self._repo.run_usage(run_id)
            with self._lock:
                calls = list(self._pending.calls)
        return (tokens + sum(c.prompt_tokens + c.completion_tokens for c in calls), cost + sum(c.cost for c in calls))

    def _check_run(self, run_id: str) -> None:
        if run_id != self.run_id:
            raise ValueError(f"this journal is run {self.run_id}'s, not run {run_id}'s")

    def _gather(self, add: Callable[[RunWrites], None]) -> None:
        with self._lock:
            self._raise_error()
            if self._closed:
                write_through = True
            else:
                write_through = False
                first = not self._pending
                add(self._pending)
                if self._flusher is None:
                    self._flusher = threading.Thread(
                        target=self._flush_loop, daemon=True, name=f"journal-{self.run_id}"
                    )
                    self._flusher.start()
                if first:  # the flusher waits for a first write, then only its delay (or close)
                    self._lock.notify_all()
        if write_through:
            through = RunWrites()
            add(through)
            self._repo.write_batch(self.run_id, through)

    def _raise_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            self._lock.notify_all()  # the flusher tries again
            raise error

    # ------------------------------------------------------------------ storing

    def flush(self) -> None:
        """Store what is gathered now, in this thread; raises what the database refuses. (A refusal
        the flusher met is tried again here: its batch was kept.)"""
        with self._lock:
            self._error = None
            self._lock.notify_all()
        self._write_pending()

    def flush_nodes(self) -> None:
        """`flush`, when node updates are among what is gathered: what a read of nodes needs
        stored first. Calls and step-log lines alone change no node row, and wait for their batch."""
        self._flush_when(lambda pending: pending.nodes)

    def add_edge(self, src: int, dst: int, kind: str, data: Mapping[str, Any]) -> None:
        """`Repository.add_edge`, gathered (an edge already there is kept as it is)."""
        edge = (src, dst, kind, dict(data))
        self._gather(lambda pending: pending.edges.append(edge))

    def flush_links(self) -> None:
        """`flush`, when links of sources are among what is gathered: what a read of a node's
        sources from storage needs stored first."""
        self._flush_when(lambda pending: pending.links)

    def flush_edges(self) -> None:
        """`flush`, when edges are among what is gathered: what a read or removal of edges needs
        stored first."""
        self._flush_when(lambda pending: pending.edges)

    def flush_states(self) -> None:
        """`flush`, when run states are among what is gathered: what a read of a state's versions
        from storage needs stored first."""
        self._flush_when(lambda pending: pending.states)

    def _flush_when(self, gathered: Callable[[RunWrites], object]) -> None:
        """`flush`, when `gathered(pending)` holds (or a refused batch waits to be tried again)."""
        with self._lock:
            if not gathered(self._pending) and self._error is None:
                return
        self.flush()

    def _write_pending(self) -> None:
        with self._flushing:
            with self._lock:
                writes, self._pending = self._pending, RunWrites()
            if not writes:
                return
            try:
                self._repo.write_batch(self.run_id, writes)
            except BaseException:
                with self._lock:  # kept, in order, for the next flush
                    self._pending = writes.before(self._pending)
                raise

    def _flush_loop(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._closed:
                    self._lock.wait()
                if self._closed:
                    return
            # Let the burst this write belongs to gather, then store it all.
            with self._lock:
                self._lock.wait_for(lambda: self._closed, timeout=self._delay_s)
                if self._closed:
                    return  # close() stores what is left, in its caller's thread
            try:
                self._write_pending()
            except BaseException as exc:  # noqa: BLE001 - raised in the run's thread, at its next write
                with self._lock:
                    self._error = exc
                    # Nothing more is tried until the run's thread has seen it.
                    self._lock.wait_for(lambda: self._error is None or self._closed)

    def close(self, ending: RunEnding | None = None) -> None:
        """Stop gathering: store what is left (raising what the database refuses) and write through
        from now on. Idempotent. `ending`: how the execution ended, stored in the same transaction
        as the last batch (three statements fewer than a status write of its own); when that write
        is refused it is dropped again, for the runner to record the run's end as it then is."""
        with self._lock:
            self._closed = True
            flusher, self._flusher = self._flusher, None
            if ending is not None:
                self._pending.ending = ending
            self._lock.notify_all()
        if flusher is not None and flusher is not threading.current_thread():
            flusher.join()
        try:
            self.flush()
        except BaseException:
            with self._lock:
                self._pending.ending = None
            raise
