"""Storage: migrations, the run graph, sources, usage totals, the command queue, reports —
on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from enum import StrEnum

import pytest
from sqlalchemy import inspect

from storage import NodeInput, open_database
from storage.db import DatabaseURLError
from storage.migrations import MIGRATIONS, applied_versions, migrate
from storage.models import CommandStatus, Node, NodeStatus, RunStatus, row_copy
from storage.repository import NodeNotFound, RunNotFound, SourceInput
from tests.support.db_backends import database_url, repo  # noqa: F401  (fixtures)


def test_migrations_are_recorded_and_run_once(database_url):
    db = open_database(database_url)
    assert applied_versions(db.engine) == [v for v, _, _ in MIGRATIONS]
    assert migrate(db.engine) == []  # second time: nothing to do
    tables = set(inspect(db.engine).get_table_names())
    assert {
        "runs",
        "nodes",
        "edges",
        "sources",
        "node_sources",
        "llm_calls",
        "commands",
        "reports",
        "schema_migrations",
    } <= tables
    db.dispose()


def test_a_database_of_the_previous_release_gets_the_warning_column(tmp_path):
    import sqlite3

    path = tmp_path / "old.sqlite3"
    # Made by the previous release: migration 1 recorded, `runs` without `warning`, one run stored.
    with sqlite3.connect(path) as conn:
        conn.executescript(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name VARCHAR(200) NOT NULL,"
            " applied_at DATETIME NOT NULL);"
            "INSERT INTO schema_migrations VALUES (1, 'initial tables', '2026-01-01 00:00:00');"
            "CREATE TABLE runs (id VARCHAR(32) PRIMARY KEY, question TEXT NOT NULL);"
            "INSERT INTO runs VALUES ('r1', 'kept?');"
        )
    db = open_database(f"sqlite:///{path}")
    assert applied_versions(db.engine) == [v for v, _, _ in MIGRATIONS]
    db.dispose()
    with sqlite3.connect(path) as conn:
        assert "warning" in [row[1] for row in conn.execute("PRAGMA table_info(runs)")]
        assert conn.execute("SELECT question, warning FROM runs").fetchall() == [("kept?", "")]


def test_bad_database_url_is_a_clear_error():
    with pytest.raises(DatabaseURLError, match="not a database URL"):
        open_database("not a url at all")


def test_run_graph_round_trip(repo):
    run = repo.create_run(
        question="Why is the sky blue?", method="rag", params={"top_k": 3}, llm_info={"kind": "fake"}, max_tokens=1000
    )
    root = repo.add_node(run.id, kind="question", label=run.question, status=NodeStatus.DONE)
    child = repo.add_node(
        run.id, kind="answer", label="Answer", parent_id=root.id, depth=1, data={"confidence": "high"}
    )
    repo.start_node(child.id)
    repo.finish_node(child.id, content="Rayleigh scattering.", data={"extra": 1})

    snap = repo.snapshot(run.id)
    assert [n.kind for n in snap.nodes] == ["question", "answer"]
    assert snap.nodes[1].status == NodeStatus.DONE
    assert snap.nodes[1].data == {"confidence": "high", "extra": 1}
    assert [(e.src, e.dst) for e in snap.edges] == [(root.id, child.id)]
    assert snap.run.node_count == 2
    assert snap.run.params == {"top_k": 3}
    assert [c.id for c in repo.children(root.id)] == [child.id]

    failed = repo.add_node(run.id, kind="answer", label="other", parent_id=root.id)
    repo.fail_node(failed.id, "model output was not JSON")
    assert repo.get_node(failed.id).error == "model output was not JSON"


def test_version_counter_moves_with_every_change(repo):
    run = repo.create_run(question="q", method="rag", params={})
    v0 = repo.run_version(run.id)
    node = repo.add_node(run.id, kind="question", label="q")
    v1 = repo.run_version(run.id)
    repo.update_node(node.id, label="q2")
    assert v0 < v1 < repo.run_version(run.id)


def test_sources_are_unique_per_run_and_linked_in_order(repo):
    run = repo.create_run(question="q", method="rag", params={})
    node = repo.add_node(run.id, kind="search", label="s")
    hits = [
        SourceInput(ref="hotpotqa/A#0", title="A", text="alpha"),
        SourceInput(ref="hotpotqa/B#0", title="B", text="beta"),
    ]
    first = repo.add_sources(run.id, hits, node_id=node.id)
    again = repo.add_sources(run.id, hits[:1], node_id=node.id)
    assert again[0].id == first[0].id
    assert [s.ref for s in repo.list_sources(run.id)] == ["hotpotqa/A#0", "hotpotqa/B#0"]
    assert [s.title for s in repo.sources_for_node(node.id)] == ["A", "B"]
    other = repo.create_run(question="q2", method="rag", params={})
    assert repo.add_sources(other.id, hits[:1])[0].id != first[0].id


def test_llm_usage_totals_are_atomic_under_concurrency(repo):
    run = repo.create_run(question="q", method="rag", params={})
    node = repo.add_node(run.id, kind="answer", label="a")

    def record():
        for _ in range(10):
            repo.record_llm_call(
                run.id,
                node_id=node.id,
                purpose="default",
                model="m",
                prompt_tokens=3,
                completion_tokens=2,
                cost=0.001,
                latency_s=0.01,
            )

    threads = [threading.Thread(target=record) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    tokens, cost = repo.run_usage(run.id)
    assert tokens == 4 * 10 * 5
    assert cost == pytest.approx(0.04)
    stored = repo.get_run(run.id)
    assert stored.llm_calls == 40
    # The node's totals: live from its calls, and in its row from its next update on.
    assert repo.node_usage(node.id) == (120, 80, pytest.approx(0.04), pytest.approx(0.4))
    assert repo.update_node(node.id, label="a2").prompt_tokens == 120
    assert repo.get_node(node.id).completion_tokens == 80
    assert len(repo.list_llm_calls(run.id)) == 40


def test_commands_are_taken_exactly_once(repo):
    run = repo.create_run(question="q", method="rag", params={})
    for i in range(20):
        repo.enqueue_command(run.id, "expand", {"node": i})
    taken: list[int] = []
    lock = threading.Lock()

    def worker():
        got = repo.take_commands(run.id)
        with lock:
            taken.extend(c.payload["node"] for c in got)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(taken) == list(range(20))
    assert repo.list_commands(run.id, status=CommandStatus.QUEUED) == []
    # A taken command of a dead worker goes back to the queue.
    assert repo.requeue_taken_commands(run.id) == 20
    first = repo.take_commands(run.id, kinds=["expand"])[0]
    repo.complete_command(first.id, ok=False, error="node pruned")
    assert repo.list_commands(run.id, status=CommandStatus.FAILED)[0].error == "node pruned"


def test_dead_runs_become_interrupted_and_running_nodes_pending(repo):
    alive = repo.create_run(question="alive", method="rag", params={})
    dead = repo.create_run(question="dead", method="rag", params={})
    repo.claim_run(alive.id, "host:1:alive")
    repo.claim_run(dead.id, "host:2:dead")
    node = repo.add_node(dead.id, kind="answer", label="a")
    repo.start_node(node.id)
    marked = repo.mark_dead_runs_interrupted(lambda run: run.owner.endswith("alive"))
    assert marked == [dead.id]
    assert repo.get_run(dead.id).status == RunStatus.INTERRUPTED
    assert repo.get_run(alive.id).status == RunStatus.RUNNING
    assert repo.reset_unfinished_nodes(dead.id) == 1
    assert repo.get_node(node.id).status == NodeStatus.PENDING


def test_reports_keep_versions(repo):
    run = repo.create_run(question="q", method="rag", params={})
    assert repo.latest_report(run.id) is None
    repo.save_report(run.id, "first")
    repo.save_report(run.id, "second", data={"n": 2})
    assert repo.latest_report(run.id).markdown == "second"
    assert [r.markdown for r in repo.list_reports(run.id)] == ["first", "second"]


def test_runs_are_paged_newest_first_with_every_run_on_exactly_one_page(repo):
    # Sessions pages through every run (issue 43: it stopped at 200). Runs made in the same instant
    # are ordered by id, so a page boundary neither repeats nor skips one.
    made = [
        repo.create_run(question=f"Paged question {i}", method="rag" if i % 2 else "direct", params={})
        for i in range(23)
    ]
    assert repo.count_runs() == 23 and repo.count_runs(method="rag") == 11
    assert repo.count_runs(text="question 1") == 11  # 1 and 10-19
    pages = [repo.list_runs(limit=5, offset=offset) for offset in range(0, 25, 5)]
    seen = [run.id for page in pages for run in page]
    assert [len(page) for page in pages] == [5, 5, 5, 5, 3]
    assert sorted(seen) == sorted(run.id for run in made) and len(set(seen)) == 23
    assert seen == [run.id for run in repo.list_runs(limit=100)]
    rag = [run.id for offset in (0, 4, 8) for run in repo.list_runs(method="rag", limit=4, offset=offset)]
    assert len(rag) == len(set(rag)) == 11


def test_list_filter_rename_delete(repo):
    a = repo.create_run(question="Who founded Arthur's Magazine?", method="rag", params={})
    b = repo.create_run(question="Capital of France", method="direct", params={})
    repo.set_status(b.id, RunStatus.DONE)
    assert [r.id for r in repo.list_runs(text="arthur")] == [a.id]
    c = repo.create_run(question="What share is 50% of_all?", method="rag", params={})
    # % and _ are searched for as themselves, not as wildcards (on SQLite and PostgreSQL).
    assert [r.id for r in repo.list_runs(text="%")] == [c.id]
    assert [r.id for r in repo.list_runs(text="_")] == [c.id]
    assert [r.id for r in repo.list_runs(text="0% OF_")] == [c.id]
    repo.delete_run(c.id)
    assert [r.id for r in repo.list_runs(method="direct")] == [b.id]
    assert [r.id for r in repo.list_runs(status=RunStatus.DONE)] == [b.id]
    assert repo.find_run(a.id[:6]).id == a.id
    repo.rename_run(a.id, "  Magazines  ")
    assert repo.get_run(a.id).title == "Magazines"
    with pytest.raises(ValueError, match="empty"):
        repo.rename_run(a.id, "   ")
    node = repo.add_node(a.id, kind="question", label="q")
    repo.add_sources(a.id, [SourceInput(ref="x", title="X")], node_id=node.id)
    repo.enqueue_command(a.id, "stop")
    repo.record_llm_call(
        a.id, node_id=node.id, purpose="d", model="m", prompt_tokens=1, completion_tokens=1, cost=0, latency_s=0
    )
    repo.delete_run(a.id)
    with pytest.raises(RunNotFound, match="thoughtmap list"):
        repo.get_run(a.id)
    with pytest.raises(NodeNotFound):
        repo.get_node(node.id)
    assert [r.id for r in repo.list_runs()] == [b.id]


def test_a_row_copy_equals_its_row_shares_nothing_mutable_and_can_be_written(repo):
    """`row_copy` (a running graph's reads of its nodes): equal to the row read back, its data its
    own however deep, and a real row: changed and stored like one read from the database."""
    run = repo.create_run(question="q", method="deot", params={})
    [node] = repo.add_nodes(
        run.id,
        [
            NodeInput(
                kind="question",
                label="root",
                data={"tasks": [{"id": "t1", "depends_on": ["t0"], "result": {"hits": [1, 2]}}], "pair": (1, [2])},
            )
        ],
    )
    node = repo.get_node(node.id)
    copied = row_copy(node)
    assert copied.model_dump() == node.model_dump() and copied.model_fields_set == node.model_fields_set
    copied.data["tasks"][0]["result"]["hits"].append(3)
    copied.data["pair"][1].append(4)
    copied.label = "changed"
    assert node.data["tasks"][0]["result"]["hits"] == [1, 2] and node.label == "root"
    assert node.data["pair"] == [1, [2]]  # stored as JSON: the tuple came back a list
    repo.update_node(copied.id, label=copied.label, data=copied.data)
    assert repo.get_node(node.id).label == "changed"


def test_a_row_copy_of_a_node_not_stored_copies_tuples_and_other_values_deeply():
    """A graph's mirror holds nodes as written, before JSON: tuples and other values stay deep copies."""
    node = Node(id=1, run_id="r", kind="question", label="root", data={"pair": (1, [2]), "seen": {"a"}})
    copied = row_copy(node)
    copied.data["pair"][1].append(3)
    copied.data["seen"].add("b")
    assert node.data == {"pair": (1, [2]), "seen": {"a"}} and copied.data == {"pair": (1, [2, 3]), "seen": {"a", "b"}}


def test_a_row_copy_keeps_enums_and_datetimes_as_they_are():
    """Plain data is copied by a `marshal` round trip, which refuses a StrEnum or a datetime: data
    holding one is copied by hand instead, each value keeping its type, and still its own."""

    class Colour(StrEnum):
        RED = "red"
        BLUE = "blue"

    when = datetime(2026, 12, 7, tzinfo=UTC)
    node = Node(id=1, run_id="r", kind="question", label="root", data={"runs": [{"colour": Colour.RED, "at": when}]})
    copied = row_copy(node)
    [entry] = copied.data["runs"]
    assert type(entry["colour"]) is Colour and type(entry["at"]) is datetime and entry["at"] == when
    entry["colour"] = Colour.BLUE
    assert node.data["runs"][0]["colour"] is Colour.RED
