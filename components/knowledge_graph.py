"""A stored knowledge graph drawn (issue 43): entities as dots, relations as labelled edges, in our
own Streamlit component over vis-network (`components/knowledge_graph_frontend/`, read only: it
sends nothing back). The entities and relations a node's knowledge units name are highlighted: those
of the units its text cites in one colour, those of the other units it read in another, the units'
own triples as thicker edges; the view opens on them (on the cited ones when there are any), at a
scale where their names are legible.

`graph_frame` is pure Python (tested without a browser); the frame shows every text with
textContent or vis's canvas labels. Labels follow vis's `drawThreshold`: an entity's or relation's
label is drawn only where it is at least about 8 px on screen, so a drawing zoomed out to fit reads
as its shape and its highlight, and zooming in (or Full screen) brings the words."""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from engine.contract import KnowledgeFocus
from engine.knowledge.drawing import GraphDrawing
from engine.knowledge.merge import entity_key
from engine.safe_text import cut_at_word

CITED, USED, OTHER = "cited", "used", "other"
FILLS = {CITED: "#E8A33D", USED: "#8FD3CF", OTHER: "#DDE1E7"}
BORDERS = {CITED: "#9C5F0A", USED: "#2E8C86", OTHER: "#A9B0BA"}
UNIT_EDGE, OTHER_EDGE = "#2E8C86", "#B8BEC8"
ENTITY_FONT, RELATION_FONT = 13, 11  # px at scale 1; a highlighted entity's name is larger
HIGHLIGHTED_FONT = 16
LEGIBLE_PX = 9  # vis draws a label from drawThreshold − 1 = 8 px on screen
# The view opens on the highlighted entities, never zoomed out below this: 13 px × 0.75 ≈ 10 px on
# screen, every label in view drawn. Fit (the frame's button) shows the whole drawing, labels or not.
MIN_SCALE = 0.75
OPENING_HUBS = 1  # without a cited unit, the view opens on the most connected entity the node read
LABEL_CHARS = 28
HEIGHT = 470

_FRONTEND = Path(__file__).with_name("knowledge_graph_frontend")


@dataclass(frozen=True)
class GraphFrame:
    """What the frame draws: vis items, the ids to open the view on, the legend, vis's options."""

    nodes: list[dict]
    edges: list[dict]
    focus: list[str] = field(default_factory=list)
    legend: list[dict] = field(default_factory=list)
    options: dict = field(default_factory=dict)


def short(text: str, limit: int = LABEL_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else cut_at_word(text, limit) + "…"


def unit_keys(focus: KnowledgeFocus) -> tuple[set[str], set[str], set[frozenset[str]]]:
    """(the entities of the units the node cites, of all its units, the units' triples as key pairs)."""
    cited, used, pairs = set(), set(), set()
    for unit in focus.units:
        for subject, _, obj in unit.triples:
            ends = {entity_key(subject), entity_key(obj)} - {""}
            used |= ends
            if unit.cited:
                cited |= ends
            if len(ends) == 2:
                pairs.add(frozenset(ends))
    return cited, used, pairs


def graph_frame(drawing: GraphDrawing, focus: KnowledgeFocus) -> GraphFrame:
    """vis items for `drawing`, the entities and triples of `focus`'s units highlighted."""
    cited, used, pairs = unit_keys(focus)
    degree = Counter(end for r in drawing.relations for end in (r.source, r.target))
    names = {e.key: e.name for e in drawing.entities}
    nodes = []
    for entity in drawing.entities:
        role = CITED if entity.key in cited else USED if entity.key in used else OTHER
        kind = f" · {entity.type}" if entity.type else ""
        where = {CITED: "in a unit this node cites", USED: "in a unit this node read", OTHER: ""}[role]
        nodes.append(
            {
                "id": entity.key,
                "name": entity.name,
                "label": short(entity.name),
                "role": role,
                "tip": f"{entity.name}{kind}"
                + (f" · {where}" if where else "")
                + (f"\n{entity.description}" if entity.description else ""),
                "details": "\n".join(
                    p for p in (entity.type, where, entity.description, f"{degree[entity.key]} relation(s) drawn") if p
                ),
                "shape": "dot",
                "size": 8 + 2 * min(degree[entity.key], 8) + (4 if role != OTHER else 0),
                "color": {
                    "background": FILLS[role],
                    "border": BORDERS[role],
                    "highlight": {"background": FILLS[role], "border": "#1E6EFF"},
                    "hover": {"background": FILLS[role], "border": BORDERS[role]},
                },
                "borderWidth": 2 if role == OTHER else 3,
                "font": {"size": ENTITY_FONT if role == OTHER else HIGHLIGHTED_FONT, "color": "#1F1F1F"},
            }
        )
    edges = []
    for relation in drawing.relations:
        in_unit = frozenset((relation.source, relation.target)) in pairs
        colour = UNIT_EDGE if in_unit else OTHER_EDGE
        edges.append(
            {
                "id": f"{relation.source}\x1f{relation.target}",
                "from": relation.source,
                "to": relation.target,
                "label": short(relation.label, 32),
                "focus": in_unit,
                "tip": f"{names.get(relation.source, relation.source)} — {relation.label} → "
                f"{names.get(relation.target, relation.target)}"
                + (" · a triple of this node's units" if in_unit else "")
                + (f"\n{relation.description}" if relation.description else ""),
                "color": {"color": colour, "highlight": "#1E6EFF", "hover": colour},
                "width": 3 if in_unit else 1,
                "font": {"size": RELATION_FONT + (1 if in_unit else 0), "color": "#333" if in_unit else "#666"},
            }
        )
    # The view opens on what the node cites (the few entities that matter most), else on the most
    # connected of those it read (a view centred on all of them lands between them, on nothing).
    hubs = sorted((k for k in names if k in used), key=lambda k: -degree[k])[:OPENING_HUBS]
    focus_ids = [k for k in names if k in cited] or hubs
    roles = {node["role"] for node in nodes}
    return GraphFrame(nodes, edges, focus_ids, legend(CITED in roles, USED in roles), graph_options())


def legend(cited: bool, used: bool) -> list[dict]:
    """The legend's entries: only the highlights this drawing has, and the plain ones."""
    entries = []
    if cited:
        entries.append({"colour": FILLS[CITED], "border": BORDERS[CITED], "text": "in a unit the node cites"})
    if used:
        entries.append({"colour": FILLS[USED], "border": BORDERS[USED], "text": "in a unit the node read"})
    entries.append({"colour": FILLS[OTHER], "border": BORDERS[OTHER], "text": "other entity"})
    if cited or used:
        entries.append({"kind": "edge", "colour": UNIT_EDGE, "text": "a triple of the node's units"})
    return entries


def graph_options() -> dict:
    """vis-network options: a force-directed layout that stops once placed (the frame turns physics
    off), labels only where legible, no vis tooltips (the frame's are text)."""
    return {
        "autoResize": True,
        "physics": {
            "enabled": True,
            "solver": "forceAtlas2Based",
            "forceAtlas2Based": {"gravitationalConstant": -70, "springLength": 120, "avoidOverlap": 0.5},
            "stabilization": {"enabled": True, "iterations": 250, "fit": False},
        },
        "interaction": {
            "hover": True,
            "navigationButtons": False,
            "keyboard": False,
            "multiselect": False,
            "zoomSpeed": 0.7,
        },
        "nodes": {
            "shape": "dot",
            "font": {"face": "sans-serif", "background": "rgba(255, 255, 255, 0.8)"},
            "scaling": {"label": {"drawThreshold": LEGIBLE_PX}},
        },
        "edges": {
            "arrows": {"to": {"enabled": True, "scaleFactor": 0.4}},
            "smooth": {"type": "continuous"},
            "font": {"face": "sans-serif", "align": "horizontal", "strokeWidth": 3, "strokeColor": "#ffffff"},
            "scaling": {"label": {"drawThreshold": LEGIBLE_PX}},
        },
    }


@functools.cache  # declared once per process: the same name and path on every rerun
def _component():
    import streamlit.components.v1 as components  # Streamlit only when drawn

    return components.declare_component("thoughtmap_knowledge_graph", path=str(_FRONTEND))


def draw_graph(frame: GraphFrame, *, key: str, height: int = HEIGHT) -> None:
    """Draw the frame (the reader's zoom and the entities' places survive the reruns)."""
    _component()(
        nodes=frame.nodes,
        edges=frame.edges,
        focus=frame.focus,
        legend=frame.legend,
        options=frame.options,
        height=height,
        minScale=MIN_SCALE,
        key=key,
        default=None,
    )
