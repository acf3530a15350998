"""Database fixtures: every storage test runs on SQLite and on the PostgreSQL server that
scripts/test starts (THOUGHTMAP_TEST_POSTGRES_URL). In CI a missing server is a failure."""

from __future__ import annotations

import os
import uuid

import pytest
from sqlalchemy import create_engine, text

from storage import Repository, open_database


def _postgres_url() -> str | None:
    url = os.environ.get("THOUGHTMAP_TEST_POSTGRES_URL")
    if not url and os.environ.get("CI"):
        pytest.fail("CI must run the storage tests on PostgreSQL: THOUGHTMAP_TEST_POSTGRES_URL is unset (use scripts/test)")
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
