"""The map's legend as data, drawn in the map's frame with the map's own shapes, colours and line
styles (`components/mindmap_frontend/map.js`): one section per meaning, as `map_style` assigns them
(fill = node kind, border = status, line = edge kind, size = priority). Built from the contract's
declarations only: nothing here knows a method."""

from __future__ import annotations

from collections.abc import Iterable

from components.map_style import PRUNED_FILL, STATUS_STYLES, colour_name
from engine.contract import EdgeKind, MethodContract, NodeKind

WHITE = "#FFFFFF"
PLAIN_BORDER = "#6B6B6B"  # kinds are shown with a neutral border: the border means status


def _kind_items(kind: NodeKind) -> list[dict]:
    items = [
        {
            "type": "node",
            "shape": kind.shape,
            "fill": kind.colour,
            "border": PLAIN_BORDER,
            "text": f"{kind.label}: {kind.legend} ({colour_name(kind.colour)})",
        }
    ]
    for variant in kind.variants:
        items.append(
            {
                "type": "node",
                "shape": kind.shape,
                "fill": variant.colour,
                "border": PLAIN_BORDER,
                "text": f"{kind.label}, {variant.legend} ({colour_name(variant.colour)})",
            }
        )
    if kind.depth_palette:
        items.append(
            {
                "type": "palette",
                "shape": kind.shape,
                "fills": list(kind.depth_palette),
                "border": PLAIN_BORDER,
                "text": f"{kind.label} by depth: lighter as the tree deepens",
            }
        )
    return items


def _edge_item(kind: EdgeKind) -> dict:
    meaning = kind.legend or "from a node to the node it grew"
    over = "" if kind.structural else ", drawn over the layout"
    return {
        "type": "edge",
        "colour": kind.colour,
        "dashes": kind.dashes,
        "text": f"{kind.label}: {meaning} ({'dashed' if kind.dashes else 'solid'}{over})",
    }


def legend(contract: MethodContract | None) -> list[dict]:
    """The legend's sections: `{"title": ..., "items": [...]}`, each item a `type` (node, palette,
    status, edge, size) with what to draw and the words beside it."""
    kinds: Iterable[NodeKind] = contract.node_kinds.values() if contract is not None else ()
    edges: Iterable[EdgeKind] = contract.edge_kinds.values() if contract is not None else ()
    fills = [item for kind in kinds for item in _kind_items(kind)]
    fills.append(
        {"type": "node", "shape": "dot", "fill": PRUNED_FILL, "border": PLAIN_BORDER, "text": "pruned: greyed, faded"}
    )
    statuses = [
        {
            "type": "status",
            "shape": "dot",
            "fill": WHITE,
            "border": style.border,
            "dashes": style.dashes,
            "glyph": style.glyph,
            "text": f"{style.glyph} {style.words}",
        }
        for style in STATUS_STYLES.values()
    ]
    statuses.append(
        {
            "type": "status",
            "shape": "dot",
            "fill": WHITE,
            "border": PLAIN_BORDER,
            "dashes": False,
            "halo": True,
            "glyph": "",
            "text": "selected: a blue glow (the border still tells the status)",
        }
    )
    sections = [
        {"title": "Fill: what the node is", "items": fills},
        {"title": "Border: status", "items": statuses},
        {"title": "Line: edge kind", "items": [_edge_item(kind) for kind in edges]},
    ]
    if contract is None or any(kind.size_by_priority for kind in contract.node_kinds.values()):
        sections.append({"title": "Size", "items": [{"type": "size", "text": "larger: higher priority"}]})
    return [section for section in sections if section["items"]]


def legend_text(sections: list[dict]) -> str:
    """The legend in words (for tests and plain-text views)."""
    return "\n".join(f"{s['title']}\n" + "\n".join(f"- {i['text']}" for i in s["items"]) for s in sections)
