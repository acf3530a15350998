"""Ordered, recorded schema migrations (in the manner of simonw/llm's migrations.py).

Each migration runs once, in order, and is recorded in `schema_migrations`. Migration 1 creates
the tables. Later migrations must check before they alter (the inspector is passed in), because a
database created from scratch already has the current columns through migration 1.

Several processes may open a new database at the same moment (the app and a few CLI commands):
the pending migrations run under a database-wide lock, in one transaction that also creates
`schema_migrations`, so exactly one process applies them and the others find them recorded.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine
from sqlmodel import SQLModel

from storage import models

Migration = Callable[[Connection], None]

# The PostgreSQL advisory lock that serialises migrations (advisory locks are per database).
_PG_LOCK_KEY = zlib.crc32(b"thoughtmap.schema_migrations")


def _m001_initial_tables(conn: Connection) -> None:
    tables = [
        models.Run.__table__,
        models.Node.__table__,
        models.Edge.__table__,
        models.Source.__table__,
        models.NodeSource.__table__,
        models.LLMCall.__table__,
        models.Command.__table__,
        models.Report.__table__,
    ]
    SQLModel.metadata.create_all(conn, tables=tables, checkfirst=True)


def _m002_run_warning(conn: Connection) -> None:
    # A `done` run that had failures says so (engine.methods.base.RunOutcome).
    if "warning" not in {c["name"] for c in inspect(conn).get_columns("runs")}:
        conn.execute(text("ALTER TABLE runs ADD COLUMN warning TEXT NOT NULL DEFAULT ''"))


MIGRATIONS: list[tuple[int, str, Migration]] = [
    (1, "initial tables", _m001_initial_tables),
    (2, "runs.warning", _m002_run_warning),
]


def _recorded(conn: Connection) -> set[int]:
    if not inspect(conn).has_table("schema_migrations"):
        return set()
    return {row[0] for row in conn.execute(text("SELECT version FROM schema_migrations"))}


def applied_versions(engine: Engine) -> list[int]:
    with engine.connect() as conn:
        return sorted(_recorded(conn))


@contextmanager
def _sqlite_write_lock(engine: Engine) -> Iterator[Connection]:
    # BEGIN IMMEDIATE takes the write lock before anything is read, so no other process can act
    # between our check and our create; the busy timeout (storage/db.py) makes the others wait.
    # AUTOCOMMIT keeps pysqlite from issuing its own (deferred) BEGIN.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.exec_driver_sql("ROLLBACK")
            raise
        conn.exec_driver_sql("COMMIT")


@contextmanager
def _postgres_lock(engine: Engine) -> Iterator[Connection]:
    # A transaction-scoped advisory lock: released by the commit (or rollback) of the same
    # transaction that holds the DDL, so the next process sees the tables when it gets the lock.
    with engine.begin() as conn:
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
        yield conn


def _locked_transaction(engine: Engine):
    dialect = engine.dialect.name
    if dialect == "sqlite":
        return _sqlite_write_lock(engine)
    if dialect == "postgresql":
        return _postgres_lock(engine)
    return engine.begin()  # other databases: one transaction, no cross-process lock


def migrate(engine: Engine) -> list[int]:
    """Apply the pending migrations; returns the versions applied now (by this process)."""
    if set(applied_versions(engine)) >= {version for version, _name, _m in MIGRATIONS}:
        return []  # the usual start-up: nothing to do, no write lock taken
    done: list[int] = []
    with _locked_transaction(engine) as conn:
        models.SchemaMigration.__table__.create(conn, checkfirst=True)
        recorded = _recorded(conn)  # checked under the lock: another process may have just finished
        for version, name, migration in MIGRATIONS:
            if version in recorded:
                continue
            migration(conn)
            conn.execute(
                models.SchemaMigration.__table__.insert().values(
                    version=version, name=name, applied_at=models.utcnow()
                )
            )
            done.append(version)
    return done
