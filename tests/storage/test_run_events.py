"""The step log's storage (`run_events`, migration 4) on SQLite and PostgreSQL: events are listed
newest first, after an id, by kind and node, limited; each one bumps the run's version; they go
with their run; a database of the previous release gains the table."""

from __future__ import annotations

from sqlalchemy import inspect, text

from storage import Repository, open_database
from storage.migrations import MIGRATIONS, applied_versions, migrate
from tests.support.db_backends import database_url, repo  # noqa: F401  (fixtures)


def _run(repo: Repository) -> str:
    return repo.create_run(question="How do tides work?", method="deot", params={}).id


def test_events_are_listed_newest_first_after_an_id_by_kind_and_node(repo):
    run_id = _run(repo)
    node = repo.add_node(run_id, kind="question", label="tides")
    repo.add_event(run_id, "run", "the run started", data={"phase": "started"})
    repo.add_event(run_id, "step", "planning the tasks", node_id=node.id, data={"prompt": "deot.plan_tasks"})
    repo.add_event(run_id, "search", "searched the corpus", node_id=node.id, data={"found": 3})
    repo.add_event(run_id, "step", "writing the report")

    events = repo.list_events(run_id)
    assert [e.text for e in events] == [
        "writing the report",
        "searched the corpus",
        "planning the tasks",
        "the run started",
    ]
    assert events[1].node_id == node.id and events[1].data == {"found": 3} and events[1].kind == "search"
    assert events[0].node_id is None and events[0].created_at is not None
    oldest = events[-1].id
    assert [e.text for e in repo.list_events(run_id, after_id=oldest, limit=2)] == [
        "writing the report",
        "searched the corpus",
    ]
    assert [e.text for e in repo.list_events(run_id, kinds=["run"])] == ["the run started"]
    assert [e.text for e in repo.list_events(run_id, node_id=node.id)] == ["searched the corpus", "planning the tasks"]
    other = _run(repo)
    assert repo.list_events(other) == []


def test_an_event_bumps_the_runs_version(repo):
    run_id = _run(repo)
    before = repo.run_version(run_id)
    repo.add_event(run_id, "step", "planning the tasks")
    assert repo.run_version(run_id) == before + 1


def test_events_go_with_their_run(repo):
    run_id = _run(repo)
    repo.add_event(run_id, "run", "the run started", data={"phase": "started"})
    repo.delete_run(run_id)
    assert repo.list_events(run_id) == []
    # The key cascades too (a run row deleted by anything else than the repository).
    kept = _run(repo)
    repo.add_event(kept, "run", "the run started", data={"phase": "started"})
    with repo.db.engine.begin() as conn:
        conn.execute(text("DELETE FROM runs WHERE id = :id"), {"id": kept})
    assert repo.list_events(kept) == []


def test_migration_4_adds_the_table_to_a_database_of_the_previous_release(database_url):
    db = open_database(database_url)
    later = [v for v, _n, _m in MIGRATIONS if v >= 4]
    with db.engine.begin() as conn:  # back to the previous release: migrations 1-3
        conn.execute(text("DROP TABLE run_events"))
        conn.execute(text(f"DELETE FROM schema_migrations WHERE version IN ({', '.join(map(str, later))})"))
    assert applied_versions(db.engine) == [1, 2, 3]
    run_id = Repository(db).create_run(question="How do tides work?", method="deot", params={}).id

    assert migrate(db.engine) == later  # 4, and the later ones: they check before they alter
    assert applied_versions(db.engine) == [v for v, _n, _m in MIGRATIONS]
    assert inspect(db.engine).has_table("run_events")
    repo = Repository(db)
    repo.add_event(run_id, "run", "the run started", data={"phase": "started"})
    assert [e.text for e in repo.list_events(run_id)] == ["the run started"]
    assert migrate(db.engine) == []  # recorded: never again
    db.dispose()
