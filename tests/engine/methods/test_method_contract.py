"""The method contract, checked for every registered method (and the test-only `gridtest`): a
method added to the registry later is covered without touching this file.

For each method:
 1. its declarations are consistent (the contract builds, every node kind's data has a default for
    every field, every command payload without required fields parses from nothing);
 2. a run on the fake LLM ends `done`, and everything it stored fits the declarations (node kinds
    and data, edge kinds, run states);
 3. every citation resolves: each `[n]` of the rendered report is listed in its Sources section and
    names a stored source of the run; each stored `[[S<id>]]` names a source of this run;
 4. every declared command refuses a bad payload, a node of another run, a node it does not apply
    to (wrong kind or status, the root, a pruned node) and changes nothing stored; an undeclared
    command is refused the same way;
 5. a `thoughtmap run` killed with SIGKILL mid-run and resumed recomputes no finished node.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from engine.citations import cited_source_ids, number_citations
from engine.config import load_settings
from engine.contract import (
    ALL_STATUSES,
    NODE_TAB,
    CommandRejected,
    ContractError,
    MethodContract,
    NodeData,
    NodeKind,
    RunStateModel,
    ViewSpec,
)
from engine.graph import RunGraph
from engine.llm.fake import FakeLLM
from engine.llm.limits import ConcurrencyLimiter
from engine.llm.pricing import PriceTable
from engine.methods.base import Method, UnsupportedCommand
from engine.report import render_markdown
from engine.safe_text import inline_text
from engine.services import Services
from storage import Repository, open_database
from storage.models import NodeStatus, RunStatus
from tests.support.contract_helpers import (
    QUESTION,
    SMALLER,
    bad_payloads,
    methods,
    params_for,
    poll_until,
    start_cli_run,
    stop,
    stored_state,
    valid_base,
)

METHODS = methods()
REFUSED = (UnsupportedCommand, CommandRejected, ValueError)

by_method = pytest.mark.parametrize("cls", list(METHODS.values()), ids=list(METHODS))


def make_services(home: Path) -> Services:
    """A Services like tests/support/fixtures_engine.py's, with the test method injected."""
    settings = load_settings({"THOUGHTMAP_HOME": str(home), "THOUGHTMAP_LLM": "fake"})
    settings.home.mkdir(parents=True, exist_ok=True)
    db = open_database(settings.database_url)
    services = Services(
        settings=settings,
        db=db,
        repo=Repository(db),
        limiter=ConcurrencyLimiter(8),
        prices=PriceTable(),
        methods=METHODS,
    )
    services.use_llm("fake", FakeLLM())
    return services


@pytest.fixture
def services(prebuilt_corpus_home):
    built = make_services(prebuilt_corpus_home)
    yield built
    built.close()


def finished_run(services: Services, cls: type[Method]) -> str:
    run = services.runner.create_run(
        question=QUESTION,
        method=cls.name,
        params=params_for(cls),
        llm_info=services.llm_info("fake"),
        search_mode="local",
    )
    services.runner.start(run.id)
    final = services.runner.wait(run.id, timeout=60)
    assert final.status == RunStatus.DONE, f"{cls.name}: the run ended {final.status}: {final.error}"
    assert not services.runner.is_active(run.id)
    return run.id


# --------------------------------------------------------------------------- 1. declarations


@by_method
def test_declarations_are_consistent(cls):
    contract = cls.contract()
    assert isinstance(contract, MethodContract) and contract.method == cls.name
    # Built again from the class's declarations, they still agree with each other.
    MethodContract.build(cls.name, cls.node_kinds, cls.edge_kinds, cls.commands, cls.run_states, cls.view)
    assert contract.node_kinds, f"{cls.name} declares no node kind"
    assert contract.answer_kinds, f"{cls.name} declares no answering node kind: every run would fail"
    assert "child" in contract.edge_kinds
    assert cls.steering == frozenset(contract.commands) and cls.answer_kinds == contract.answer_kinds

    # Parameters: paper defaults for every field; the quick profile and the small values are fields.
    cls.Params()
    cls.Params.model_validate(params_for(cls))
    assert set(cls.Params.quick_profile) <= set(cls.Params.model_fields)
    assert set(SMALLER) <= set(METHODS), "SMALLER names a method that is not registered"

    for name, kind in contract.node_kinds.items():
        assert isinstance(kind, NodeKind) and kind.name == name
        assert issubclass(kind.data, NodeData), f"{cls.name}.{name}: data model is not a NodeData"
        required = [f for f, info in kind.data.model_fields.items() if info.is_required()]
        assert not required, f"{cls.name}.{name}: data fields without a default: {required}"
        kind.data()  # a node is created with what it is and filled in as it is worked on
        assert kind.validate_data({}) == {}

    for name, spec in contract.commands.items():
        assert spec.name == name
        assert spec.kinds <= set(contract.node_kinds)
        assert bool(spec.kinds) == spec.targets_node, f"{cls.name}.{name}: node command without kinds, or the reverse"
        required = [f for f, info in spec.payload.model_fields.items() if info.is_required()]
        if required:
            with pytest.raises(CommandRejected):
                spec.parse({})
        else:
            spec.parse({})
            spec.parse(None)

    for name, state in contract.run_states.items():
        assert state.name == name and issubclass(state.model, RunStateModel)
    assert set(contract.view.panels) <= set(contract.run_states)
    assert contract.view.side_tab.strip() and contract.view.side_tab != NODE_TAB  # two tabs, told apart


def test_the_side_tab_needs_a_name_of_its_own():
    from engine.methods.deot.method import DeotMethod as cls

    for name in ("Node", " "):
        with pytest.raises(ContractError, match="ViewSpec.side_tab"):
            MethodContract.build(
                cls.name, cls.node_kinds, cls.edge_kinds, cls.commands, cls.run_states, ViewSpec(side_tab=name)
            )


# --------------------------------------------------------------------------- 2. a stored run fits


@by_method
def test_a_run_on_the_fake_llm_stores_only_what_is_declared(services, cls):
    contract = cls.contract()
    run_id = finished_run(services, cls)
    repo = services.repo
    nodes = repo.list_nodes(run_id)
    assert nodes
    for node in nodes:
        assert node.kind in contract.node_kinds, f"node {node.id}: undeclared kind '{node.kind}'"
        contract.node_kinds[node.kind].data.model_validate(node.data)
        assert node.status in (NodeStatus.DONE, NodeStatus.FAILED, NodeStatus.PRUNED), (
            f"node {node.id} is still {node.status} in a finished run"
        )
    assert any(n.kind in contract.answer_kinds and n.status == NodeStatus.DONE for n in nodes)
    node_ids = {n.id for n in nodes}
    for edge in repo.list_edges(run_id):
        assert edge.kind in contract.edge_kinds, f"edge {edge.id}: undeclared kind '{edge.kind}'"
        assert {edge.src, edge.dst} <= node_ids
    states = repo.list_run_states(run_id)
    for state in states:
        assert state.name in contract.run_states, f"undeclared run state '{state.name}'"
        spec = contract.run_states[state.name]
        spec.model.model_validate(state.data)
        assert state.schema == spec.schema
    # The typed read the app's panels use: the latest version of each declared state, as its model.
    graph = RunGraph(repo, run_id, contract)
    for name, spec in contract.run_states.items():
        latest = graph.state(name)
        assert latest is None or isinstance(latest, spec.model)
        assert len(graph.state_history(name)) == sum(s.name == name for s in states)
    assert repo.latest_report(run_id) is not None, "a finished run has a report"


# --------------------------------------------------------------------------- 3. citations resolve

_CITATION = re.compile(r"\[(\d+)\]")
_SOURCE_LINE = re.compile(r"^\[(\d+)\] (.*)$", re.MULTILINE)


@by_method
def test_every_citation_resolves_to_a_source_of_the_run(services, cls):
    # An earlier run of the same method stored sources on the same refs: none of them is ours.
    earlier = finished_run(services, cls)
    run_id = finished_run(services, cls)
    repo = services.repo
    sources = {s.id: s for s in repo.list_sources(run_id)}
    assert not set(sources) & {s.id for s in repo.list_sources(earlier)}

    for report in repo.list_reports(run_id):
        cited = cited_source_ids(report.markdown)
        assert set(cited) <= set(sources), (
            f"report {report.id} cites sources of no run of its own: {sorted(set(cited) - set(sources))}"
        )
    for node in repo.list_nodes(run_id):
        assert set(cited_source_ids(node.content)) <= set(sources), f"node {node.id} cites another run's sources"

    markdown = render_markdown(repo, run_id)
    body, has_sources, listing = markdown.partition("\n## Sources\n")
    cited_numbers = {int(n) for n in _CITATION.findall(body)}
    listed = {int(n): rest for n, rest in _SOURCE_LINE.findall(listing)}
    if cited_numbers:
        assert has_sources, "the report cites [n] but has no Sources section"
    assert cited_numbers == set(listed), f"cited {sorted(cited_numbers)}, listed {sorted(listed)}"
    assert sorted(listed) == list(range(1, len(listed) + 1)), "sources are numbered 1..N by first appearance"
    # The numbering the renderer used: each listed number is a stored source of this run, by title.
    report = repo.latest_report(run_id)
    numbering = number_citations(report.markdown.strip(), sources.keys()).numbering
    assert set(numbering) == set(listed)
    for number, rest in listed.items():
        source = sources[numbering[number]]
        title = inline_text(source.title) or "Untitled"
        # The title, linked to the source's page when it has an http(s) URL.
        assert rest.startswith((f"{title} — ", f"[{title}](")), (number, rest, source.title)
    if sources and cited_source_ids(report.markdown):
        assert cited_numbers, "the stored report cites sources but the rendering shows no [n]"


# --------------------------------------------------------------------------- 4. commands refuse


def _refused(services: Services, run_id: str, kind: str, payload, what: str) -> None:
    before = stored_state(services.repo, run_id)
    try:
        services.runner.steer(run_id, kind, payload)
    except REFUSED as refused:
        assert str(refused).strip(), f"'{kind}' with {what}: refused without saying why"
    else:
        pytest.fail(f"'{kind}' with {what} was accepted: {payload!r}")
    after = stored_state(services.repo, run_id)
    for part in before:
        assert after[part] == before[part], f"'{kind}' with {what} was refused but changed the run's {part}"
    assert not services.runner.is_active(run_id), f"'{kind}' with {what} reopened the run"


def _may_reach_status(spec, node) -> bool:
    """A node the command would take but for a status it may still reach: queued, checked later."""
    return (
        node.status in NodeStatus.UNFINISHED
        and node.kind in spec.kinds
        and (spec.on_root or node.parent_id is not None)
    )


@by_method
def test_every_declared_command_refuses_what_it_cannot_apply(services, cls):
    contract = cls.contract()
    repo = services.repo
    run_id = finished_run(services, cls)
    graph = RunGraph(repo, run_id, contract)

    # A pruned node (the shared prune, as a Prune command would), when a node command could target one.
    steerable = [n for n in graph.nodes() if n.kind in contract.steerable_kinds and n.parent_id is not None]
    if steerable:
        graph.prune(steerable[-1])

    # A node in each finished status a node command does not take (a finished run has only done
    # ones). Not pending or running: a node still being worked on may reach the status a command
    # needs before the command is applied, so it is queued and checked again then
    # (engine/methods/steering.py, `target(queueing=True)`).
    for spec in contract.commands.values():
        for status in sorted(ALL_STATUSES - spec.statuses - set(NodeStatus.UNFINISHED)) if spec.targets_node else ():
            if not any(n.kind in spec.kinds and n.status == status and n.parent_id is not None for n in graph.nodes()):
                graph.add(kind=sorted(spec.kinds)[0], label=f"a {status} node", parent=graph.root(), status=status)

    # Another run of the same method, holding a node every node command would take if it were ours.
    other = services.runner.create_run(
        question="Another question about magazines",
        method=cls.name,
        params=params_for(cls),
        llm_info=services.llm_info("fake"),
    )
    other_graph = RunGraph(repo, other.id, contract)

    for undeclared in ("no_such_command", "pause", "stop"):
        if undeclared not in contract.commands:
            _refused(services, run_id, undeclared, {}, "an undeclared command kind")
            _refused(services, run_id, undeclared, {"node_id": graph.root().id}, "an undeclared command kind")

    nodes = graph.nodes()
    for spec in contract.commands.values():
        if not spec.targets_node:
            base = valid_base(spec, None)
            for bad in bad_payloads(spec, base):
                _refused(services, run_id, spec.name, bad.payload, bad.what)
            continue
        target = next((n for n in nodes if spec.applies_to(n)), None)
        base = valid_base(spec, target or nodes[0])
        for bad in bad_payloads(spec, base):
            _refused(services, run_id, spec.name, bad.payload, bad.what)
        _refused(services, run_id, spec.name, {**base, "node_id": 10**9}, "a node that does not exist")

        status = next(iter(sorted(spec.statuses)))
        foreign_parent = other_graph.add(
            kind=next(iter(sorted(spec.kinds))), label="root of another run", status=status
        )
        foreign = other_graph.add(
            kind=next(iter(sorted(spec.kinds))), label="a node of another run", parent=foreign_parent, status=status
        )
        assert spec.applies_to(foreign)  # it would be taken, were it a node of this run
        _refused(services, run_id, spec.name, {**base, "node_id": foreign.id}, "a node of another run")

        # Every node of the run the command does not apply to: another kind, a status it does not
        # take, the root where it is not allowed, a pruned node.
        for node in nodes:
            if not spec.applies_to(node) and not _may_reach_status(spec, node):
                _refused(
                    services,
                    run_id,
                    spec.name,
                    {**base, "node_id": node.id},
                    f"node {node.id} ({node.kind}, {node.status}, {'root' if node.parent_id is None else 'child'})",
                )
    if steerable:
        pruned = repo.get_node(steerable[-1].id)
        assert pruned.status == NodeStatus.PRUNED
        # Only a command made for pruned nodes (Restore) takes one.
        assert all(
            not spec.applies_to(pruned) for spec in contract.commands.values() if NodeStatus.PRUNED not in spec.statuses
        )


# --------------------------------------------------------------------------- 5. kill and resume

LATENCY_S = 0.3  # each fake LLM call of the killed process: slow enough to land the kill mid-run


def _answer_is_last_work(services: Services, cls: type[Method]) -> bool:
    """Whether, in a run of this method, nothing is asked of the LLM after its first answering node
    is done (a baseline: retrieve, answer, done). Such a run ends milliseconds after that node, so
    it cannot be killed "after an answer, before the end": it is killed while that answer is being
    computed instead, after its first node (the root, a retrieval) is done. Read from a reference
    run, so no method is named here."""
    run_id = finished_run(services, cls)
    answered = [
        n.finished_at
        for n in services.repo.list_nodes(run_id)
        if n.kind in cls.answer_kinds and n.status == NodeStatus.DONE and n.finished_at
    ]
    first = min(answered)
    return not any(c.created_at > first for c in services.repo.list_llm_calls(run_id))


def _kill_point(cls: type[Method], repo: Repository, run_id: str, while_answering: bool) -> bool:
    run = repo.get_run(run_id)
    if run.status != RunStatus.RUNNING:
        return False
    nodes = repo.list_nodes(run_id)
    answers = [n for n in nodes if n.kind in cls.answer_kinds]
    if while_answering:
        return any(n.status == NodeStatus.DONE for n in nodes) and any(n.status == NodeStatus.RUNNING for n in answers)
    return any(n.status == NodeStatus.DONE for n in answers)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
@by_method
def test_a_killed_cli_run_resumes_without_recomputing_finished_nodes(prebuilt_corpus_home, cls):
    home = prebuilt_corpus_home
    watcher = make_services(home)  # reads the database the CLI process writes; resumes the run later
    try:
        while_answering = _answer_is_last_work(watcher, cls)
        for attempt in range(2):
            proc, run_id = start_cli_run(cls, home, LATENCY_S)
            try:
                caught = poll_until(
                    lambda: _kill_point(cls, watcher.repo, run_id, while_answering),
                    60,
                    f"{cls.name}: a finished answering node in a running run",
                    proc,
                )
                if caught:
                    proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=10)
            finally:
                stop(proc)
            # Nobody can update a run after a SIGKILL: one still `running` was killed mid-run.
            if caught and watcher.repo.get_run(run_id).status == RunStatus.RUNNING:
                break
        else:
            pytest.fail(f"{cls.name}: the CLI run ended before it could be killed mid-run, twice")
        assert proc.returncode == -signal.SIGKILL

        repo = watcher.repo
        finished = {n.id: n for n in repo.list_nodes(run_id) if n.status == NodeStatus.DONE}
        assert finished
        if not while_answering:
            assert any(n.kind in cls.answer_kinds for n in finished.values())
        calls_before = repo.list_llm_calls(run_id)
        seen = {c.id for c in calls_before}
        # The purposes of the calls that produced each finished node (made before it finished).
        # Work a method does on a node *after* finishing it (DEoT's controller and engines, OmniThink's
        # reflection and expansion are recorded against the node they read) may be redone when the
        # kill interrupted it; the node's own work may not.
        solved_by = {
            node_id: {
                c.purpose
                for c in calls_before
                if c.node_id == node_id and node.finished_at and c.created_at <= node.finished_at
            }
            for node_id, node in finished.items()
        }

        assert watcher.runner.recover_interrupted() == [run_id]  # the reference run is done
        assert repo.get_run(run_id).status == RunStatus.INTERRUPTED
        watcher.runner.resume(run_id)
        run = watcher.runner.wait(run_id, timeout=90)
        assert run.status == RunStatus.DONE, (run.status, run.error)

        for node_id, before in finished.items():
            after = repo.get_node(node_id)
            assert after.status == NodeStatus.DONE, f"node {node_id} was {after.status} after the resume"
            assert (after.finished_at, after.content) == (before.finished_at, before.content), (
                f"{cls.name}: node {node_id} ({before.kind}) finished before the kill was computed again"
            )
        new_calls = [c for c in repo.list_llm_calls(run_id) if c.id not in seen]
        redone = [
            (c.node_id, c.purpose) for c in new_calls if c.node_id in finished and c.purpose in solved_by[c.node_id]
        ]
        assert not redone, f"{cls.name}: LLM calls after the resume redid finished nodes' work: {redone}"
        assert repo.latest_report(run_id) is not None
    finally:
        watcher.close()
