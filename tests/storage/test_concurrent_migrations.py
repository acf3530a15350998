"""Issue 10, finding 3: several processes opening a fresh database at once all start cleanly.

Ten real processes run `thoughtmap list` (the CLI's `main`) on one new database at the same
moment, several rounds, a new database each round. Each process imports the CLI once, then waits
for a start signal per round, so their migrations really collide (ten plain `Popen`s are spread over
the interpreters' import time, which hides the race, and would cost that import time every round).
Before the fix, 6 to 9 of the ten failed in the first round ("table ... already exists",
duplicate keys on PostgreSQL, and now and then "database is locked" from SQLite's switch to WAL).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from storage import open_database
from storage.migrations import MIGRATIONS, applied_versions
from tests import REPO_ROOT
from tests.support.db_backends import _fresh_postgres_database, _postgres_url

ROOT = REPO_ROOT
PROCESSES = 10
ROUNDS = 4

LAUNCHER = """
import os, sys, time, traceback
import engine.services
from engine.cli import main

# A process that ends frees its database connections; this one serves several rounds, so it
# closes the services each round built.
built, real_build = [], engine.services.build_services
engine.services.build_services = lambda *a, **k: built.append(real_build(*a, **k)) or built[-1]

signals, urls = sys.argv[1], sys.argv[2:]
for round_no, url in enumerate(urls):
    os.environ["THOUGHTMAP_DATABASE_URL"] = url
    open(os.path.join(signals, f"ready-{round_no}-{os.getpid()}"), "w").close()
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(signals, f"go-{round_no}")):
        if time.monotonic() > deadline:
            raise SystemExit("no start signal")
        time.sleep(0.002)
    try:
        code = main(["list"])
    except BaseException:
        traceback.print_exc()
        code = 1
    for services in built:
        services.close()
    built.clear()
    partial = os.path.join(signals, f"partial-{round_no}-{os.getpid()}")
    with open(partial, "w") as out:
        out.write(str(code))
    os.replace(partial, os.path.join(signals, f"exit-{round_no}-{os.getpid()}"))  # complete when seen
"""


def _wait_for_files(signals: Path, prefix: str, procs: list[subprocess.Popen]) -> list[Path]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = list(signals.glob(f"{prefix}-*"))
        if len(found) == PROCESSES:
            return found
        if any(proc.poll() not in (None, 0) for proc in procs):
            break  # a process died outside main(): its stderr says why
        time.sleep(0.005)
    raise AssertionError(
        f"only {len(list(signals.glob(prefix + '-*')))} of {PROCESSES} processes reached "
        f"{prefix}:\n{_first_error(procs)}"
    )


def _first_error(procs: list[subprocess.Popen]) -> str:
    """The first error a process printed (the others are stopped: they wait for the next round)."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
    stderr = [proc.communicate(timeout=30)[1] for proc in procs]
    return next((err for err in stderr if "Traceback" in err or "error" in err), "no error printed")


def _run_rounds(tmp_path: Path, urls: list[str]) -> None:
    signals = tmp_path / "signals"
    signals.mkdir()
    env = {**os.environ, "THOUGHTMAP_HOME": str(tmp_path / "home"), "THOUGHTMAP_LLM": "fake", "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", LAUNCHER, str(signals), *urls],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    try:
        for round_no, url in enumerate(urls):
            _wait_for_files(signals, f"ready-{round_no}", procs)
            (signals / f"go-{round_no}").touch()
            codes = [int(path.read_text()) for path in _wait_for_files(signals, f"exit-{round_no}", procs)]
            failed = sum(code != 0 for code in codes)
            if failed:
                raise AssertionError(
                    f"round {round_no}: {failed} of {PROCESSES} processes failed:\n{_first_error(procs)}"
                )
            _assert_migrated_once(url)
        for proc in procs:
            _out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
            assert "Traceback" not in err
            assert err.count("no runs stored yet") == len(urls)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _assert_migrated_once(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT version, count(*) FROM schema_migrations GROUP BY version")).all()
            assert conn.execute(text("SELECT count(*) FROM runs")).scalar_one() == 0
    finally:
        engine.dispose()
    assert sorted(tuple(row) for row in rows) == [(version, 1) for version, _name, _m in MIGRATIONS]


def test_ten_processes_migrate_a_fresh_sqlite_database_together(tmp_path):
    _run_rounds(tmp_path, [f"sqlite:///{tmp_path / f'round{n}.sqlite3'}" for n in range(ROUNDS)])


@pytest.mark.postgres
def test_ten_processes_migrate_a_fresh_postgres_database_together(tmp_path):
    base = _postgres_url()
    if not base:
        pytest.skip("no PostgreSQL test server (run the tests through scripts/test)")
    _run_rounds(tmp_path, [_fresh_postgres_database(base) for _ in range(ROUNDS)])


def test_opening_a_new_sqlite_database_waits_while_another_connection_writes_it(tmp_path):
    # SQLite refuses the switch of a new database to WAL at once ("database is locked", no busy
    # timeout) while another connection holds a write lock on it: the ten-process test hit this.
    path = tmp_path / "new.sqlite3"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    other.execute("CREATE TABLE written_by_the_other (x)")
    release = threading.Timer(0.5, lambda: other.execute("COMMIT"))
    release.start()
    started = time.monotonic()
    try:
        db = open_database(f"sqlite:///{path}")
    finally:
        release.join()
        other.close()
    assert time.monotonic() - started >= 0.4  # it waited for the other connection
    try:
        assert applied_versions(db.engine) == [version for version, _name, _m in MIGRATIONS]
        with db.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar_one() == "wal"
            assert conn.exec_driver_sql("SELECT count(*) FROM written_by_the_other").scalar_one() == 0
    finally:
        db.dispose()
