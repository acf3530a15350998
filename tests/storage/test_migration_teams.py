"""Migration 14 (users, shares, an owner for every run, benchmark and API token) on a copy of a real
database made by the release before it (`data/before_teams.sqlite3.gz`: six runs, one per method, a
benchmark of four items, a judgment, a knowledge graph, a steering command and an API token, made
with the CLI at commit bd84012), on SQLite and, loaded row by row, on PostgreSQL.

Every row of every table is kept as it was; every run, benchmark and token belongs to the local
user; the first admin to sign in takes them over, and nobody after."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest
from sqlalchemy import MetaData, create_engine, select, text

from storage import Repository, open_database
from storage.evaluation import EvaluationStore
from storage.migrations import MIGRATIONS, applied_versions
from storage.models import LOCAL_ISSUER
from storage.users import UserStore
from tests.support.db_backends import database_url  # noqa: F401  (fixture)

COPY = Path(__file__).parent / "data" / "before_teams.sqlite3.gz"
OWNED = ("runs", "benchmarks", "api_tokens")


def _unpacked(tmp_path: Path) -> Path:
    path = tmp_path / "before.sqlite3"
    with gzip.open(COPY) as packed, path.open("wb") as out:
        shutil.copyfileobj(packed, out)
    return path


def _rows(engine, meta: MetaData) -> dict[str, list[dict]]:
    """Every row of every table the old database had, in its old columns, in a stable order."""
    with engine.connect() as conn:
        out = {}
        for name, table in meta.tables.items():
            rows = [dict(r._mapping) for r in conn.execute(select(table))]
            columns = [c.name for c in table.columns]
            out[name] = sorted(({c: r[c] for c in columns} for r in rows), key=repr)
        return out


def _load_into(url: str, source_engine, meta: MetaData) -> None:
    """The old database's tables and rows, as they were, in another database (PostgreSQL)."""
    target = create_engine(url)
    for table in meta.tables.values():  # SQLite's type names, as the generic types PostgreSQL has
        for column in table.columns:
            column.type = column.type.as_generic()
    with source_engine.connect() as src, target.begin() as dst:
        meta.create_all(dst)
        for table in meta.sorted_tables:
            rows = [dict(r._mapping) for r in src.execute(select(table))]
            if rows:
                dst.execute(table.insert(), rows)
        for table in meta.sorted_tables:  # the ids go on from where the copy's ended
            if "id" in table.c and str(table.c.id.type) == "INTEGER":
                dst.execute(
                    text(
                        f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
                        f"COALESCE((SELECT MAX(id) FROM {table.name}), 0) + 1, false)"
                    )
                )
    target.dispose()


def test_every_row_is_kept_and_owned_by_the_local_user(database_url, tmp_path):  # noqa: F811
    old = _unpacked(tmp_path)
    source = create_engine(f"sqlite:///{old}")
    meta = MetaData()
    meta.reflect(source)
    before = _rows(source, meta)
    assert applied_versions(source)[-1] == 13
    assert {t: len(before[t]) for t in ("runs", "nodes", "benchmarks", "api_tokens", "commands", "judgments")} == {
        "runs": 10,
        "nodes": 76,
        "benchmarks": 1,
        "api_tokens": 1,
        "commands": 1,
        "judgments": 1,
    }
    if database_url.startswith("sqlite"):
        url = f"sqlite:///{old}"
    else:
        url = database_url
        _load_into(url, source, meta)
    source.dispose()

    db = open_database(url)
    assert applied_versions(db.engine) == sorted(v for v, _n, _m in MIGRATIONS)
    after = _rows(db.engine, meta)
    assert [m["version"] for m in after["schema_migrations"] if m not in before["schema_migrations"]] == [14]
    after["schema_migrations"] = before["schema_migrations"]
    assert after == before  # every old row, every old column, unchanged

    users = UserStore(db)
    [local] = users.list_users()
    assert local.issuer == LOCAL_ISSUER and local.is_admin
    with db.engine.connect() as conn:
        for table in OWNED:
            owners = {r[0] for r in conn.execute(text(f"SELECT user_id FROM {table}"))}
            assert owners == {local.id}, (table, owners)

    # New rows belong to the local user too, until someone signs in.
    repo = Repository(db)
    assert repo.create_run(question="a new one", method="rag", params={}).user_id == local.id

    # The first admin to sign in takes over everything the local user had; the next admin, nothing.
    admin = users.sign_in(
        issuer="https://id.example", subject="a-1", email="ada@example.org", name="Ada", is_admin=True
    )
    second = users.sign_in(issuer="https://id.example", subject="b-2", email="bo@example.org", name="Bo", is_admin=True)
    assert {r.user_id for r in repo.list_runs(limit=100)} == {admin.id}
    assert repo.count_runs(visible_to=admin.id) == 11 and repo.count_runs(visible_to=second.id) == 0
    assert [b.user_id for b in EvaluationStore(db).list_benchmarks()] == [admin.id]
    # Not the tokens: one made single-user may be in anyone's hands, and would act as the admin.
    with db.engine.connect() as conn:
        assert {r[0] for r in conn.execute(text("SELECT user_id FROM api_tokens"))} == {local.id}
    db.dispose()


def test_the_copy_is_the_release_before_teams():
    """The copy stays what it says: made before migration 14, so the test above migrates it."""
    with gzip.open(COPY) as packed:
        assert packed.read(16) == b"SQLite format 3\x00"
    assert 14 in {v for v, _n, _m in MIGRATIONS}


@pytest.fixture(autouse=True)
def _no_leftover(tmp_path):
    yield
    for wal in tmp_path.glob("*.sqlite3-*"):
        wal.unlink(missing_ok=True)
