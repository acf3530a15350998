"""The knowledge graph browsable around an entity (issue 14, "In the app"): a stored graph read one
entity at a time, with no LLM call (`engine/knowledge/browse.py`, `KnowledgeLayer.browse`); the graph
key MTQA records on the nodes that read it, declared through the contract (`NodeKind.
browses_knowledge`, `NodeData.knowledge_graph`); and the node panel's browser
(`components/knowledge_browser.py`): an entity chosen, a neighbour clicked, a name looked up, the way
back, and a graph that is gone said in a plain sentence."""

from __future__ import annotations

import pytest

from components.knowledge_browser import GONE, NOT_RECORDED, TITLE
from engine.contract import ContractError, MethodContract, NodeData, NodeKind, ViewSpec
from engine.knowledge.open import KnowledgeLayer
from engine.llm.fake import FakeLLM
from engine.methods.mtqa.method import MtqaMethod
from engine.safe_text import inline_text
from storage.models import NodeStatus, RunStatus
from tests.engine.knowledge.test_knowledge import ARTHUR, FIRST, GODEY, QUESTION, question_kb, store  # noqa: F401 - `store`
from tests.pages.test_app_pages import assert_no_exception, joined, open_page, pick_node, services, texts  # noqa: F401
from tests.support.db_backends import database_url  # noqa: F401 - the fixture behind `store`
from tests.support.fixtures_engine import run_to_end

GODEYS = "Godey's Lady's Book"


@pytest.fixture
def graph(store):  # noqa: F811 - the fixture imported above
    fake = FakeLLM()
    kb = question_kb(store, fake)
    kb.add_documents([ARTHUR, FIRST, GODEY])
    calls = len(fake.calls)
    browser = KnowledgeLayer(store).browse(kb.key)
    assert browser is not None and browser.key == kb.key and kb.key.startswith("run:")
    yield browser
    assert len(fake.calls) == calls  # browsing asked the model nothing


# ---------------------------------------------------------------------- the engine side


def test_the_neighbourhood_of_a_named_entity_with_its_relations_sources_and_how_many_there_are(graph):
    around = graph.around("  godey's LADY'S book ")  # found as dedup finds it
    assert around is not None and around.entity.name == GODEYS and around.entity.description
    assert {s.ref for s in around.sources} == {ARTHUR.ref, GODEY.ref}
    by_ref = {s.ref: s for s in around.sources}
    assert by_ref[GODEY.ref].url == GODEY.url and by_ref[ARTHUR.ref].title == ARTHUR.title
    assert by_ref[ARTHUR.ref].snippet == ARTHUR.text[:300]
    assert all(GODEYS in (t.subject, t.object) for t in around.triples)
    assert any({t.subject, t.object} == {"Arthur's Magazine", GODEYS} and t.description for t in around.triples)
    assert (around.relations_total, around.sources_total) == (len(around.triples), 2) and around.relations_total > 2
    # Bounded, and saying how many there are in all.
    small = graph.around(GODEYS, limit=1)
    assert (len(small.triples), len(small.sources)) == (1, 1)
    assert (small.relations_total, small.sources_total) == (around.relations_total, 2)
    assert small.triples[0] == around.triples[0]
    counts = graph.counts()
    assert counts.entities >= 10 and counts.relations >= around.relations_total and counts.chunks_done == 3


def test_entity_names_are_looked_up_starting_with_then_containing_the_typed_text(graph):
    assert graph.names("PHIL") == ["Philadelphia"]
    assert graph.names("the godey") == ["Godey", GODEYS]  # shorter first; a leading "the" is not a name
    assert graph.names("magazine") == ["Arthur's Magazine"]  # contained, not at the start
    found = graph.names("a", limit=50)
    assert len(found) == len(set(found))  # a name that starts with it is not listed again as containing it
    starting = [n for n in found if n.lower().startswith("a")]
    assert found[: len(starting)] == starting and len(starting) < len(found)
    assert len(graph.names("a", limit=3)) == 3
    # What LIKE would read as wildcards is matched as typed.
    assert graph.names("%") == [] and graph.names("_") == [] and graph.names("   ") == []
    # The names a node offers are kept when the graph holds them, as the graph spells them.
    assert graph.known(["philadelphia", "Nobody", "the Arthur's Magazine", "Philadelphia"]) == [
        "Philadelphia",
        "Arthur's Magazine",
    ]


def test_an_unknown_name_or_graph_gives_nothing(graph, store):  # noqa: F811
    assert graph.around("Nobody Here") is None and graph.around("") is None
    assert graph.names("zzz") == []
    layer = KnowledgeLayer(store)
    assert layer.browse("run:nosuchrun:1200") is None and layer.browse("") is None


def test_a_kind_that_offers_the_browser_must_say_which_graph():
    class Plain(NodeData):
        pass

    with pytest.raises(ContractError, match="NodeData.knowledge_graph"):
        MethodContract.build(
            "m", [NodeKind("n", Plain, "N", "#000000", "n", browses_knowledge=True)], [], [], [], ViewSpec()
        )
    kinds = {k.name for k in MtqaMethod.contract().node_kinds.values() if k.browses_knowledge}
    assert kinds == {"knowledge", "summary"}


def test_mtqa_records_the_graph_it_read_on_the_knowledge_base_and_summaries(services):  # noqa: F811
    fake_llm = services.llm("fake")
    run_id = run_to_end(services, QUESTION, "mtqa", {"rows": 1, "columns": 2, "documents": 4})
    assert services.repo.get_run(run_id).status == RunStatus.DONE
    contract = MtqaMethod.contract()
    nodes = services.repo.list_nodes(run_id)
    holders = [n for n in nodes if contract.node_kinds[n.kind].browses_knowledge]
    assert len(holders) == 3  # the knowledge base and two summaries
    refs = [contract.node_kinds[n.kind].read(n).knowledge_graph() for n in holders]
    params = services.repo.get_run(run_id).params
    assert {r.key for r in refs} == {f"run:{run_id}:{params['chunk_tokens']}"}
    calls = len(fake_llm.calls)
    browser = services.knowledge.browse(refs[0].key)
    offered = browser.known(refs[0].entities)
    assert offered  # the units' triples name entities of the graph
    base = next(n for n in holders if n.kind == "knowledge")
    named = {name for u in base.data["units"] for t in u["triples"] for name in (t["subject"], t["object"])}
    keywords = browser.known(base.data["detailed_keywords"])
    assert keywords and set(offered) >= named | set(keywords)  # the question's keywords too, when entities
    assert browser.around(offered[0]).sources
    assert len(fake_llm.calls) == calls


# ---------------------------------------------------------------------- the node panel


@pytest.fixture
def mtqa_run(services) -> str:  # noqa: F811
    run_id = run_to_end(services, QUESTION, "mtqa", {"rows": 1, "columns": 1, "documents": 4})
    assert services.repo.get_run(run_id).status == RunStatus.DONE
    return run_id


def test_the_node_panel_browses_around_an_entity_moves_to_a_neighbour_and_back(
    services,
    mtqa_run,  # noqa: F811
    monkeypatch,
):
    base = next(n for n in services.repo.list_nodes(mtqa_run, kind="knowledge"))
    assert base.status == NodeStatus.DONE
    pick_node(monkeypatch, base.id)
    at = open_page(run_id=mtqa_run)
    assert TITLE in [e.label for e in at.expander]
    prefix = f"kg-{mtqa_run}-{base.id}"
    browser = services.knowledge.browse(base.data["graph_key"])
    counts = browser.counts()
    assert (
        f"{counts.entities:,} entities · {counts.relations:,} relations · {counts.chunks_done:,} chunks extracted"
        in texts(at.caption)
    )
    # The node's entities offered; the first shown at once, with its relations and sources.
    pick = at.selectbox(key=f"{prefix}-pick")
    offered = list(pick.options)
    assert offered and offered[0] == at.session_state[f"{prefix}-entity"]
    target = next(name for name in offered if (browser.around(name) or None) and browser.around(name).triples)
    pick.select(target).run()
    assert_no_exception(at)
    assert at.session_state[f"{prefix}-entity"] == target and at.selectbox(key=f"{prefix}-pick").value is None
    around = browser.around(target, limit=12)
    markdown = joined(at.markdown)
    assert f"**{inline_text(target)}**" in markdown
    assert f"**Relations** ({around.relations_total})" in markdown or "**Relations** (12 of" in markdown
    assert f"**Source chunks** ({min(around.sources_total, 5)}" in markdown
    assert all(inline_text(s.title) in markdown for s in around.sources[:5])
    first = around.triples[0]
    neighbour = first.object if first.subject == around.entity.name else first.subject
    button = at.button(key=f"{prefix}-to-0")
    assert button.label == inline_text(neighbour)

    # One click moves there; "Back" returns.
    button.click().run()
    assert_no_exception(at)
    assert at.session_state[f"{prefix}-entity"] == neighbour
    assert f"**{inline_text(neighbour)}**" in joined(at.markdown)
    back = at.button(key=f"{prefix}-back")
    assert back.label == f"Back to {inline_text(target)}"
    back.click().run()
    assert at.session_state[f"{prefix}-entity"] == target

    # Any entity by name: suggestions as typed, one click opens it.
    typed = neighbour[:3].upper()
    at.text_input(key=f"{prefix}-find").input(typed).run()
    assert_no_exception(at)
    names = browser.names(typed, limit=8)
    assert neighbour in names
    labels = [b.label for b in at.button if (b.key or "").startswith(f"{prefix}-found-")]
    assert labels == [inline_text(n) for n in names]
    at.button(key=f"{prefix}-found-{names.index(neighbour)}").click().run()
    assert at.session_state[f"{prefix}-entity"] == neighbour
    assert at.text_input(key=f"{prefix}-find").value == ""
    at.text_input(key=f"{prefix}-find").input("zzzz").run()
    assert "No entity's name contains “zzzz”." in texts(at.caption)


def test_a_graph_that_is_gone_or_not_recorded_is_said_plainly(services, mtqa_run, monkeypatch):  # noqa: F811
    base = next(n for n in services.repo.list_nodes(mtqa_run, kind="knowledge"))
    services.repo.update_node(base.id, merge_data={"graph_key": "run:gone:1200"})
    pick_node(monkeypatch, base.id)
    at = open_page(run_id=mtqa_run)
    assert GONE in texts(at.caption) and not at.exception
    services.repo.update_node(base.id, merge_data={"graph_key": ""})
    at = open_page(run_id=mtqa_run)
    assert NOT_RECORDED in texts(at.caption)
    # A kind that does not offer the browser shows none.
    cell = services.repo.list_nodes(mtqa_run, kind="cell")[0]
    pick_node(monkeypatch, cell.id)
    at = open_page(run_id=mtqa_run)
    assert TITLE not in [e.label for e in at.expander]
