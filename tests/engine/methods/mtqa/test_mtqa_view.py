"""What the app shows of an MTQA run, built from its declarations only (components/ name no
method): the matrix as a grid (knowledge base above column 1, thoughts in rows, the summaries in a
row of their own), communication and column-link edges drawn, and a column's knowledge units in the
node panel with citations that link to sources."""

from __future__ import annotations

import pytest

from components import mindmap
from components.node_text import answer_markdown
from engine.methods.mtqa import knowledge
from engine.methods.mtqa.method import MtqaMethod
from storage.models import RunStatus
from tests.engine.methods.mtqa.mtqa_knowledge import KnowledgeInjector
from tests.support.fixtures_engine import run_to_end

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
CONTRACT = MtqaMethod.contract()


@pytest.fixture
def run(services, monkeypatch):
    monkeypatch.setattr(knowledge, "open_knowledge_base", KnowledgeInjector())
    run_id = run_to_end(services, QUESTION, "mtqa", {"rows": 3, "columns": 2})
    assert services.repo.get_run(run_id).status == RunStatus.DONE
    return services.repo.list_nodes(run_id), services.repo.list_edges(run_id), services.repo.list_sources(run_id)


def test_the_map_is_a_grid_with_summaries_in_their_own_row_and_visible_communication(run):
    nodes, edges, _ = run
    data = mindmap.build_map(nodes, edges, contract=CONTRACT)
    assert data.mode == mindmap.FIXED
    by_id = {n.id: n for n in nodes}
    drawn = {item["id"]: item for item in data.nodes}
    ys = {kind: {drawn[str(n.id)]["y"] for n in nodes if n.kind == kind} for kind in ("knowledge", "cell", "summary")}
    assert len(ys["cell"]) == 3 and len(ys["summary"]) == 1  # three rows of thoughts, one summary row
    assert max(ys["knowledge"]) < min(ys["cell"]) and max(ys["cell"]) < min(ys["summary"])
    # Communication edges join vertical neighbours and are drawn over the grid, saying what they are.
    communication = {f"e{e.id}" for e in edges if e.kind == "communication"}
    assert communication and all(
        by_id[e.src].kind == by_id[e.dst].kind == "cell" for e in edges if e.kind == "communication"
    )
    tips = {item["id"]: item.get("tip") for item in data.edges}
    assert all(tips[edge_id] == "communication" for edge_id in communication)
    assert "column link" in set(tips.values())
    lines = next(section for section in data.legend if section["title"] == "Line: edge kind")["items"]
    assert any(item["text"].startswith("communication: ") for item in lines)


def test_a_columns_knowledge_units_are_listed_in_the_node_panel_with_linked_sources(run):
    nodes, _, sources = run
    ids = [s.id for s in sources]
    base = next(n for n in nodes if n.kind == "knowledge")
    markdown, numbering = answer_markdown(base, CONTRACT.kind("knowledge").read(base), ids)
    assert "Knowledge units (KU 1" in markdown
    titles = [u["title"] for u in base.data["units"]]
    assert titles and all(title in markdown for title in titles)
    assert f"Unit 1 · {titles[0]}" in markdown and "1. " not in markdown  # the pin/drop number, not a list's
    assert set(numbering.values()) == {u["source_id"] for u in base.data["units"]}

    summary = next(n for n in nodes if n.kind == "summary" and n.data["column"] == 0)
    markdown, numbering = answer_markdown(summary, CONTRACT.kind("summary").read(summary), ids)
    assert "Knowledge units (KU′" in markdown and "Short answer" in markdown
    assert {u["source_id"] for u in summary.data["units"]} <= set(numbering.values())

    cell = next(n for n in nodes if n.kind == "cell" and n.data["row"] == 1)
    markdown, _ = answer_markdown(cell, CONTRACT.kind("cell").read(cell), ids)
    assert "Strategy passed from the thought above" in markdown


def test_pin_and_drop_share_one_unit_form_in_the_node_panel(prebuilt_corpus_home, monkeypatch):
    """Pin and drop take the same payload: one "Knowledge unit" field, a button each; the number
    typed once goes with the button pressed. Undoing it is in the Matrix tab, by the choice's number."""
    from engine.llm.fake import FakeLLM
    from storage.models import CommandStatus
    from tests.components.test_ui_contract import MapSpy
    from tests.engine.methods.fgdip.test_app_fgdip import app_services
    from tests.pages.test_app_pages import assert_no_exception, open_page

    monkeypatch.setattr(knowledge, "open_knowledge_base", KnowledgeInjector())
    services = app_services(FakeLLM())
    built = next(services)
    try:
        run_id = run_to_end(built, QUESTION, "mtqa", {"rows": 1, "columns": 2})
        base = built.repo.list_nodes(run_id, kind="knowledge")[0]
        MapSpy(monkeypatch, click=base.id)
        at = open_page(run_id=run_id)
        key = f"steer-{run_id}-{base.id}"
        fields = [w for w in at.number_input if (w.key or "").startswith(key)]
        assert [w.label for w in fields] == ["Knowledge unit"]  # once, not once per command
        buttons = [b.label for b in at.button if (b.key or "").startswith(key)]
        assert {"Pin knowledge unit", "Drop knowledge unit"} <= set(buttons)
        fields[0].set_value(2)
        at.button(key=f"{key}-drop_unit").click().run()
        assert_no_exception(at)
        built.runner.wait(run_id, timeout=30)
        [command] = built.repo.list_commands(run_id)
        assert (command.kind, command.payload["unit"], command.status) == ("drop_unit", 2, CommandStatus.DONE)
        assert built.repo.get_node(base.id).data["units"][1]["dropped"] is True
        # The Matrix tab lists the drop as Choice 1 and undoes it by that number.
        at.run()
        matrix = at.tabs[1]
        assert at.tabs[1].label == "Matrix"
        assert "Choice 1 · dropped:" in " ".join(m.value for m in matrix.markdown)
        at.number_input(key=f"run-cmd-{run_id}-undo_choice.choice").set_value(1)
        at.button(key=f"run-cmd-{run_id}-undo_choice").click().run()
        assert_no_exception(at)
        built.runner.wait(run_id, timeout=30)
        assert [c.status for c in built.repo.list_commands(run_id)] == [CommandStatus.DONE] * 2
        assert built.repo.get_node(base.id).data["units"][1]["dropped"] is False
    finally:
        next(services, None)
