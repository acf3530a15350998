"""The knowledge graph tab beside the map, for a method whose view declares one
(`ViewSpec.knowledge_tab`: MTQA): the run's knowledge graph drawn (`components/knowledge_graph.py`)
with the selected node's knowledge units highlighted, as the method says which units a node used
(`KnowledgeTab.focus`). A cap keeps it readable, and the tab says what is drawn of how much
(`engine/knowledge/drawing.py`). Built from the declarations alone."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from components.knowledge_browser import EMPTY, GONE
from components.knowledge_graph import HEIGHT, draw_graph, graph_frame
from components.live_run import RunReads
from engine.contract import MethodContract
from engine.reads import Node, Run
from engine.safe_text import inline_text
from engine.services import Services

AROUND, WHOLE = "Around its units", "Whole graph"
NOT_YET = "The knowledge base is not built yet: the graph is drawn here once its documents are read."
NOT_RECORDED = "No knowledge graph is recorded for this run yet: it is drawn once the knowledge base has read one."
HOW_TO_READ = "Fit or Full screen for all of it; hover or click an entity for its description."


def has_knowledge_tab(contract: MethodContract | None) -> bool:
    return contract is not None and contract.view.knowledge_tab is not None


def knowledge_graph_tab(
    services: Services,
    run: Run,
    contract: MethodContract,
    nodes: Sequence[Node],
    selected: Node | None,
    reads: RunReads | None = None,
    *,
    height: int = HEIGHT,
) -> None:
    """What the selected node's units are, a choice of drawing (around them, or the whole graph
    capped), the drawing, and what of the graph it shows."""
    tab = contract.view.knowledge_tab
    assert tab is not None
    focus = tab.focus(nodes, selected)
    if focus is None:
        st.caption(NOT_YET)
        return
    st.caption(inline_text(focus.says))  # one line of ours around counts: still shown as text
    if not focus.key:
        st.caption(NOT_RECORDED)
        return

    def memo(key, compute):
        return reads.memo(("knowledge-graph-tab", focus.key, key), compute) if reads is not None else compute()

    browser = memo("graph", lambda: services.knowledge.browse(focus.key))
    if browser is None:
        st.caption(GONE)
        return
    names = tuple(dict.fromkeys(end for unit in focus.units for (s, _, o) in unit.triples for end in (s, o)))
    # The units' own triples go first (the cited units' before the others'): the cap never cuts them.
    ordered = sorted(focus.units, key=lambda unit: not unit.cited)
    first = tuple(dict.fromkeys((s, o) for unit in ordered for (s, _, o) in unit.triples))
    mode = st.segmented_control(
        "Draw",
        [AROUND, WHOLE],
        default=AROUND,
        key=f"kg-draw-{run.id}",
        label_visibility="collapsed",
        help="Around its units: the relations of the highlighted entities, then their "
        "neighbours'. Whole graph: all of it, or its most connected part when large.",
    )
    around = mode != WHOLE and bool(names)
    drawing = memo(("drawing", names, first, around), lambda: browser.drawing(names, around=around, first=first))
    if not drawing.entities:
        st.caption(EMPTY)
        return
    draw_graph(graph_frame(drawing, focus), key=f"kg-frame-{run.id}", height=height)
    st.caption(inline_text(f"Drawn: {drawing.says()}. {HOW_TO_READ}"))
