"""The repository API: every read and write of runs, graphs, sources, usage, commands, reports.

Objects returned are detached snapshots (safe to hand to other threads). Counters are updated with
atomic `UPDATE ... SET x = x + n` statements, so concurrent workers never lose an increment.

Round trips: a write is as few statements as the dialect allows, each with RETURNING instead of a
re-read. On PostgreSQL the run's version bump rides in the same statement as the write (a
data-modifying CTE); SQLite has no such CTEs and sends it as a second statement of the same
transaction. A node's usage totals are not updated per LLM call: every UPDATE of a node row
recomputes them from its `llm_calls` in the same statement, and a run reaching a terminal status
recomputes them for all its nodes (`node_usage` gives the exact live numbers of one node).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import case, delete, func, insert, or_, update
from sqlalchemy import select as sa_select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from engine.questions import check_length, check_storable
from storage.db import Database
from storage.models import (
    BenchmarkItem,
    Command,
    CommandStatus,
    Edge,
    Judgment,
    LLMCall,
    Node,
    NodeSource,
    NodeStatus,
    Report,
    Run,
    RunEvent,
    RunState,
    RunStatus,
    Source,
    utcnow,
)
from storage.unwritable import refused_writes


class RunNotFound(LookupError):
    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run with id '{run_id}'. List runs with: thoughtmap list")
        self.run_id = run_id


class NodeNotFound(LookupError):
    def __init__(self, node_id: int) -> None:
        super().__init__(f"no node with id {node_id}")
        self.node_id = node_id


@dataclass(frozen=True)
class SourceInput:
    """What a searcher hands to storage (mirrors engine.search.Hit without importing engine)."""

    ref: str
    title: str
    snippet: str = ""
    text: str = ""
    kind: str = "corpus"
    url: str | None = None
    score: float = 0.0


@dataclass(frozen=True)
class NodeInput:
    """One node for `Repository.add_nodes`; `parent_id` must be a node of the same run."""

    kind: str
    label: str
    parent_id: int | None = None
    content: str = ""
    status: str = NodeStatus.PENDING
    depth: int = 0
    priority: float = 0.0
    data: dict[str, Any] | None = None
    edge_kind: str = "child"


@dataclass(frozen=True)
class GraphSnapshot:
    run: Run
    nodes: list[Node]
    edges: list[Edge]


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


TERMINAL_STATUSES = (RunStatus.DONE, RunStatus.FAILED, RunStatus.STOPPED, RunStatus.INTERRUPTED)

# Rows per multi-row INSERT (SQLite allows 32766 bound parameters per statement, PostgreSQL 65535).
_ROWS_PER_INSERT = 500

_runs = Run.__table__
_nodes = Node.__table__
_calls = LLMCall.__table__
_events = RunEvent.__table__


def _node_usage_columns() -> dict[str, Any]:
    """A node's usage totals as correlated scalar subqueries over its LLM calls, for an UPDATE (or
    a SELECT) of `nodes`: `SET prompt_tokens = (SELECT coalesce(sum(...), 0) FROM llm_calls WHERE
    llm_calls.node_id = nodes.id), ...`."""

    def total(column, zero):
        total_of_node = sa_select(func.coalesce(func.sum(column), zero)).where(_calls.c.node_id == _nodes.c.id)
        return total_of_node.scalar_subquery()

    return {
        "prompt_tokens": total(_calls.c.prompt_tokens, 0),
        "completion_tokens": total(_calls.c.completion_tokens, 0),
        "cost": total(_calls.c.cost, 0.0),
        "latency_s": total(_calls.c.latency_s, 0.0),
    }


# A source read several times (a web page focused on each search's query) keeps the passages of
# every read, up to this.
MAX_SOURCE_TEXT_CHARS = 60_000


def united_text(stored: str, new: str) -> str:
    """The newest read first, then the lines of the earlier reads it does not repeat: the node that
    read it now quotes its own passages from the start (prompts cut a source's text from there), and
    the passages an earlier summary cited stay in the source behind them (a later read focused on
    another query used to replace them). Lines, not paragraphs: a page's passages are one per line.
    Past MAX_SOURCE_TEXT_CHARS the oldest lines go."""
    if stored in new:
        return new
    if new in stored or not new.strip():
        return stored  # already held as it is (a chunk of the whole page, a read repeated)
    seen = {" ".join(line.split()) for line in new.splitlines() if line.strip()}
    older = []
    for line in stored.splitlines():
        key = " ".join(line.split())
        if key and key not in seen:
            seen.add(key)
            older.append(line)
    if not older:
        return new
    united, room = new, MAX_SOURCE_TEXT_CHARS - len(new)
    for line in older:
        if len(line) + 1 > room:
            break
        united, room = united + "\n" + line, room - len(line) - 1
    return united


def _chunks(rows: list) -> list[list]:
    return [rows[start:start + _ROWS_PER_INSERT] for start in range(0, len(rows), _ROWS_PER_INSERT)]


class Repository:
    def __init__(self, db: Database) -> None:
        self.db = db
        # Names the database when it refuses writes: a SQLite file's path, or the URL without a password.
        self._where = db.engine.url.database if db.is_sqlite else db.display_url
        dialect = db.engine.dialect.name
        # PostgreSQL: a write and its run's version bump in one statement (a data-modifying CTE).
        self._pg = dialect == "postgresql"
        # The dialect's own INSERT, for ON CONFLICT (the same on SQLite and PostgreSQL).
        self._upsert = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}.get(dialect)

    def _insert_on_conflict(self, table):
        if self._upsert is None:
            raise NotImplementedError(
                f"the {self.db.engine.dialect.name} database is not supported: use SQLite or PostgreSQL")
        return self._upsert(table)

    @staticmethod
    def _bump(run_id: Any, **values: Any):
        """`UPDATE runs SET version = version + 1 (, values) WHERE id = run_id` (a value or an expression)."""
        return update(_runs).where(_runs.c.id == run_id).values(version=_runs.c.version + 1, **values)

    def _insert_rows_with_bump(self, s: Session, insert_rows: Callable[[list], Any], rows: list, run_id: str,
                               **bump_values: Any) -> None:
        """Multi-row INSERTs of `rows` (`insert_rows(chunk)` makes one) and the run's version bump,
        which rides with the last INSERT on PostgreSQL."""
        *first, last = _chunks(rows)
        for chunk in first:
            s.execute(insert_rows(chunk))
        self._write_with_bump(s, insert_rows(last), run_id, **bump_values)

    def _write_with_bump(self, s: Session, write, run_id: str, **bump_values: Any) -> None:
        """Run a write without results and bump the run's version: one statement on PostgreSQL
        (`WITH w AS (write) UPDATE runs ...`), two on SQLite. PostgreSQL runs the UPDATE first, so
        this is for inserts only: their key checks take key-share locks, which nothing a writer
        holds while it waits for the run's row blocks (node updates lock FOR NO KEY UPDATE)."""
        if self._pg:
            s.execute(self._bump(run_id, **bump_values).add_cte(write.cte("write")))
        else:
            s.execute(write)
            s.execute(self._bump(run_id, **bump_values))

    @contextmanager
    def _session(self):
        # A full disk or a read-only database is said as such (DatabaseUnwritable), not as a driver error.
        with refused_writes(self._where), Session(self.db.engine, expire_on_commit=False) as session:
            yield session

    # ------------------------------------------------------------------ runs

    def create_run(
        self,
        *,
        question: str,
        method: str,
        params: dict[str, Any],
        llm_info: dict[str, Any] | None = None,
        search_mode: str = "local",
        max_tokens: int | None = None,
        max_cost: float | None = None,
        title: str = "",
        search_exclusions: dict[str, Any] | None = None,
        run_id: str | None = None,
    ) -> Run:
        """`run_id`: the id to create it under, chosen beforehand (`new_run_id()`) by a caller that
        records it elsewhere first (a benchmark item), so a kill between the two leaves no run that
        nothing refers to; a new one by default."""
        # The last guard for callers that skip the runner: a NUL or a non-string would be stored
        # as given by SQLite and fail later, or fail with a driver error on PostgreSQL; a document
        # pasted as a question would be sent again with every prompt of the run.
        check_length(check_storable(question))
        run = Run(
            id=run_id or new_run_id(),
            question=question,
            title=title or question[:300],
            method=method,
            params=params,
            llm_info=llm_info or {},
            search_mode=search_mode,
            max_tokens=max_tokens,
            max_cost=max_cost,
            search_exclusions=search_exclusions or {},
        )
        with self._session() as s:
            s.add(run)
            s.commit()  # every column has a Python-side value: no re-read
        return run

    def get_run(self, run_id: str) -> Run:
        with self._session() as s:
            run = s.get(Run, run_id)
        if run is None:
            raise RunNotFound(run_id)
        return run

    def find_run(self, run_id_or_prefix: str) -> Run:
        """Exact id, or a unique id prefix (at least 4 characters), as users type them."""
        with self._session() as s:
            run = s.get(Run, run_id_or_prefix)
            if run is None and len(run_id_or_prefix) >= 4:
                matches = s.exec(
                    select(Run).where(col(Run.id).startswith(run_id_or_prefix)).limit(2)
                ).all()
                run = matches[0] if len(matches) == 1 else None
        if run is None:
            raise RunNotFound(run_id_or_prefix)
        return run

    def list_runs(
        self,
        *,
        text: str | None = None,
        method: str | None = None,
        status: str | None = None,
        since: datetime | None = None,
        limit: int = 200,
        offset: int = 0,
    ) -> list[Run]:
        """The runs that match, newest first, `limit` of them from `offset` on (a page of Sessions).
        Ties on the creation time are ordered by id, so pages neither repeat nor skip a run."""
        stmt = self._matching_runs(select(Run), text=text, method=method, status=status, since=since)
        stmt = stmt.order_by(col(Run.created_at).desc(), col(Run.id).desc()).offset(max(offset, 0)).limit(limit)
        with self._session() as s:
            return list(s.exec(stmt).all())

    def count_runs(self, *, text: str | None = None, method: str | None = None, status: str | None = None,
                   since: datetime | None = None) -> int:
        """How many runs `list_runs` with the same filters would page through."""
        stmt = self._matching_runs(select(func.count()).select_from(Run), text=text, method=method,
                                   status=status, since=since)
        with self._session() as s:
            return int(s.exec(stmt).one())

    @staticmethod
    def _matching_runs(stmt, *, text: str | None, method: str | None, status: str | None,
                       since: datetime | None):
        if text:
            # Escaped: a search for "%" or "_" finds those characters, not every run.
            stmt = stmt.where(or_(col(Run.question).icontains(text, autoescape=True),
                                  col(Run.title).icontains(text, autoescape=True)))
        if method:
            stmt = stmt.where(Run.method == method)
        if status:
            stmt = stmt.where(Run.status == status)
        if since:
            stmt = stmt.where(Run.created_at >= since)
        return stmt

    def _update_run(self, run_id: str, *, refresh_node_usage: bool = False, **values: Any) -> None:
        values.setdefault("updated_at", utcnow())
        with self._session() as s:
            if refresh_node_usage:
                self._refresh_node_usage(s, run_id)
            result = s.execute(self._bump(run_id, **values))
            if result.rowcount == 0:
                raise RunNotFound(run_id)
            s.commit()

    @staticmethod
    def _refresh_node_usage(s: Session, run_id: str) -> None:
        """Recompute the usage totals of the run's nodes that have LLM calls: one UPDATE (so calls
        recorded after a node's last update, e.g. by the report writer, are counted)."""
        s.execute(
            update(_nodes)
            .where(_nodes.c.run_id == run_id,
                   _nodes.c.id.in_(sa_select(_calls.c.node_id).where(_calls.c.run_id == run_id)))
            .values(**_node_usage_columns())
        )

    def claim_run(self, run_id: str, owner: str) -> None:
        """Mark a run running in this process (for crash detection by other processes)."""
        now = utcnow()
        self._update_run(
            run_id,
            status=RunStatus.RUNNING,
            owner=owner,
            heartbeat_at=now,
            started_at=func.coalesce(_runs.c.started_at, now),  # the first start is kept
            finished_at=None,
            stop_reason="",
            error="",
            warning="",
        )

    def mark_queued(self, run_id: str) -> None:
        """The run waits for a worker (distributed execution). A run some process is executing
        keeps its status: that process applies what was asked."""
        with self._session() as s:
            s.execute(self._bump(run_id, status=RunStatus.QUEUED, owner="", updated_at=utcnow())
                      .where(_runs.c.status.not_in([RunStatus.RUNNING, RunStatus.PAUSED])))
            s.commit()

    def set_budget(self, run_id: str, *, max_tokens: int | None, max_cost: float | None) -> None:
        self._update_run(run_id, max_tokens=max_tokens, max_cost=max_cost)

    def update_llm_info(self, run_id: str, llm_info: dict[str, Any]) -> None:
        self._update_run(run_id, llm_info=llm_info)

    def heartbeat(self, run_id: str) -> None:
        """The executing process is alive; RunNotFound when the run was deleted under it."""
        with self._session() as s:
            result = s.exec(update(Run).where(col(Run.id) == run_id).values(heartbeat_at=utcnow()))
            s.commit()
        if result.rowcount == 0:
            raise RunNotFound(run_id)

    def set_status(
        self,
        run_id: str,
        status: str,
        *,
        stop_reason: str | None = None,
        error: str | None = None,
        warning: str | None = None,
    ) -> None:
        values: dict[str, Any] = {"status": status}
        if stop_reason is not None:
            values["stop_reason"] = stop_reason
        if error is not None:
            values["error"] = error
        if warning is not None:
            values["warning"] = warning
        terminal = status in TERMINAL_STATUSES
        if terminal:
            values["finished_at"] = utcnow()
            values["owner"] = ""
        # A finished run's nodes get their final usage totals in the same transaction.
        self._update_run(run_id, refresh_node_usage=terminal, **values)

    def rename_run(self, run_id: str, title: str) -> None:
        title = title.strip()
        if not title:
            raise ValueError("the new name is empty; type a name for the run")
        self._update_run(run_id, title=title[:300])

    def delete_run(self, run_id: str) -> None:
        self.get_run(run_id)
        with self._session() as s:
            node_ids = select(Node.id).where(Node.run_id == run_id)
            s.exec(delete(NodeSource).where(col(NodeSource.node_id).in_(node_ids)))
            for table in (Edge, Source, LLMCall, Command, Report, RunState, RunEvent, Node):
                s.exec(delete(table).where(col(table.run_id) == run_id))
            # Verdicts on the run go with it; a benchmark item keeps its scores and forgets the run.
            s.exec(delete(Judgment).where(or_(col(Judgment.run_a) == run_id, col(Judgment.run_b) == run_id)))
            s.exec(update(BenchmarkItem).where(col(BenchmarkItem.run_id) == run_id).values(run_id=None))
            s.exec(delete(Run).where(col(Run.id) == run_id))
            s.commit()

    def mark_dead_runs_interrupted(self, is_owner_alive: Callable[[Run], bool]) -> list[str]:
        """Runs left running/paused by a process that no longer exists become `interrupted`."""
        with self._session() as s:
            candidates = s.exec(
                select(Run).where(col(Run.status).in_([RunStatus.RUNNING, RunStatus.PAUSED]))
            ).all()
        dead = [run for run in candidates if not is_owner_alive(run)]
        for run in dead:
            self.interrupt_run(run.id, owner=run.owner, reason="the process running it ended; resume to continue")
        return [run.id for run in dead]

    def interrupt_run(self, run_id: str, *, owner: str, reason: str) -> bool:
        """Mark the run `interrupted` (resumable) with `reason`, only if `owner` still holds it
        running or paused: never clobber a claim made since. Whether it was marked."""
        with self._session() as s:
            self._refresh_node_usage(s, run_id)
            result = s.execute(
                self._bump(run_id, status=RunStatus.INTERRUPTED, stop_reason=reason, owner="", updated_at=utcnow())
                .where(_runs.c.owner == owner, _runs.c.status.in_([RunStatus.RUNNING, RunStatus.PAUSED]))
            )
            s.commit()
        return bool(result.rowcount)

    def run_version(self, run_id: str) -> int:
        """The run's change counter: one SELECT of one column, for cheap polling."""
        with self._session() as s:
            version = s.exec(select(Run.version).where(Run.id == run_id)).first()
        if version is None:
            raise RunNotFound(run_id)
        return version

    # ----------------------------------------------------------------- nodes

    def add_node(
        self,
        run_id: str,
        *,
        kind: str,
        label: str,
        content: str = "",
        parent_id: int | None = None,
        status: str = NodeStatus.PENDING,
        depth: int = 0,
        order: int | None = None,
        priority: float = 0.0,
        data: dict[str, Any] | None = None,
        edge_kind: str = "child",
    ) -> Node:
        item = NodeInput(kind=kind, label=label, parent_id=parent_id, content=content, status=status,
                         depth=depth, priority=priority, data=data, edge_kind=edge_kind)
        return self._add_nodes(run_id, [item], order=order or 0)[0]

    def add_nodes(self, run_id: str, inputs: Sequence[NodeInput]) -> list[Node]:
        """Several nodes (and the edges from their parents) in one transaction, one version bump."""
        return self._add_nodes(run_id, inputs) if inputs else []

    def _add_nodes(self, run_id: str, inputs: Sequence[NodeInput], order: int = 0) -> list[Node]:
        now = utcnow()
        nodes = [
            Node(run_id=run_id, parent_id=i.parent_id, kind=i.kind, label=i.label, content=i.content,
                 status=i.status, depth=i.depth, order=order, priority=i.priority, data=dict(i.data or {}),
                 created_at=now,
                 # Set here, not by the database, so the returned node is complete without a re-read.
                 started_at=now if i.status == NodeStatus.DONE else None,
                 finished_at=now if i.status == NodeStatus.DONE else None)
            for i in inputs
        ]
        try:
            with self._session() as s:
                s.add_all(nodes)
                # The ids: one INSERT ... RETURNING on PostgreSQL; one INSERT per node on SQLite,
                # where the ORM cannot otherwise tie the returned ids to the nodes.
                s.flush()
                edges = [dict(run_id=run_id, src=i.parent_id, dst=n.id, kind=i.edge_kind, data={})
                         for i, n in zip(inputs, nodes) if i.parent_id is not None]
                bump = {"node_count": _runs.c.node_count + len(nodes), "updated_at": now}
                if edges:  # nothing to read back: one multi-row INSERT, with the bump on PostgreSQL
                    self._insert_rows_with_bump(s, lambda rows: insert(Edge.__table__).values(rows), edges,
                                                run_id, **bump)
                else:
                    s.execute(self._bump(run_id, **bump))
                s.commit()
        except IntegrityError as exc:
            # The keys refused the run or a parent: say which, in words.
            self.get_run(run_id)
            parents = sorted({i.parent_id for i in inputs if i.parent_id is not None})
            if not parents:
                raise
            raise ValueError(f"a parent ({', '.join(map(str, parents))}) is not a node of run '{run_id}'") from exc
        return nodes

    def remove_edge(self, run_id: str, src: int, dst: int, kind: str) -> bool:
        """Remove the edge src -> dst of this kind; whether there was one."""
        with self._session() as s:
            result = s.exec(delete(Edge).where(Edge.run_id == run_id, Edge.src == src, Edge.dst == dst,
                                               Edge.kind == kind))
            if result.rowcount:
                s.exec(update(Run).where(col(Run.id) == run_id).values(version=Run.version + 1))
            s.commit()
        return bool(result.rowcount)

    def add_edge(self, run_id: str, src: int, dst: int, kind: str, data: dict[str, Any] | None = None) -> Edge:
        """The edge src -> dst of this kind; an existing one is returned as it is (idempotent).

        Both ends must be nodes of the run (ValueError otherwise; the database's keys check it)."""
        existing = self._find_edge(run_id, src, dst, kind)
        if existing is not None:
            return existing
        edge = Edge(run_id=run_id, src=src, dst=dst, kind=kind, data=dict(data or {}))
        try:
            with self._session() as s:
                s.add(edge)
                s.exec(update(Run).where(col(Run.id) == run_id).values(version=Run.version + 1))
                s.commit()
        except IntegrityError as exc:
            # Either another worker added the same edge first (unique key), or an end is not a
            # node of this run (foreign keys): the re-read tells which.
            existing = self._find_edge(run_id, src, dst, kind)
            if existing is not None:
                return existing
            raise ValueError(f"cannot link {src} -> {dst}: both must be nodes of run '{run_id}'") from exc
        return edge

    def _find_edge(self, run_id: str, src: int, dst: int, kind: str) -> Edge | None:
        with self._session() as s:
            return s.exec(
                select(Edge).where(Edge.run_id == run_id, Edge.src == src, Edge.dst == dst, Edge.kind == kind)
            ).first()

    def get_node(self, node_id: int) -> Node:
        with self._session() as s:
            node = s.get(Node, node_id)
        if node is None:
            raise NodeNotFound(node_id)
        return node

    def update_node(self, node_id: int, *, merge_data: dict[str, Any] | None = None, **values: Any) -> Node:
        """Set columns (`data=` replaces the node's data); `merge_data` is merged into its `data`.

        Without `merge_data` (or with `data=` too, merged over it here): one `UPDATE nodes ...
        RETURNING`, no read. With `merge_data` alone the stored data is read first (and locked on
        PostgreSQL, so concurrent merges do not lose keys). Every update also recomputes the node's
        usage totals from its LLM calls, in the same statement."""
        # The read locks FOR NO KEY UPDATE (`key_share=True`), as the UPDATE does anyway. FOR UPDATE
        # would also block the key-share locks of inserts that reference the node (the links of
        # its sources) while they hold the run's row, which this update waits for next: a deadlock.
        with self._session() as s:
            if merge_data:
                if "data" in values:
                    values["data"] = {**(values["data"] or {}), **merge_data}
                else:
                    row = s.execute(
                        sa_select(_nodes.c.data).where(_nodes.c.id == node_id).with_for_update(key_share=True)
                    ).first()
                    if row is None:
                        raise NodeNotFound(node_id)
                    values["data"] = {**(row.data or {}), **merge_data}
            node = self._write_node(s, node_id, values)
            if node is None:
                raise NodeNotFound(node_id)
            s.commit()  # expire_on_commit=False: `node` keeps the returned values, no re-read
        return node

    def _write_node(self, s: Session, node_id: int, values: dict[str, Any]) -> Node | None:
        """`UPDATE nodes SET values, usage totals WHERE id = node_id RETURNING *` and the version
        bump of its run; None when there is no such node (nothing written)."""
        write = (
            update(_nodes)
            .where(_nodes.c.id == node_id)
            .values({**values, **_node_usage_columns()})
            .returning(*_nodes.c)
        )
        bump = {"updated_at": utcnow()}
        if self._pg:
            # WITH changed AS (UPDATE nodes ... RETURNING *), bumped AS (UPDATE runs ... WHERE id =
            # (SELECT run_id FROM changed)) SELECT * FROM changed: the node's row is locked first.
            changed = write.cte("changed_node")
            bumped = self._bump(sa_select(changed.c.run_id).scalar_subquery(), **bump).cte("bumped_run")
            return s.scalars(sa_select(Node).from_statement(sa_select(changed).add_cte(bumped))).first()
        node = s.scalars(sa_select(Node).from_statement(write)).first()
        if node is not None:
            s.execute(self._bump(node.run_id, **bump))
        return node

    @staticmethod
    def _data_values(merge: dict[str, Any] | None, replace: dict[str, Any] | None) -> dict[str, Any]:
        """`update_node` keywords for `data=` (merge, as before) and `replace_data=`."""
        if merge is not None and replace is not None:
            raise ValueError("give data= (merged into the node's data) or replace_data=, not both")
        if replace is not None:
            return {"data": dict(replace)}
        return {"merge_data": merge}

    def start_node(
        self, node_id: int, *, data: dict[str, Any] | None = None, replace_data: dict[str, Any] | None = None
    ) -> Node:
        """Mark a node running; `data` is merged into its data (a read first), `replace_data`
        replaces it (one UPDATE)."""
        return self.update_node(node_id, status=NodeStatus.RUNNING, started_at=utcnow(), error="",
                                **self._data_values(data, replace_data))

    def finish_node(
        self,
        node_id: int,
        *,
        content: str | None = None,
        data: dict[str, Any] | None = None,
        label: str | None = None,
        replace_data: dict[str, Any] | None = None,
    ) -> Node:
        """Mark a node done; `data` is merged into its data (a read first), `replace_data`
        replaces it (one UPDATE, no read)."""
        values: dict[str, Any] = {"status": NodeStatus.DONE, "finished_at": utcnow()}
        if content is not None:
            values["content"] = content
        if label is not None:
            values["label"] = label
        return self.update_node(node_id, **values, **self._data_values(data, replace_data))

    def fail_node(
        self, node_id: int, error: str, *, data: dict[str, Any] | None = None,
        replace_data: dict[str, Any] | None = None,
    ) -> Node:
        """Mark a node failed; `data` is merged, `replace_data` replaces (as `finish_node`)."""
        return self.update_node(node_id, status=NodeStatus.FAILED, error=error, finished_at=utcnow(),
                                **self._data_values(data, replace_data))

    def node_usage(self, node_id: int) -> tuple[int, int, float, float]:
        """A node's exact usage so far, (prompt tokens, completion tokens, cost, LLM seconds), from
        its LLM calls: one SELECT. (The node's columns are brought up to date by its next update.)"""
        usage = _node_usage_columns()
        with self._session() as s:
            row = s.execute(
                sa_select(usage["prompt_tokens"], usage["completion_tokens"], usage["cost"], usage["latency_s"])
                .where(_nodes.c.id == node_id)
            ).first()
        if row is None:
            raise NodeNotFound(node_id)
        return int(row[0]), int(row[1]), float(row[2]), float(row[3])

    def list_nodes(self, run_id: str, *, kind: str | None = None, status: str | None = None) -> list[Node]:
        stmt = select(Node).where(Node.run_id == run_id)
        if kind:
            stmt = stmt.where(Node.kind == kind)
        if status:
            stmt = stmt.where(Node.status == status)
        with self._session() as s:
            return list(s.exec(stmt.order_by(col(Node.id))).all())

    def children(self, node_id: int) -> list[Node]:
        with self._session() as s:
            return list(s.exec(select(Node).where(Node.parent_id == node_id).order_by(col(Node.id))).all())

    def frontier(
        self, run_id: str, kinds: Iterable[str], statuses: Iterable[str] = NodeStatus.UNFINISHED
    ) -> list[Node]:
        """The run's nodes of these kinds and statuses (pending or running by default), by id."""
        stmt = select(Node).where(
            Node.run_id == run_id, col(Node.kind).in_(list(kinds)), col(Node.status).in_(list(statuses))
        )
        with self._session() as s:
            return list(s.exec(stmt.order_by(col(Node.id))).all())

    def list_edges(self, run_id: str, kind: str | None = None) -> list[Edge]:
        stmt = select(Edge).where(Edge.run_id == run_id)
        if kind is not None:
            stmt = stmt.where(Edge.kind == kind)
        with self._session() as s:
            return list(s.exec(stmt.order_by(col(Edge.id))).all())

    def reset_unfinished_nodes(self, run_id: str) -> int:
        """Nodes left `running` by a stopped or dead worker go back to `pending` (for resume)."""
        with self._session() as s:
            result = s.execute(
                update(_nodes)
                .where(_nodes.c.run_id == run_id, _nodes.c.status == NodeStatus.RUNNING)
                .values(status=NodeStatus.PENDING, started_at=None, **_node_usage_columns())
            )
            s.commit()
        return result.rowcount

    def snapshot(self, run_id: str) -> GraphSnapshot:
        with self._session() as s:
            run = s.get(Run, run_id)
            if run is None:
                raise RunNotFound(run_id)
            nodes = list(s.exec(select(Node).where(Node.run_id == run_id).order_by(col(Node.id))).all())
            edges = list(s.exec(select(Edge).where(Edge.run_id == run_id).order_by(col(Edge.id))).all())
        return GraphSnapshot(run=run, nodes=nodes, edges=edges)

    # --------------------------------------------------------------- sources

    def add_sources(
        self, run_id: str, inputs: Sequence[SourceInput], *, node_id: int | None = None
    ) -> list[Source]:
        """Store sources (one row per run and ref) and link them to `node_id` in the given order;
        one detached Source (with its id) per input, in input order, duplicates included.

        A stored ref keeps its row (title, url...) and its text becomes the new read followed by the
        earlier reads' lines it lacks (`united_text`). One SELECT of the stored texts, one `INSERT ...
        ON CONFLICT (run_id, ref) DO UPDATE ... RETURNING` for the batch (a text at least as long
        wins), one `INSERT ... ON
        CONFLICT DO NOTHING` of the links, the version bump (with the links on PostgreSQL), one
        COMMIT. Safe under concurrency: the database resolves a ref inserted by two workers at once
        (two reads of one page united at the same moment keep the longer union)."""
        if not inputs:
            return []
        # One entry per ref (a statement cannot touch a row twice): the first occurrence gives
        # the row and the rank; the longest text wins.
        wanted: dict[str, SourceInput] = {}
        rank: dict[str, int] = {}
        for position, item in enumerate(inputs):
            known = wanted.get(item.ref)
            if known is None:
                wanted[item.ref], rank[item.ref] = item, position
            else:
                wanted[item.ref] = replace(known, text=united_text(known.text, item.text))
        now = utcnow()
        # In ref order: concurrent batches lock the rows they share in the same order (no deadlock).
        rows = [dict(run_id=run_id, ref=ref, kind=item.kind, url=item.url, title=item.title,
                     snippet=item.snippet, text=item.text, created_at=now)
                for ref, item in sorted(wanted.items())]
        table = Source.__table__
        by_ref: dict[str, Source] = {}
        with self._session() as s:
            stored = dict(s.exec(select(Source.ref, Source.text).where(
                Source.run_id == run_id, col(Source.ref).in_(list(wanted)))).all()) if wanted else {}
            for row in rows:
                if row["ref"] in stored:
                    row["text"] = united_text(stored[row["ref"]], row["text"])
            for chunk in _chunks(rows):
                upsert = self._insert_on_conflict(table).values(chunk)
                # As long or longer: the united text (newest read first) may reorder as many characters.
                longer = func.length(upsert.excluded.text) >= func.length(table.c.text)
                upsert = upsert.on_conflict_do_update(
                    index_elements=[table.c.run_id, table.c.ref],
                    set_={"text": case((longer, upsert.excluded.text), else_=table.c.text)},
                ).returning(*table.c)
                by_ref.update((source.ref, source)
                              for source in s.scalars(sa_select(Source).from_statement(upsert)))
            if node_id is None:
                s.execute(self._bump(run_id))
            else:
                links = sorted((by_ref[ref].id, rank[ref], item.score) for ref, item in wanted.items())
                self._insert_rows_with_bump(s, lambda chunk: self._link_rows(node_id, chunk), links, run_id)
            s.commit()
        return [by_ref[item.ref] for item in inputs]

    def _link_rows(self, node_id: int, links: Sequence[tuple[int, int, float]]):
        """`INSERT INTO node_sources ... ON CONFLICT DO NOTHING` of (source id, rank, score)."""
        table = NodeSource.__table__
        return (
            self._insert_on_conflict(table)
            .values([dict(node_id=node_id, source_id=sid, rank=r, score=score) for sid, r, score in links])
            .on_conflict_do_nothing(index_elements=[table.c.node_id, table.c.source_id])
        )

    def link_sources(self, node_id: int, source_ids: Sequence[int]) -> None:
        """Link stored sources to a node, ranked by their position; existing links are kept.
        One `INSERT ... ON CONFLICT DO NOTHING`, one COMMIT."""
        first: dict[int, int] = {}
        for position, source_id in enumerate(source_ids):
            first.setdefault(source_id, position)
        if not first:
            return
        with self._session() as s:
            for chunk in _chunks(sorted((sid, r, 0.0) for sid, r in first.items())):
                s.execute(self._link_rows(node_id, chunk))
            s.commit()

    def list_sources(self, run_id: str) -> list[Source]:
        with self._session() as s:
            return list(s.exec(select(Source).where(Source.run_id == run_id).order_by(col(Source.id))).all())

    def sources_for_node(self, node_id: int) -> list[Source]:
        with self._session() as s:
            stmt = (
                select(Source)
                .join(NodeSource, col(NodeSource.source_id) == col(Source.id))
                .where(NodeSource.node_id == node_id)
                .order_by(col(NodeSource.rank))
            )
            return list(s.exec(stmt).all())

    def node_source_links(self, run_id: str) -> list[NodeSource]:
        with self._session() as s:
            stmt = (
                select(NodeSource)
                .join(Node, col(Node.id) == col(NodeSource.node_id))
                .where(Node.run_id == run_id)
            )
            return list(s.exec(stmt).all())

    # ------------------------------------------------------------- LLM usage

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
        """Store one call and add it to the run's totals atomically: INSERT + UPDATE of the run (one
        statement on PostgreSQL) + COMMIT. The node's totals are recomputed from its calls by its
        next update (and when the run ends); `node_usage` reads them live."""
        call = LLMCall(run_id=run_id, node_id=node_id, purpose=purpose, model=model,
                       prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cost=cost,
                       latency_s=latency_s, attempts=attempts, ok=ok, error=error[:2000])
        with self._session() as s:
            self._write_with_bump(
                s, insert(_calls).values(**call.model_dump(exclude={"id"})), run_id,
                prompt_tokens=_runs.c.prompt_tokens + prompt_tokens,
                completion_tokens=_runs.c.completion_tokens + completion_tokens,
                cost=_runs.c.cost + cost,
                llm_calls=_runs.c.llm_calls + 1,
                updated_at=utcnow(),
            )
            s.commit()

    def run_usage(self, run_id: str) -> tuple[int, float]:
        """(total tokens, total cost) of a run so far."""
        with self._session() as s:
            row = s.exec(
                select(Run.prompt_tokens, Run.completion_tokens, Run.cost).where(Run.id == run_id)
            ).first()
        if row is None:
            raise RunNotFound(run_id)
        return row[0] + row[1], row[2]

    def list_llm_calls(self, run_id: str) -> list[LLMCall]:
        with self._session() as s:
            return list(s.exec(select(LLMCall).where(LLMCall.run_id == run_id).order_by(col(LLMCall.id))).all())

    # -------------------------------------------------------------- commands

    def enqueue_command(self, run_id: str, kind: str, payload: dict[str, Any] | None = None) -> Command:
        command = Command(run_id=run_id, kind=kind, payload=payload or {})
        with self._session() as s:
            # The version bump first: it says whether the run exists (no SELECT for that).
            if s.execute(self._bump(run_id)).rowcount == 0:
                raise RunNotFound(run_id)
            s.add(command)
            s.commit()  # id from the INSERT, the rest set here: no re-read
        return command

    def take_commands(self, run_id: str, kinds: Iterable[str] | None = None) -> list[Command]:
        """Claim queued commands in order. A command is taken by exactly one worker: the claim is
        one `UPDATE ... WHERE status = 'queued' RETURNING id`, whose rows say which ones this
        worker won (a concurrent claimer's commit makes the row fail the WHERE)."""
        stmt = select(Command).where(Command.run_id == run_id, Command.status == CommandStatus.QUEUED)
        if kinds is not None:
            stmt = stmt.where(col(Command.kind).in_(list(kinds)))
        now = utcnow()
        with self._session() as s:
            queued = list(s.exec(stmt.order_by(col(Command.id))).all())
            if not queued:
                return []  # the usual case at a checkpoint: one SELECT, no write
            won = set(s.exec(
                update(Command)
                .where(col(Command.id).in_([c.id for c in queued]), col(Command.status) == CommandStatus.QUEUED)
                .values(status=CommandStatus.TAKEN, taken_at=now)
                .returning(col(Command.id))
                .execution_options(synchronize_session=False)
            ).scalars())
            s.commit()
        taken = [c for c in queued if c.id in won]
        for command in taken:
            command.status, command.taken_at = CommandStatus.TAKEN, now
        return taken

    def requeue_taken_commands(self, run_id: str) -> int:
        """Commands taken by a worker that died go back to the queue (for resume)."""
        with self._session() as s:
            result = s.exec(
                update(Command)
                .where(col(Command.run_id) == run_id, col(Command.status) == CommandStatus.TAKEN)
                .values(status=CommandStatus.QUEUED, taken_at=None)
            )
            s.commit()
        return result.rowcount

    def last_command_applied_at(self, run_id: str, kinds: Iterable[str]) -> datetime | None:
        """When the run's latest command of these kinds was applied (None: none was)."""
        kinds = list(kinds)
        if not kinds:
            return None
        with self._session() as s:
            return s.exec(select(func.max(Command.done_at)).where(
                Command.run_id == run_id, Command.status == CommandStatus.DONE, col(Command.kind).in_(kinds))).one()

    def complete_command(self, command_id: int, *, ok: bool = True, error: str = "") -> None:
        with self._session() as s:
            s.exec(
                update(Command)
                .where(col(Command.id) == command_id)
                .values(
                    status=CommandStatus.DONE if ok else CommandStatus.FAILED,
                    error=error,
                    done_at=utcnow(),
                )
            )
            s.commit()

    def list_commands(self, run_id: str, *, status: str | None = None) -> list[Command]:
        stmt = select(Command).where(Command.run_id == run_id)
        if status:
            stmt = stmt.where(Command.status == status)
        with self._session() as s:
            return list(s.exec(stmt.order_by(col(Command.id))).all())

    # ------------------------------------------------------------ run events

    def add_event(self, run_id: str, kind: str, text: str, *, node_id: int | None = None,
                  data: dict[str, Any] | None = None) -> None:
        """One line of the run's step log, and the run's version bump (the live view re-reads on
        it): one statement on PostgreSQL, two on SQLite, one COMMIT."""
        event = RunEvent(run_id=run_id, node_id=node_id, kind=kind, text=text, data=dict(data or {}))
        with self._session() as s:
            self._write_with_bump(s, insert(_events).values(**event.model_dump(exclude={"id"})), run_id)
            s.commit()

    def list_events(self, run_id: str, *, after_id: int | None = None, limit: int | None = None,
                    kinds: Iterable[str] | None = None, node_id: int | None = None) -> list[RunEvent]:
        """The run's events, newest first; only those after `after_id` (what a reader has not
        seen yet), of `kinds`, of one node, at most `limit`."""
        stmt = select(RunEvent).where(RunEvent.run_id == run_id)
        if after_id is not None:
            stmt = stmt.where(col(RunEvent.id) > after_id)
        if kinds is not None:
            stmt = stmt.where(col(RunEvent.kind).in_(list(kinds)))
        if node_id is not None:
            stmt = stmt.where(RunEvent.node_id == node_id)
        stmt = stmt.order_by(col(RunEvent.id).desc())
        if limit is not None:
            stmt = stmt.limit(limit)
        with self._session() as s:
            return list(s.exec(stmt).all())

    # --------------------------------------------------------------- reports

    def save_report(self, run_id: str, markdown: str, *, kind: str = "final", data: dict[str, Any] | None = None) -> Report:
        report = Report(run_id=run_id, kind=kind, markdown=markdown, data=data or {})
        with self._session() as s:
            s.add(report)
            s.exec(update(Run).where(col(Run.id) == run_id).values(version=Run.version + 1))
            s.commit()  # id from the INSERT, the rest set here: no re-read
        return report

    def latest_report(self, run_id: str, kind: str = "final") -> Report | None:
        with self._session() as s:
            return s.exec(
                select(Report)
                .where(Report.run_id == run_id, Report.kind == kind)
                .order_by(col(Report.id).desc())
                .limit(1)
            ).first()

    def list_reports(self, run_id: str) -> list[Report]:
        with self._session() as s:
            return list(s.exec(select(Report).where(Report.run_id == run_id).order_by(col(Report.id))).all())

    # ------------------------------------------------------------ run states

    def save_run_state(self, run_id: str, name: str, data: dict[str, Any], *, schema: int = 1) -> RunState:
        """Store the next version (1, 2, 3...) of a method's run-level state `name`.

        The run's version bump comes first and locks the run's row (PostgreSQL) or the database
        (SQLite), so concurrent savers of a run take turns: each then inserts max(version) + 1 in
        one `INSERT ... RETURNING`, which sees the previous saver's row. Then one COMMIT."""
        table = RunState.__table__
        next_version = (
            sa_select(func.coalesce(func.max(table.c.version), 0) + 1)
            .where(table.c.run_id == run_id, table.c.name == name)
            .scalar_subquery()
        )
        write = (
            insert(table)
            .values(run_id=run_id, name=name, version=next_version, schema=schema, data=dict(data),
                    created_at=utcnow())
            .returning(*table.c)
        )
        for attempt in range(3):  # the unique key stays the last guard (a writer that skips the lock)
            try:
                with self._session() as s:
                    if s.execute(self._bump(run_id, updated_at=utcnow())).rowcount == 0:
                        raise RunNotFound(run_id)
                    state = s.scalars(sa_select(RunState).from_statement(write)).one()
                    s.commit()
                return state
            except IntegrityError:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def latest_run_state(self, run_id: str, name: str) -> RunState | None:
        with self._session() as s:
            return s.exec(
                select(RunState)
                .where(RunState.run_id == run_id, RunState.name == name)
                .order_by(col(RunState.version).desc())
                .limit(1)
            ).first()

    def list_run_states(self, run_id: str, name: str | None = None) -> list[RunState]:
        """Every stored version, by name then version."""
        stmt = select(RunState).where(RunState.run_id == run_id)
        if name is not None:
            stmt = stmt.where(RunState.name == name)
        with self._session() as s:
            return list(s.exec(stmt.order_by(col(RunState.name), col(RunState.version))).all())
