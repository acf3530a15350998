"""Migration 7 (the knowledge graphs' tables) on a database of the previous release (migrations 1-6,
with a run), on SQLite and PostgreSQL; and the new tables at work: a graph keyed to a run is deleted
with it, a merge is one transaction, a chunk key is unique per graph."""

from __future__ import annotations

from sqlalchemy import inspect, text

from engine.knowledge.merge import merge_entity, merge_relation
from storage import Repository, open_database
from storage.knowledge import ChunkInput, EntityInput, KnowledgeStore, RelationInput
from storage.migrations import MIGRATIONS, applied_versions, migrate
from tests.support.db_backends import database_url  # noqa: F401 - the fixture

KG_TABLES = ("kg_relation_chunks", "kg_entity_chunks", "kg_relations", "kg_entities", "kg_chunks", "kg_graphs")


def test_migration_7_adds_the_knowledge_tables_to_a_database_of_the_previous_release(database_url):  # noqa: F811
    db = open_database(database_url)
    repo = Repository(db)
    old = repo.create_run(question="Who founded Arthur's Magazine?", method="rag", params={"top_k": 3})
    with db.engine.begin() as conn:  # back to the previous release: migrations 1-6
        for table in KG_TABLES:
            conn.execute(text(f"DROP TABLE {table}"))
        conn.execute(text("DELETE FROM schema_migrations WHERE version >= 7"))
    assert applied_versions(db.engine) == [1, 2, 3, 4, 5, 6]

    assert migrate(db.engine) == [v for v, _n, _m in MIGRATIONS if v >= 7]  # 7, and any later one
    assert applied_versions(db.engine) == [v for v, _n, _m in MIGRATIONS]
    assert set(KG_TABLES) <= set(inspect(db.engine).get_table_names())
    assert repo.get_run(old.id).question == "Who founded Arthur's Magazine?"

    store = KnowledgeStore(db)
    graph = store.open_graph(f"run:{old.id}:1200", scope="question", run_id=old.id, chunk_tokens=1200)
    assert store.open_graph(f"run:{old.id}:1200", scope="question", run_id=old.id, chunk_tokens=1200).id == graph.id
    chunk = ChunkInput(key="k1", ref="hotpotqa/Arthur's Magazine#0", title="Arthur's Magazine", text="T. S. Arthur.")
    assert store.add_chunks(graph.id, [chunk, chunk]) == 1
    assert store.add_chunks(graph.id, [chunk]) == 0  # a key is unique per graph
    stored = store.chunks_by_keys(graph.id, ["k1"])[0]
    entities = [
        EntityInput("arthur's magazine", "Arthur's Magazine", "work", "A periodical."),
        EntityInput("t. s. arthur", "T. S. Arthur", "person", "Its founder."),
    ]
    relation = RelationInput("t. s. arthur", "arthur's magazine", "Arthur founded it.", ("founding",))
    store.save_extraction(
        graph.id, stored.id, entities, [relation], merge_entity=merge_entity, merge_relation=merge_relation
    )
    counts = store.counts(graph.id)
    assert (counts.chunks_done, counts.entities, counts.relations) == (1, 2, 1)
    assert store.contents(graph.id).relations[0].keywords == ["founding"]

    repo.delete_run(old.id)  # the run's graph goes with it, and everything in it
    assert store.find_graph(f"run:{old.id}:1200") is None
    with db.engine.connect() as conn:
        for table in KG_TABLES:
            assert conn.execute(text(f"SELECT COUNT(*) FROM {table}")).scalar() == 0, table
    assert migrate(db.engine) == []  # recorded: never again
    db.dispose()
