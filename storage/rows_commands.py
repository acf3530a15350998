"""Commands: the run's steering queue (enqueued, taken, requeued, completed). (Mixed into `storage.repository.Repository`.)"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import func, update
from sqlmodel import col, select

from storage.models import (
    Command,
    CommandStatus,
    utcnow,
)
from storage.repository_base import (
    RepositoryBase,
    RunNotFound,
)


class CommandRows(RepositoryBase):
    def enqueue_command(self, run_id: str, kind: str, payload: dict[str, Any] | None = None) -> Command:
        command = Command(run_id=run_id, kind=kind, payload=payload or {})
        with self._session() as s:
            # The version bump first: it says whether the run exists (no SELECT for that).
            if s.exec(self._bump(run_id)).rowcount == 0:
                raise RunNotFound(run_id)
            s.add(command)
            s.commit()  # id from the INSERT, the rest set here: no re-read
        return command

    def take_commands(self, run_id: str, kinds: Iterable[str] | None = None) -> list[Command]:
        """Claim queued commands in order. A command is taken by exactly one worker: the claim is
        one `UPDATE ... WHERE status = 'queued' RETURNING id`, whose rows say which ones this
        worker won (a concurrent claimer's commit makes the row fail the WHERE)."""
        return self._take(run_id, kinds, see_others=False)[0]

    def poll_commands(self, run_id: str, kinds: Iterable[str]) -> tuple[list[Command], bool]:
        """`take_commands` of `kinds`, and whether commands of other kinds are queued, in the same
        SELECT (a run's control poll learns whether steering waits without a read of its own)."""
        return self._take(run_id, kinds, see_others=True)

    def _take(self, run_id: str, kinds: Iterable[str] | None, *, see_others: bool) -> tuple[list[Command], bool]:
        wanted = None if kinds is None else set(kinds)
        stmt = select(Command).where(Command.run_id == run_id, Command.status == CommandStatus.QUEUED)
        if wanted is not None and not see_others:
            stmt = stmt.where(col(Command.kind).in_(sorted(wanted)))
        now = utcnow()
        with self._session() as s:
            found = list(s.exec(stmt.order_by(col(Command.id))).all())
            queued = [c for c in found if wanted is None or c.kind in wanted]
            others = len(queued) < len(found)
            if not queued:
                return [], others  # the usual case at a checkpoint: one SELECT, no write
            won = set(
                s.exec(
                    update(Command)
                    .where(col(Command.id).in_([c.id for c in queued]), col(Command.status) == CommandStatus.QUEUED)
                    .values(status=CommandStatus.TAKEN, taken_at=now)
                    .returning(col(Command.id))
                    .execution_options(synchronize_session=False)
                ).scalars()
            )
            s.commit()
        taken = [c for c in queued if c.id in won]
        for command in taken:
            command.status, command.taken_at = CommandStatus.TAKEN, now
        return taken, others

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
            return s.exec(
                select(func.max(Command.done_at)).where(
                    Command.run_id == run_id, Command.status == CommandStatus.DONE, col(Command.kind).in_(kinds)
                )
            ).one()

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
