"""MTQA's knowledge graph drawn (issue 43): the part of a stored graph chosen to be drawn
(`engine/knowledge/drawing.py`: around a node's entities, or the whole graph, never more than a cap,
said in words), its vis items with the node's units highlighted (`components/knowledge_graph.py`),
and which units a node used (`mtqa.kinds.knowledge_focus`: a thought's column's units, the ones its
text cites marked; a summary's; the knowledge base's)."""

from __future__ import annotations

import json

import pytest

from components.knowledge_graph import CITED, OTHER, USED, graph_frame
from engine.contract import ContractError, FocusUnit, KnowledgeFocus, KnowledgeTab, MethodContract, ViewSpec
from engine.knowledge.drawing import AROUND_CAP, WHOLE_CAP, draw
from engine.knowledge.merge import entity_key, merge_entity, merge_relation
from engine.methods.mtqa.kinds import CELL, KNOWLEDGE, QUESTION, SUMMARY, knowledge_focus
from storage.knowledge import ChunkInput, EntityInput, RelationInput
from storage.models import Node
from tests import REPO_ROOT
from tests.engine.knowledge.test_knowledge import store  # noqa: F401 - the fixture
from tests.engine.knowledge.test_knowledge_browse import GODEYS, graph  # noqa: F401 - the fixture
from tests.support.db_backends import database_url  # noqa: F401 - the fixture behind `store`

HUB, SPOKES = "Hubville", 300


@pytest.fixture
def hub_graph(store):  # noqa: F811
    """A graph of a few hundred relations, as a real run's: a hub related to 300 places, a pair of
    them related to each other, and one small island."""
    graph = store.open_graph("collection:test:1200", scope="collection", chunk_tokens=1200, collection="test")
    store.add_chunks(graph.id, [ChunkInput(key="c1", ref="test/doc#0", title="Doc", text="text")])
    [chunk] = store.list_chunks(graph.id)
    names = [HUB, *(f"Place {n:03d}" for n in range(SPOKES)), "Island A", "Island B"]
    entities = [EntityInput(entity_key(n), n, "place", f"the description of {n}") for n in names]
    relations = [
        RelationInput(entity_key(HUB), entity_key(f"Place {n:03d}"), f"{HUB} holds place {n}", ("holds",))
        for n in range(SPOKES)
    ]
    relations.append(RelationInput(entity_key("Place 007"), entity_key("Place 008"), "neighbours", ("borders",)))
    relations.append(RelationInput(entity_key("Island A"), entity_key("Island B"), "a ferry", ("ferry to",)))
    assert store.save_extraction(
        graph.id, chunk.id, entities, relations, merge_entity=merge_entity, merge_relation=merge_relation
    )
    return store, graph.id


# ---------------------------------------------------------------------- what is drawn


def test_a_small_graph_is_drawn_whole_and_around_a_node_its_entities_come_first(graph):  # noqa: F811
    counts = graph.counts()
    whole = graph.drawing([], around=False)
    assert len(whole.relations) == counts.relations and not whole.capped
    assert whole.says().endswith(": the whole graph") and f"of {counts.relations} relations" in whole.says()
    around = graph.drawing([GODEYS, "Philadelphia"], around=True)
    assert around.focus == {entity_key(GODEYS), "philadelphia"}
    keys = {e.key for e in around.entities}
    assert around.focus <= keys
    # Every relation touches a highlighted entity or one of their neighbours; those between two
    # highlighted entities come first.
    ring = {end for r in around.relations for end in (r.source, r.target) if {r.source, r.target} & around.focus}
    assert all({r.source, r.target} & ring for r in around.relations)
    inside = [i for i, r in enumerate(around.relations) if {r.source, r.target} <= around.focus]
    assert inside == list(range(len(inside)))
    assert "the relations of the 2 entities the node's units name first" in around.says()


def test_a_graph_of_hundreds_of_relations_is_capped_and_says_so(hub_graph):
    store, graph_id = hub_graph
    total = SPOKES + 2
    whole = draw(store, graph_id, ["Island A"], around=False)
    assert len(whole.relations) == WHOLE_CAP and whole.relations_total == total and whole.capped
    # The highlighted entity's relation first, then the most connected entity's (the hub's).
    assert {whole.relations[0].source, whole.relations[0].target} == {"island a", "island b"}
    assert all(HUB.lower() in (r.source, r.target) for r in whole.relations[1:])
    assert whole.says() == (
        f"{WHOLE_CAP} of {total} relations and {len(whole.entities)} of {SPOKES + 3} entities: "
        f"at most {WHOLE_CAP}, the relations of the node's units first, then those of the most "
        "connected entities"
    )
    around = draw(store, graph_id, ["Place 007", "Place 008"], around=True)
    assert len(around.relations) == AROUND_CAP and around.capped
    assert {around.relations[0].source, around.relations[0].target} == {"place 007", "place 008"}
    assert f"(at most {AROUND_CAP})" in around.says()
    # Every drawn relation has both its ends drawn, each entity once.
    keys = [e.key for e in around.entities]
    assert len(keys) == len(set(keys)) and all({r.source, r.target} <= set(keys) for r in around.relations)


def test_names_the_graph_does_not_hold_highlight_nothing(hub_graph):
    store, graph_id = hub_graph
    around = draw(store, graph_id, ["Nowhere", ""], around=True)
    assert not around.relations and not around.focus and "none of the node's entities" in around.says()


def test_the_store_counts_degrees_and_bounds_a_hubs_relations(hub_graph):
    store, graph_id = hub_graph
    assert store.busiest_entities(graph_id, 3)[0] == entity_key(HUB)
    assert len(store.relations_touching(graph_id, [entity_key(HUB)], 25)) == 25


# ---------------------------------------------------------------------- the frame's items


def _focus(*units: FocusUnit) -> KnowledgeFocus:
    return KnowledgeFocus("k", units, "")


def test_the_frame_highlights_the_units_entities_and_triples(graph):  # noqa: F811
    cited = FocusUnit("Arthur's Magazine", (("Arthur's Magazine", "merged into", GODEYS),), cited=True)
    read = FocusUnit("Godey", ((GODEYS, "published in", "Philadelphia"),))
    drawing = graph.drawing([GODEYS, "Arthur's Magazine", "Philadelphia"], around=True)
    frame = graph_frame(drawing, _focus(cited, read))
    roles = {n["id"]: n["role"] for n in frame.nodes}
    assert roles[entity_key("Arthur's Magazine")] == roles[entity_key(GODEYS)] == CITED
    assert roles["philadelphia"] == USED and OTHER in roles.values()
    # The view opens on what the node cites; without a cited unit, on all it read.
    assert set(frame.focus) == {entity_key("Arthur's Magazine"), entity_key(GODEYS)}
    uncited = graph_frame(drawing, _focus(read, FocusUnit("a", cited.triples, cited=False)))
    assert uncited.focus == [entity_key(GODEYS)]  # the most connected entity it read
    unit_edges = {frozenset((e["from"], e["to"])) for e in frame.edges if e["focus"]}
    assert frozenset((entity_key("Arthur's Magazine"), entity_key(GODEYS))) in unit_edges
    assert all(e["label"] for e in frame.edges) and len({e["id"] for e in frame.edges}) == len(frame.edges)
    assert [entry["text"] for entry in frame.legend] == [
        "in a unit the node cites",
        "in a unit the node read",
        "other entity",
        "a triple of the node's units",
    ]
    # Labels only where legible; no vis tooltip (`title`): the frame shows tips as text.
    assert frame.options["nodes"]["scaling"]["label"]["drawThreshold"] >= 9
    assert not any("title" in item for item in frame.nodes + frame.edges)


def test_model_text_reaches_the_frame_as_data_only(graph):  # noqa: F811
    """Entity names are model text: they travel as JSON strings for canvas labels and textContent,
    never as markup the frame would parse (graph.js has no innerHTML)."""

    hostile = '<img src=x onerror="alert(1)">'
    focus = _focus(FocusUnit(hostile, ((hostile, "is", GODEYS),)))
    frame = graph_frame(graph.drawing([GODEYS], around=True), focus)
    json.dumps(frame.nodes)  # plain data
    script = (REPO_ROOT / "components/knowledge_graph_frontend/graph.js").read_text()
    assert ".innerHTML" not in script and "title:" not in script and ".insertAdjacentHTML" not in script


# ---------------------------------------------------------------------- which units a node used


def _unit(uid: str, source: int, triple: tuple[str, str, str], dropped: bool = False) -> dict:
    return {
        "id": uid,
        "source_id": source,
        "title": uid,
        "ref": uid,
        "dropped": dropped,
        "triples": [{"subject": triple[0], "relation": triple[1], "object": triple[2]}],
    }


def _matrix() -> list[Node]:
    base = Node(
        id=2,
        run_id="r",
        kind=KNOWLEDGE,
        label="Knowledge base",
        parent_id=1,
        status="done",
        data={
            "graph_key": "run:r:1200",
            "units": [
                _unit("u1", 11, ("A", "r", "B")),
                _unit("u2", 12, ("C", "r", "D")),
                _unit("u3", 13, ("E", "r", "F"), dropped=True),
            ],
        },
    )
    cell = Node(
        id=3,
        run_id="r",
        kind=CELL,
        label="Thought 1.1",
        parent_id=2,
        status="done",
        content="A came first [[S12]].",
        data={"row": 0, "column": 0},
    )
    summary = Node(
        id=4,
        run_id="r",
        kind=SUMMARY,
        label="Summary",
        parent_id=2,
        status="done",
        data={"column": 0, "graph_key": "run:r:1200", "units": [_unit("u4", 14, ("G", "r", "H"))]},
    )
    later = Node(
        id=5,
        run_id="r",
        kind=CELL,
        label="Thought 1.2",
        parent_id=4,
        status="done",
        content="G.",
        data={"row": 0, "column": 1},
    )
    return [Node(id=1, run_id="r", kind=QUESTION, label="q", status="done"), base, cell, summary, later]


def test_a_thought_highlights_its_columns_units_and_marks_those_it_cites():
    nodes = _matrix()
    focus = knowledge_focus(nodes, nodes[2])
    assert focus.key == "run:r:1200"
    assert [(u.title, u.cited) for u in focus.units] == [("u1", False), ("u2", True)]  # the dropped one left out
    assert focus.says == (
        "Row 1, column 1 thought from the 2 knowledge units of the knowledge base (KU 1); its text cites 1 of them."
    )
    later = knowledge_focus(nodes, nodes[4])
    assert [u.title for u in later.units] == ["u4"] and "the summary of column 1 (KU′)" in later.says
    summary = knowledge_focus(nodes, nodes[3])
    assert [u.title for u in summary.units] == ["u4"] and summary.says.startswith("The summary of column 1")
    question = knowledge_focus(nodes, nodes[0])
    assert [u.title for u in question.units] == ["u1", "u2"] and "Pick a thought" in question.says
    assert knowledge_focus(nodes[:1], None) is None  # no knowledge base yet


def test_a_knowledge_tab_needs_a_name_of_its_own():
    tab = KnowledgeTab("Matrix", knowledge_focus)
    with pytest.raises(ContractError, match="name of its own"):
        MethodContract.build("m", [], [], [], [], ViewSpec(side_tab="Matrix", knowledge_tab=tab))
    MethodContract.build(
        "m", [], [], [], [], ViewSpec(side_tab="Matrix", knowledge_tab=KnowledgeTab("Knowledge graph", knowledge_focus))
    )


def test_the_frame_carries_the_maps_own_copy_of_vis_network():
    """Streamlit serves a component only from its own folder, so the frame has a copy: the same file."""

    components = REPO_ROOT / "components"
    for name in ("vis-network.min.js", "LICENSE-MIT", "LICENSE-APACHE-2.0"):
        assert (components / "knowledge_graph_frontend" / name).read_bytes() == (
            components / "mindmap_frontend" / name
        ).read_bytes(), name
