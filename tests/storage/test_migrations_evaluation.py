"""Migrations 5 and 6 (and the later ones) on a database of the previous release (migrations 1-4, with a run):
the run keeps everything, gains `search_exclusions` (empty), and the harness's tables appear."""

from __future__ import annotations

from sqlalchemy import inspect, text

from engine.evaluate.datasets import load_items
from storage import Repository, open_database
from storage.evaluation import EvaluationStore
from storage.migrations import MIGRATIONS, applied_versions, migrate
from tests.support.db_backends import database_url  # noqa: F401 - the fixture


def test_migrations_5_and_6_upgrade_a_database_of_the_previous_release(database_url):  # noqa: F811
    db = open_database(database_url)
    repo = Repository(db)
    old = repo.create_run(question="How do tides work?", method="rag", params={"top_k": 3})
    with db.engine.begin() as conn:  # back to the previous release: migrations 1-4
        for table in (
            "judgments",
            "benchmark_items",
            "benchmarks",
            "kg_relation_chunks",
            "kg_entity_chunks",
            "kg_relations",
            "kg_entities",
            "kg_chunks",
            "kg_graphs",
        ):
            conn.execute(text(f"DROP TABLE {table}"))
        conn.execute(text("ALTER TABLE runs DROP COLUMN search_exclusions"))
        conn.execute(text("DELETE FROM schema_migrations WHERE version >= 5"))
    assert applied_versions(db.engine) == [1, 2, 3, 4]

    assert migrate(db.engine) == [v for v, _n, _m in MIGRATIONS if v >= 5]  # 5, 6 and every later one
    assert applied_versions(db.engine) == [v for v, _n, _m in MIGRATIONS]
    tables = set(inspect(db.engine).get_table_names())
    assert {"benchmarks", "benchmark_items", "judgments"} <= tables
    kept = repo.get_run(old.id)
    assert (kept.question, kept.params, kept.search_exclusions) == ("How do tides work?", {"top_k": 3}, {})
    # The new tables work: a benchmark with its items, and a run with exclusions.
    store = EvaluationStore(db)
    item = load_items("freshwiki", limit=1)[0]
    bench = store.create_benchmark(
        dataset="freshwiki",
        methods=["rag"],
        items=[item.id],
        limit=1,
        seed=13,
        params={"rag": {}},
        llm_info={"kind": "fake"},
        search_mode="local",
        judges=["claims"],
    )
    assert store.get_benchmark(bench.id).judges == ["claims"]
    run = repo.create_run(
        question=item.question, method="rag", params={}, search_exclusions=item.exclusions.model_dump()
    )
    assert repo.get_run(run.id).search_exclusions["titles"] == [item.reference_title]
    assert migrate(db.engine) == []  # recorded: never again
    db.dispose()
