"""The database engine factory: SQLite (WAL, busy timeout, foreign keys) or any SQLAlchemy URL."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError
from sqlmodel import Session, create_engine

from storage.migrations import migrate


class DatabaseURLError(ValueError):
    """THOUGHTMAP_DATABASE_URL is not a usable SQLAlchemy URL."""


@dataclass
class Database:
    url: str
    engine: Engine

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    @property
    def display_url(self) -> str:
        """The URL with any password hidden, for notices and logs."""
        return make_url(self.url).render_as_string(hide_password=True)

    def dispose(self) -> None:
        self.engine.dispose()


class Store:
    """Base of the stores that own a group of tables (evaluation, knowledge graphs): one session per
    operation, objects usable after their session closed."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @contextmanager
    def _session(self) -> Iterator[Session]:
        with Session(self.db.engine, expire_on_commit=False) as session:
            yield session


BUSY_TIMEOUT_S = 30


def _switch_to_wal(cursor) -> None:
    # Switching a new database to WAL needs an exclusive lock, and SQLite answers "database is
    # locked" at once, without the busy timeout, while another process starting at the same moment
    # holds one: wait here as the busy timeout would.
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _sqlite_pragmas(dbapi_connection, _record) -> None:  # pragma: no cover - driver callback
    cursor = dbapi_connection.cursor()
    _switch_to_wal(cursor)
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_S * 1000}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def open_database(url: str, *, run_migrations: bool = True) -> Database:
    """Open (and by default migrate) the database at `url`."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise DatabaseURLError(
            f"'{url}' is not a database URL. Use sqlite:///path/to/file.sqlite3 or "
            "postgresql+psycopg://user:password@host:5432/dbname."
        ) from exc
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        if database and database != ":memory:":
            Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_S},
            pool_size=10,
            max_overflow=20,
        )
        event.listen(engine, "connect", _sqlite_pragmas)
    else:
        engine = create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)
    db = Database(url=url, engine=engine)
    if run_migrations:
        migrate(engine)
    return db
