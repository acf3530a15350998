"""MTQA's question knowledge graph drawn, in a real browser (issue 43): a run started on Explore as a
person would, with the fake LLM scripted by prompt name (tests/engine/methods/mtqa/mtqa_scripts.py) and the knowledge
layer's own offline extraction, so the real graph is built and stored.

The "Knowledge graph" tab beside the map draws it (entities as dots, relations as labelled edges,
read through the frame's test hook `window.__knowledgeGraph`): first around the knowledge base's units
(KU 1), their entities highlighted and in view; then a thought picked on the map, with the tab left
open: the tab follows it and highlights the units of its column, those its text cites marked; the
whole graph, capped (the run reads 40 documents: a graph of a few hundred relations, as a real
run's); and a line saying what is drawn of how much.

Screenshots: test-artifacts/mtqa-knowledge-graph.png (a thought's units highlighted, the tab beside
the matrix), mtqa-knowledge-graph-whole.png."""

from __future__ import annotations

import pytest

from components.knowledge_graph import CITED, MIN_SCALE, USED
from components.knowledge_graph_tab import AROUND, WHOLE
from engine.knowledge.drawing import AROUND_CAP, WHOLE_CAP
from engine.knowledge.merge import entity_key
from engine.llm.fake import FakeLLM
from engine.methods.mtqa.kinds import CELL, KNOWLEDGE, knowledge_focus
from engine.methods.mtqa.method import MtqaMethod
from tests.e2e.conftest import (
    ARTIFACTS,
    choose_method,
    click_map_node,
    map_frame,
    map_nodes,
    metric,
    open_parameters,
    poll,
    serving_fake_llm,
    type_number,
)
from tests.engine.methods.mtqa.mtqa_scripts import labelled_thoughts, summaries

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
DOCUMENTS = 40  # a graph of a few hundred relations, as a real run's: the drawing is capped
TAB = MtqaMethod.contract().view.knowledge_tab.title
GRAPH_IFRAME = "iframe[title='components.knowledge_graph.thoughtmap_knowledge_graph']"

_HOOK_JS = """(what) => {
  const hook = [...document.querySelectorAll("iframe[title='components.knowledge_graph.thoughtmap_knowledge_graph']")]
    .map((f) => { try { return f.contentWindow.__knowledgeGraph; } catch (e) { return null; } })
    .filter((h) => h && h.network).at(-1);
  if (!hook || !hook.settled()) return null;
  return {nodes: hook.nodes(), edges: hook.edges(), focus: hook.focus(), scale: hook.scale(),
          renders: hook.renders()};
}"""


@pytest.fixture
def mtqa_app(app_home, tmp_path, request):
    fake = summaries(labelled_thoughts(FakeLLM(), paragraphs=2))
    yield from serving_fake_llm(fake, app_home, tmp_path, request, latency_s=0.05)


def drawn(page) -> dict | None:
    """The drawing once placed: entities (id, name, role, centre, inView, fontPx), edges, the focus."""
    return page.evaluate(_HOOK_JS, "all")


def tab_text(page) -> str:
    return page.locator('[data-testid="stTabs"]').last.inner_text(timeout=5_000)


def test_the_knowledge_graph_tab_draws_the_graph_and_follows_the_thought_picked(mtqa_app, page, app_repo):
    page.set_viewport_size({"width": 1500, "height": 1100})
    page.goto(mtqa_app.url)
    page.get_by_label("Question").fill(QUESTION)
    choose_method(page, MtqaMethod.title)
    open_parameters(page)
    type_number(page, "Rows", 2)
    type_number(page, "Columns", 2)
    type_number(page, "Documents", DOCUMENTS)
    page.get_by_role("button", name="Start").click()
    poll(page, lambda: "run=" in page.url, what="the started run in the address")
    run_id = page.url.split("run=")[1].split("&")[0]
    poll(page, lambda: metric(page, "Status") == "done", timeout=240, what="the MTQA run to finish")
    nodes = app_repo.list_nodes(run_id)
    base = next(n for n in nodes if n.kind == KNOWLEDGE)
    assert base.data["relations"] > WHOLE_CAP, base.data  # real-run size: more than the drawing holds

    # The tab: the knowledge base's units (KU 1) highlighted, in view, named in words.
    page.get_by_role("tab", name=TAB, exact=True).click()
    first = poll(page, lambda: drawn(page), timeout=90, what="the knowledge graph drawn and placed")
    focus = knowledge_focus(nodes, None)
    wanted = {entity_key(end) for unit in focus.units for (s, _, o) in unit.triples for end in (s, o)}
    assert wanted and set(first["focus"]) <= wanted and first["focus"], (first["focus"], wanted)
    roles = {n["id"]: n["role"] for n in first["nodes"]}
    assert all(roles[key] in (CITED, USED) for key in first["focus"])
    assert first["scale"] >= MIN_SCALE - 0.01 and any(n["inView"] for n in first["nodes"] if n["id"] in first["focus"])
    assert first["edges"] and all(e["label"] for e in first["edges"])
    text = tab_text(page)
    assert "The knowledge base's" in text and "(KU 1)" in text and "Drawn: " in text, text
    assert len(first["edges"]) <= AROUND_CAP and f"of {base.data['relations']} relations" in text, text
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "mtqa-knowledge-graph-ku1.png"))

    # A thought of column 2 picked on the map: the tab stays open and follows it.
    cell = next(n for n in nodes if n.kind == CELL and n.data["column"] == 1 and n.data["row"] == 0)
    map_frame(page).get_by_role("button", name="Fit").click()
    poll(page, lambda: all(n["inView"] for n in map_nodes(page)), what="the whole matrix in view")
    page.wait_for_timeout(500)
    before = drawn(page)
    click_map_node(page, cell.id)
    poll(page, lambda: "Row 1, column 2 thought from" in tab_text(page), what="the tab to follow the thought")
    assert page.get_by_role("tab", name=TAB, exact=True).get_attribute("aria-selected") == "true"
    focus = knowledge_focus(app_repo.list_nodes(run_id), app_repo.get_node(cell.id))
    wanted = {entity_key(end) for unit in focus.units for (s, _, o) in unit.triples for end in (s, o)}
    cited = {entity_key(end) for unit in focus.units if unit.cited for (s, _, o) in unit.triples for end in (s, o)}

    def followed():  # the frame drawn again for the thought, and the view moved there (its animation over)
        now = drawn(page)
        if not now or now["renders"] <= before["renders"] or now["scale"] < MIN_SCALE - 0.01:
            return None
        highlighted = {n["id"] for n in now["nodes"] if n["role"] == CITED}
        return now if now["focus"] and highlighted == cited & {n["id"] for n in now["nodes"]} else None

    after = poll(page, followed, timeout=60, what="the thought's units highlighted")
    roles = {n["id"]: n["role"] for n in after["nodes"]}
    assert {k for k, r in roles.items() if r == CITED} == cited & set(roles), (roles, cited)
    assert "the summary of column 1 (KU′)" in tab_text(page)
    # The view opens on the cited entities, their names legible (never zoomed out below MIN_SCALE).
    assert set(after["focus"]) == cited & set(roles) and after["scale"] >= MIN_SCALE - 0.01, after["scale"]
    cited_drawn = [n for n in after["nodes"] if n["id"] in after["focus"]]
    assert all(n["fontPx"] >= 10 for n in cited_drawn), cited_drawn  # names legible, not dots
    assert sum(n["inView"] for n in cited_drawn) >= min(len(cited_drawn), 5), cited_drawn
    ARTIFACTS.mkdir(exist_ok=True)
    page.mouse.move(5, 5)
    page.wait_for_timeout(400)
    page.screenshot(path=str(ARTIFACTS / "mtqa-knowledge-graph.png"))

    # The whole graph: more relations than the cap, so its most connected part, said so.
    page.get_by_text(WHOLE, exact=True).click()
    poll(
        page,
        lambda: (
            f"{WHOLE_CAP} of {base.data['relations']} relations" in tab_text(page)
            and f"at most {WHOLE_CAP}" in tab_text(page)
        ),
        what="the whole graph drawn, capped",
    )
    whole = poll(
        page,
        lambda: (d := drawn(page)) and len(d["edges"]) == WHOLE_CAP and d,
        timeout=60,
        what="the capped whole graph drawn",
    )
    assert len(whole["nodes"]) >= len(after["nodes"])
    page.wait_for_timeout(400)
    page.locator('[data-testid="stTabs"]').last.screenshot(path=str(ARTIFACTS / "mtqa-knowledge-graph-whole.png"))
    page.get_by_text(AROUND, exact=True).click()
    assert page.dialogs == [] and page.outside_requests == []
