"""The task queue's own tables (procrastinate's schema) in our PostgreSQL database.

Created on first use of distributed execution, not by our migrations: a database that only ever
runs embedded never gets them. Processes starting together take the migrations' advisory lock, so
exactly one creates them. The schema text is procrastinate's (`SchemaManager.get_schema()`): its
version is the pinned one; upgrading procrastinate means applying its migration files (see its
documentation) before starting the new workers.
"""

from __future__ import annotations

from sqlalchemy import inspect, text

from storage.db import Database
from storage.leases import LeaseUnavailable
from storage.migrations import _PG_LOCK_KEY

QUEUE_TABLE = "procrastinate_jobs"


def ensure_queue_schema(db: Database, schema_sql: str) -> bool:
    """Create the queue's tables unless they exist; True when this call created them."""
    if db.engine.dialect.name != "postgresql":
        raise LeaseUnavailable("the task queue needs PostgreSQL (THOUGHTMAP_DATABASE_URL=postgresql+psycopg://...)")
    if inspect(db.engine).has_table(QUEUE_TABLE):
        return False
    with db.engine.begin() as conn:
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
        if inspect(conn).has_table(QUEUE_TABLE):
            return False  # another process made them while we waited for the lock
        # The schema is many statements with `%` in function bodies: sent as one simple query,
        # with no parameters, straight to psycopg (in this transaction, under the lock).
        driver = conn.connection.driver_connection
        if driver is None:
            raise RuntimeError("the database connection was closed before the queue's tables were made")
        driver.execute(schema_sql)
    return True
