"""The cross-process locks of distributed execution (storage/leases.py) on the PostgreSQL test server:
a run's lease is held by one session at a time and freed when its connection ends; the LLM slots
keep the calls in flight of several "processes" (each its own limiter and connections) within the limit."""

from __future__ import annotations

import threading
import time

import pytest

from engine.llm.limits import SharedConcurrencyLimiter
from storage import open_database
from storage.leases import LeaseUnavailable, RunLease, SharedCooldown, SlotLocks
from tests.support.db_backends import _fresh_postgres_database, _postgres_url, run_threads

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_db():
    base = _postgres_url()
    if not base:
        pytest.skip("no PostgreSQL test server (run the tests through scripts/test)")
    db = open_database(_fresh_postgres_database(base), run_migrations=False)
    yield db
    db.dispose()


def test_a_run_lease_is_held_once_and_freed_with_its_session(pg_db):
    first, second = RunLease(pg_db), RunLease(pg_db)
    try:
        with first.hold("run-a") as taken:
            assert taken and first.is_held("run-a")
            with second.hold("run-a") as again, second.hold("run-b") as other:
                assert (again, other) == (False, True)
        assert not first.is_held("run-a")
        with second.hold("run-a") as taken:
            assert taken
    finally:
        first.dispose()
        second.dispose()


def test_llm_slots_bound_the_calls_in_flight_of_all_processes(pg_db):
    limit = 2
    # Two limiters with their own connections stand for two worker processes.
    limiters = [SharedConcurrencyLimiter(limit, SlotLocks(pg_db, "llm", limit), poll_s=0.005) for _ in range(2)]
    in_flight, peak, lock = 0, 0, threading.Lock()

    def call(i: int) -> None:
        nonlocal in_flight, peak
        for _ in range(3):
            with limiters[i % 2]:
                with lock:
                    in_flight += 1
                    peak = max(peak, in_flight)
                time.sleep(0.01)
                with lock:
                    in_flight -= 1

    run_threads(call, n=8)
    assert 1 <= peak <= limit  # never passed
    assert limiters[0].slots.in_use() == 0  # every slot given back
    for limiter in limiters:
        limiter.slots.dispose()


def test_an_endpoints_429_quiets_every_worker():
    """The quiet an endpoint asked for is kept in the database: a 429 seen by one worker holds back
    the calls of the others (each its own limiter and connections), by the database's clock."""
    base = _postgres_url()
    if not base:
        pytest.skip("no PostgreSQL test server (run the tests through scripts/test)")
    db = open_database(_fresh_postgres_database(base))  # with the migrations: endpoint_cooldowns
    try:
        limiters = [
            SharedConcurrencyLimiter(2, SlotLocks(db, "llm", 2), cooldown=SharedCooldown(db, "llm")) for _ in range(2)
        ]
        assert SharedCooldown(db, "llm").seconds_left() == 0.0
        limiters[0].cool_down(1.5)  # (each limiter reads the database at most every 0.25 s)
        assert 1.0 < limiters[1].cooling_for() <= 1.5
        limiters[1].cool_down(0.1)  # a shorter quiet never cuts a longer one short
        assert SharedCooldown(db, "llm").seconds_left() > 1.0
        started = time.monotonic()
        with limiters[1]:
            assert time.monotonic() - started >= 1.0  # the other worker's call waited the quiet out
        assert SharedCooldown(db, "other-endpoint").seconds_left() == 0.0
        for limiter in limiters:
            limiter.slots.dispose()
    finally:
        db.dispose()


def test_leases_refuse_sqlite(tmp_path):
    db = open_database(f"sqlite:///{tmp_path / 'x.sqlite3'}")
    with pytest.raises(LeaseUnavailable, match="PostgreSQL"):
        RunLease(db)
    db.dispose()
