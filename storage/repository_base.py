"""The repository's shared base: the errors, the inputs and the helpers every aggregate's rows use,
and `RepositoryBase` (the database, the session, the run's version bump). `storage/repository.py`
puts the aggregates together; see its docstring for the round-trip rules."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeAlias, TypeVar

from sqlalchemy import ColumnElement, Insert, ScalarSelect, Table, Update, func, update
from sqlalchemy import select as sa_select
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session

from storage.db import Database
from storage.models import (
    Edge,
    LLMCall,
    Node,
    NodeSource,
    Run,
    RunEvent,
    table_of,
)
from storage.statuses import NodeStatus, RunStatus
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

_runs = table_of(Run)
_nodes = table_of(Node)
_calls = table_of(LLMCall)
_events = table_of(RunEvent)


def _node_usage_columns() -> dict[str, Any]:
    """A node's usage totals as correlated scalar subqueries over its LLM calls, for an UPDATE (or
    a SELECT) of `nodes`: `SET prompt_tokens = (SELECT coalesce(sum(...), 0) FROM llm_calls WHERE
    llm_calls.node_id = nodes.id), ...`."""

    def total(column: ColumnElement[Any], zero: float) -> ScalarSelect[Any]:
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


_Item = TypeVar("_Item")

# The dialect's own INSERT: both have ON CONFLICT (and `excluded`), SQLAlchemy's generic one has not.
UpsertInsert: TypeAlias = postgresql.Insert | sqlite.Insert


def _chunks(rows: list[_Item]) -> list[list[_Item]]:
    return [rows[start : start + _ROWS_PER_INSERT] for start in range(0, len(rows), _ROWS_PER_INSERT)]


class RepositoryBase:
    """What every aggregate's rows share: the database, the session, the run's version bump."""

    def __init__(self, db: Database) -> None:
        self.db = db
        # Names the database when it refuses writes: a SQLite file's path, or the URL without a password.
        # str(): an in-memory SQLite database has no path (None), and keeps the name it always had, "None".
        self._where = str(db.engine.url.database) if db.is_sqlite else db.display_url
        dialect = db.engine.dialect.name
        # PostgreSQL: a write and its run's version bump in one statement (a data-modifying CTE).
        self._pg = dialect == "postgresql"
        # The dialect's own INSERT, for ON CONFLICT (the same on SQLite and PostgreSQL).
        upserts: dict[str, Callable[[Table], UpsertInsert]] = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}
        self._upsert = upserts.get(dialect)
        self._local_user_id: int | None = None  # read once: the local user is never replaced

    def local_user_id(self) -> int:
        """The local user's id (`_local_user`), read once per repository."""
        if self._local_user_id is None:
            with self._session() as s:
                return self._local_user(s)
        return self._local_user_id

    def _local_user(self, s: Session) -> int:
        """The local user's id: the owner of what is made without a person (single-user mode)."""
        if self._local_user_id is None:
            from storage.users import local_user_id

            self._local_user_id = local_user_id(s)
        return self._local_user_id

    def _insert_on_conflict(self, table: Table) -> UpsertInsert:
        if self._upsert is None:
            raise NotImplementedError(
                f"the {self.db.engine.dialect.name} database is not supported: use SQLite or PostgreSQL"
            )
        return self._upsert(table)

    @cached_property
    def _links_insert(self) -> UpsertInsert:
        """`INSERT INTO node_sources ... ON CONFLICT DO NOTHING`, its rows given as parameters (an
        executemany, in order: the first link of a pair is kept). Built once per repository: a
        multi-row VALUES was built and compiled for every node's sources, a third of storing them."""
        table = table_of(NodeSource)
        return self._insert_on_conflict(table).on_conflict_do_nothing(
            index_elements=[table.c.node_id, table.c.source_id]
        )

    @cached_property
    def _edges_insert(self) -> UpsertInsert:
        """`INSERT INTO edges ... ON CONFLICT DO NOTHING`, its rows given as parameters (an executemany,
        in order: the first edge of a kind is kept), built once per repository (as `_links_insert`):
        the journal's batched edges and the edges to nodes just added."""
        table = table_of(Edge)
        return self._insert_on_conflict(table).on_conflict_do_nothing(
            index_elements=[table.c.run_id, table.c.src, table.c.dst, table.c.kind]
        )

    @staticmethod
    def _refresh_node_usage(s: Session, run_id: str) -> None:
        """Recompute the usage totals of the run's nodes that have LLM calls: one UPDATE (so calls
        recorded after a node's last update, e.g. by the report writer, are counted)."""
        s.execute(
            update(_nodes)
            .where(
                _nodes.c.run_id == run_id, _nodes.c.id.in_(sa_select(_calls.c.node_id).where(_calls.c.run_id == run_id))
            )
            .values(**_node_usage_columns())
        )

    @staticmethod
    def _bump(run_id: Any, **values: Any) -> Update:
        """`UPDATE runs SET version = version + 1 (, values) WHERE id = run_id` (a value or an expression)."""
        return update(_runs).where(_runs.c.id == run_id).values(version=_runs.c.version + 1, **values)

    def _insert_rows_with_bump(
        self,
        s: Session,
        insert_rows: Callable[[list[_Item]], Insert],
        rows: list[_Item],
        run_id: str,
        **bump_values: Any,
    ) -> None:
        """Multi-row INSERTs of `rows` (`insert_rows(chunk)` makes one) and the run's version bump,
        which rides with the last INSERT on PostgreSQL."""
        *first, last = _chunks(rows)
        for chunk in first:
            s.execute(insert_rows(chunk))
        self._write_with_bump(s, insert_rows(last), run_id, **bump_values)

    def _write_with_bump(self, s: Session, write: Insert, run_id: str, **bump_values: Any) -> None:
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
    def _session(self) -> Iterator[Session]:
        # A full disk or a read-only database is said as such (DatabaseUnwritable), not as a driver error.
        with refused_writes(self._where), Session(self.db.engine, expire_on_commit=False) as session:
            yield session
