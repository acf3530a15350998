"""Migration 3 on a database of the previous release (migrations 1-2 applied, with data), on
SQLite and PostgreSQL: edges get `data`, a unique key and keys to nodes of their run (duplicates
merged into the lowest id), and OmniThink's concept_pool/outline reports move to run_states."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import Column, ForeignKey, Integer, MetaData, String, Table, insert, text
from sqlalchemy.exc import IntegrityError

from storage import Repository, models, open_database
from storage.migrations import MIGRATIONS, applied_versions
from tests.support.db_backends import database_url  # noqa: F401  (fixture)

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def old_schema() -> MetaData:
    """The tables as migrations 1-2 of the previous release made them: the unchanged ones from
    today's models, `nodes` without the (run_id, id) key, `edges` with its five columns."""
    meta = MetaData()
    for model in (models.Run, models.Source, models.LLMCall, models.Command, models.Report, models.SchemaMigration):
        model.__table__.to_metadata(meta)
    nodes = models.Node.__table__.to_metadata(meta)
    for constraint in [c for c in nodes.constraints if c.name == "uq_nodes_run_id_id"]:
        nodes.constraints.discard(constraint)
    models.NodeSource.__table__.to_metadata(meta)
    Table(
        "edges",
        meta,
        Column("id", Integer, primary_key=True),
        Column("run_id", String(32), ForeignKey("runs.id", ondelete="CASCADE"), nullable=False, index=True),
        Column("src", Integer, nullable=False, index=True),
        Column("dst", Integer, nullable=False, index=True),
        Column("kind", String(32), nullable=False),
    )
    return meta


def node(id_: int, run_id: str, parent: int | None = None) -> dict:
    return dict(
        id=id_,
        run_id=run_id,
        parent_id=parent,
        kind="topic",
        label=f"n{id_}",
        content="",
        status="done",
        depth=0,
        order=0,
        priority=0.0,
        data={},
        error="",
        prompt_tokens=0,
        completion_tokens=0,
        cost=0.0,
        latency_s=0.0,
        created_at=T0,
    )


def report(id_: int, run_id: str, kind: str, markdown: str, data: dict) -> dict:
    return dict(
        id=id_, run_id=run_id, kind=kind, markdown=markdown, data=data, created_at=T0 + dt.timedelta(seconds=id_)
    )


def build_old_database(url: str) -> None:
    db = open_database(url, run_migrations=False)
    meta = old_schema()
    with db.engine.begin() as conn:
        meta.create_all(conn)
        t = meta.tables
        conn.execute(
            insert(t["schema_migrations"]),
            [
                dict(version=1, name="initial tables", applied_at=T0),
                dict(version=2, name="runs.warning", applied_at=T0),
            ],
        )
        conn.execute(
            insert(t["runs"]),
            [
                dict(
                    id=r,
                    question=f"question {r}",
                    title=r,
                    method="omnithink",
                    params={},
                    llm_info={},
                    search_mode="local",
                    status="done",
                    stop_reason="",
                    error="",
                    warning="",
                    prompt_tokens=0,
                    completion_tokens=0,
                    cost=0.0,
                    llm_calls=0,
                    node_count=3,
                    version=7,
                    owner="",
                    created_at=T0,
                    updated_at=T0,
                )
                for r in ("r1", "r2")
            ],
        )
        conn.execute(
            insert(t["nodes"]), [node(1, "r1"), node(2, "r1", 1), node(3, "r1", 1), node(4, "r2"), node(5, "r2", 4)]
        )
        conn.execute(
            insert(t["edges"]),
            [
                dict(id=1, run_id="r1", src=1, dst=2, kind="child"),
                dict(id=2, run_id="r1", src=1, dst=3, kind="child"),
                dict(id=3, run_id="r1", src=1, dst=2, kind="child"),  # a duplicate of 1
                dict(id=4, run_id="r1", src=1, dst=2, kind="related"),  # another kind: kept
                dict(id=5, run_id="r2", src=4, dst=5, kind="child"),
                dict(id=6, run_id="r2", src=4, dst=5, kind="child"),  # a duplicate of 5
                dict(id=7, run_id="r1", src=1, dst=99, kind="child"),  # to no node: dropped
                dict(id=8, run_id="r1", src=1, dst=4, kind="related"),  # to a node of r2: dropped
            ],
        )
        conn.execute(
            insert(t["sources"]),
            [
                dict(
                    id=1,
                    run_id="r1",
                    ref="doc",
                    kind="corpus",
                    url=None,
                    title="D",
                    snippet="",
                    text="body",
                    created_at=T0,
                )
            ],
        )
        conn.execute(insert(t["node_sources"]), [dict(node_id=2, source_id=1, rank=0, score=0.5)])
        conn.execute(
            insert(t["reports"]),
            [
                report(1, "r1", "concept_pool", "", {"step": 1, "concepts": ["a"]}),
                report(2, "r2", "concept_pool", "", {"step": 1, "concepts": ["x"]}),
                report(3, "r1", "outline", "# Outline\n1. A", {"outline": {"sections": [{"title": "A"}]}}),
                report(4, "r1", "concept_pool", "", {"step": 2, "concepts": ["a", "b"]}),
                report(5, "r1", "final", "The article [[S1]]", {"tree": [[1, "done"]]}),
                report(6, "r2", "outline", "ignored", {"outline": {}, "markdown": "kept as it was"}),
                report(7, "r1", "outline", "# Outline v2", {"outline": {"sections": []}}),
            ],
        )
        if not db.is_sqlite:  # the rows above chose their ids: move the sequences past them
            for table in ("nodes", "edges", "sources", "reports"):
                conn.execute(
                    text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT MAX(id) FROM {table}))")
                )
    db.dispose()


def test_migration_3_upgrades_a_database_of_the_previous_release(database_url):
    build_old_database(database_url)
    db = open_database(database_url)
    assert applied_versions(db.engine) == [v for v, _, _ in MIGRATIONS]
    repo = Repository(db)

    # Nothing else lost: runs, nodes, sources, links, the article.
    assert [r.id for r in sorted(repo.list_runs(), key=lambda r: r.id)] == ["r1", "r2"]
    assert [n.id for n in repo.list_nodes("r1")] == [1, 2, 3] and [n.id for n in repo.list_nodes("r2")] == [4, 5]
    assert [s.text for s in repo.sources_for_node(2)] == ["body"]
    assert [(r.id, r.kind) for r in repo.list_reports("r1")] == [(5, "final")]
    assert repo.latest_report("r1").data == {"tree": [[1, "done"]]}
    assert repo.list_reports("r2") == []

    # Edges: the lowest id of each duplicate kept, the ones no key can hold dropped, data {}.
    assert [(e.id, e.src, e.dst, e.kind, e.data) for e in repo.list_edges("r1")] == [
        (1, 1, 2, "child", {}),
        (2, 1, 3, "child", {}),
        (4, 1, 2, "related", {}),
    ]
    assert [e.id for e in repo.list_edges("r2")] == [5]

    # Run states: versions in report id order, per run and name; the outline keeps its text.
    states = [(s.run_id, s.name, s.version, s.schema, s.data) for s in repo.list_run_states("r1")]
    assert states == [
        ("r1", "concept_pool", 1, 1, {"step": 1, "concepts": ["a"]}),
        ("r1", "concept_pool", 2, 1, {"step": 2, "concepts": ["a", "b"]}),
        ("r1", "outline", 1, 1, {"outline": {"sections": [{"title": "A"}]}, "markdown": "# Outline\n1. A"}),
        ("r1", "outline", 2, 1, {"outline": {"sections": []}, "markdown": "# Outline v2"}),
    ]
    assert [(s.name, s.version, s.data) for s in repo.list_run_states("r2")] == [
        ("concept_pool", 1, {"step": 1, "concepts": ["x"]}),
        ("outline", 1, {"outline": {}, "markdown": "kept as it was"}),
    ]
    assert repo.latest_run_state("r1", "concept_pool").created_at is not None

    # The new keys hold: one edge per (src, dst, kind), both ends nodes of the run.
    with pytest.raises(IntegrityError), db.engine.begin() as conn:
        conn.execute(text("INSERT INTO edges (run_id, src, dst, kind, data) VALUES ('r1', 1, 2, 'child', '{}')"))
    with pytest.raises(IntegrityError), db.engine.begin() as conn:
        conn.execute(text("INSERT INTO edges (run_id, src, dst, kind, data) VALUES ('r1', 1, 5, 'x', '{}')"))
    with pytest.raises(ValueError, match="both must be nodes of run 'r1'"):
        repo.add_edge("r1", 1, 4, "related")
    assert repo.add_edge("r1", 1, 2, "child").id == 1
    new = repo.add_edge("r1", 3, 2, "related", data={"w": 1})
    assert new.id not in {1, 2, 4, 5} and new.data == {"w": 1}
    assert repo.save_run_state("r1", "concept_pool", {"step": 3}).version == 3
    child = repo.add_node("r1", kind="subtopic", label="new", parent_id=3)
    assert repo.list_edges("r1", kind="child")[-1].dst == child.id

    # The keys cascade: deleting a run deletes its nodes, edges and states.
    repo.delete_run("r2")
    with db.engine.begin() as conn:
        conn.execute(text("DELETE FROM runs WHERE id = 'r1'"))
        for table in ("nodes", "edges", "run_states", "node_sources", "sources"):
            assert conn.execute(text(f"SELECT COUNT(*) FROM {table}")).scalar() == 0, table
    db.dispose()

    # Opening it again finds nothing to do.
    again = open_database(database_url)
    assert applied_versions(again.engine) == [v for v, _, _ in MIGRATIONS]
    again.dispose()


def test_a_new_database_gets_the_new_edges_directly(database_url):
    db = open_database(database_url)
    repo = Repository(db)
    run = repo.create_run(question="q", method="deot", params={})
    a = repo.add_node(run.id, kind="question", label="a")
    b = repo.add_node(run.id, kind="question", label="b", parent_id=a.id)
    assert repo.add_edge(run.id, a.id, b.id, "child").id == repo.list_edges(run.id)[0].id
    with pytest.raises(IntegrityError), db.engine.begin() as conn:
        conn.execute(
            text("INSERT INTO edges (run_id, src, dst, kind, data) VALUES (:r, :a, :b, 'child', '{}')"),
            {"r": run.id, "a": a.id, "b": b.id},
        )
    db.dispose()
