"""Ordered, recorded schema migrations (in the manner of simonw/llm's migrations.py).

Each migration runs once, in order, and is recorded in `schema_migrations`. Migration 1 creates
the tables. Later migrations must check before they alter (the inspector is passed in), because a
database created from scratch already has the current columns through migration 1.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine
from sqlmodel import SQLModel

from storage import models

Migration = Callable[[Connection], None]


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


MIGRATIONS: list[tuple[int, str, Migration]] = [
    (1, "initial tables", _m001_initial_tables),
]


def applied_versions(engine: Engine) -> list[int]:
    with engine.connect() as conn:
        if not inspect(conn).has_table("schema_migrations"):
            return []
        rows = conn.execute(text("SELECT version FROM schema_migrations ORDER BY version"))
        return [row[0] for row in rows]


def migrate(engine: Engine) -> list[int]:
    """Apply the pending migrations; returns the versions applied now."""
    models.SchemaMigration.__table__.create(engine, checkfirst=True)
    done: list[int] = []
    for version, name, migration in MIGRATIONS:
        with engine.begin() as conn:
            # Re-check inside the transaction: two processes may start at the same time.
            exists = conn.execute(
                text("SELECT 1 FROM schema_migrations WHERE version = :v"), {"v": version}
            ).first()
            if exists:
                continue
            migration(conn)
            conn.execute(
                models.SchemaMigration.__table__.insert().values(
                    version=version, name=name, applied_at=models.utcnow()
                )
            )
            done.append(version)
    return done
