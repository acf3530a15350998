"""Storage for method contract v2: batched nodes, typed idempotent edges, the frontier, run states,
batched sources and fewer round trips — on SQLite and PostgreSQL."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import text

from storage import NodeInput, RunState
from storage.models import CommandStatus, NodeStatus
from storage.repository import RunNotFound, SourceInput
from tests.support.db_backends import database_url, repo, run_threads, statements  # noqa: F401  (fixtures)

# ---------------------------------------------------------------------- nodes


def test_add_node_is_complete_without_count_or_reread(repo):
    run = repo.create_run(question="q", method="deot", params={})
    with statements(repo) as counts:
        root = repo.add_node(run.id, kind="question", label="q", status=NodeStatus.DONE, data={"a": 1})
        child = repo.add_node(run.id, kind="question", label="c", parent_id=root.id, depth=1)
    assert counts["SELECT"] == 0  # no COUNT(*) for `order`, no refresh after the commit
    assert counts["COMMIT"] == 2
    assert root.id and root.created_at and root.started_at and root.finished_at
    assert (root.order, root.data, root.run_id, root.error) == (0, {"a": 1}, run.id, "")
    assert child.started_at is None and child.status == NodeStatus.PENDING
    stored = repo.get_node(child.id)
    assert stored.model_dump() == child.model_dump() | {"created_at": stored.created_at}
    assert [(e.src, e.dst, e.kind, e.data) for e in repo.list_edges(run.id)] == [(root.id, child.id, "child", {})]


def test_add_nodes_one_transaction_one_version(repo):
    run = repo.create_run(question="q", method="deot", params={})
    root = repo.add_node(run.id, kind="question", label="q")
    before = repo.get_run(run.id)
    assert repo.add_nodes(run.id, []) == []
    with statements(repo) as counts:
        made = repo.add_nodes(
            run.id,
            [
                NodeInput(
                    kind="question",
                    label=f"child {i}",
                    parent_id=root.id,
                    depth=1,
                    priority=i / 10,
                    data={"i": i},
                    edge_kind="proposal" if i == 2 else "child",
                )
                for i in range(3)
            ]
            + [NodeInput(kind="note", label="free", status=NodeStatus.DONE)],
        )
    assert counts["COMMIT"] == 1 and counts["SELECT"] == 0
    after = repo.get_run(run.id)
    assert after.version == before.version + 1
    assert after.node_count == before.node_count + 4
    assert [n.label for n in made] == ["child 0", "child 1", "child 2", "free"]
    assert [n.data for n in made[:3]] == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert made[3].finished_at is not None and made[3].parent_id is None
    assert [n.id for n in repo.list_nodes(run.id)] == [root.id, *(n.id for n in made)]
    assert [(e.src, e.dst, e.kind) for e in repo.list_edges(run.id)] == [
        (root.id, made[0].id, "child"),
        (root.id, made[1].id, "child"),
        (root.id, made[2].id, "proposal"),
    ]
    assert [e.dst for e in repo.list_edges(run.id, kind="proposal")] == [made[2].id]


def test_add_nodes_uncounted_returns_the_stored_nodes_in_order(repo):
    """An executing run's journal counts its nodes itself: the add stores nodes and edges (one
    prepared INSERT each) and leaves the run's count and version alone; each node handed back is
    the stored one, its id the one its row was given."""
    run = repo.create_run(question="q", method="research", params={})
    root = repo.add_node(run.id, kind="question", label="q")
    before = repo.get_run(run.id)
    with statements(repo) as counts:
        made = repo.add_nodes(
            run.id,
            [NodeInput(kind="search", label=f"s{i}", parent_id=root.id, depth=1, data={"i": i}) for i in range(3)]
            + [NodeInput(kind="note", label="free", status=NodeStatus.DONE)],
            counted=False,
        )
    assert counts["COMMIT"] == 1 and counts["SELECT"] == 0
    after = repo.get_run(run.id)
    assert (after.version, after.node_count) == (before.version, before.node_count)
    assert [n.label for n in made] == ["s0", "s1", "s2", "free"]
    for node in made:
        assert repo.get_node(node.id).model_dump() == node.model_dump()
    assert [(e.src, e.dst, e.kind) for e in repo.list_edges(run.id)] == [
        (root.id, made[i].id, "child") for i in range(3)
    ]


def test_add_nodes_refuses_a_parent_of_another_run_and_stores_nothing(repo):
    run = repo.create_run(question="q", method="deot", params={})
    other = repo.create_run(question="other", method="deot", params={})
    foreign = repo.add_node(other.id, kind="question", label="x")
    version = repo.run_version(run.id)
    with pytest.raises(ValueError, match=f"not a node of run '{run.id}'"):
        repo.add_nodes(
            run.id,
            [NodeInput(kind="question", label="ok"), NodeInput(kind="question", label="bad", parent_id=foreign.id)],
        )
    assert repo.list_nodes(run.id) == [] and repo.run_version(run.id) == version
    with pytest.raises(RunNotFound):
        repo.add_nodes("nosuchrun", [NodeInput(kind="question", label="q")])


def test_frontier_by_kinds_and_statuses_in_id_order(repo):
    run = repo.create_run(question="q", method="omnithink", params={})
    a = repo.add_node(run.id, kind="topic", label="a")
    b = repo.add_node(run.id, kind="subtopic", label="b", parent_id=a.id)
    c = repo.add_node(run.id, kind="subtopic", label="c", parent_id=a.id, status=NodeStatus.DONE)
    d = repo.add_node(run.id, kind="note", label="d", parent_id=a.id)
    repo.start_node(a.id)
    repo.fail_node(b.id, "boom")
    repo.add_node(repo.create_run(question="x", method="omnithink", params={}).id, kind="topic", label="other run")
    assert [n.id for n in repo.frontier(run.id, ["topic", "subtopic"])] == [a.id]
    assert [n.id for n in repo.frontier(run.id, {"subtopic"}, [NodeStatus.DONE, NodeStatus.FAILED])] == [b.id, c.id]
    assert [n.id for n in repo.frontier(run.id, ("note", "topic"))] == [a.id, d.id]
    assert repo.frontier(run.id, []) == []


def test_run_version_is_one_select_of_one_column(repo):
    run = repo.create_run(question="q", method="rag", params={})
    with statements(repo) as counts:
        assert repo.run_version(run.id) == run.version
    assert sum(counts.values()) == 1
    with pytest.raises(RunNotFound):
        repo.run_version("nosuchrun")


def test_node_updates_return_complete_nodes_without_reread(repo):
    run = repo.create_run(question="q", method="rag", params={})
    node = repo.add_node(run.id, kind="answer", label="a", data={"keep": 1})
    repo.record_llm_call(
        run.id, node_id=node.id, purpose="p", model="m", prompt_tokens=5, completion_tokens=2, cost=0.0, latency_s=0.1
    )
    with statements(repo) as counts:
        started = repo.start_node(node.id)
        finished = repo.finish_node(node.id, content="done", data={"more": 2}, label="A")
    # No read for the start; one read of the data to merge into for the finish; no refresh after
    # either commit.
    assert counts["SELECT"] == 1
    assert started.status == NodeStatus.RUNNING and started.started_at is not None
    assert (finished.status, finished.content, finished.label, finished.data) == (
        NodeStatus.DONE,
        "done",
        "A",
        {"keep": 1, "more": 2},
    )
    assert finished.prompt_tokens == 5 and finished.finished_at is not None and finished.started_at is not None
    assert repo.get_node(node.id).model_dump() == finished.model_dump()
    failed = repo.fail_node(node.id, "boom", data={"why": "x"})
    assert (failed.status, failed.error, failed.data["why"]) == (NodeStatus.FAILED, "boom", "x")


# ---------------------------------------------------------------------- edges


def test_add_edge_is_idempotent_per_src_dst_kind(repo):
    run = repo.create_run(question="q", method="deot", params={})
    a = repo.add_node(run.id, kind="question", label="a")
    b = repo.add_node(run.id, kind="question", label="b")
    version = repo.run_version(run.id)
    first = repo.add_edge(run.id, a.id, b.id, "cites", data={"why": "overlap"})
    assert first.id is not None and first.data == {"why": "overlap"}
    assert repo.run_version(run.id) == version + 1
    again = repo.add_edge(run.id, a.id, b.id, "cites", data={"why": "ignored"})
    assert (again.id, again.data) == (first.id, {"why": "overlap"})
    assert repo.run_version(run.id) == version + 1  # nothing changed
    other_kind = repo.add_edge(run.id, a.id, b.id, "supports")
    reverse = repo.add_edge(run.id, b.id, a.id, "cites")
    assert len({first.id, other_kind.id, reverse.id}) == 3
    assert [e.id for e in repo.list_edges(run.id, kind="cites")] == [first.id, reverse.id]
    assert [e.id for e in repo.snapshot(run.id).edges] == [first.id, other_kind.id, reverse.id]


def test_add_edge_under_concurrent_inserts_makes_one_edge(repo):
    run = repo.create_run(question="q", method="deot", params={})
    a = repo.add_node(run.id, kind="question", label="a")
    b = repo.add_node(run.id, kind="question", label="b")
    ids: list[int] = []
    barrier = threading.Barrier(4)

    def link(_):
        barrier.wait()
        ids.append(repo.add_edge(run.id, a.id, b.id, "related").id)

    run_threads(link)
    assert len(set(ids)) == 1 and len(ids) == 4
    assert len(repo.list_edges(run.id, kind="related")) == 1


def test_add_edge_between_runs_or_to_nothing_is_a_clear_error(repo):
    run = repo.create_run(question="q", method="deot", params={})
    other = repo.create_run(question="o", method="deot", params={})
    mine = repo.add_node(run.id, kind="question", label="mine")
    theirs = repo.add_node(other.id, kind="question", label="theirs")
    with pytest.raises(ValueError, match=f"both must be nodes of run '{run.id}'"):
        repo.add_edge(run.id, mine.id, theirs.id, "related")
    with pytest.raises(ValueError, match="both must be nodes of run"):
        repo.add_edge(run.id, theirs.id, mine.id, "related")
    with pytest.raises(ValueError, match="both must be nodes of run"):
        repo.add_edge(run.id, mine.id, 10**9, "related")
    with pytest.raises(ValueError, match="not a node of run"):
        repo.add_node(run.id, kind="question", label="x", parent_id=theirs.id)
    assert repo.list_edges(run.id) == [] and repo.list_edges(other.id) == []


def test_deleting_a_run_deletes_its_graph_and_states_also_by_the_keys(repo):
    keep = repo.create_run(question="keep", method="omnithink", params={})
    kept = repo.add_node(keep.id, kind="topic", label="k")
    repo.add_node(keep.id, kind="subtopic", label="k2", parent_id=kept.id)
    repo.save_run_state(keep.id, "concept_pool", {"concepts": ["k"]})
    for deleter in ("repository", "database keys"):
        run = repo.create_run(question="q", method="omnithink", params={})
        root = repo.add_node(run.id, kind="topic", label="t")
        child = repo.add_node(run.id, kind="subtopic", label="s", parent_id=root.id)
        repo.add_edge(run.id, child.id, root.id, "related")
        repo.save_run_state(run.id, "concept_pool", {"concepts": ["a"]})
        if deleter == "repository":
            repo.delete_run(run.id)
        else:  # ON DELETE CASCADE: runs -> nodes -> edges, runs -> run_states
            with repo.db.engine.begin() as conn:
                conn.execute(text("DELETE FROM runs WHERE id = :id"), {"id": run.id})
        with repo.db.engine.connect() as conn:
            for table in ("nodes", "edges", "run_states"):
                count = conn.execute(text(f"SELECT COUNT(*) FROM {table} WHERE run_id = :id"), {"id": run.id})
                assert count.scalar() == 0, (deleter, table)
    assert len(repo.list_edges(keep.id)) == 1 and len(repo.list_run_states(keep.id)) == 1


def test_deleting_a_node_deletes_its_edges(repo):
    run = repo.create_run(question="q", method="deot", params={})
    a = repo.add_node(run.id, kind="question", label="a")
    b = repo.add_node(run.id, kind="question", label="b", parent_id=a.id)
    with repo.db.engine.begin() as conn:
        conn.execute(text("DELETE FROM nodes WHERE id = :id"), {"id": b.id})
    assert repo.list_edges(run.id) == []


# ------------------------------------------------------------------ run states


def test_run_states_are_versioned_per_name(repo):
    run = repo.create_run(question="q", method="omnithink", params={})
    assert repo.latest_run_state(run.id, "concept_pool") is None
    version = repo.run_version(run.id)
    first = repo.save_run_state(run.id, "concept_pool", {"concepts": ["a"]})
    assert isinstance(first, RunState)
    assert (first.id is not None, first.version, first.schema, first.data) == (True, 1, 1, {"concepts": ["a"]})
    assert first.created_at is not None and repo.run_version(run.id) == version + 1
    repo.save_run_state(run.id, "outline", {"sections": []}, schema=2)
    second = repo.save_run_state(run.id, "concept_pool", {"concepts": ["a", "b"]})
    assert second.version == 2
    latest = repo.latest_run_state(run.id, "concept_pool")
    assert (latest.id, latest.data) == (second.id, {"concepts": ["a", "b"]})
    assert repo.latest_run_state(run.id, "outline").schema == 2
    assert [(s.name, s.version) for s in repo.list_run_states(run.id)] == [
        ("concept_pool", 1),
        ("concept_pool", 2),
        ("outline", 1),
    ]
    assert [s.version for s in repo.list_run_states(run.id, "concept_pool")] == [1, 2]
    other = repo.create_run(question="o", method="omnithink", params={})
    assert repo.save_run_state(other.id, "concept_pool", {}).version == 1
    assert repo.list_reports(run.id) == []  # states are not reports
    with pytest.raises(RunNotFound):
        repo.save_run_state("nosuchrun", "concept_pool", {})


def test_run_state_versions_stay_unique_under_concurrent_savers(repo):
    run = repo.create_run(question="q", method="omnithink", params={})
    barrier = threading.Barrier(4)

    def save(worker):
        barrier.wait()
        for i in range(5):
            repo.save_run_state(run.id, "pool", {"worker": worker, "i": i})

    run_threads(save)
    states = repo.list_run_states(run.id, "pool")
    assert [s.version for s in states] == list(range(1, 21))
    assert sorted((s.data["worker"], s.data["i"]) for s in states) == [(w, i) for w in range(4) for i in range(5)]


# --------------------------------------------------------------------- sources


def test_add_sources_batch_semantics(repo):
    run = repo.create_run(question="q", method="rag", params={})
    node = repo.add_node(run.id, kind="search", label="s")
    hits = [
        SourceInput(ref="a", title="A", text="short", score=0.9),
        SourceInput(ref="b", title="B", text="beta", score=0.5),
        SourceInput(ref="a", title="A again", text="a much longer text", score=0.1),
    ]
    with statements(repo) as counts:
        stored = repo.add_sources(run.id, hits, node_id=node.id)
    # One SELECT of the texts already stored for these refs, one INSERT ... ON CONFLICT DO UPDATE ...
    # RETURNING of the sources, one INSERT ... ON CONFLICT DO NOTHING of the links, the version bump
    # (in the links' statement on PostgreSQL), one COMMIT.
    if repo.db.is_sqlite:
        assert (counts["SELECT"], counts["INSERT"], counts["UPDATE"], counts["COMMIT"]) == (1, 2, 1, 1)
    else:
        assert (counts["SELECT"], counts["INSERT"], counts["WITH"], counts["COMMIT"]) == (1, 1, 1, 1)
    assert sum(counts.values()) == (5 if repo.db.is_sqlite else 4)
    assert [s.ref for s in stored] == ["a", "b", "a"] and stored[0].id == stored[2].id
    # The first row wins; the text is the newest read, then the earlier read's lines it lacks.
    assert stored[0].title == "A" and stored[0].text == "a much longer text\nshort"
    assert all(s.id and s.created_at and s.run_id == run.id for s in stored)
    assert [s.ref for s in repo.list_sources(run.id)] == ["a", "b"]
    links = sorted((link.source_id, link.rank, link.score) for link in repo.node_source_links(run.id))
    assert links == [(stored[0].id, 0, 0.9), (stored[1].id, 1, 0.5)]

    # An existing ref: a text holding the stored one replaces it; another comes first, the rest after it.
    other = repo.add_node(run.id, kind="search", label="s2")
    again = repo.add_sources(
        run.id,
        [
            SourceInput(ref="b", title="ignored", text="beta, in full"),
            SourceInput(ref="a", title="ignored", text="tiny"),
            SourceInput(ref="c", title="C"),
        ],
        node_id=other.id,
    )
    assert [s.id for s in again[:2]] == [stored[1].id, stored[0].id]
    by_ref = {s.ref: s for s in repo.list_sources(run.id)}
    assert (by_ref["b"].text, by_ref["b"].title, by_ref["a"].text) == (
        "beta, in full",
        "B",
        "tiny\na much longer text\nshort",
    )
    assert again[0].text == "beta, in full"
    assert [s.ref for s in repo.sources_for_node(other.id)] == ["b", "a", "c"]
    # Adding the same sources to the same node again keeps the links as they are.
    repo.add_sources(run.id, hits[::-1], node_id=node.id)
    assert [s.ref for s in repo.sources_for_node(node.id)] == ["a", "b"]
    assert repo.add_sources(run.id, []) == []


def test_add_sources_from_concurrent_workers(repo):
    run = repo.create_run(question="q", method="rag", params={})
    nodes = [repo.add_node(run.id, kind="search", label=f"s{i}") for i in range(4)]
    barrier = threading.Barrier(4)
    refs = [f"doc{i}" for i in range(12)]

    def add(worker):
        barrier.wait()
        for round_ in range(3):  # overlapping batches, in a different order per worker
            batch = refs[round_ * 4 : (round_ + 1) * 4 + 2][:: 1 if worker % 2 else -1]
            stored = repo.add_sources(
                run.id, [SourceInput(ref=r, title=r, text=r * (worker + 1)) for r in batch], node_id=nodes[worker].id
            )
            assert [s.ref for s in stored] == batch

    run_threads(add)
    sources = repo.list_sources(run.id)
    assert sorted(s.ref for s in sources) == sorted(refs)
    assert all(s.text == s.ref * 4 or len(s.text) >= len(s.ref) for s in sources)
    for node in nodes:
        assert sorted(s.ref for s in repo.sources_for_node(node.id)) == sorted(refs)


def test_link_sources_batched(repo):
    run = repo.create_run(question="q", method="rag", params={})
    node = repo.add_node(run.id, kind="answer", label="a")
    a, b, c = repo.add_sources(run.id, [SourceInput(ref=r, title=r) for r in "abc"])
    repo.link_sources(node.id, [b.id])
    with statements(repo) as counts:
        repo.link_sources(node.id, [c.id, b.id, c.id, a.id])
    assert (counts["SELECT"], counts["INSERT"], counts["COMMIT"]) == (0, 1, 1)  # ON CONFLICT DO NOTHING
    assert [s.ref for s in repo.sources_for_node(node.id)] == ["b", "c", "a"]  # ranks 0, 0, 3
    with statements(repo) as counts:
        repo.link_sources(node.id, [a.id])  # already linked: kept as it is
        repo.link_sources(node.id, [])  # nothing to link: nothing sent
    assert (counts["INSERT"], counts["COMMIT"]) == (1, 1) and sum(counts.values()) == 2
    assert [s.ref for s in repo.sources_for_node(node.id)] == ["b", "c", "a"]


# -------------------------------------------------------------------- commands


def test_take_commands_writes_nothing_when_nothing_is_queued(repo):
    run = repo.create_run(question="q", method="rag", params={})
    with statements(repo) as counts:
        assert repo.take_commands(run.id, ["stop"]) == []
    assert sum(counts.values()) == 1
    for kind in ("expand", "stop", "expand"):
        repo.enqueue_command(run.id, kind)
    with statements(repo) as counts:
        taken = repo.take_commands(run.id, ["expand"])
    assert (counts["SELECT"], counts["UPDATE"], counts["COMMIT"]) == (1, 1, 1)
    assert [c.kind for c in taken] == ["expand", "expand"]
    assert all(c.status == CommandStatus.TAKEN and c.taken_at is not None for c in taken)
    assert [c.kind for c in repo.list_commands(run.id, status=CommandStatus.QUEUED)] == ["stop"]


def test_created_objects_are_complete_without_reread(repo):
    repo.create_run(question="first", method="rag", params={})  # reads the local user's id, once per repository
    with statements(repo) as counts:
        run = repo.create_run(question="q", method="rag", params={"k": 1}, max_tokens=10)
        command = repo.enqueue_command(run.id, "stop", {"why": "test"})
        report = repo.save_report(run.id, "text", data={"n": 1})
    assert counts["SELECT"] == 0  # enqueue_command's version bump tells whether the run exists
    assert repo.get_run(run.id).model_dump() == run.model_dump() | {"version": 2}
    assert repo.list_commands(run.id)[0].model_dump() == command.model_dump()
    assert repo.latest_report(run.id).model_dump() == report.model_dump()
