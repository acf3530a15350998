"""MTQA's steering commands on a finished run: add a column, re-run a column with another α, pin or
drop a knowledge unit and undo either; and bad payloads refused with the reason, changing nothing."""

from __future__ import annotations

import re

import pytest

from engine.llm.fake import request_text
from engine.methods.mtqa import knowledge
from storage.models import CommandStatus, NodeStatus, RunStatus
from tests.engine.methods.mtqa.mtqa_knowledge import KnowledgeInjector
from tests.engine.methods.mtqa.mtqa_scripts import THOUGHT, cell_of, labelled_thoughts, summaries
from tests.support.fixtures_engine import refused_before_queueing, run_to_end, steer_and_wait, steer_refused

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"


@pytest.fixture
def knowledge_bases(monkeypatch) -> KnowledgeInjector:
    injector = KnowledgeInjector()
    monkeypatch.setattr(knowledge, "open_knowledge_base", injector)
    return injector


def finished(services, params) -> str:
    run_id = run_to_end(services, QUESTION, "mtqa", params)
    assert services.repo.get_run(run_id).status == RunStatus.DONE
    return run_id


def nodes(services, run_id, kind):
    return [n for n in services.repo.list_nodes(run_id) if n.kind == kind]


def by_column(services, run_id, kind, column):
    return sorted(
        (n for n in nodes(services, run_id, kind) if n.data["column"] == column), key=lambda n: n.data.get("row", 0)
    )


def test_add_column_thinks_one_more_column_and_answers_from_it(services, fake_llm, knowledge_bases):
    summaries(fake_llm)
    run_id = finished(services, {"rows": 2, "columns": 2})
    calls = fake_llm.call_count
    command = steer_and_wait(services, run_id, "add_column", {})
    assert command.status == CommandStatus.DONE, command.error
    new = by_column(services, run_id, "cell", 2)
    assert [c.data.get("alpha") for c in new] == [None, 0.1]  # A's last column continued
    assert all(c.status == NodeStatus.DONE for c in new)
    (summary,) = by_column(services, run_id, "summary", 2)
    assert summary.status == NodeStatus.DONE
    assert fake_llm.call_count - calls == 2 + 1
    report = services.repo.latest_report(run_id)
    assert report.data["summary_node"] == summary.id and report.data["column"] == 3

    steer_and_wait(services, run_id, "add_column", {"alpha": 0.5})
    assert [c.data.get("alpha") for c in by_column(services, run_id, "cell", 3)] == [None, 0.5]
    weights = services.repo.latest_run_state(run_id, "weights").data
    assert weights["cells"] == [[None, None, None, None], [0.1, 0.1, 0.1, 0.5]]


def test_rerun_column_thinks_it_and_the_later_columns_again_with_the_new_alpha(services, fake_llm, knowledge_bases):
    labelled_thoughts(fake_llm, paragraphs=4)
    run_id = finished(services, {"rows": 3, "columns": 2})
    first = by_column(services, run_id, "cell", 0)[0]
    summary = by_column(services, run_id, "summary", 0)[0]
    before = len(fake_llm.calls_for(THOUGHT))

    command = steer_and_wait(services, run_id, "rerun_column", {"node_id": summary.id, "alpha": 1.0})
    assert command.status == CommandStatus.DONE, command.error
    column = by_column(services, run_id, "cell", 0)
    assert [c.data.get("alpha") for c in column] == [None, 1.0, 1.0]
    assert [c.data["passed_count"] for c in column] == [0, 4, 4]  # α = 1 passes every paragraph
    assert services.repo.get_node(first.id).finished_at == first.finished_at  # the first thought is kept
    # Rows 2-3 of column 1, then the whole of column 2: 2 + 3 thoughts.
    redone = fake_llm.calls_for(THOUGHT)[before:]
    assert sorted(cell_of(r) for r in redone) == [(1, 2), (2, 1), (2, 2), (3, 1), (3, 2)]
    assert all(n.status == NodeStatus.DONE for n in services.repo.list_nodes(run_id))

    steer_and_wait(services, run_id, "rerun_column", {"node_id": column[2].id, "alpha": 0.0})
    assert [c.data["passed_count"] for c in by_column(services, run_id, "cell", 0)] == [0, 0, 0]


def test_pin_keeps_a_unit_in_every_later_retrieval(services, fake_llm, knowledge_bases):
    run_id = finished(services, {"rows": 1, "columns": 3})
    base = nodes(services, run_id, "knowledge")[0]
    unit = base.data["units"][-1]
    command = steer_and_wait(services, run_id, "pin_unit", {"node_id": base.id, "unit": len(base.data["units"])})
    assert command.status == CommandStatus.DONE, command.error
    assert services.repo.get_node(base.id).data["units"][-1]["pinned"] is True
    choices = services.repo.latest_run_state(run_id, "knowledge_choices").data
    assert [p["id"] for p in choices["pinned"]] == [unit["id"]]
    for summary in nodes(services, run_id, "summary"):
        pinned = [u for u in summary.data["units"] if u["id"] == unit["id"]]
        assert pinned and pinned[0]["pinned"], summary.data["column"]


def test_drop_leaves_a_unit_out_and_thinks_its_readers_again(services, fake_llm, knowledge_bases):
    run_id = finished(services, {"rows": 2, "columns": 2})
    base = nodes(services, run_id, "knowledge")[0]
    unit = base.data["units"][0]
    before = len(fake_llm.calls_for(THOUGHT))
    command = steer_and_wait(services, run_id, "drop_unit", {"node_id": base.id, "unit": 1})
    assert command.status == CommandStatus.DONE, command.error
    assert services.repo.get_node(base.id).data["units"][0]["dropped"] is True
    after = fake_llm.calls_for(THOUGHT)[before:]
    assert len(after) == 4  # every thought read KU_1 or a retrieval after it
    head = re.compile(rf"^\[\d+\] {re.escape(unit['title'])}$", re.M)
    assert not any(head.search(request_text(r)) for r in after)
    for summary in nodes(services, run_id, "summary"):
        assert unit["id"] not in {u["id"] for u in summary.data["units"]}
    assert all(n.status == NodeStatus.DONE for n in services.repo.list_nodes(run_id))
    # The choices panel names it as the node listed it (not by its internal id), and the node's
    # listing numbers it as "Unit 1", apart from its source's citation number.
    from engine.methods.mtqa.kinds import ChoicesState, units_listing
    from engine.methods.mtqa.knowledge import UnitRecord

    state = ChoicesState.model_validate(services.repo.latest_run_state(run_id, "knowledge_choices").data)
    assert (
        state.panel_markdown() == f"- Choice 1 · dropped: {unit['title']}" and unit["id"] not in state.panel_markdown()
    )
    listed = units_listing([UnitRecord.model_validate(u) for u in services.repo.get_node(base.id).data["units"]])
    assert listed[0].startswith(f"Unit 1 · **dropped** · {unit['title']}")  # the choice first, where the eye starts
    # Dropping it again, or pinning it, is refused with the reason.
    assert "already dropped" in steer_refused(services, run_id, "drop_unit", {"node_id": base.id, "unit": 1})
    assert "already dropped" in steer_refused(services, run_id, "pin_unit", {"node_id": base.id, "unit": 1})


def test_bad_payloads_are_refused_and_change_nothing(services, fake_llm, knowledge_bases):
    run_id = finished(services, {"rows": 1, "columns": 1})
    summary = nodes(services, run_id, "summary")[0]
    cell = nodes(services, run_id, "cell")[0]
    base = nodes(services, run_id, "knowledge")[0]
    calls = fake_llm.call_count
    assert "alpha" in steer_refused(services, run_id, "rerun_column", {"node_id": summary.id, "alpha": 1.5})
    assert "alpha" in steer_refused(services, run_id, "rerun_column", {"node_id": summary.id})
    assert "α changes nothing" in steer_refused(services, run_id, "rerun_column", {"node_id": cell.id, "alpha": 0.5})
    assert "applies to" in steer_refused(services, run_id, "pin_unit", {"node_id": cell.id, "unit": 1})
    assert "unit" in steer_refused(services, run_id, "pin_unit", {"node_id": base.id, "unit": 0})
    listed = len(base.data["units"])
    assert f"choose a number from 1 to {listed}" in steer_refused(
        services, run_id, "drop_unit", {"node_id": base.id, "unit": listed + 1}
    )
    assert "no_such" in steer_refused(services, run_id, "add_column", {"no_such": 1})
    assert "alpha" in steer_refused(services, run_id, "add_column", {"alpha": -0.1})
    assert "α changes nothing" in steer_refused(services, run_id, "add_column", {"alpha": 0.5})  # one row
    assert fake_llm.call_count == calls
    assert len(nodes(services, run_id, "cell")) == 1
    assert services.repo.latest_run_state(run_id, "knowledge_choices") is None


def test_an_ablation_run_refuses_communication(services, fake_llm, knowledge_bases):
    run_id = finished(services, {"rows": 2, "columns": 1, "no_communication": True})
    summary = nodes(services, run_id, "summary")[0]
    assert "no-communication" in steer_refused(services, run_id, "rerun_column", {"node_id": summary.id, "alpha": 0.3})
    assert "no-communication" in steer_refused(services, run_id, "add_column", {"alpha": 0.3})


def test_rerun_column_draws_the_new_alpha_and_no_edge_for_zero(services, fake_llm, knowledge_bases):
    run_id = run_to_end(services, QUESTION, "mtqa", {"rows": 3, "columns": 1})
    assert services.repo.get_run(run_id).status == RunStatus.DONE
    summary = services.repo.list_nodes(run_id, kind="summary")[0]
    assert sorted(e.data["alpha"] for e in services.repo.list_edges(run_id, kind="communication")) == [0.1, 0.2]
    steer_and_wait(services, run_id, "rerun_column", {"node_id": summary.id, "alpha": 0.0})
    assert services.repo.list_edges(run_id, kind="communication") == []  # nothing passes: nothing drawn
    steer_and_wait(services, run_id, "rerun_column", {"node_id": summary.id, "alpha": 0.9})
    assert sorted(e.data["alpha"] for e in services.repo.list_edges(run_id, kind="communication")) == [0.9, 0.9]


def test_rerun_column_thinks_a_failed_first_thought_again(services, fake_llm, knowledge_bases):
    from tests.engine.methods.mtqa.mtqa_scripts import THOUGHT, cell_of

    model = {"broken": True}  # the first thought of column 1 cannot be read, until the model is fixed
    fake_llm.when(
        prompt=THOUGHT,
        respond=lambda r: (
            {"wrong": "shape"}
            if model["broken"] and cell_of(r) == (1, 1)
            else {"paragraphs": [f"Thought {cell_of(r)} reads the first unit [1]."]}
        ),
    )
    run_id = run_to_end(services, QUESTION, "mtqa", {"rows": 2, "columns": 1})
    assert services.repo.get_run(run_id).status == RunStatus.FAILED
    [summary] = services.repo.list_nodes(run_id, kind="summary")
    model["broken"] = False
    steer_and_wait(services, run_id, "rerun_column", {"node_id": summary.id, "alpha": 0.5})
    cells = sorted(services.repo.list_nodes(run_id, kind="cell"), key=lambda n: n.data["row"])
    assert [c.status for c in cells] == [NodeStatus.DONE, NodeStatus.DONE]


def test_pinning_a_unit_dropped_elsewhere_brings_it_back(services, fake_llm, knowledge_bases):
    run_id = run_to_end(services, QUESTION, "mtqa", {"rows": 1, "columns": 2})
    [kb] = services.repo.list_nodes(run_id, kind="knowledge")
    s0 = next(n for n in services.repo.list_nodes(run_id, kind="summary") if n.data["column"] == 0)
    ids_k, ids_s0 = [u["id"] for u in kb.data["units"]], [u["id"] for u in s0.data["units"]]
    shared = next(u for u in ids_s0 if u in ids_k)
    steer_and_wait(services, run_id, "drop_unit", {"node_id": s0.id, "unit": ids_s0.index(shared) + 1})
    steer_and_wait(services, run_id, "pin_unit", {"node_id": kb.id, "unit": ids_k.index(shared) + 1})
    state = services.repo.latest_run_state(run_id, "knowledge_choices").data
    assert shared in [p["id"] for p in state["pinned"]] and shared not in state["dropped"]  # the latest choice
    later = [n for n in services.repo.list_nodes(run_id, kind="summary")]
    assert any(u["id"] == shared and not u.get("dropped") for s in later for u in s.data["units"])


def test_a_unit_pinned_on_two_holders_is_listed_once(services, fake_llm, knowledge_bases):
    # Pinned on a summary's retrieval first, then on the knowledge base that listed it earlier (its
    # record there is not marked pinned): still one pin.
    run_id = run_to_end(services, QUESTION, "mtqa", {"rows": 1, "columns": 2})
    [kb] = services.repo.list_nodes(run_id, kind="knowledge")
    s0 = next(n for n in services.repo.list_nodes(run_id, kind="summary") if n.data["column"] == 0)
    ids_k, ids_s0 = [u["id"] for u in kb.data["units"]], [u["id"] for u in s0.data["units"]]
    shared = next(u for u in ids_s0 if u in ids_k)
    assert (
        steer_and_wait(services, run_id, "pin_unit", {"node_id": s0.id, "unit": ids_s0.index(shared) + 1}).status
        == CommandStatus.DONE
    )
    assert (
        steer_and_wait(services, run_id, "pin_unit", {"node_id": kb.id, "unit": ids_k.index(shared) + 1}).status
        == CommandStatus.DONE
    )
    state = services.repo.latest_run_state(run_id, "knowledge_choices").data
    assert [p["id"] for p in state["pinned"]] == [shared]


def choices_of(services, run_id) -> dict:
    return services.repo.latest_run_state(run_id, "knowledge_choices").data


def marks(services, run_id, unit_id) -> list[tuple[str, bool, bool]]:
    """(kind, pinned, dropped) of every listing of the unit that marks it."""
    return [
        (n.kind, u["pinned"], u["dropped"])
        for n in services.repo.list_nodes(run_id)
        for u in (n.data or {}).get("units", [])
        if u["id"] == unit_id and (u["pinned"] or u["dropped"])
    ]


def test_undoing_a_drop_brings_the_unit_back_to_its_readers(services, fake_llm, knowledge_bases):
    run_id = finished(services, {"rows": 2, "columns": 2})
    base = nodes(services, run_id, "knowledge")[0]
    unit = base.data["units"][0]
    head = re.compile(rf"^\[\d+\] {re.escape(unit['title'])}$", re.M)
    steer_and_wait(services, run_id, "drop_unit", {"node_id": base.id, "unit": 1})
    from engine.methods.mtqa.kinds import ChoicesState

    panel = ChoicesState.model_validate(choices_of(services, run_id)).panel_markdown()
    assert panel == f"- Choice 1 · dropped: {unit['title']}"  # the number the undo takes
    before = len(fake_llm.calls_for(THOUGHT))
    command = steer_and_wait(services, run_id, "undo_choice", {"choice": 1})
    assert command.status == CommandStatus.DONE, command.error
    assert marks(services, run_id, unit["id"]) == []
    choices = choices_of(services, run_id)
    assert (
        choices["pinned"],
        choices["dropped"],
        choices["dropped_titles"],
        choices["made_on"],
        choices["numbers"],
    ) == ([], [], {}, {}, {})
    after = fake_llm.calls_for(THOUGHT)[before:]
    assert len(after) == 4  # every thought that went without it is thought again
    assert all(head.search(request_text(r)) for r in after if cell_of(r)[1] == 1)  # column 1 reads it again
    for summary in nodes(services, run_id, "summary"):
        assert unit["id"] in {u["id"] for u in summary.data["units"]}
    assert all(n.status == NodeStatus.DONE for n in services.repo.list_nodes(run_id))
    # Nothing left to undo: refused with the reason, nothing thought again.
    calls = fake_llm.call_count
    assert "nothing to undo" in refused_before_queueing(services, run_id, "undo_choice", {"choice": 1})
    assert fake_llm.call_count == calls


def test_a_drop_after_a_pin_is_the_units_only_choice_and_undoes_the_pins_effects(services, fake_llm, knowledge_bases):
    # Pinned on the knowledge base (so every later retrieval holds the unit), then dropped on summary
    # 1: one choice (the drop); the pin's additions are undone, so no retrieval from summary 1 on
    # holds the unit. Undoing the drop makes those retrievals again: they hold it as they find it.
    run_id = finished(services, {"rows": 1, "columns": 3})
    base = nodes(services, run_id, "knowledge")[0]
    unit = base.data["units"][-1]

    def listing(column: int) -> list[str]:
        return [u["id"] for u in by_column(services, run_id, "summary", column)[0].data["units"]]

    found = {column: unit["id"] in listing(column) for column in (0, 1, 2)}  # before any choice
    steer_and_wait(services, run_id, "pin_unit", {"node_id": base.id, "unit": len(base.data["units"])})
    assert all(unit["id"] in listing(column) for column in (0, 1, 2))  # the pin added it everywhere
    s0 = by_column(services, run_id, "summary", 0)[0]
    number = listing(0).index(unit["id"]) + 1
    steer_and_wait(services, run_id, "drop_unit", {"node_id": s0.id, "unit": number})
    choices = choices_of(services, run_id)
    assert (choices["pinned"], choices["dropped"], choices["made_on"]) == ([], [unit["id"]], {unit["id"]: s0.id})
    assert choices["numbers"] == {unit["id"]: 2}  # the drop is a new choice, numbered after the pin
    assert not any(pinned for _, pinned, _ in marks(services, run_id, unit["id"]))  # no pin left anywhere
    assert not any(unit["id"] in listing(column) for column in (0, 1, 2))  # left out from summary 1 on
    assert steer_and_wait(services, run_id, "undo_choice", {"choice": 2}).status == CommandStatus.DONE
    assert marks(services, run_id, unit["id"]) == []
    assert {column: unit["id"] in listing(column) for column in (0, 1, 2)} == found  # as retrievals find it
    assert all(n.status == NodeStatus.DONE for n in services.repo.list_nodes(run_id))


def test_undoing_a_pin_unpins_the_unit_everywhere(services, fake_llm, knowledge_bases):
    run_id = finished(services, {"rows": 1, "columns": 3})
    base = nodes(services, run_id, "knowledge")[0]
    unit = base.data["units"][-1]
    steer_and_wait(services, run_id, "pin_unit", {"node_id": base.id, "unit": len(base.data["units"])})
    assert len(marks(services, run_id, unit["id"])) > 1  # the knowledge base and every later retrieval
    before = len(fake_llm.calls_for(THOUGHT))
    assert steer_and_wait(services, run_id, "undo_choice", {"choice": 1}).status == CommandStatus.DONE
    assert choices_of(services, run_id)["pinned"] == [] and marks(services, run_id, unit["id"]) == []
    # The knowledge base's retrieval holds it as found: column 1 is kept; columns 2 and 3 think again.
    assert sorted(cell_of(r)[1] for r in fake_llm.calls_for(THOUGHT)[before:]) == [2, 3]


def test_a_drop_whose_node_no_longer_lists_the_unit_is_undone_all_the_same(services, fake_llm, knowledge_bases):
    # Dropped on summary 2, then column 1 re-run: summary 2's retrieval is made again, without the
    # unit. Undone from the choices panel, that retrieval is made again with it.
    run_id = finished(services, {"rows": 2, "columns": 3})
    s1 = by_column(services, run_id, "summary", 1)[0]
    unit = s1.data["units"][0]
    steer_and_wait(services, run_id, "drop_unit", {"node_id": s1.id, "unit": 1})
    first_summary = by_column(services, run_id, "summary", 0)[0]
    steer_and_wait(services, run_id, "rerun_column", {"node_id": first_summary.id, "alpha": 0.5})
    assert unit["id"] not in {u["id"] for u in services.repo.get_node(s1.id).data["units"]}
    assert steer_and_wait(services, run_id, "undo_choice", {"choice": 1}).status == CommandStatus.DONE
    listed = {u["id"]: u for u in services.repo.get_node(s1.id).data["units"]}
    assert unit["id"] in listed and not listed[unit["id"]]["dropped"]
    assert all(n.status == NodeStatus.DONE for n in services.repo.list_nodes(run_id))


def test_a_bad_choice_number_is_refused(services, fake_llm, knowledge_bases):
    run_id = finished(services, {"rows": 1, "columns": 1})
    base = nodes(services, run_id, "knowledge")[0]
    steer_and_wait(services, run_id, "drop_unit", {"node_id": base.id, "unit": 1})
    assert "there is no choice 2; the panel lists Choice 1" in refused_before_queueing(
        services, run_id, "undo_choice", {"choice": 2}
    )
    assert "choice" in steer_refused(services, run_id, "undo_choice", {"choice": 0})
    assert choices_of(services, run_id)["dropped"] == [base.data["units"][0]["id"]]


def test_choice_numbers_are_kept_when_another_choice_is_undone(services, fake_llm, knowledge_bases):
    from engine.methods.mtqa.kinds import ChoicesState

    run_id = finished(services, {"rows": 1, "columns": 1})
    base = nodes(services, run_id, "knowledge")[0]
    first, second = base.data["units"][0], base.data["units"][1]
    steer_and_wait(services, run_id, "pin_unit", {"node_id": base.id, "unit": 1})
    steer_and_wait(services, run_id, "drop_unit", {"node_id": base.id, "unit": 2})

    def panel() -> str:
        return ChoicesState.model_validate(choices_of(services, run_id)).panel_markdown()

    assert panel() == f"- Choice 1 · pinned: {first['title']}\n- Choice 2 · dropped: {second['title']}"
    steer_and_wait(services, run_id, "undo_choice", {"choice": 1})
    assert panel() == f"- Choice 2 · dropped: {second['title']}"  # still Choice 2, as read before the undo
    assert "there is no choice 1; the panel lists Choice 2" in refused_before_queueing(
        services, run_id, "undo_choice", {"choice": 1}
    )
    steer_and_wait(services, run_id, "pin_unit", {"node_id": base.id, "unit": 1})
    assert panel() == f"- Choice 2 · dropped: {second['title']}\n- Choice 3 · pinned: {first['title']}"


def test_a_unit_number_the_node_does_not_list_is_refused_before_it_is_queued(services, fake_llm, knowledge_bases):
    run_id = finished(services, {"rows": 1, "columns": 1})
    base = nodes(services, run_id, "knowledge")[0]
    listed = len(base.data["units"])
    assert f"this node lists {listed} knowledge unit(s); choose a number from 1 to {listed}" in refused_before_queueing(
        services, run_id, "pin_unit", {"node_id": base.id, "unit": listed + 40}
    )
    steer_and_wait(services, run_id, "drop_unit", {"node_id": base.id, "unit": 1})
    assert "already dropped" in refused_before_queueing(services, run_id, "pin_unit", {"node_id": base.id, "unit": 1})


def test_choices_stored_before_numbers_were_kept_are_numbered_in_the_old_order():
    from engine.methods.mtqa.kinds import ChoicesState
    from engine.methods.mtqa.knowledge import UnitRecord

    old = ChoicesState.model_validate(
        {"pinned": [UnitRecord(id="a", title="A").model_dump()], "dropped": ["b"], "dropped_titles": {"b": "B"}}
    )
    assert old.panel_markdown() == "- Choice 1 · pinned: A\n- Choice 2 · dropped: B"
    assert [n for n, *_ in old.without("a").listed()] == [2]  # numbered as they were listed, then kept


def test_a_unit_number_holds_to_the_unit_it_named_when_the_command_was_sent(services, fake_llm, knowledge_bases):
    # Unit numbers are positions in a node's listing: a retrieval made again between sending a pin
    # and applying it can list another unit under that number. The command carries the unit's id,
    # filled in when it is sent (the form never asks for it), and a number that names another unit
    # by then is refused, not applied to the wrong unit.
    from engine.methods.mtqa.kinds import COMMANDS

    assert all("unit_id" not in spec.form_fields() for spec in COMMANDS)
    run_id = finished(services, {"rows": 1, "columns": 1})
    base = nodes(services, run_id, "knowledge")[0]
    first, second, *rest = base.data["units"]
    command = steer_and_wait(services, run_id, "drop_unit", {"node_id": base.id, "unit": 2})
    assert command.status == CommandStatus.DONE and command.payload["unit_id"] == second["id"]

    services.repo.update_node(base.id, merge_data={"units": [second, first, *rest]})  # listed anew
    before = services.repo.get_node(base.id).data
    # A pin of unit 2 sent when unit 2 was `second` (its id in the payload): unit 2 is `first` now.
    error = steer_refused(services, run_id, "pin_unit", {"node_id": base.id, "unit": 2, "unit_id": second["id"]})
    assert "retrieved again since you chose unit 2, and that number names another unit now" in error
    assert services.repo.get_node(base.id).data == before
    assert choices_of(services, run_id)["pinned"] == []
