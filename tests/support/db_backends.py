"""Database fixtures: every storage test runs on SQLite and on the PostgreSQL server that
scripts/test starts (THOUGHTMAP_TEST_POSTGRES_URL). In CI a missing server is a failure."""

from __future__ import annotations

import os
import threading
import uuid
from collections import Counter
from contextlib import contextmanager

import pytest
from sqlalchemy import create_engine, event, text

from storage import Repository, open_database


def _postgres_url() -> str | None:
    url = os.environ.get("THOUGHTMAP_TEST_POSTGRES_URL")
    if not url and os.environ.get("CI"):
        pytest.fail(
            "CI must run the storage tests on PostgreSQL: THOUGHTMAP_TEST_POSTGRES_URL is unset (use scripts/test)"
        )
    return url


def _fresh_postgres_database(base_url: str) -> str:
    """A new empty database on the test server, so tests never see each other's rows."""
    name = f"tm_{uuid.uuid4().hex[:10]}"
    admin = create_engine(base_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return base_url.rsplit("/", 1)[0] + "/" + name


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'test.sqlite3'}"
    base = _postgres_url()
    if not base:
        pytest.skip("no PostgreSQL test server (run the tests through scripts/test)")
    return _fresh_postgres_database(base)


@pytest.fixture
def repo(database_url):
    db = open_database(database_url)
    yield Repository(db)
    db.dispose()


@contextmanager
def statements(repo):
    """Counts the statements the block sends, by first word (a PostgreSQL CTE is a `WITH`), and
    the COMMITs."""
    counts: Counter[str] = Counter()
    lock = threading.Lock()

    def on_statement(conn, cursor, statement, *args):
        with lock:
            counts[statement.split(None, 1)[0].upper()] += 1

    def on_commit(conn):
        with lock:
            counts["COMMIT"] += 1

    engine = repo.db.engine
    event.listen(engine, "before_cursor_execute", on_statement)
    event.listen(engine, "commit", on_commit)
    try:
        yield counts
    finally:
        event.remove(engine, "before_cursor_execute", on_statement)
        event.remove(engine, "commit", on_commit)


def run_threads(target, n: int = 4) -> None:
    errors: list[BaseException] = []

    def guarded(i):
        try:
            target(i)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
