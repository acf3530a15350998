"""A database that takes no more writes: its disk is full, or it became read-only.

Both are conditions of the machine, not of the data: the refused write's transaction is rolled
back, everything stored before it stays intact, and once space is freed (or the database is
writable again) the same writes succeed. The repository raises `DatabaseUnwritable` for them, so
the engine can stop a run and say what to do without knowing the database driver's errors.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.exc import DBAPIError

# SQLite's primary result codes (an extended code carries the primary one in its low byte).
_SQLITE_READONLY, _SQLITE_FULL = 8, 13
# PostgreSQL's SQLSTATEs: disk_full, read_only_sql_transaction (a standby, or default_transaction_read_only).
_PG_DISK_FULL, _PG_READ_ONLY = "53100", "25006"


class DatabaseUnwritable(RuntimeError):
    """The database refused a write: `kind` is FULL or READ_ONLY; `where` names the database
    (its URL without a password)."""

    FULL = "full"
    READ_ONLY = "read-only"

    def __init__(self, kind: str, where: str) -> None:
        self.kind = kind
        self.where = where
        what = (
            f"the disk holding the database ({where}) is full"
            if kind == self.FULL
            else f"the database ({where}) is read-only"
        )
        super().__init__(what)

    @property
    def fix(self) -> str:
        """What a person does before trying again, in a few words."""
        return "free space on that disk" if self.kind == self.FULL else "make the database writable again"


def _kind(error: BaseException) -> str | None:
    driver_error = error.orig if isinstance(error, DBAPIError) else error
    if isinstance(driver_error, sqlite3.Error):
        code = (getattr(driver_error, "sqlite_errorcode", None) or 0) & 0xFF
        return {_SQLITE_FULL: DatabaseUnwritable.FULL, _SQLITE_READONLY: DatabaseUnwritable.READ_ONLY}.get(code)
    sqlstate = getattr(driver_error, "sqlstate", None)  # psycopg's errors carry it
    if not isinstance(sqlstate, str):
        return None
    return {_PG_DISK_FULL: DatabaseUnwritable.FULL, _PG_READ_ONLY: DatabaseUnwritable.READ_ONLY}.get(sqlstate)


@contextmanager
def refused_writes(where: str) -> Iterator[None]:
    """Raise a full disk or a read-only database met inside as `DatabaseUnwritable` (from the
    driver's error); every other error passes as it is."""
    try:
        yield
    except DBAPIError as exc:
        kind = _kind(exc)
        if kind is None:
            raise
        raise DatabaseUnwritable(kind, where) from exc
