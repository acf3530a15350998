"""Migration 10: DEoT's max_layers now counts the question (issue 17, item 1). A run or benchmark
stored before keeps the tree it asked for: its value goes up by one, on SQLite and PostgreSQL."""

from __future__ import annotations

from sqlalchemy import text

from engine.methods.registry import get_method
from storage import Repository, open_database
from storage.evaluation import EvaluationStore
from storage.migrations import applied_versions, migrate
from storage.models import Benchmark
from tests.support.db_backends import database_url  # noqa: F401 - the fixture


def test_migration_10_keeps_the_tree_a_stored_deot_run_asked_for(database_url):  # noqa: F811
    db = open_database(database_url)
    repo = Repository(db)
    deot = repo.create_run(question="Why do bees dance?", method="deot", params={"max_layers": 0, "max_aspects": 2})
    unset = repo.create_run(question="Why do bees dance?", method="deot", params={"max_aspects": 2})
    other = repo.create_run(question="Why do bees dance?", method="rag", params={"max_layers": 0})
    store = EvaluationStore(db)
    with db.engine.begin() as conn:  # back to a database written before the change
        conn.execute(text("DELETE FROM schema_migrations WHERE version >= 10"))
    bench_id = "b" * 12
    with db.engine.begin() as conn:
        conn.execute(
            Benchmark.__table__.insert().values(
                id=bench_id,
                dataset="researchy",
                methods=["deot"],
                limit=2,
                seed=13,
                params={"deot": {"max_layers": 2}, "rag": {"top_k": 3}},
                llm_info={},
                judges=[],
                note="",
            )
        )

    assert 10 in migrate(db.engine) and 10 in applied_versions(db.engine)
    assert repo.get_run(deot.id).params == {"max_layers": 1, "max_aspects": 2}
    assert repo.get_run(unset.id).params == {"max_aspects": 2}  # the default already counts the new way
    assert repo.get_run(other.id).params == {"max_layers": 0}  # not DEoT's parameter
    assert store.get_benchmark(bench_id).params == {"deot": {"max_layers": 3}, "rag": {"top_k": 3}}
    # The stored run's parameters are valid again for the method as it is now.
    assert get_method("deot").Params.model_validate(repo.get_run(deot.id).params).max_layers == 1
    assert 10 not in migrate(db.engine)  # recorded: never again
    db.dispose()
