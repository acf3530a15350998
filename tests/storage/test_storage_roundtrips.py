"""Round trips per write, and what they must not change — on SQLite and PostgreSQL.

A write is one statement per table it changes plus the run's version bump, which PostgreSQL folds
into the write (`WITH ... UPDATE runs`), and one COMMIT; nothing is read back. A node's usage totals
come from its LLM calls: every update of the node recomputes them, a finished run recomputes them
for all its nodes, and `node_usage` reads them live."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from sqlalchemy import inspect
from sqlalchemy.exc import IntegrityError

from storage import NodeInput
from storage.models import NodeStatus, RunStatus
from storage.repository import NodeNotFound, RunNotFound, SourceInput
from tests.support.db_backends import database_url, repo, run_threads, statements  # noqa: F401  (fixtures)


def write_plus_bump(repo, *sqlite_words: str) -> dict[str, int]:
    """The statements of a write whose last statement is followed by the version bump: on SQLite
    the given statements, an UPDATE of the run and a COMMIT; on PostgreSQL the last statement and
    the bump are one `WITH`."""
    if repo.db.is_sqlite:
        return dict(Counter([*sqlite_words, "UPDATE", "COMMIT"]))
    return dict(Counter([*sqlite_words[:-1], "WITH", "COMMIT"]))


def call(repo, run_id, node_id, tokens=(3, 2), cost=0.001, latency=0.01):
    repo.record_llm_call(
        run_id,
        node_id=node_id,
        purpose="p",
        model="m",
        prompt_tokens=tokens[0],
        completion_tokens=tokens[1],
        cost=cost,
        latency_s=latency,
    )


def usage_columns(node):
    return node.prompt_tokens, node.completion_tokens, node.cost, node.latency_s


# ----------------------------------------------------------------- node updates


def test_update_node_without_merge_is_one_update_returning(repo):
    run = repo.create_run(question="q", method="deot", params={})
    node = repo.add_node(run.id, kind="question", label="q", data={"old": 1})
    version = repo.run_version(run.id)
    with statements(repo) as counts:
        updated = repo.update_node(node.id, label="q2", priority=0.5, data={"new": 2})
    assert dict(counts) == write_plus_bump(repo, "UPDATE")
    assert (updated.label, updated.priority, updated.data) == ("q2", 0.5, {"new": 2})  # data= replaces
    assert inspect(updated).detached
    assert repo.get_node(node.id).model_dump() == updated.model_dump()  # complete as stored
    assert repo.run_version(run.id) == version + 1

    with statements(repo) as counts, pytest.raises(NodeNotFound):
        repo.update_node(10**9, label="nobody")
    assert counts["COMMIT"] == 0 and counts["SELECT"] == 0
    assert repo.run_version(run.id) == version + 1


def test_merge_data_reads_once_and_data_with_merge_data_does_not_read(repo):
    run = repo.create_run(question="q", method="deot", params={})
    node = repo.add_node(run.id, kind="question", label="q", data={"a": 1, "b": 1})
    with statements(repo) as counts:
        merged = repo.update_node(node.id, merge_data={"b": 2, "c": 3})
    assert dict(counts) == write_plus_bump(repo, "SELECT", "UPDATE")
    assert merged.data == {"a": 1, "b": 2, "c": 3}
    with statements(repo) as counts:
        both = repo.update_node(node.id, data={"x": 1, "c": 0}, merge_data={"c": 4})
    assert counts["SELECT"] == 0
    assert both.data == repo.get_node(node.id).data == {"x": 1, "c": 4}  # set, then merged into
    with statements(repo) as counts:
        repo.update_node(node.id, merge_data={}, label="empty merge: nothing to read")
    assert counts["SELECT"] == 0 and repo.get_node(node.id).data == {"x": 1, "c": 4}
    with pytest.raises(NodeNotFound):
        repo.update_node(10**9, merge_data={"a": 1})


def test_start_finish_fail_replace_without_reading_and_merge_as_before(repo):
    run = repo.create_run(question="q", method="deot", params={})
    node = repo.add_node(run.id, kind="question", label="q", data={"keep": 1})
    with statements(repo) as counts:
        started = repo.start_node(node.id)
        finished = repo.finish_node(node.id, content="answer", label="Q", replace_data={"only": 2})
    assert counts["SELECT"] == 0
    assert counts["COMMIT"] == 2 and sum(counts.values()) == (6 if repo.db.is_sqlite else 4)
    assert started.status == NodeStatus.RUNNING and started.started_at is not None
    assert (finished.status, finished.content, finished.label, finished.data) == (
        NodeStatus.DONE,
        "answer",
        "Q",
        {"only": 2},
    )
    assert finished.started_at is not None and finished.finished_at is not None
    assert repo.get_node(node.id).model_dump() == finished.model_dump()

    assert repo.finish_node(node.id, data={"more": 3}).data == {"only": 2, "more": 3}  # data= merges
    assert repo.start_node(node.id, replace_data={"s": 1}).data == {"s": 1}
    assert repo.start_node(node.id, data={"t": 2}).data == {"s": 1, "t": 2}
    with statements(repo) as counts:
        failed = repo.fail_node(node.id, "boom", replace_data={"why": "x"})
    assert counts["SELECT"] == 0
    assert (failed.status, failed.error, failed.data) == (NodeStatus.FAILED, "boom", {"why": "x"})
    assert repo.fail_node(node.id, "again", data={"more": 1}).data == {"why": "x", "more": 1}
    with pytest.raises(ValueError, match="not both"):
        repo.finish_node(node.id, data={"a": 1}, replace_data={"b": 2})
    with pytest.raises(NodeNotFound):
        repo.finish_node(10**9, replace_data={})


# ------------------------------------------------------------------ usage totals


def test_record_llm_call_does_not_touch_the_node(repo):
    run = repo.create_run(question="q", method="rag", params={})
    node = repo.add_node(run.id, kind="answer", label="a")
    version = repo.run_version(run.id)
    with statements(repo) as counts:
        call(repo, run.id, node.id)
    assert dict(counts) == write_plus_bump(repo, "INSERT")  # the call; the run's totals; COMMIT
    stored = repo.get_run(run.id)
    assert (stored.prompt_tokens, stored.completion_tokens, stored.llm_calls, stored.version) == (3, 2, 1, version + 1)
    assert usage_columns(repo.get_node(node.id)) == (0, 0, 0.0, 0.0)  # until its next update
    assert repo.node_usage(node.id) == (3, 2, pytest.approx(0.001), pytest.approx(0.01))
    with pytest.raises(IntegrityError):  # the keys refuse a call of no run, as before
        call(repo, "nosuchrun", None)


def test_node_totals_after_finish_after_late_calls_and_at_the_end_of_the_run(repo):
    run = repo.create_run(question="q", method="deot", params={})
    node = repo.add_node(run.id, kind="question", label="q")
    other = repo.add_node(run.id, kind="question", label="no calls")
    repo.start_node(node.id)
    call(repo, run.id, node.id, (10, 5), 0.5, 1.0)
    call(repo, run.id, node.id, (1, 1), 0.25, 0.5)
    call(repo, run.id, None, (7, 7), 1.0, 1.0)  # a run-level call: no node's
    finished = repo.finish_node(node.id, content="done")
    assert usage_columns(finished) == (11, 6, 0.75, 1.5)
    assert usage_columns(repo.get_node(node.id)) == (11, 6, 0.75, 1.5)

    # A call after the finish (the report writer's, say) counts from the next update on...
    call(repo, run.id, node.id, (100, 50), 2.0, 3.0)
    assert repo.get_node(node.id).prompt_tokens == 11
    assert repo.node_usage(node.id) == (111, 56, 2.75, 4.5)
    assert usage_columns(repo.update_node(node.id, label="relabelled")) == (111, 56, 2.75, 4.5)

    # ... or from the run's end: a terminal status recomputes every node of the run.
    call(repo, run.id, node.id, (1000, 0), 0.0, 0.0)
    repo.set_status(run.id, RunStatus.PAUSED)  # not terminal: nodes untouched
    assert repo.get_node(node.id).prompt_tokens == 111
    with statements(repo) as counts:
        repo.set_status(run.id, RunStatus.DONE)
    assert (counts["UPDATE"], counts["COMMIT"], counts["SELECT"]) == (2, 1, 0)  # nodes, run
    assert usage_columns(repo.get_node(node.id)) == (1111, 56, 2.75, 4.5)
    assert usage_columns(repo.get_node(other.id)) == (0, 0, 0.0, 0.0)
    assert repo.node_usage(other.id) == (0, 0, 0.0, 0.0)
    tokens, cost = repo.run_usage(run.id)
    assert (tokens, cost) == (1111 + 56 + 14, 3.75)
    with statements(repo) as counts:
        assert repo.node_usage(node.id) == (1111, 56, 2.75, 4.5)
    assert sum(counts.values()) == 1
    with pytest.raises(NodeNotFound):
        repo.node_usage(10**9)


@pytest.mark.parametrize("end", [RunStatus.FAILED, RunStatus.STOPPED, RunStatus.INTERRUPTED])
def test_every_terminal_status_recomputes_node_totals(repo, end):
    run = repo.create_run(question="q", method="deot", params={})
    node = repo.add_node(run.id, kind="question", label="q")
    call(repo, run.id, node.id, (4, 4), 0.5, 0.5)
    repo.set_status(run.id, end)
    assert usage_columns(repo.get_node(node.id)) == (4, 4, 0.5, 0.5)
    with pytest.raises(RunNotFound):
        repo.set_status("nosuchrun", end)


def test_concurrent_calls_and_updates_sum_exactly(repo):
    run = repo.create_run(question="q", method="deot", params={})
    nodes = [repo.add_node(run.id, kind="question", label=f"n{i}") for i in range(2)]
    barrier = threading.Barrier(5)

    def work(worker):
        barrier.wait()
        if worker == 4:  # a fifth thread keeps updating the nodes meanwhile
            for i in range(20):
                repo.update_node(nodes[i % 2].id, label=f"u{i}")
            return
        for _ in range(15):
            call(repo, run.id, nodes[worker % 2].id, (3, 2), 0.125, 0.25)

    run_threads(work, 5)
    run_after = repo.get_run(run.id)
    assert (run_after.llm_calls, run_after.prompt_tokens, run_after.completion_tokens) == (60, 180, 120)
    assert run_after.cost == pytest.approx(7.5)
    for node in nodes:
        assert repo.node_usage(node.id) == (90, 60, 3.75, 7.5)
    repo.set_status(run.id, RunStatus.DONE)
    for node in nodes:
        assert usage_columns(repo.get_node(node.id)) == (90, 60, 3.75, 7.5)


def test_reset_and_dead_runs_recompute_totals_and_keep_a_live_claim(repo):
    run = repo.create_run(question="q", method="deot", params={})
    node = repo.add_node(run.id, kind="question", label="q")
    repo.claim_run(run.id, "host:1:dead")
    repo.start_node(node.id)
    call(repo, run.id, node.id, (5, 5), 0.0, 0.0)
    assert repo.mark_dead_runs_interrupted(lambda r: False) == [run.id]
    assert repo.get_run(run.id).status == RunStatus.INTERRUPTED
    assert repo.get_node(node.id).prompt_tokens == 5
    call(repo, run.id, node.id, (5, 5), 0.0, 0.0)
    assert repo.reset_unfinished_nodes(run.id) == 1
    reset = repo.get_node(node.id)
    assert (reset.status, reset.started_at, reset.prompt_tokens) == (NodeStatus.PENDING, None, 10)

    # The owner found dead is the one the update requires: a claim made since is kept.
    first_start = repo.get_run(run.id).started_at
    repo.claim_run(run.id, "host:2:old")

    def dead_but_reclaimed(found):
        repo.claim_run(found.id, "host:3:new")
        return False

    assert repo.mark_dead_runs_interrupted(dead_but_reclaimed) == [run.id]
    kept = repo.get_run(run.id)
    assert (kept.status, kept.owner) == (RunStatus.RUNNING, "host:3:new")
    assert kept.started_at == first_start  # a claim keeps the first start, without reading it


# --------------------------------------------------------------------- sources


def test_add_sources_one_upsert_in_input_order_and_detached(repo):
    run = repo.create_run(question="q", method="rag", params={})
    node = repo.add_node(run.id, kind="search", label="s")
    repo.add_sources(run.id, [SourceInput(ref="old", title="Old", text="x" * 10)])
    version = repo.run_version(run.id)
    batch = [
        SourceInput(ref="new", title="New", text="n", url="https://example.org/n", kind="web"),
        SourceInput(ref="old", title="ignored", text="short"),
        SourceInput(ref="new", title="ignored too", text="a longer n"),
        SourceInput(ref="old", title="ignored", text="y" * 20),
    ]
    with statements(repo) as counts:
        stored = repo.add_sources(run.id, batch, node_id=node.id)
    assert dict(counts) == write_plus_bump(repo, "SELECT", "INSERT", "INSERT")
    assert repo.run_version(run.id) == version + 1
    assert [s.ref for s in stored] == ["new", "old", "new", "old"]
    assert stored[0] is stored[2] and stored[1] is stored[3]
    assert all(inspect(s).detached and s.id and s.created_at for s in stored)
    new, old = stored[0], stored[1]
    assert (new.title, new.text, new.url, new.kind) == ("New", "a longer n", "https://example.org/n", "web")
    # The row is kept; its text keeps every read's paragraphs (a later read never drops what was cited).
    assert (old.title, old.text) == ("Old", "y" * 20 + "\nshort\n" + "x" * 10)
    assert {s.ref: s.model_dump() for s in repo.list_sources(run.id)} == {s.ref: s.model_dump() for s in (new, old)}
    assert [s.ref for s in repo.sources_for_node(node.id)] == ["new", "old"]

    # Without a node: the upsert and the version bump.
    with statements(repo) as counts:
        repo.add_sources(run.id, [SourceInput(ref="third", title="T")])
    # (one SELECT: the texts stored for these refs, which a read again unites with)
    assert (counts["INSERT"], counts["UPDATE"], counts["COMMIT"], counts["SELECT"]) == (1, 1, 1, 1)


def test_the_sources_upsert_is_compiled_once_whatever_the_batch(repo):
    """Every node stores its sources: the upsert's rows are parameters of one cached statement. Built
    into its VALUES they made a statement SQLAlchemy compiled on each call (about 1 ms of CPU each)."""
    from sqlalchemy import event
    from sqlalchemy.engine.default import DefaultExecutionContext

    run = repo.create_run(question="q", method="omnithink", params={})
    node = repo.add_node(run.id, kind="subtopic", label="s")
    # Compiled once for one row and once for several (sent as one INSERT of many VALUES).
    repo.add_sources(run.id, [SourceInput(ref="warm", title="W")], node_id=node.id)
    repo.add_sources(run.id, [SourceInput(ref="warm", title="W"), SourceInput(ref="up", title="U")], node_id=node.id)
    compiled: list[bool] = []

    def seen(conn, cursor, statement, parameters, context: DefaultExecutionContext, executemany) -> None:
        if statement.startswith("INSERT INTO sources"):
            compiled.append(context.cache_hit.name == "CACHE_MISS")

    event.listen(repo.db.engine, "before_cursor_execute", seen)
    try:
        batches = [
            [SourceInput(ref=f"r{i}-{j}", title=f"R{j}", text=f"paragraph {j}") for j in range(1, 1 + i)]
            for i in (1, 3, 2)
        ]
        stored = repo.add_source_batches(run.id, batches, node_id=node.id)
        repo.add_sources(run.id, [SourceInput(ref="r3-1", title="again", text="a longer text")], node_id=node.id)
    finally:
        event.remove(repo.db.engine, "before_cursor_execute", seen)
    assert compiled == [False, False, False, False]  # four upserts, no compile
    assert [[s.ref for s in batch] for batch in stored] == [["r1-1"], ["r3-1", "r3-2", "r3-3"], ["r2-1", "r2-2"]]
    assert {s.ref: s.text for s in repo.list_sources(run.id)}["r3-1"] == "a longer text\nparagraph 1"


def test_add_sources_of_a_large_batch(repo):
    run = repo.create_run(question="q", method="rag", params={})
    node = repo.add_node(run.id, kind="search", label="s")
    batch = [SourceInput(ref=f"doc{i:04d}", title=str(i), text="t" * (i % 7), score=i / 2000) for i in range(1200)]
    stored = repo.add_sources(run.id, batch + batch[:10], node_id=node.id)
    assert [s.ref for s in stored] == [b.ref for b in batch + batch[:10]]
    assert len({s.id for s in stored}) == 1200
    assert [s.ref for s in repo.sources_for_node(node.id)] == [b.ref for b in batch]


def test_concurrent_adders_keep_the_longest_text_and_every_link(repo):
    run = repo.create_run(question="q", method="rag", params={})
    shared = repo.add_node(run.id, kind="search", label="shared")
    refs = [f"doc{i}" for i in range(10)]
    barrier = threading.Barrier(4)

    def add(worker):
        barrier.wait()
        for round_ in range(5):  # the same refs, in opposite orders, to the same node
            batch = refs[:: 1 if (worker + round_) % 2 else -1]
            stored = repo.add_sources(
                run.id,
                [SourceInput(ref=r, title=f"w{worker}", text=r * (worker + 1)) for r in batch],
                node_id=shared.id,
            )
            assert [s.ref for s in stored] == batch
            repo.link_sources(shared.id, [s.id for s in stored])

    run_threads(add)
    sources = repo.list_sources(run.id)
    assert sorted(s.ref for s in sources) == sorted(refs)
    assert all(s.text == s.ref * 4 for s in sources)  # the longest text, whoever stored the row
    assert sorted(s.ref for s in repo.sources_for_node(shared.id)) == sorted(refs)
    assert len(repo.node_source_links(run.id)) == len(refs)


def test_concurrent_merges_calls_and_links_on_one_node(repo):
    """Merges lock the node's row, adders of its sources hold the run's row while they link to it,
    calls add to the run: none may wait for the other in a circle."""
    run = repo.create_run(question="q", method="deot", params={})
    node = repo.add_node(run.id, kind="question", label="q", data={})
    barrier = threading.Barrier(4)

    def work(worker):
        barrier.wait()
        for i in range(15):
            if worker < 2:
                repo.update_node(node.id, merge_data={f"w{worker}-{i}": i})
            elif worker == 2:
                repo.add_sources(run.id, [SourceInput(ref=f"d{i}-{j}", title="t") for j in range(3)], node_id=node.id)
            else:
                call(repo, run.id, node.id, (1, 1), 0.0, 0.0)

    run_threads(work)
    assert len(repo.sources_for_node(node.id)) == 45
    assert repo.node_usage(node.id)[:2] == (15, 15)
    data = repo.get_node(node.id).data
    if not repo.db.is_sqlite:  # the read is locked there; pysqlite reads outside the transaction
        assert data == {f"w{w}-{i}": i for w in range(2) for i in range(15)}


# -------------------------------------------------------------- other writes


def test_add_node_edges_and_bump(repo):
    run = repo.create_run(question="q", method="deot", params={})
    root = repo.add_node(run.id, kind="question", label="q")
    with statements(repo) as counts:
        child = repo.add_node(run.id, kind="question", label="c", parent_id=root.id)
    assert dict(counts) == write_plus_bump(repo, "INSERT", "INSERT")  # the node, its edge (+ bump)
    assert [(e.src, e.dst) for e in repo.list_edges(run.id)] == [(root.id, child.id)]
    stored = repo.get_run(run.id)
    assert (stored.node_count, stored.version) == (2, 2)
    many = repo.add_nodes(
        run.id, [NodeInput(kind="question", label=f"n{i}", parent_id=root.id) for i in range(620)]
    )  # edges in two INSERTs
    assert len(repo.list_edges(run.id)) == 621 and repo.get_run(run.id).node_count == 622
    assert {e.dst for e in repo.list_edges(run.id)} == {child.id, *(n.id for n in many)}


def test_run_state_command_and_claim_without_reads(repo):
    run = repo.create_run(question="q", method="omnithink", params={})
    with statements(repo) as counts:
        state = repo.save_run_state(run.id, "pool", {"a": 1})
    # The version bump (it serialises savers of the run), INSERT ... (SELECT max + 1) RETURNING.
    assert dict(counts) == {"UPDATE": 1, "INSERT": 1, "COMMIT": 1}
    assert (state.version, state.data, inspect(state).detached) == (1, {"a": 1}, True)
    assert repo.latest_run_state(run.id, "pool").model_dump() == state.model_dump()
    assert repo.save_run_state(run.id, "pool", {"a": 2}).version == 2
    with pytest.raises(RunNotFound):
        repo.save_run_state("nosuchrun", "pool", {})

    with statements(repo) as counts:
        repo.claim_run(run.id, "host:1:me")
    assert dict(counts) == {"UPDATE": 1, "COMMIT": 1}
    with pytest.raises(RunNotFound):
        repo.claim_run("nosuchrun", "host:1:me")

    with pytest.raises(RunNotFound):
        repo.enqueue_command("nosuchrun", "stop")
    with statements(repo) as counts:
        repo.enqueue_command(run.id, "stop")
    assert dict(counts) == {"UPDATE": 1, "INSERT": 1, "COMMIT": 1}


def test_a_source_read_again_keeps_the_passages_every_reader_was_shown(repo):
    """A web page read for two searches, each focused on its own query: the second read used to
    replace the first when a little longer, so the first summary's citations pointed at text that
    no longer held them (review 14, research)."""
    run = repo.create_run(question="q", method="research", params={})
    # A page's passages as `read_pages` joins them: one per line.
    first = "Legions went unpaid in the third century.\nSoldiers mutinied."
    second = "Soldiers mutinied.\nThe aqueducts fell into disrepair as taxes failed to come in."
    repo.add_sources(run.id, [SourceInput(ref="https://example.org/rome", title="Rome", text=first, kind="web")])
    [stored] = repo.add_sources(
        run.id, [SourceInput(ref="https://example.org/rome", title="Rome", text=second, kind="web")]
    )
    # The newest read first (the node reading it now quotes it from the start), the earlier one's
    # other lines after it, nothing twice.
    assert stored.text == second + "\nLegions went unpaid in the third century."
    [again] = repo.add_sources(
        run.id, [SourceInput(ref="https://example.org/rome", title="Rome", text=first, kind="web")]
    )
    assert again.text == first + "\nThe aqueducts fell into disrepair as taxes failed to come in."
