"""A run's writes made together: LLM calls, step-log lines and node updates gathered while a run
executes (`engine/write_behind.py`), stored in one transaction with one version bump.
(Mixed into `storage.repository.Repository`.)"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, insert, update

from storage.models import Report, table_of, utcnow
from storage.repository_base import (
    RepositoryBase,
    RunNotFound,
    _calls,
    _chunks,
    _events,
    _node_usage_columns,
    _nodes,
    _runs,
)
from storage.rows_run_states import state_version_insert


@dataclass(frozen=True)
class CallRecord:
    """One LLM call, as `record_llm_call` takes it, with the moment it ended."""

    node_id: int | None
    purpose: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost: float
    latency_s: float
    attempts: int = 1
    ok: bool = True
    error: str = ""
    created_at: datetime = field(default_factory=utcnow)


@dataclass(frozen=True)
class EventRecord:
    """One step-log line, as `add_event` takes it, with the moment it was said."""

    kind: str
    text: str
    node_id: int | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    created_at: datetime = field(default_factory=utcnow)

    def row(self, run_id: str) -> dict[str, Any]:
        """Its `run_events` row."""
        return {
            "run_id": run_id,
            "node_id": self.node_id,
            "kind": self.kind,
            "text": self.text,
            "data": dict(self.data),
            "created_at": self.created_at,
        }


@dataclass(frozen=True)
class StateRecord:
    """A new version of one of the run's states, as `save_run_state` takes it, with the moment it
    was saved."""

    name: str
    data: Mapping[str, Any]
    schema: int = 1
    created_at: datetime = field(default_factory=utcnow)


@dataclass(frozen=True)
class RunEnding:
    """How a run's execution ended, stored with its last batch: the run's columns (`status`, ...)
    and the step-log line that says it (`Repository.run_ending` makes one)."""

    values: Mapping[str, Any]
    event: EventRecord | None = None
    terminal: bool = True  # the nodes' usage totals are recomputed from their calls


@dataclass
class RunWrites:
    """What one run wrote since its last batch: calls and events in the order they were made, and
    for each node the columns its updates set, the later over the earlier (`data` whole)."""

    calls: list[CallRecord] = field(default_factory=list)
    events: list[EventRecord] = field(default_factory=list)
    nodes: dict[int, dict[str, Any]] = field(default_factory=dict)
    bump: bool = False  # the run's version is bumped even if nothing else is written
    nodes_added: int = 0  # nodes stored beside the batch, not yet in the run's node count
    # Stored sources linked to nodes: (node id, source id, rank), a link already there kept.
    links: list[tuple[int, int, int]] = field(default_factory=list)
    # Edges between nodes of the run: (src, dst, kind, data), an edge already there kept.
    edges: list[tuple[int, int, str, dict[str, Any]]] = field(default_factory=list)
    # New versions of the run's reports, in the order they were written.
    reports: list[Report] = field(default_factory=list)
    # New versions of the run's states, in the order they were saved.
    states: list[StateRecord] = field(default_factory=list)
    # How the execution ended, stored last: the batch is the run's final write.
    ending: RunEnding | None = None

    def __bool__(self) -> bool:
        return bool(
            self.calls
            or self.events
            or self.nodes
            or self.bump
            or self.nodes_added
            or self.links
            or self.edges
            or self.reports
            or self.states
            or self.ending
        )

    def before(self, later: RunWrites) -> RunWrites:
        """This batch followed by `later` (a batch that could not be written goes back in front)."""
        nodes = {node_id: dict(values) for node_id, values in self.nodes.items()}
        for node_id, values in later.nodes.items():
            nodes[node_id] = {**nodes.get(node_id, {}), **values}
        return RunWrites(
            self.calls + later.calls,
            self.events + later.events,
            nodes,
            self.bump or later.bump,
            self.nodes_added + later.nodes_added,
            self.links + later.links,
            self.edges + later.edges,
            self.reports + later.reports,
            self.states + later.states,
            later.ending or self.ending,
        )


def _same_columns(nodes: Mapping[int, Mapping[str, Any]]) -> dict[tuple[str, ...], list[tuple[int, Mapping[str, Any]]]]:
    """The nodes' updates grouped by the columns they set, each group in node order."""
    groups: dict[tuple[str, ...], list[tuple[int, Mapping[str, Any]]]] = {}
    for node_id, values in sorted(nodes.items()):
        groups.setdefault(tuple(sorted(values)), []).append((node_id, values))
    return groups


_reports = table_of(Report)


class BatchRows(RepositoryBase):
    def write_batch(self, run_id: str, writes: RunWrites) -> None:
        """Store `writes` in one transaction: one INSERT of the calls, one of the events, one UPDATE
        per set of columns the nodes' updates set (an executemany over those nodes; their usage
        totals recomputed from their calls, now stored), one INSERT of the links of sources to
        nodes, one of the edges, one UPDATE of the run (its
        version, its node count raised by the nodes added beside the batch, and its totals raised by
        the calls), one COMMIT. With an `ending`, its line is the last event, the nodes' usage totals are
        recomputed (as `set_status` does) and its columns join the run's UPDATE; RunNotFound when the
        run is gone (nothing is stored)."""
        if not writes:
            return
        ending = writes.ending
        events = writes.events + [ending.event] if ending is not None and ending.event is not None else writes.events
        with self._session() as s:
            for calls_chunk in _chunks(writes.calls):
                s.execute(
                    insert(_calls),
                    [
                        {
                            "run_id": run_id,
                            "node_id": c.node_id,
                            "purpose": c.purpose,
                            "model": c.model,
                            "prompt_tokens": c.prompt_tokens,
                            "completion_tokens": c.completion_tokens,
                            "cost": c.cost,
                            "latency_s": c.latency_s,
                            "attempts": c.attempts,
                            "ok": c.ok,
                            "error": c.error[:2000],
                            "created_at": c.created_at,
                        }
                        for c in calls_chunk
                    ],
                )
            for events_chunk in _chunks(events):
                s.execute(insert(_events), [e.row(run_id) for e in events_chunk])
            for columns, rows in _same_columns(writes.nodes).items():
                # One statement per set of columns, all its nodes as one executemany. A node deleted
                # meanwhile (its run deleted) matches no row: nothing to write.
                s.execute(
                    update(_nodes)
                    .where(_nodes.c.id == bindparam("node_id_"), _nodes.c.run_id == run_id)
                    .values({**{name: bindparam(f"{name}_") for name in columns}, **_node_usage_columns()}),
                    [
                        {"node_id_": node_id, **{f"{name}_": value for name, value in values.items()}}
                        for node_id, values in rows
                    ],
                )
            if writes.links:  # in order: the first link of a pair is kept
                s.execute(
                    self._links_insert,
                    [
                        {"node_id": node_id, "source_id": source_id, "rank": rank, "score": 0.0}
                        for node_id, source_id, rank in writes.links
                    ],
                )
            if writes.edges:  # in order: the first edge of a kind is kept
                s.execute(
                    self._edges_insert,
                    [
                        {"run_id": run_id, "src": src, "dst": dst, "kind": kind, "data": dict(data)}
                        for src, dst, kind, data in writes.edges
                    ],
                )
            for report in writes.reports:  # each its own version, in order (few: one or two a run)
                s.execute(
                    insert(_reports).values(
                        run_id=run_id,
                        kind=report.kind,
                        markdown=report.markdown,
                        data=dict(report.data),
                        created_at=report.created_at,
                    )
                )
            for state in writes.states:  # each its own version, in order: each sees the one before
                s.execute(state_version_insert(run_id, state.name, state.data, state.schema, state.created_at))
            if ending is not None and ending.terminal:
                self._refresh_node_usage(s, run_id)
            calls = writes.calls
            bumped = s.exec(
                self._bump(
                    run_id,
                    updated_at=utcnow(),
                    **(ending.values if ending is not None else {}),
                    **({"node_count": _runs.c.node_count + writes.nodes_added} if writes.nodes_added else {}),
                    **(
                        {
                            "prompt_tokens": _runs.c.prompt_tokens + sum(c.prompt_tokens for c in calls),
                            "completion_tokens": _runs.c.completion_tokens + sum(c.completion_tokens for c in calls),
                            "cost": _runs.c.cost + sum(c.cost for c in calls),
                            "llm_calls": _runs.c.llm_calls + len(calls),
                        }
                        if calls
                        else {}
                    ),
                )
            )
            if ending is not None and bumped.rowcount == 0:
                raise RunNotFound(run_id)
            s.commit()
