"""The live mind map: a keyed wrapper around streamlit-agraph's component.

The public `agraph()` takes no `key`, so every data change remounts its iframe (flicker, lost zoom
and selection). Calling the declared component with a stable key keeps the iframe and only sends
the new data. Hover titles never contain `<` or `>`: see `hover_title`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from storage.models import Edge, Node, NodeStatus

KIND_COLOURS = {
    "topic": "#2F4B7C",
    "subtopic": "#4C78A8",
    "question": "#4C78A8",
    "search": "#72B7B2",
    "answer": "#54A24B",
    "concept": "#B279A2",
    "section": "#F58518",
}
ENGINE_COLOURS = {"root": "#2F4B7C", "breadth": "#4C78A8", "depth": "#E45756", "user": "#F2B701"}
STATUS_BORDERS = {
    NodeStatus.PENDING: "#BBBBBB",
    NodeStatus.RUNNING: "#F2B701",
    NodeStatus.DONE: "#2CA02C",
    NodeStatus.FAILED: "#D62728",
    NodeStatus.PRUNED: "#7F7F7F",
}
LEGEND = (
    ("Fill", [("dark blue", "the question or topic you asked"), ("blue", "breadth engine: a new aspect"),
              ("red", "depth engine: a deeper follow-up (dashed edge)"), ("yellow", "your own follow-up or subtopic"),
              ("blue to pale blue", "information-tree subtopics, lighter with depth"),
              ("teal", "retrieval step"), ("green", "answer"), ("light grey", "pruned")]),
    ("Border", [("grey", "pending"), ("yellow", "running"), ("green", "done"), ("red", "failed"),
                ("dark grey", "pruned"), ("black, thick", "selected")]),
    ("Size", [("larger", "higher priority")]),
)


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


# Information-tree methods (OmniThink) colour sub-nodes by depth: lighter as the tree deepens.
DEPTH_PALETTE = ("#2F4B7C", "#4C78A8", "#72B7B2", "#9ECAE9", "#C6DBEF")


def hover_title(text: str) -> str:
    """A node's hover title. vis-network shows it as text (`innerText`), so HTML escapes would show up
    literally ("What&#x27;s"); but the component also parses it with `innerHTML` into a detached
    element, where `<img src=x onerror=...>` would still run. Without `<` and `>` nothing in it can
    become an element: they become look-alike angle quotes."""
    return text.replace("<", "\u2039").replace(">", "\u203a")


def fill_colour(node: Node) -> str:
    data = node.data or {}
    engine = data.get("engine")
    if engine in ENGINE_COLOURS:
        return ENGINE_COLOURS[engine]
    if data.get("user"):
        return ENGINE_COLOURS["user"]
    if node.kind in ("topic", "subtopic"):
        return DEPTH_PALETTE[min(node.depth, len(DEPTH_PALETTE) - 1)]
    return KIND_COLOURS.get(node.kind, "#9D9D9D")


@dataclass(frozen=True)
class MapData:
    nodes: list[dict]
    edges: list[dict]

    def as_json(self) -> str:
        return json.dumps({"nodes": self.nodes, "edges": self.edges}, separators=(",", ":"))


def build_map(nodes: Sequence[Node], edges: Sequence[Edge], selected: int | None = None) -> MapData:
    """vis-network nodes/edges: colour by kind/engine, border by status, size by priority."""
    vis_nodes = []
    for node in nodes:
        pruned = node.status == NodeStatus.PRUNED
        size = 14 + 4 * max(0.0, min(node.priority, 3.0))
        # The component window.open()s a node's title on double click: a title beginning with the
        # label could be a javascript: URL, run with the app's origin. "#..." is only a fragment.
        title = f"#{node.id} · {node.kind} · {node.status}\n{node.label}"
        vis_nodes.append({
            "id": str(node.id),
            "label": _wrap(short_label(node.label)),
            "title": hover_title(title),
            "shape": "dot",
            "size": size,
            "level": node.depth,
            "borderWidth": 5 if node.id == selected else 3,
            "color": {
                "background": "#DDDDDD" if pruned else fill_colour(node),
                "border": "#111111" if node.id == selected else STATUS_BORDERS.get(node.status, "#BBBBBB"),
            },
            "font": {"size": 13, "color": "#888888" if pruned else "#222222", "multi": False},
            "opacity": 0.45 if pruned else 1.0,
        })
    vis_edges = [
        {"source": str(e.src), "from": str(e.src), "to": str(e.dst), "color": "#B0B0B0",
         "dashes": e.kind == "depth", "title": hover_title(e.kind)}
        for e in edges
    ]
    return MapData(nodes=vis_nodes, edges=vis_edges)


def map_config(height: int = 560, tree: bool = True) -> dict:
    """A top-down tree without physics: stable positions, so growth does not shuffle the map.

    `edgeMinimization` stays off: vis re-runs the whole hierarchical layout on every data change,
    and its edge-length minimisation (up to 1000 passes over every level) made that superlinear —
    220-310 ms of layout per live update at 500 nodes against about 70 ms without it, and seconds of
    blocked page while a large run opens. For trees, block shifting and parent centring give
    nearly the same picture (0-18 % wider in benchmarks/bench_ui.py's trees)."""
    return {
        "height": f"{height}px",
        "width": "100%",
        "directed": True,
        "physics": {"enabled": not tree, "stabilization": {"enabled": True, "fit": True}},
        "layout": {"hierarchical": {
            "enabled": tree, "direction": "UD", "sortMethod": "directed", "levelSeparation": 110,
            "nodeSpacing": 170, "treeSpacing": 200, "blockShifting": True, "edgeMinimization": False,
            "parentCentralization": True, "shakeTowards": "roots",
        }},
        "interaction": {"hover": True, "tooltipDelay": 120, "navigationButtons": True, "keyboard": False},
        "edges": {"arrows": {"to": {"enabled": True, "scaleFactor": 0.5}}, "smooth": {"type": "cubicBezier"}},
    }


def mind_map(data: MapData, *, key: str, height: int = 560, tree: bool = True) -> str | None:
    """Render the map; returns the id (a string) of the node the user last selected, if any."""
    from streamlit_agraph import _agraph  # the declared component; imported late (Streamlit only)

    return _agraph(data=data.as_json(), config=json.dumps(map_config(height, tree)), key=key, default=None)
