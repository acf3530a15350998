"""The live mind map: our own bidirectional Streamlit component over vis-network
(`components/mindmap_frontend/`), drawn from the run's method contract (`engine/contract.py`).
Nothing here knows a method by name.

`build_map` is pure Python: it turns the stored nodes and edges into vis-network items, with one
meaning per visual channel (`components/map_style.py`): fill = node kind, border = status (plus a
glyph, and dashes for pending), line style = edge kind. Labels carry the node's number within its run
(`engine/node_numbers.py`), its text wrapped (not cut at 40 characters: siblings must be told apart)
and an optional badge line (e.g. "queued: prune"). The frame keeps its vis Network across reruns and
updates its DataSets by id, so the viewport, the selection and collapsed subtrees survive the live
updates; it shows every text with `textContent` (tooltips included) and opens nothing.

Layouts (`ViewSpec.layout`):

* `tree`: a mind map growing left to right, levelled by depth (vis's hierarchical layout, no physics,
  so growth does not shuffle the map).
* `search_tree`: the same tree, with non-structural edges (backtracks) drawn dashed and curved over
  it. vis's hierarchical layout counts every visible edge between two levels as a parent → child
  relation, so when such edges exist the positions come from `map_layout.tree_positions` and are
  handed to vis fixed.
* `grid`: rows × columns from `ViewSpec.position(node)` (`map_layout.grid_positions`).
* `network`: force-directed (physics on, no hierarchy).

Reading a map of 50-500 nodes (issue 43). Both ideas were tried on stored DEoT trees of 48 and 300
nodes at 1440×900 (`tests/e2e/test_map_overview_browser.py`; times in `benchmarks/bench_map.py`):

* semantic zoom: a left-to-right tree stacks its leaves 135 px apart (a dot and three lines of
  label), so 300 nodes fit a 600 px map only at a scale near 0.03, a strip a few dozen pixels wide.
  One-line labels at a readable size then fit only on the branches, stacked along that strip with
  their sizes ("+85"): a legible sketch of the top of the tree, not of its questions;
* an outline (an indented list of entries of up to two lines) shows 15-30 nodes at 13 px, whatever
  the map's size, scrolls, folds and searches: the overview of a large tree is the outline. It is in
  the frame, beside the map (`components/mindmap_frontend/outline.js`; the Outline button, open by
  itself when the frame is wide enough to keep 600 px of map beside it and the map is too big to show
  whole readably), and a click on an entry chooses the node as a click on the map does.

So both: the outline is the overview, and semantic zoom is the map's rule for labels: none is drawn
below `LEGIBLE_PX` on screen (vis's `drawThreshold`: Fit used to turn 48 labels into 2 px smudges),
and zoomed out past that, the branches keep one-line landmark labels with their size where they
have room (`landmarks.js`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from components.map_layout import GRID_ROW, LEVEL_SEPARATION, NODE_SPACING, grid_positions, tree_positions
from components.map_legend import legend
from components.map_style import NEUTRAL_FILL, PRUNED_FILL, is_dark, status_style
from engine.contract import EdgeKind, Layout, MethodContract, NodeKind
from engine.node_numbers import node_numbers
from engine.reads import Command, CommandStatus, Edge, Node, NodeStatus
from engine.safe_text import cut_at_word

# How the map is laid out in vis-network.
HIERARCHICAL, FIXED, PHYSICS = "hierarchical", "fixed", "physics"

FONT_SIZE = 16  # px at scale 1
LEGIBLE_PX = 11  # no label is drawn smaller on screen (vis fades a label in over its last pixel)
# The frame never opens a map zoomed out below this (16 px × 0.8 = 12.8 px on screen), unless the
# whole map fits at nine tenths of it (11.5 px; `map.js`'s WHOLE_AT). "Fit" may.
MIN_READABLE_SCALE = 0.8
# A map in a column beside others (Compare) is an overview: it may open smaller to show the whole
# tree; the toolbar zooms in and Full screen reads it.
OVERVIEW_SCALE = 0.45
LABEL_WIDTH = 32  # characters per label line
LABEL_LINES = 3  # lines of label text; the whole text is in the tooltip and the node panel
LABEL_GROUND = "rgba(255, 255, 255, 0.85)"  # behind labels drawn outside their shape
MAP_HEIGHT = 650

# Shapes that draw their label inside: the label's colour must contrast with the fill.
LABEL_INSIDE = frozenset({"box", "ellipse", "circle", "database"})
# Thin shapes: a thick border would hide their fill.
THIN_SHAPES = frozenset({"star", "triangle", "triangleDown", "diamond"})
# A star's arms taper to points: at a tree's size its status border covered most of them, and the
# question (a dark-blue star) read as a green, "done" one. It is drawn larger, so its fill shows.
STAR_SIZE = 26

_FRONTEND = Path(__file__).with_name("mindmap_frontend")


def short_label(text: str, limit: int = 42) -> str:
    """`text` on one line, cut at a word boundary to about `limit` characters."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return cut_at_word(text, limit) + "…"


def wrap_label(text: str, width: int = LABEL_WIDTH, lines: int = LABEL_LINES) -> str:
    """`text` wrapped at word boundaries into at most `lines` lines (the last one ends in "…" when
    text was left out); a word longer than a line is split."""
    words: list[str] = []
    for word in text.split():
        words.extend(word[i : i + width] for i in range(0, len(word), width))
    out, line = [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    if line:
        out.append(line)
    if len(out) > lines:
        out = out[:lines]
        out[-1] = out[-1][: width - 1].rstrip() + "…"
    return "\n".join(out)


@dataclass(frozen=True)
class MapData:
    """What the frame draws: vis-network items, its options, and the legend."""

    nodes: list[dict]
    edges: list[dict]
    mode: str = HIERARCHICAL  # HIERARCHICAL, FIXED (positions given) or PHYSICS
    options: dict = field(default_factory=dict)
    legend: list[dict] = field(default_factory=list)
    selected: str | None = None
    follow: str | None = None  # the node the run works on, kept in view while the reader watches
    reveal: str | None = None  # the newest node the reader's steering made: brought into view once


def working_node(nodes: Sequence[Node]) -> int | None:
    """Where a live run is working now: its newest running node, else its newest node that is not
    pruned (between two steps nothing runs). None for an empty tree."""
    running = [node.id for node in nodes if node.status == NodeStatus.RUNNING]
    if running:
        return max(running)
    kept = [node.id for node in nodes if node.status != NodeStatus.PRUNED]
    return max(kept, default=None)


def steered_node(nodes: Sequence[Node], commands: Iterable[Command]) -> int | None:
    """The newest node the reader's steering made: a child of a node command's target (a follow-up,
    new branches, a deeper question), created after the command was sent. None when there is none."""
    sent: dict[int, datetime] = {}  # target node -> when the first command on it (not refused) was sent
    for command in commands:
        target = (command.payload or {}).get("node_id")
        if isinstance(target, int) and command.status != CommandStatus.FAILED:
            at = _utc(command.created_at)
            sent[target] = min(at, sent.get(target, at))
    made = [node.id for node in nodes if node.parent_id in sent and _utc(node.created_at) >= sent[node.parent_id]]
    return max(made, default=None)


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)  # SQLite reads naive UTC


def fill_colour(node: Node, kind: NodeKind | None) -> str:
    """The node's fill as its kind declares it (variant, depth palette, colour)."""
    return kind.fill(node) if kind is not None else NEUTRAL_FILL


def edge_kind(contract: MethodContract | None, name: str) -> EdgeKind:
    declared = contract.edge_kinds.get(name) if contract is not None else None
    return declared or EdgeKind(name, name)


def _layout(
    nodes: Sequence[Node], edges: Sequence[Edge], contract: MethodContract | None
) -> tuple[str, dict[int, tuple[float, float]] | None, bool]:
    """(mode, fixed positions or None, grows left to right?)"""
    layout = contract.view.layout if contract is not None else Layout.TREE
    if layout == Layout.GRID and contract is not None and contract.view.position is not None:
        return FIXED, grid_positions(nodes, contract.view.position), False
    if layout == Layout.NETWORK:
        return PHYSICS, None, False
    node_ids = {n.id for n in nodes}
    if any(not edge_kind(contract, e.kind).structural for e in edges if e.src in node_ids and e.dst in node_ids):
        # A tree with edges drawn over it: vis's hierarchy would count them, so it is placed here.
        return FIXED, tree_positions(nodes), True
    return HIERARCHICAL, None, True


BADGE_CHARS = 34  # about a label's width


def _vis_node(node: Node, number: int, kind: NodeKind | None, *, badge: str | None) -> dict:
    style = status_style(node.status)
    pruned = node.status == NodeStatus.PRUNED
    shape = kind.shape if kind is not None else "dot"
    fill = PRUNED_FILL if pruned else fill_colour(node, kind)
    sized = kind is None or kind.size_by_priority
    size = 14 + 4 * max(0.0, min(node.priority, 3.0)) if sized else 16
    if shape == "star":
        size = max(size, STAR_SIZE)
    if pruned:
        font_colour = "#777777"
    elif shape in LABEL_INSIDE and is_dark(fill):
        font_colour = "#FFFFFF"
    else:
        font_colour = "#1F1F1F"
    text = " ".join(node.label.split())
    # The badge under the label is one short line (a step can be a whole search query); the tooltip has all of it.
    label = f"#{number} {style.glyph}\n{wrap_label(text)}" + (f"\n{short_label(badge, BADGE_CHARS)}" if badge else "")
    colours = {"background": fill, "border": style.border}
    kind_label = kind.label if kind is not None else node.kind
    item = {
        "id": str(node.id),
        "number": number,
        "text": text,  # what the search box matches (with "#number")
        "parent": str(node.parent_id) if node.parent_id is not None else None,
        "label": label,
        # Plain text, shown with textContent by the frame (never given to vis as `title`).
        "tip": f"#{number} · {kind_label} · {node.status}\n{text}" + (f"\n{badge}" if badge else ""),
        "shape": shape,
        "size": size,
        "borderWidth": 2 if shape in THIN_SHAPES else 3,
        "borderWidthSelected": 3 if shape in THIN_SHAPES else 4,
        # Selection and hover keep the node's own colours: the status border stays readable.
        "color": {**colours, "highlight": dict(colours), "hover": dict(colours)},
        "shapeProperties": {"borderDashes": [6, 4] if style.dashes else False},
        "font": {"size": FONT_SIZE, "color": font_colour, "multi": False},
        "opacity": 0.5 if pruned else 1.0,
    }
    if shape in LABEL_INSIDE:
        item["margin"] = 10
    else:
        # A label under its shape sits on a white ground: an edge passing behind it (a grid's
        # synthesis edges, a tree's long first-layer edges) never runs through its text.
        item["font"]["background"] = LABEL_GROUND
    return item


def _vis_edge(edge: Edge, kind: EdgeKind) -> dict:
    item = {
        "id": f"e{edge.id}" if edge.id is not None else f"{edge.src}-{edge.dst}-{edge.kind}",
        "from": str(edge.src),
        "to": str(edge.dst),
        "structural": kind.structural,
        "color": {"color": kind.colour, "highlight": kind.colour, "hover": kind.colour},
        "dashes": kind.dashes,
        "width": 1.5,
    }
    if not kind.structural:
        # Drawn over the layout: no pull on the nodes, curved so it does not hide a tree edge or run
        # through the nodes between its ends. Only these say what they are on hover: a structural
        # edge is the tree itself.
        item["tip"] = kind.label
        item["physics"] = False
        item["smooth"] = {"enabled": True, "type": "curvedCW", "roundness": 0.25}
    return item


def build_map(
    nodes: Sequence[Node],
    edges: Sequence[Edge],
    selected: int | None = None,
    *,
    contract: MethodContract | None = None,
    badges: Mapping[int, str] | None = None,
    follow: int | None = None,
    reveal: int | None = None,
) -> MapData:
    """vis-network nodes and edges as the run's method declares them, positioned by the view's
    layout; `selected` is selected in the frame (which draws it with a halo, its colours kept);
    `badges` (node id -> a short status line, e.g. "queued: prune") go under the labels; `follow`
    (a live run's `working_node`) is kept in view as the map grows, until the reader moves the map;
    `reveal` (`steered_node`) is brought into view when it appears, however the reader moved the map.
    Without a contract (a run of a method this process does not serve) every node is a neutral dot."""
    mode, positions, horizontal = _layout(nodes, edges, contract)
    numbers = node_numbers(nodes)
    vis_nodes = []
    for node in nodes:
        kind = contract.node_kinds.get(node.kind) if contract is not None else None
        item = _vis_node(node, numbers.get(node.id, 0), kind, badge=(badges or {}).get(node.id))
        if mode == HIERARCHICAL:
            item["level"] = node.depth
        if positions is not None and node.id in positions:
            item["x"], item["y"] = positions[node.id]
        vis_nodes.append(item)
    vis_edges = [_vis_edge(edge, edge_kind(contract, edge.kind)) for edge in edges]
    return MapData(
        nodes=vis_nodes,
        edges=vis_edges,
        mode=mode,
        options=map_options(mode, horizontal=horizontal),
        legend=legend(contract),
        selected=str(selected) if selected is not None else None,
        follow=str(follow) if follow is not None else None,
        reveal=str(reveal) if reveal is not None else None,
    )


def map_options(mode: str = HIERARCHICAL, *, horizontal: bool = True) -> dict:
    """vis-network options for a mode.

    HIERARCHICAL: a left-to-right tree without physics: stable positions, so growth does not
    shuffle the map. `edgeMinimization` stays off: vis re-runs the whole hierarchical layout on
    every data change, and its edge-length minimisation made that superlinear (220-310 ms of layout
    per live update at 500 nodes against about 70 ms without it; benchmarks/bench_ui.py).

    FIXED: the nodes carry their positions (grid, or a tree with edges drawn over it); no hierarchy,
    no physics. PHYSICS: a force-directed network."""
    physics = mode == PHYSICS
    direction = "horizontal" if horizontal else "vertical"
    smooth = (
        {"type": "continuous"} if physics else {"type": "cubicBezier", "forceDirection": direction, "roundness": 0.5}
    )
    return {
        "autoResize": True,
        "physics": {"enabled": physics, "stabilization": {"enabled": True, "fit": False}},
        "layout": {
            "hierarchical": {
                "enabled": mode == HIERARCHICAL,
                "direction": "LR",
                "sortMethod": "directed",
                "levelSeparation": LEVEL_SEPARATION,
                "nodeSpacing": NODE_SPACING,
                "treeSpacing": GRID_ROW,
                "blockShifting": True,
                "edgeMinimization": False,
                "parentCentralization": True,
                "shakeTowards": "roots",
            }
        },
        "interaction": {
            "hover": True,
            "navigationButtons": False,
            "keyboard": False,
            "multiselect": False,
            "selectConnectedEdges": False,
            "hoverConnectedEdges": False,
            "zoomSpeed": 0.7,
        },
        # vis draws a label only from drawThreshold - 1 px on screen, fading it in over that pixel.
        "nodes": {
            "font": {"size": FONT_SIZE, "face": "sans-serif"},
            "scaling": {"label": {"drawThreshold": LEGIBLE_PX + 1}},
        },
        "edges": {"arrows": {"to": {"enabled": True, "scaleFactor": 0.5}}, "smooth": smooth},
    }


@functools.cache  # declared once per process: the same name and path on every rerun
def _component():
    import streamlit.components.v1 as components  # Streamlit only when drawn

    return components.declare_component("thoughtmap_map", path=str(_FRONTEND))


def frame_args(
    data: MapData, height: int = MAP_HEIGHT, min_scale: float = MIN_READABLE_SCALE, *, received: str | None = None
) -> dict:
    """What each render sends the frame (Streamlit serialises it as JSON): the whole map, every time,
    and `received`, the `chain` of the frame's last choice that reached the page."""
    return {
        "nodes": data.nodes,
        "edges": data.edges,
        "options": data.options,
        "legend": data.legend,
        "selected": data.selected,
        "follow": data.follow,
        "reveal": data.reveal,
        "height": height,
        "minScale": min_scale,
        "received": received,
    }


def map_choice(key: str) -> int | None:
    """The node the reader has just chosen on the map `key` (a click, or a search match), once: None
    on every other rerun, so the Node list's own choices stand. Read before the map is built (a
    keyed component's value is in session_state before it is drawn), so the render that first says
    the choice was received already selects it: a map built before the choice was read carried the
    old selection, and Streamlit renders a frame again unchanged (a resize, a reconnect)."""
    import streamlit as st

    chain = choice_chain(st.session_state.get(key))
    seen_key = f"{key}-seen"
    if chain is None or chain == st.session_state.get(seen_key):
        return None
    st.session_state[seen_key] = chain
    node = str(st.session_state[key].get("node", ""))
    return int(node) if node.isdigit() else None


def choice_chain(value: object) -> str | None:
    """The choice a frame value is of: its `chain`, the first send's `seq`, which the frame's resends
    of a choice keep (each has a new `seq`, so that Streamlit reruns); a value without one, its seq."""
    if not isinstance(value, dict):
        return None
    chain = value.get("chain") if value.get("chain") is not None else value.get("seq")
    return str(chain) if chain is not None else None


def mind_map(data: MapData, *, key: str, height: int = MAP_HEIGHT, min_scale: float = MIN_READABLE_SCALE) -> None:
    """Draw the map. What the reader chooses on it comes back through `map_choice(key)`, read before
    the map is built."""
    import streamlit as st

    # The frame's last choice as this run received it, said back to the frame, which sends a choice
    # again only when it did not arrive, and follows the page's selection again once it did.
    received = choice_chain(st.session_state.get(key))
    _component()(**frame_args(data, height, min_scale, received=received), key=key, default=None)
