"""A running run's journal (`engine/write_behind.py`): its calls, step-log lines and node updates
are stored together in one transaction, a moment after they are made, on SQLite and PostgreSQL;
reads through the run's graph see them; the budget counts them before they are stored; a refused
batch is raised in the run's thread and kept; after `close` every write goes through at once."""

from __future__ import annotations

import time

import pytest

from engine.contract import RunStateModel
from engine.graph import RunGraph
from engine.runner import RunControl
from engine.search.protocol import Hit
from engine.write_behind import RunJournal
from storage import Repository
from storage.models import stored_id
from storage.repository import SourceInput
from storage.rows_batch import EventRecord
from storage.statuses import NodeStatus
from storage.unwritable import DatabaseUnwritable
from tests.support.db_backends import database_url, repo, statements  # noqa: F401  (fixtures)

# Long enough that nothing is stored on its own while a test looks; `flush` and `close` store now.
HELD_S = 600.0
# A safety limit only (the flusher stores within its 0.05 s delay; a busy machine may take longer).
STORED_WITHIN_S = 60


def _run(repo: Repository) -> str:
    return repo.create_run(question="How do tides work?", method="deot", params={}).id


def _call(journal: RunJournal, node_id: int | None, tokens: int = 10, cost: float = 0.01) -> None:
    journal.record_llm_call(
        journal.run_id,
        node_id=node_id,
        purpose="summarizer",
        model="m",
        prompt_tokens=tokens,
        completion_tokens=tokens,
        cost=cost,
        latency_s=0.5,
    )


def test_writes_are_gathered_and_stored_in_one_transaction(repo):
    run_id = _run(repo)
    node = repo.add_node(run_id, kind="question", label="tides")
    version = repo.get_run(run_id).version
    journal = RunJournal(repo, run_id, delay_s=HELD_S)
    journal.add_event(run_id, "step", "planning the tasks", node_id=node.id, data={"prompt": "p"})
    _call(journal, node.id)
    _call(journal, node.id, tokens=5, cost=0.02)
    journal.update_node(node.id, {"status": NodeStatus.RUNNING})
    journal.update_node(node.id, {"data": {"plan": ["a"]}})
    journal.add_event(run_id, "step", "summarising what the sources say", node_id=node.id)
    assert repo.list_events(run_id) == [] and repo.list_llm_calls(run_id) == []  # gathered, not stored

    with statements(repo) as counts:
        journal.flush()
    assert counts["COMMIT"] == 1
    assert sum(n for word, n in counts.items() if word != "COMMIT") <= 5  # calls, events, the node, the run

    assert [e.text for e in repo.list_events(run_id)] == ["summarising what the sources say", "planning the tasks"]
    stored = repo.get_node(node.id)
    assert stored.status == NodeStatus.RUNNING and stored.data == {"plan": ["a"]}
    assert (stored.prompt_tokens, stored.completion_tokens) == (15, 15)  # its calls, stored with it
    run = repo.get_run(run_id)
    assert (run.llm_calls, run.prompt_tokens, run.completion_tokens) == (2, 15, 15)
    assert run.cost == pytest.approx(0.03) and run.version == version + 1
    journal.close()


def test_the_flusher_stores_on_its_own_and_the_budget_counts_what_is_gathered(repo):
    run_id = _run(repo)
    held = RunJournal(repo, run_id, delay_s=HELD_S)
    _call(held, None, tokens=100, cost=0.5)
    assert repo.run_usage(run_id) == (0, 0.0)
    assert held.run_usage(run_id) == (200, 0.5)  # stored (nothing) plus gathered
    held.close()
    assert repo.run_usage(run_id) == (200, 0.5) and held.run_usage(run_id) == (200, 0.5)  # counted once

    quick = RunJournal(repo, run_id, delay_s=0.05)
    quick.add_event(run_id, "step", "checking the facts")
    # Waits on the flusher's progress: the line appears without a flush from this thread.
    deadline = time.monotonic() + STORED_WITHIN_S
    while not repo.list_events(run_id) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert repo.list_events(run_id)
    quick.close()


def test_the_graph_reads_its_own_gathered_writes_and_hands_back_the_updated_node(repo):
    run_id = _run(repo)
    journal = RunJournal(repo, run_id, delay_s=HELD_S)
    graph = RunGraph(repo, run_id, journal=journal)
    root = graph.add(kind="question", label="tides")
    started = graph.start(root)
    assert started.status == NodeStatus.RUNNING and started.id == root.id
    assert repo.get_node(root.id).status == NodeStatus.PENDING  # not stored yet
    finished = graph.finish(started, content="The moon [1].", data={"answer": "the moon"})
    assert (finished.status, finished.content, finished.data) == (
        NodeStatus.DONE,
        "The moon [1].",
        {"answer": "the moon"},
    )
    merged = graph.update(finished, merge_data={"checked": True})
    assert merged.data == {"answer": "the moon", "checked": True} and merged.status == NodeStatus.DONE

    [read] = graph.nodes()  # a read through the graph stores what was gathered first
    assert (read.status, read.content, read.data) == (
        NodeStatus.DONE,
        "The moon [1].",
        {"answer": "the moon", "checked": True},
    )
    graph.settle()
    graph.narrate("written through now", node_id=root.id)
    assert repo.list_events(run_id)[0].text == "written through now"  # after close: at once


class RefusingRepository(Repository):
    """Refuses `write_batch` while `full` is set, as a full disk does."""

    full = False

    def write_batch(self, run_id, writes):  # noqa: ANN001, ANN201
        if self.full:
            raise DatabaseUnwritable(DatabaseUnwritable.FULL, "test.sqlite3")
        return super().write_batch(run_id, writes)


def test_a_refused_batch_is_raised_in_the_runs_thread_and_kept(database_url):  # noqa: F811
    from storage import open_database

    db = open_database(database_url)
    repo = RefusingRepository(db)
    try:
        run_id = _run(repo)
        journal = RunJournal(repo, run_id, delay_s=0.01)
        repo.full = True
        journal.add_event(run_id, "step", "planning the tasks")
        # The flusher meets the refusal; the run's thread is told at its next write (or flush).
        with pytest.raises(DatabaseUnwritable):
            for _ in range(STORED_WITHIN_S * 100):
                journal.add_event(run_id, "step", "checking the plan")
                time.sleep(0.01)
        repo.full = False  # space freed: nothing gathered was lost, in order
        journal.close()
        texts = [e.text for e in reversed(repo.list_events(run_id))]
        assert texts[0] == "planning the tasks" and set(texts[1:]) == {"checking the plan"}
    finally:
        db.dispose()


def test_an_executing_graph_reads_its_nodes_once_and_from_memory_until_it_settles(repo):
    run_id = _run(repo)
    journal = RunJournal(repo, run_id, delay_s=HELD_S)
    graph = RunGraph(repo, run_id, journal=journal)
    root = graph.add(kind="question", label="tides")
    child = graph.add(kind="question", label="moon", parent=root)
    assert [n.id for n in graph.nodes()] == [root.id, child.id]  # the one read
    with statements(repo) as counts:
        graph.finish(graph.start(child), content="The moon pulls [1].", data={"answer": "the moon"})
        done = graph.nodes(status=NodeStatus.DONE)
        assert [n.id for n in graph.children(root)] == [child.id]
        assert graph.node(child.id).content == "The moon pulls [1]."
        assert [n.id for n in graph.frontier(["question"])] == [root.id]
    assert sum(counts.values()) == 0  # no query, and nothing gathered was stored to answer them
    assert [(n.id, n.data) for n in done] == [(child.id, {"answer": "the moon"})]
    done[0].data["answer"] = "changed by a caller"  # a copy: what the graph remembers stays
    assert graph.node(child.id).data == {"answer": "the moon"}
    assert repo.get_node(child.id).status == NodeStatus.PENDING  # still only gathered

    graph.settle()  # stores it all; reads go to storage again, and see writes made beside the graph
    repo.update_node(root.id, status=NodeStatus.FAILED)
    assert [n.status for n in graph.nodes()] == [NodeStatus.FAILED, NodeStatus.DONE]


def test_a_new_runs_graph_reads_no_nodes_and_a_first_execution_puts_nothing_back(repo):
    run_id = _run(repo)
    with statements(repo) as counts:
        assert repo.open_execution(run_id, has_nodes=False, started_kind="run") is False
    assert sum(counts.values()) == 1  # one SELECT: it never ran, so nothing is left running or taken
    graph = RunGraph(repo, run_id, journal=RunJournal(repo, run_id, delay_s=HELD_S))
    graph.has_no_nodes()
    with statements(repo) as counts:
        assert graph.nodes() == [] and graph.root() is None
    assert sum(counts.values()) == 0

    node = repo.add_node(run_id, kind="question", label="tides", status=NodeStatus.RUNNING)
    command = repo.enqueue_command(run_id, "expand", {"node_id": node.id})
    repo.take_commands(run_id, ["expand"])
    repo.add_event(run_id, "run", "the run started", data={"phase": "started"})
    assert repo.open_execution(run_id, has_nodes=True, started_kind="run") is True
    assert repo.get_node(node.id).status == NodeStatus.PENDING
    assert [c.status for c in repo.list_commands(run_id) if c.id == command.id] == ["queued"]


def _hit(title: str, text: str) -> Hit:
    return Hit(title=title, ref=f"t/{title}#0", snippet=text[:40], text=text, kind="corpus")


def test_a_first_execution_knows_its_sources_links_states_and_reports_without_a_read(repo):
    """What a first execution wrote is all there is: its graph answers reads of sources (the run's
    and a node's, by rank), run states and reports from memory, as storage would."""
    run_id = _run(repo)
    journal = RunJournal(repo, run_id, delay_s=HELD_S)
    graph = RunGraph(repo, run_id, journal=journal)
    graph.has_no_nodes(first_execution=True)
    root = graph.add(kind="question", label="tides")
    child = graph.add(kind="question", label="moon", parent=root)
    with statements(repo) as counts:
        assert graph.sources() == [] and graph.sources(root) == []
        assert graph.report() is None and graph.state("pool", dict) is None  # type: ignore[type-var]
    assert sum(counts.values()) == 0
    moon, sun, tide = _hit("Moon", "The moon pulls."), _hit("Sun", "The sun pulls too."), _hit("Tide", "Twice a day.")
    graph.add_sources([moon, sun], node=root)
    # Two searches stored at once: each ranked within its own; a page read again unites its text.
    graph.add_source_batches([[tide, moon], [_hit("Moon", "Spring tides."), sun]], node=child)
    graph.link_sources(root, [stored_id(s) for s in graph.sources(child)])
    with statements(repo) as counts:
        remembered = {"run": graph.sources(), "root": graph.sources(root), "child": graph.sources(child)}
    assert sum(counts.values()) == 0
    graph.settle()  # from storage now
    stored = {"run": graph.sources(), "root": graph.sources(root), "child": graph.sources(child)}
    assert {k: [s.model_dump() for s in v] for k, v in remembered.items()} == {
        k: [s.model_dump() for s in v] for k, v in stored.items()
    }
    # Tide first in its search; Moon second in it (its link keeps that rank), Sun second in the other.
    assert [s.title for s in stored["child"]] == ["Tide", "Moon", "Sun"]
    assert [s.text for s in stored["run"] if s.title == "Moon"] == ["Spring tides.\nThe moon pulls."]


def test_source_batches_store_what_one_add_per_batch_stores(repo):
    batches = [
        [_hit("Moon", "The moon pulls."), _hit("Sun", "The sun.")],
        [_hit("Tide", "Twice a day."), _hit("Moon", "Spring tides.")],
        [],
    ]
    runs = []
    for together in (False, True):
        run_id = _run(repo)
        node = repo.add_node(run_id, kind="question", label="tides")
        inputs = [[SourceInput(ref=h.ref, title=h.title, snippet=h.snippet, text=h.text) for h in b] for b in batches]
        with statements(repo) as counts:
            if together:
                got = repo.add_source_batches(run_id, inputs, node_id=node.id)
            else:
                got = [repo.add_sources(run_id, batch, node_id=node.id) for batch in inputs]
        if together:
            assert counts["COMMIT"] == 1
        first = min(s.id for b in got for s in b)
        runs.append(
            (
                [[(s.id - first, s.text) for s in b] for b in got],
                [(s.id - first, s.title, s.text) for s in repo.sources_for_node(node.id)],
            )
        )
    assert runs[0] == runs[1]


def test_a_step_reads_the_steering_queue_only_when_a_command_may_wait(repo):
    """The control's poll (one SELECT every `poll_s`) says whether commands other than controls
    are queued; a step reads the steering queue only then, or after a poke."""
    run_id = _run(repo)
    control = RunControl(repo, run_id, poll_s=HELD_S, heartbeat_s=HELD_S)
    assert control.steering_due() and not control.steering_due()  # unknown at first: read once
    control.checkpoint()  # no poll yet: the first is due `poll_s` after the control began
    assert not control.steering_due()
    repo.enqueue_command(run_id, "expand", {"node_id": 1})  # from another process: no poke
    control.checkpoint()
    assert not control.steering_due()  # not polled again yet (`poll_s`)
    control.poke()  # what `Runner.steer` does here; a poll after `poll_s` does the same
    with statements(repo) as counts:
        control.checkpoint()
    assert sum(counts.values()) == 1  # one SELECT: controls taken (none), steering seen
    assert control.steering_due() and not control.steering_due()
    assert [c.kind for c in repo.list_commands(run_id, status="queued")] == ["expand"]  # left for the step


def test_node_counts_links_and_edges_go_with_the_next_batch(repo):
    """Nodes are stored at once (their ids are needed), their count and the run's version with the
    journal's next batch; links of sources and edges are gathered, and read through the graph
    they are stored first. An edge to a node of another run is refused at once, as storage would."""
    run_id = _run(repo)
    journal = RunJournal(repo, run_id, delay_s=HELD_S)
    graph = RunGraph(repo, run_id, journal=journal)
    graph.has_no_nodes(first_execution=True)
    version = repo.get_run(run_id).version
    root = graph.add(kind="question", label="tides")
    child = graph.add(kind="question", label="moon", parent=root)
    assert repo.get_node(child.id).parent_id == root.id  # stored
    assert (repo.get_run(run_id).node_count, repo.get_run(run_id).version) == (0, version)  # not yet counted
    [moon] = graph.add_sources([_hit("Moon", "The moon pulls.")])
    with statements(repo) as counts:
        graph.link_sources(child, [moon.id])
        graph.link(child, root, "backtrack", data={"order": 1})
    assert sum(counts.values()) == 0
    other = repo.add_node(_run(repo), kind="question", label="elsewhere")
    with pytest.raises(ValueError, match="not a node of run"):
        graph.link(root, other, "backtrack")
    assert [e.kind for e in graph.edges()] == ["child", "backtrack"]  # stored first, then read
    graph.settle()
    assert [s.id for s in repo.sources_for_node(child.id)] == [moon.id]
    run = repo.get_run(run_id)
    assert run.node_count == 2 and run.version > version


def test_a_claim_returns_the_run_and_a_first_execution_reads_nothing_to_open(repo):
    run_id = _run(repo)
    claim = repo.claim_run(run_id, "host:1:here")
    claimed = claim.run
    assert (claimed.id, claimed.status, claimed.owner) == (run_id, "running", "host:1:here")
    assert claimed.started_at is not None and not claim.commands_queued
    repo.enqueue_command(run_id, "pause")
    assert repo.claim_run(run_id, "host:1:here").commands_queued  # its control polls at the first checkpoint
    with statements(repo) as counts:
        assert repo.open_execution(run_id, has_nodes=False, started_kind="run", first=True) is False
    assert sum(counts.values()) == 0


def test_a_report_is_gathered_and_the_runs_end_rides_the_last_batch(repo):
    """A report written while the run executes is stored with the journal's next batch (the graph
    answers reads of it meanwhile); how the run ended is stored with the last batch, in its one
    transaction, its line last, the nodes' usage totals as `set_status` leaves them."""
    run_id = _run(repo)
    journal = RunJournal(repo, run_id, delay_s=HELD_S)
    graph = RunGraph(repo, run_id, journal=journal)
    graph.has_no_nodes(first_execution=True)
    node = graph.add(kind="question", label="tides")
    graph.update(node, status=NodeStatus.DONE, content="The moon.")
    _call(journal, node.id)
    graph.save_report("The moon pulls the tides.", data={"method": "deot"})
    assert repo.latest_report(run_id) is None  # gathered
    with statements(repo) as counts:
        report = graph.report()
    assert sum(counts.values()) == 0 and report is not None and report.markdown == "The moon pulls the tides."
    journal.add_event(run_id, "step", "writing the report")
    ending = repo.run_ending("done", stop_reason="", event=EventRecord(kind="run", text="finished"))
    with statements(repo) as counts:
        assert graph.settle(ending) is True
    assert counts["COMMIT"] == 1
    run = repo.get_run(run_id)
    assert (run.status, run.owner, run.llm_calls) == ("done", "", 1) and run.finished_at is not None
    assert [e.text for e in repo.list_events(run_id)][:2] == ["finished", "writing the report"]  # newest first
    stored = repo.latest_report(run_id)
    assert stored is not None and (stored.markdown, stored.data) == ("The moon pulls the tides.", {"method": "deot"})
    assert repo.get_node(node.id).prompt_tokens == 10


def test_an_end_the_database_refuses_is_dropped_and_the_runs_writes_kept(database_url):  # noqa: F811
    """The last batch refused (a full disk): the run's writes stay gathered for the next flush, its
    end is not stored with them later (the runner records the end as it then is)."""
    from storage import open_database

    db = open_database(database_url)
    repo = RefusingRepository(db)
    try:
        run_id = _run(repo)
        journal = RunJournal(repo, run_id, delay_s=HELD_S)
        journal.add_event(run_id, "step", "writing the report")
        repo.full = True
        with pytest.raises(DatabaseUnwritable):
            journal.close(repo.run_ending("done", event=EventRecord(kind="run", text="finished")))
        repo.full = False
        journal.flush()
        assert [e.text for e in repo.list_events(run_id)] == ["writing the report"]
        assert repo.get_run(run_id).status != "done"
    finally:
        db.dispose()


class Pool(RunStateModel):
    concepts: list[str] = []


def test_run_states_are_gathered_each_stored_as_the_next_version_in_order(repo):
    """A run state saved while the run executes is stored with the journal's next batch, each save
    its own version in the order they were made (the graph answers reads of the latest meanwhile);
    a read of a state's versions stores the gathered ones first."""
    run_id = _run(repo)
    journal = RunJournal(repo, run_id, delay_s=HELD_S)
    graph = RunGraph(repo, run_id, journal=journal)
    graph.has_no_nodes(first_execution=True)
    with statements(repo) as counts:
        graph.save_state("pool", Pool(concepts=["tides"]))
        graph.save_state("pool", Pool(concepts=["tides", "moon"]))
        latest = graph.state("pool", Pool)
    assert sum(counts.values()) == 0  # gathered, and read from memory
    assert latest == Pool(concepts=["tides", "moon"]) and repo.list_run_states(run_id) == []
    assert [p.concepts for p in graph.state_history("pool", Pool)] == [["tides"], ["tides", "moon"]]
    graph.save_state("pool", Pool(concepts=["sun"]))
    graph.save_state("outline", Pool(concepts=["a"]))
    version = repo.get_run(run_id).version
    with statements(repo) as counts:
        graph.settle()
    assert counts["COMMIT"] == 1
    stored = repo.list_run_states(run_id)
    assert [(s.name, s.version, s.data["concepts"]) for s in stored] == [
        ("outline", 1, ["a"]),
        ("pool", 1, ["tides"]),
        ("pool", 2, ["tides", "moon"]),
        ("pool", 3, ["sun"]),
    ]
    assert repo.get_run(run_id).version == version + 1  # readers of the run learn of them
    assert graph.state("pool", Pool) == Pool(concepts=["sun"])  # from storage now
