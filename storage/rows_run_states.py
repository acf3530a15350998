"""Run states: named, versioned, typed state of a whole run. (Mixed into `storage.repository.Repository`.)"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Insert, func, insert
from sqlalchemy import select as sa_select
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from storage.models import (
    RunState,
    table_of,
    utcnow,
)
from storage.repository_base import (
    RepositoryBase,
    RunNotFound,
)


def state_version_insert(
    run_id: str, name: str, data: Mapping[str, Any], schema: int, created_at: datetime | None = None
) -> Insert:
    """`INSERT` of the state's next version: max(version) + 1 of the run's states of that name, read
    by the statement itself, so a saver that holds the run's lock sees the version before its own."""
    table = table_of(RunState)
    next_version = (
        sa_select(func.coalesce(func.max(table.c.version), 0) + 1)
        .where(table.c.run_id == run_id, table.c.name == name)
        .scalar_subquery()
    )
    return insert(table).values(
        run_id=run_id,
        name=name,
        version=next_version,
        schema=schema,
        data=dict(data),
        created_at=created_at or utcnow(),
    )


class RunStateRows(RepositoryBase):
    def save_run_state(self, run_id: str, name: str, data: dict[str, Any], *, schema: int = 1) -> RunState:
        """Store the next version (1, 2, 3...) of a method's run-level state `name`.

        The run's version bump comes first and locks the run's row (PostgreSQL) or the database
        (SQLite), so concurrent savers of a run take turns: each then inserts max(version) + 1 in
        one `INSERT ... RETURNING`, which sees the previous saver's row. Then one COMMIT."""
        write = state_version_insert(run_id, name, data, schema).returning(*table_of(RunState).c)
        for attempt in range(3):  # the unique key stays the last guard (a writer that skips the lock)
            try:
                with self._session() as s:
                    if s.exec(self._bump(run_id, updated_at=utcnow())).rowcount == 0:
                        raise RunNotFound(run_id)
                    state: RunState = s.scalars(sa_select(RunState).from_statement(write)).one()
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
