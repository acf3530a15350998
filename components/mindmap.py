"""The live mind map: a keyed wrapper around streamlit-agraph's component, drawn from the run's method
contract (`engine/methods/contract.py`): each node kind's fill (a variant by a data field, a palette
by depth, else its colour), shape and sizing; each edge kind's colour, dashes and hover label; the
view's layout; and a legend built from the same declarations. Nothing here knows a method by name.

The public `agraph()` takes no `key`, so every data change remounts its iframe (flicker, lost zoom
and selection). Calling the declared component with a stable key keeps the iframe and only sends
the new data. Hover titles never contain `<` or `>`: see `hover_title`.

Layouts (`ViewSpec.layout`):

* `tree`: top-down, levelled by depth, vis-network's hierarchical layout (no physics, so growth does
  not shuffle the map).
* `search_tree`: the same tree, with non-structural edges (backtracks) drawn dashed and curved over
  it. vis-network's hierarchical layout counts every visible edge between two levels as a
  parent → child relation, so an edge drawn over the tree would pull nodes around; whenever a tree
  has such edges, the positions are computed here from the structural tree (`Node.parent_id` and
  `Node.depth`) and handed to vis fixed, with hierarchy and physics off.
* `grid`: rows × columns from `ViewSpec.position(node)`; nodes without a position sit above the
  grid, centred. Hierarchy and physics off.
* `network`: force-directed (physics on, no hierarchy).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from engine.methods.contract import EdgeKind, Layout, MethodContract, NodeKind
from engine.safe_text import inline_text
from storage.models import Edge, Node, NodeStatus

STATUS_BORDERS = {
    NodeStatus.PENDING: "#BBBBBB",
    NodeStatus.RUNNING: "#F2B701",
    NodeStatus.DONE: "#2CA02C",
    NodeStatus.FAILED: "#D62728",
    NodeStatus.PRUNED: "#7F7F7F",
}
STATUS_LEGEND = (("grey", "pending"), ("yellow", "running"), ("green", "done"), ("red", "failed"),
                 ("dark grey", "pruned"), ("black, thick", "selected"))
SELECTED_BORDER = "#111111"
NEUTRAL_FILL = "#9D9D9D"  # a node whose kind the contract does not declare (or no contract)
PRUNED_FILL = "#DDDDDD"

# How the map is laid out in vis-network.
HIERARCHICAL, FIXED, PHYSICS = "hierarchical", "fixed", "physics"

LEVEL_SEPARATION = 110  # px between tree levels (as vis's hierarchical layout, below)
NODE_SPACING = 170  # px between neighbouring leaves of a computed tree
GRID_COLUMN = 210  # px between grid columns
GRID_ROW = 130  # px between grid rows

# Shapes that draw their label inside: the label's colour must contrast with the fill.
LABEL_INSIDE = frozenset({"box", "ellipse"})
# Thin shapes: a thick border would hide their fill, so a selected one grows instead.
THIN_SHAPES = frozenset({"star", "triangle", "triangleDown", "diamond"})


def short_label(text: str, limit: int = 42) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut + "…"


def _wrap(text: str, width: int = 22) -> str:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    if line:
        lines.append(line)
    return "\n".join(lines)


def hover_title(text: str) -> str:
    """A node's hover title. vis-network shows it as text (`innerText`), so HTML escapes would show up
    literally ("What&#x27;s"); but the component also parses it with `innerHTML` into a detached
    element, where `<img src=x onerror=...>` would still run. Without `<` and `>` nothing in it can
    become an element: they become look-alike angle quotes."""
    return text.replace("<", "\u2039").replace(">", "\u203a")


# --------------------------------------------------------------------------- colours, for people

# Names for the legend: the nearest of these describes a declared colour in words; the second item
# is the Streamlit Markdown colour its swatch is drawn in (`:blue[●]`).
_NAMED_COLOURS = (
    ("dark blue", "#2F4B7C", "blue"), ("blue", "#4C78A8", "blue"), ("light blue", "#9ECAE9", "blue"),
    ("pale blue", "#C6DBEF", "blue"), ("teal", "#72B7B2", "green"), ("sea green", "#16A085", "green"),
    ("green", "#54A24B", "green"), ("dark green", "#1E7B34", "green"), ("red", "#E45756", "red"),
    ("dark red", "#A93226", "red"), ("pink", "#FF9DA6", "red"), ("yellow", "#F2B701", "yellow"),
    ("dark yellow", "#C9A100", "yellow"), ("orange", "#F58518", "orange"), ("brown", "#9D755D", "orange"),
    ("purple", "#8E44AD", "violet"), ("lilac", "#B279A2", "violet"), ("grey", "#9D9D9D", "gray"),
    ("light grey", "#DDDDDD", "gray"), ("dark grey", "#555555", "gray"), ("black", "#222222", "gray"),
    ("white", "#FFFFFF", "gray"),
)
_SHAPE_GLYPHS = {"dot": "●", "box": "■", "diamond": "◆", "square": "■", "triangle": "▲",
                 "triangleDown": "▼", "star": "★", "ellipse": "⬬", "hexagon": "⬢"}


def _rgb(colour: str) -> tuple[int, int, int]:
    colour = colour.lstrip("#")
    if len(colour) == 3:
        colour = "".join(c * 2 for c in colour)
    try:
        return int(colour[0:2], 16), int(colour[2:4], 16), int(colour[4:6], 16)
    except ValueError:
        return 157, 157, 157


def _nearest(colour: str) -> tuple[str, str]:
    r, g, b = _rgb(colour)
    name, _, streamlit_colour = min(
        _NAMED_COLOURS, key=lambda item: sum((x - y) ** 2 for x, y in zip((r, g, b), _rgb(item[1]), strict=True)))
    return name, streamlit_colour


def colour_name(colour: str) -> str:
    """A declared colour in words, for the legend ("#8E44AD" -> "purple")."""
    return _nearest(colour)[0]


def _swatch(colour: str, glyph: str) -> str:
    return f":{_nearest(colour)[1]}[{glyph}]"


def _is_dark(colour: str) -> bool:
    r, g, b = _rgb(colour)
    return 0.299 * r + 0.587 * g + 0.114 * b < 150


# --------------------------------------------------------------------------- the map's data


@dataclass(frozen=True)
class MapData:
    nodes: list[dict]
    edges: list[dict]
    mode: str = HIERARCHICAL  # HIERARCHICAL, FIXED (positions given) or PHYSICS

    def as_json(self) -> str:
        return json.dumps({"nodes": self.nodes, "edges": self.edges}, separators=(",", ":"))


def fill_colour(node: Node, kind: NodeKind | None) -> str:
    """The node's fill as its kind declares it (variant, depth palette, colour)."""
    return kind.fill(node) if kind is not None else NEUTRAL_FILL


def edge_kind(contract: MethodContract | None, name: str) -> EdgeKind:
    declared = contract.edge_kinds.get(name) if contract is not None else None
    return declared or EdgeKind(name, name)


def tree_positions(nodes: Sequence[Node]) -> dict[int, tuple[float, float]]:
    """Top-down tree positions from the structural tree alone (`parent_id`, `depth`): leaves side by
    side in the order the nodes were created, each parent centred over its children."""
    by_id = {n.id: n for n in nodes}
    children: dict[int, list[int]] = {}
    roots: list[int] = []
    for node in sorted(nodes, key=lambda n: n.id):
        if node.parent_id is not None and node.parent_id in by_id and node.parent_id != node.id:
            children.setdefault(node.parent_id, []).append(node.id)
        else:
            roots.append(node.id)
    slots: dict[int, float] = {}
    next_slot = 0.0
    seen: set[int] = set()
    for root in roots:
        stack = [(root, False)]
        while stack:
            node_id, children_placed = stack.pop()
            if children_placed:
                kids = [k for k in children.get(node_id, []) if k in slots]
                if kids:
                    slots[node_id] = (slots[kids[0]] + slots[kids[-1]]) / 2
                else:
                    slots[node_id] = next_slot
                    next_slot += 1
                continue
            if node_id in seen:  # a cycle in parent ids (never stored, but the map must not hang)
                continue
            seen.add(node_id)
            stack.append((node_id, True))
            stack.extend((kid, False) for kid in reversed(children.get(node_id, [])))
        next_slot += 0.5  # a gap between separate trees
    return _centred({node_id: (slot * NODE_SPACING, by_id[node_id].depth * LEVEL_SEPARATION)
                     for node_id, slot in slots.items()})


def _centred(positions: dict[int, tuple[float, float]]) -> dict[int, tuple[float, float]]:
    """Positions shifted so the drawing is centred on x = 0. vis fits its view to the first data it
    gets and keeps that camera on later updates: centred data stays in view as it grows sideways."""
    if not positions:
        return positions
    xs = [x for x, _ in positions.values()]
    shift = (min(xs) + max(xs)) / 2
    return {node_id: (x - shift, y) for node_id, (x, y) in positions.items()}


def grid_positions(nodes: Sequence[Node],
                   position: Callable[[Node], tuple[int, int] | None]) -> dict[int, tuple[float, float]]:
    """Rows × columns from the view's `position(node)`; nodes without one in a row above the grid
    (above row 0 at least, so they do not move when a row above the others appears), centred."""
    placed: dict[int, tuple[int, int]] = {}
    outside: list[Node] = []
    for node in nodes:
        try:
            where = position(node)
        except (LookupError, TypeError, ValueError, AttributeError):  # odd stored data: off the grid
            where = None
        if where is None:
            outside.append(node)
        else:
            placed[node.id] = (int(where[0]), int(where[1]))
    if placed:
        top = min(0, *(row for row, _ in placed.values()))
        columns = [column for _, column in placed.values()]
        centre = (min(columns) + max(columns)) / 2
    else:
        top, centre = 0, 0.0
    positions = {node_id: (column * GRID_COLUMN, row * GRID_ROW) for node_id, (row, column) in placed.items()}
    for index, node in enumerate(outside):
        offset = index - (len(outside) - 1) / 2
        positions[node.id] = ((centre + offset) * GRID_COLUMN, (top - 1) * GRID_ROW)
    return _centred(positions)


def build_map(nodes: Sequence[Node], edges: Sequence[Edge], selected: int | None = None, *,
              contract: MethodContract | None = None) -> MapData:
    """vis-network nodes and edges as the run's method declares them: fill, shape and size by node
    kind, border by status (pruned nodes greyed), edges by edge kind, positioned by the view's layout.
    Without a contract (a run of a method this process does not serve) every node is a grey dot."""
    layout = contract.view.layout if contract is not None else Layout.TREE
    node_ids = {n.id for n in nodes}
    overlay = any(not edge_kind(contract, e.kind).structural for e in edges if e.src in node_ids and e.dst in node_ids)
    positions: dict[int, tuple[float, float]] | None = None
    if layout == Layout.GRID and contract is not None and contract.view.position is not None:
        positions, mode = grid_positions(nodes, contract.view.position), FIXED
    elif layout == Layout.NETWORK:
        mode = PHYSICS
    elif overlay:  # a tree with edges drawn over it: vis's hierarchy would count them, so place it here
        positions, mode = tree_positions(nodes), FIXED
    else:
        mode = HIERARCHICAL

    vis_nodes = []
    for node in nodes:
        kind = contract.node_kinds.get(node.kind) if contract is not None else None
        pruned = node.status == NodeStatus.PRUNED
        shape = kind.shape if kind is not None else "dot"
        fill = PRUNED_FILL if pruned else fill_colour(node, kind)
        sized = kind is None or kind.size_by_priority
        size = 14 + 4 * max(0.0, min(node.priority, 3.0)) if sized else 16
        selected_here = node.id == selected
        thin = shape in THIN_SHAPES
        if pruned:
            font_colour = "#888888"
        elif shape in LABEL_INSIDE and _is_dark(fill):
            font_colour = "#FFFFFF"
        else:
            font_colour = "#222222"
        # The component window.open()s a node's title on double click: a title beginning with the
        # label could be a javascript: URL, run with the app's origin. "#..." is only a fragment.
        title = f"#{node.id} · {node.kind} · {node.status}\n{node.label}"
        item = {
            "id": str(node.id),
            "label": _wrap(short_label(node.label)),
            "title": hover_title(title),
            "shape": shape,
            "size": size + 6 if selected_here and thin else size,
            "borderWidth": 5 if selected_here and not thin else 3,
            "color": {
                "background": fill,
                "border": SELECTED_BORDER if selected_here else STATUS_BORDERS.get(node.status, "#BBBBBB"),
            },
            "font": {"size": 13, "color": font_colour, "multi": False},
            "opacity": 0.45 if pruned else 1.0,
        }
        if mode == HIERARCHICAL:
            item["level"] = node.depth
        if positions is not None and node.id in positions:
            item["x"], item["y"] = positions[node.id]
        vis_nodes.append(item)

    vis_edges = []
    for edge in edges:
        kind = edge_kind(contract, edge.kind)
        item = {"source": str(edge.src), "from": str(edge.src), "to": str(edge.dst), "color": kind.colour,
                "dashes": kind.dashes, "title": hover_title(kind.label)}
        if not kind.structural:
            # Drawn over the layout: no pull on the nodes, curved so it does not hide a tree edge or
            # run through the nodes between its ends.
            item["physics"] = False
            item["smooth"] = {"enabled": True, "type": "curvedCW", "roundness": 0.25}
        vis_edges.append(item)
    return MapData(nodes=vis_nodes, edges=vis_edges, mode=mode)


def map_config(height: int = 560, mode: str = HIERARCHICAL) -> dict:
    """vis-network options for a mode.

    HIERARCHICAL: a top-down tree without physics: stable positions, so growth does not shuffle the
    map. `edgeMinimization` stays off: vis re-runs the whole hierarchical layout on every data
    change, and its edge-length minimisation (up to 1000 passes over every level) made that
    superlinear — 220-310 ms of layout per live update at 500 nodes against about 70 ms without it,
    and seconds of blocked page while a large run opens. For trees, block shifting and parent
    centring give nearly the same picture (0-18 % wider in benchmarks/bench_ui.py's trees).

    FIXED: the nodes carry their positions (grid, or a tree with edges drawn over it); no hierarchy,
    no physics. PHYSICS: a force-directed network."""
    hierarchical = mode == HIERARCHICAL
    physics = mode == PHYSICS
    smooth = ({"type": "continuous"} if physics else
              {"type": "cubicBezier", "forceDirection": "vertical", "roundness": 0.4} if mode == FIXED else
              {"type": "cubicBezier"})
    return {
        "height": f"{height}px",
        "width": "100%",
        "directed": True,
        "physics": {"enabled": physics, "stabilization": {"enabled": True, "fit": True}},
        "layout": {"hierarchical": {
            "enabled": hierarchical, "direction": "UD", "sortMethod": "directed",
            "levelSeparation": LEVEL_SEPARATION, "nodeSpacing": 170, "treeSpacing": 200, "blockShifting": True,
            "edgeMinimization": False, "parentCentralization": True, "shakeTowards": "roots",
        }},
        "interaction": {"hover": True, "tooltipDelay": 120, "navigationButtons": True, "keyboard": False},
        "edges": {"arrows": {"to": {"enabled": True, "scaleFactor": 0.5}}, "smooth": smooth},
    }


def mind_map(data: MapData, *, key: str, height: int = 560) -> str | None:
    """Render the map; returns the id (a string) of the node the user last selected, if any."""
    from streamlit_agraph import _agraph  # the declared component; imported late (Streamlit only)

    return _agraph(data=data.as_json(), config=json.dumps(map_config(height, data.mode)), key=key, default=None)


# --------------------------------------------------------------------------- the legend


def _kind_line(kind: NodeKind) -> list[str]:
    glyph = _SHAPE_GLYPHS.get(kind.shape, "●")
    shape = {"triangleDown": "triangle (down)"}.get(kind.shape, kind.shape)
    lines = [f"- {_swatch(kind.colour, glyph)} **{inline_text(kind.label)}** ({colour_name(kind.colour)} {shape}): "
             f"{inline_text(kind.legend)}"]
    for variant in kind.variants:
        lines.append(f"    - {_swatch(variant.colour, glyph)} {colour_name(variant.colour)}: "
                     f"{inline_text(variant.legend)}")
    if kind.depth_palette:
        names: list[str] = []
        for colour in kind.depth_palette:
            if colour_name(colour) not in names:
                names.append(colour_name(colour))
        swatches = "".join(_swatch(c, glyph) for c in kind.depth_palette)
        lines.append(f"    - {swatches} {' → '.join(names)}: by depth, lighter as the tree deepens")
    return lines


def _edge_line(kind: EdgeKind) -> str:
    glyph = "╌╌▸" if kind.dashes else "──▸"
    style = [colour_name(kind.colour), "dashed" if kind.dashes else "solid"]
    if not kind.structural:
        style.append("drawn over the layout")
    meaning = inline_text(kind.legend) if kind.legend else "from a node to the node it grew"
    return f"- {_swatch(kind.colour, glyph)} **{inline_text(kind.label)}** ({', '.join(style)}): {meaning}"


def legend(contract: MethodContract | None) -> list[tuple[str, list[str]]]:
    """The legend's sections (heading, Markdown list lines), from the declared node kinds with their
    variants and depth palettes, the declared edge kinds, and the status borders."""
    kinds: Iterable[NodeKind] = contract.node_kinds.values() if contract is not None else ()
    edges: Iterable[EdgeKind] = contract.edge_kinds.values() if contract is not None else ()
    node_lines = [line for kind in kinds for line in _kind_line(kind)]
    node_lines.append(f"- {_swatch(PRUNED_FILL, '●')} light grey, faded: pruned")
    sections = [("Nodes", node_lines), ("Edges", [_edge_line(kind) for kind in edges]),
                ("Border", [f"- {colour}: {meaning}" for colour, meaning in STATUS_LEGEND])]
    if contract is None or any(kind.size_by_priority for kind in contract.node_kinds.values()):
        sections.append(("Size", ["- larger: higher priority"]))
    return [(heading, lines) for heading, lines in sections if lines]


def legend_markdown(contract: MethodContract | None) -> str:
    return "\n\n".join(f"**{heading}**\n\n" + "\n".join(lines) for heading, lines in legend(contract))
