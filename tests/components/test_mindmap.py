"""`build_map` (components/mindmap.py): pure Python, so the map's meaning is checked without a browser:
the left-to-right layout, node numbers per run, one meaning per visual channel (fill = kind, border =
status with a second cue, line = edge kind; no declared fill of any registered method looks like a
status border), the selected node keeping its status border, badges, and labels long enough to tell
siblings apart."""

from __future__ import annotations

import pytest

from components import mindmap
from components.map_legend import legend, legend_text
from components.map_style import STATUS_STYLES, colour_distance, resembles
from engine.methods.registry import METHODS
from storage.models import Edge, Node, NodeStatus
from tests.support.grid_method import GridMethod

OMNITHINK = METHODS["omnithink"].contract()
ALL_METHODS = {**METHODS, GridMethod.name: GridMethod}


def _run(offset: int = 1000) -> tuple[list[Node], list[Edge]]:
    """A small OmniThink tree whose stored ids are global (they start at `offset`)."""
    statuses = [NodeStatus.DONE, NodeStatus.FAILED, NodeStatus.RUNNING, NodeStatus.PENDING, NodeStatus.PRUNED]
    nodes = [
        Node(
            id=offset,
            run_id="r",
            kind="topic",
            label="How will sea-level rise change coastal cities?",
            depth=0,
            status=NodeStatus.DONE,
        )
    ]
    for i, status in enumerate(statuses):
        nodes.append(
            Node(
                id=offset + 1 + i,
                run_id="r",
                kind="subtopic",
                parent_id=offset,
                depth=1,
                status=status,
                label=f"How will sea-level rise affect the water supply of coastal cities, aspect {i}?",
            )
        )
    edges = [Edge(id=i, run_id="r", src=n.parent_id, dst=n.id, kind="child") for i, n in enumerate(nodes[1:], 1)]
    return nodes, edges


def _declared_fills(contract) -> set[str]:
    return {
        colour
        for kind in contract.node_kinds.values()
        for colour in (kind.colour, *(v.colour for v in kind.variants), *kind.depth_palette)
    }


def test_a_tree_grows_left_to_right_with_levels_by_depth():
    nodes, edges = _run()
    data = mindmap.build_map(nodes, edges, contract=OMNITHINK)
    assert data.mode == mindmap.HIERARCHICAL
    assert [n["level"] for n in data.nodes] == [0, 1, 1, 1, 1, 1]
    hierarchy = data.options["layout"]["hierarchical"]
    assert hierarchy["enabled"] and hierarchy["direction"] == "LR"
    assert data.options["edges"]["smooth"]["forceDirection"] == "horizontal"


def test_labels_carry_the_node_number_within_the_run_and_the_whole_question():
    nodes, edges = _run(offset=1000)
    data = mindmap.build_map(nodes, edges, contract=OMNITHINK)
    assert [n["number"] for n in data.nodes] == [1, 2, 3, 4, 5, 6]  # not the global ids 1000...
    first, second = data.nodes[1], data.nodes[2]
    assert first["label"].startswith("#2 ✓\n") and "#1000" not in first["label"]
    assert first["tip"].startswith("#2 · Subtopic · done\n")
    # Siblings differ only at the end of a long question: wrapped, not cut, so both ends show.
    assert first["label"] != second["label"] and "aspect 0?" in first["label"] and "aspect 1?" in second["label"]
    assert all(len(line) <= mindmap.LABEL_WIDTH for line in first["label"].split("\n"))
    assert first["text"] == nodes[1].label  # the whole text, for the search box and the tooltip


def test_a_long_label_is_wrapped_into_a_bounded_number_of_lines():
    text = "word " * 80
    wrapped = mindmap.wrap_label(text)
    assert len(wrapped.split("\n")) == mindmap.LABEL_LINES and wrapped.endswith("…")
    assert mindmap.wrap_label("x" * 70).split("\n")[0] == "x" * mindmap.LABEL_WIDTH  # a long word is split


def test_fill_is_the_kind_border_is_the_status_with_a_second_cue():
    nodes, edges = _run()
    data = mindmap.build_map(nodes, edges, contract=OMNITHINK)
    for node, item in zip(nodes, data.nodes, strict=True):
        style = STATUS_STYLES[node.status]
        assert item["color"]["border"] == style.border
        assert item["label"].split("\n")[0].endswith(style.glyph)  # not colour alone
        assert item["shapeProperties"]["borderDashes"] == ([6, 4] if style.dashes else False)
        if node.status != NodeStatus.PRUNED:
            assert item["color"]["background"] == OMNITHINK.node_kinds[node.kind].fill(node)
    assert len({s.border for s in STATUS_STYLES.values()}) == len(STATUS_STYLES)
    assert len({s.glyph for s in STATUS_STYLES.values()}) == len(STATUS_STYLES)


def test_a_star_is_drawn_large_enough_for_its_fill_to_show_inside_its_border():
    question = Node(id=1, run_id="r", kind="question", label="Which came first?", depth=0, status=NodeStatus.DONE)
    [item] = mindmap.build_map([question], [], contract=METHODS["fgdip"].contract()).nodes
    assert item["shape"] == "star"
    assert item["size"] == mindmap.STAR_SIZE and item["borderWidth"] == 2


@pytest.mark.parametrize("name", sorted(ALL_METHODS))
def test_no_declared_fill_resembles_a_status_border(name):
    for fill in _declared_fills(ALL_METHODS[name].contract()):
        for status, style in STATUS_STYLES.items():
            assert not resembles(fill, style.border), (name, fill, status, round(colour_distance(fill, style.border)))


def test_resemblance_is_measured_as_people_see_colours():
    assert resembles("#E45756", STATUS_STYLES[NodeStatus.FAILED].border)  # the old DEoT depth red
    assert resembles("#F2B701", STATUS_STYLES[NodeStatus.RUNNING].border)  # the old "your follow-up" yellow
    assert not resembles("#4C78A8", STATUS_STYLES[NodeStatus.DONE].border)


def test_the_selected_node_keeps_its_status_border_when_selected_or_hovered():
    nodes, edges = _run()
    failed = nodes[2]
    data = mindmap.build_map(nodes, edges, failed.id, contract=OMNITHINK)
    assert data.selected == str(failed.id)
    item = next(n for n in data.nodes if n["id"] == str(failed.id))
    red = STATUS_STYLES[NodeStatus.FAILED].border
    assert item["color"]["border"] == item["color"]["highlight"]["border"] == item["color"]["hover"]["border"] == red
    assert item["color"]["highlight"]["background"] == item["color"]["background"]


def test_badges_show_under_the_label_and_in_the_tooltip():
    nodes, edges = _run()
    data = mindmap.build_map(nodes, edges, contract=OMNITHINK, badges={nodes[3].id: "queued: prune"})
    item = data.nodes[3]
    assert item["label"].endswith("\nqueued: prune") and item["tip"].endswith("\nqueued: prune")
    assert not any("queued" in n["label"] for i, n in enumerate(data.nodes) if i != 3)


def test_structural_edges_say_nothing_on_hover_and_edges_keep_their_colour_when_selected():
    nodes, edges = _run()
    data = mindmap.build_map(nodes, edges, contract=OMNITHINK)
    for edge in data.edges:
        assert "tip" not in edge and edge["structural"] is True
        assert edge["color"]["color"] == edge["color"]["highlight"] == edge["color"]["hover"]


def test_the_legend_explains_each_channel_from_the_declarations():
    deot = METHODS["deot"].contract()
    sections = legend(deot)
    assert [s["title"] for s in sections][:3] == ["Fill: what the node is", "Border: status", "Line: edge kind"]
    text = legend_text(sections)
    for words in (
        "depth engine: a deeper follow-up",
        "your own follow-up",
        "failed",
        "pending (dashed border)",
        "selected: a blue glow",
        "deeper follow-up: depth engine (dashed)",
    ):
        assert words in text, words
    statuses = {item["border"] for item in sections[1]["items"] if "glyph" in item and item["glyph"]}
    assert statuses == {s.border for s in STATUS_STYLES.values()}


def test_a_long_badge_is_one_short_line_under_the_label_and_whole_in_the_tooltip():
    from components.mindmap import BADGE_CHARS, build_map
    from storage.models import Node

    step = "searched local corpus for “How has evidence supported the main claims over time?”: 3 sources came back"
    node = Node(id=7, run_id="r", kind="question", label="How did Apollo shape later exploration?", depth=0)
    item = build_map([node], [], badges={7: step}).nodes[0]
    badge_line = item["label"].split("\n")[-1]
    assert len(badge_line) <= BADGE_CHARS + 1 and badge_line.endswith("…")
    assert step in item["tip"]


def test_a_frame_value_is_known_by_its_chain_and_a_value_without_one_by_its_seq():
    """The frame's resends of a choice keep the first send's `chain` (each has a new `seq`)."""
    assert mindmap.choice_chain({"node": "4", "seq": "2:b", "chain": "1:a"}) == "1:a"
    assert mindmap.choice_chain({"node": "4", "seq": "1:a"}) == "1:a"
    assert mindmap.choice_chain({"node": "4", "seq": 17}) == "17"
    assert mindmap.choice_chain({"node": "4"}) is None
    assert mindmap.choice_chain(None) is None and mindmap.choice_chain("1:a") is None


def test_no_label_is_drawn_below_the_legible_size():
    """Semantic zoom's floor: vis draws a label only from drawThreshold - 1 px on screen (issue 43:
    Fit turned 48 labels into 2 px smudges)."""
    options = mindmap.map_options()
    assert options["nodes"]["scaling"]["label"]["drawThreshold"] - 1 >= mindmap.LEGIBLE_PX >= 11
    assert mindmap.FONT_SIZE * mindmap.MIN_READABLE_SCALE >= mindmap.LEGIBLE_PX  # the default view has labels


def test_the_node_a_steering_command_made_is_revealed_not_the_methods_own():
    from datetime import datetime, timedelta

    from storage.models import Command, CommandStatus

    sent = datetime(2026, 12, 1, 12, 0)
    nodes, _ = _run()
    before = Node(
        id=1010,
        run_id="r",
        kind="subtopic",
        parent_id=1001,
        depth=2,
        label="grown before",
        created_at=sent - timedelta(seconds=5),
    )
    asked = Node(
        id=1011,
        run_id="r",
        kind="subtopic",
        parent_id=1001,
        depth=2,
        label="your follow-up",
        created_at=sent + timedelta(seconds=3),
    )
    elsewhere = Node(
        id=1012,
        run_id="r",
        kind="subtopic",
        parent_id=1002,
        depth=2,
        label="the method's own",
        created_at=sent + timedelta(seconds=4),
    )
    ask = Command(
        id=1,
        run_id="r",
        kind="ask",
        payload={"node_id": 1001, "question": "q"},
        status=CommandStatus.DONE,
        created_at=sent,
    )
    refused = Command(
        id=2, run_id="r", kind="expand", payload={"node_id": 1002}, status=CommandStatus.FAILED, created_at=sent
    )
    everything = [*nodes, before, asked, elsewhere]
    assert mindmap.steered_node(everything, [ask, refused]) == 1011
    assert mindmap.steered_node(everything, [refused]) is None
    assert mindmap.steered_node(everything, []) is None
    data = mindmap.build_map(everything, [], contract=OMNITHINK, reveal=1011)
    assert mindmap.frame_args(data)["reveal"] == "1011"
