"""Run events: the step log, newest first. (Mixed into `storage.repository.Repository`.)"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import insert
from sqlmodel import col, select

from storage.models import (
    RunEvent,
)
from storage.repository_base import (
    RepositoryBase,
    _events,
)


class EventRows(RepositoryBase):
    def add_event(
        self, run_id: str, kind: str, text: str, *, node_id: int | None = None, data: Mapping[str, Any] | None = None
    ) -> None:
        """One line of the run's step log, and the run's version bump (the live view re-reads on
        it): one statement on PostgreSQL, two on SQLite, one COMMIT."""
        event = RunEvent(run_id=run_id, node_id=node_id, kind=kind, text=text, data=dict(data or {}))
        with self._session() as s:
            self._write_with_bump(s, insert(_events).values(**event.model_dump(exclude={"id"})), run_id)
            s.commit()

    def list_events(
        self,
        run_id: str,
        *,
        after_id: int | None = None,
        limit: int | None = None,
        kinds: Iterable[str] | None = None,
        node_id: int | None = None,
    ) -> list[RunEvent]:
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
