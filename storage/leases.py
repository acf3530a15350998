"""Cross-process locks on PostgreSQL for distributed execution (THOUGHTMAP_EXECUTION=queue).

Both are session-level advisory locks, each held on a connection of its own: PostgreSQL releases
them the moment that connection ends, so a worker killed with SIGKILL (or a machine lost, once the
server notices the dead connection) never leaves a lock behind and nothing has to expire.

- `RunLease`: at most one process executes a run. A worker holds it for the whole execution.
- `SlotLocks`: N numbered slots shared by every process on the database, a semaphore: the LLM
  calls in flight across all workers never exceed N (engine/llm/limits.py waits on it).
- `SharedCooldown`: when an endpoint answers HTTP 429, until when every process holds back its
  calls (a row, timed by the database server's clock, so workers on machines whose clocks differ
  agree): ten workers do not each hit the limit.
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool, QueuePool

from storage.db import Database, DatabaseURLError


class LeaseUnavailable(DatabaseURLError):
    """The database cannot hold cross-process leases (it is not PostgreSQL)."""


def lock_key(namespace: str, name: str) -> int:
    """A signed 64-bit advisory-lock key for `name` within `namespace` (collisions: ~2^-64)."""
    digest = hashlib.blake2b(f"thoughtmap:{namespace}:{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _require_postgres(db: Database) -> None:
    if db.engine.dialect.name != "postgresql":
        raise LeaseUnavailable(
            "distributed execution (THOUGHTMAP_EXECUTION=queue) needs PostgreSQL: set THOUGHTMAP_DATABASE_URL="
            "postgresql+psycopg://user:password@host:5432/dbname"
        )


def _autocommit(engine: Engine) -> Connection:
    # No transaction is left open while a lock is held (idle in transaction blocks vacuum).
    return engine.connect().execution_options(isolation_level="AUTOCOMMIT")


class RunLease:
    """The right to execute a run, held by one process at a time."""

    def __init__(self, db: Database) -> None:
        _require_postgres(db)
        # One connection per held lease, closed on release: leases are few and long.
        self._engine = create_engine(db.url, poolclass=NullPool)

    @contextmanager
    def hold(self, run_id: str) -> Iterator[bool]:
        """Try to take the run's lease without waiting; yields whether it was taken, and keeps it
        until the block ends."""
        conn = _autocommit(self._engine)
        key = lock_key("run", run_id)
        try:
            taken = bool(conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar())
            try:
                yield taken
            finally:
                if taken:
                    conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
        finally:
            conn.close()

    def is_held(self, run_id: str) -> bool:
        """Whether some live session holds the run's lease now."""
        with _autocommit(self._engine) as conn:
            return bool(
                conn.execute(
                    text(
                        "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted "
                        "AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = :k)"
                    ),
                    {"k": lock_key("run", run_id)},
                ).scalar()
            )

    def dispose(self) -> None:
        self._engine.dispose()


class SlotLocks:
    """`slots` numbered advisory locks under one name: take any free one, give it back."""

    def __init__(self, db: Database, name: str, slots: int) -> None:
        _require_postgres(db)
        if slots < 1:
            raise ValueError(f"at least one slot is needed (got {slots})")
        self.slots = slots
        self._keys = [lock_key(f"slots:{name}", str(i)) for i in range(slots)]
        # A process never holds more than `slots` slots, so that many connections suffice.
        self._engine = create_engine(
            db.url, poolclass=QueuePool, pool_size=slots, max_overflow=0, pool_timeout=3600, pool_pre_ping=True
        )
        self._held: dict[int, Connection] = {}
        self._lock = threading.Lock()

    def try_acquire(self) -> int | None:
        """A free slot's number (now held by this process), or None when all are taken."""
        conn = _autocommit(self._engine)
        # One statement tries the slots in a random order and stops at the first it gets (no ORDER
        # BY: a sort would evaluate, and take, every free slot first), so waiters spread over the
        # slots and a miss costs one round trip.
        start = random.randrange(self.slots)
        order = self._keys[start:] + self._keys[:start]
        try:
            row = conn.execute(
                text(
                    "SELECT k.key FROM unnest(CAST(:keys AS bigint[])) WITH ORDINALITY AS k(key, n) "
                    "WHERE pg_try_advisory_lock(k.key) LIMIT 1"
                ),
                {"keys": order},
            ).first()
        except BaseException:
            conn.close()
            raise
        if row is None:
            conn.close()
            return None
        slot = self._keys.index(row[0])
        with self._lock:
            self._held[slot] = conn
        return slot

    def release(self, slot: int) -> None:
        with self._lock:
            conn = self._held.pop(slot)
        try:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": self._keys[slot]})
        finally:
            conn.close()

    def in_use(self) -> int:
        """Slots held now by every process on the database (for monitoring and tests)."""
        with _autocommit(self._engine) as conn:
            return int(
                conn.execute(
                    text(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                        "AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = ANY(CAST(:keys AS bigint[]))"
                    ),
                    {"keys": self._keys},
                ).scalar_one()
            )

    def dispose(self) -> None:
        self._engine.dispose()


class SharedCooldown:
    """The quiet an LLM endpoint asked for (HTTP 429 with its Retry-After), shared by every process."""

    def __init__(self, db: Database, name: str) -> None:
        _require_postgres(db)
        self.name = name
        self._engine = db.engine

    def extend(self, seconds: float) -> None:
        """No process calls the endpoint for `seconds` from now (a longer quiet already set stays)."""
        with self._engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO endpoint_cooldowns (name, until) VALUES (:name, now() + make_interval(secs => :s)) "
                    "ON CONFLICT (name) DO UPDATE SET until = GREATEST(endpoint_cooldowns.until, EXCLUDED.until)"
                ),
                {"name": self.name, "s": float(seconds)},
            )

    def seconds_left(self) -> float:
        with self._engine.connect() as conn:
            left = conn.execute(
                text("SELECT EXTRACT(EPOCH FROM (until - now())) FROM endpoint_cooldowns WHERE name = :name"),
                {"name": self.name},
            ).scalar()
        return max(0.0, float(left)) if left is not None else 0.0
