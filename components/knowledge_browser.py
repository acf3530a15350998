"""The knowledge graph browser in the node panel, for the node kinds that declare it
(`NodeKind.browses_knowledge`; the node's data says which stored graph and which entities it names,
`NodeData.knowledge_graph`): the graph around one entity at a time (its type and description, its
relations as triples, the chunks it came from), never the whole graph. A button per neighbour moves
there; a box looks up any entity by name. Read only, no LLM (`engine/knowledge/browse.py`). Entity
names, descriptions and chunks are model and document text: shown as plain text, never as HTML."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import streamlit as st

from components.live_run import RunReads
from engine.contract import MethodContract, NodeData
from engine.knowledge.browse import GraphBrowser
from engine.knowledge.units import Neighbourhood, Triple
from engine.reads import Node, Run
from engine.safe_text import inline_text, one_line, url_text
from engine.search.protocol import Hit
from engine.services import Services

TITLE = "Knowledge graph around an entity"
RELATIONS_SHOWN = 12
SOURCES_SHOWN = 5
SUGGESTIONS = 8
CHOICES_SHOWN = 40
EXCERPT_CHARS = 300
TRAIL_KEPT = 20

NOT_RECORDED = "No knowledge graph is recorded for this node yet: it is named once the node has read one."
GONE = (
    "The knowledge graph this node read is no longer stored (deleted, or never built), so there is nothing to browse."
)
EMPTY = "The knowledge graph holds no entities yet: nothing has been extracted from its documents."

T = TypeVar("T")


def offers_browser(contract: MethodContract | None, node: Node) -> bool:
    kind = contract.node_kinds.get(node.kind) if contract is not None else None
    return bool(kind and kind.browses_knowledge)


def knowledge_browser(
    services: Services,
    run: Run,
    node: Node,
    contract: MethodContract | None,
    data: NodeData | None,
    reads: RunReads | None = None,
) -> None:
    """The browser's expander, on the nodes whose kind offers it (nothing otherwise)."""
    if not offers_browser(contract, node):
        return
    with st.expander(TITLE):
        ref = data.knowledge_graph() if data is not None else None
        if ref is None or not ref.key:
            st.caption(NOT_RECORDED)
            return

        def memo(key: Any, compute: Callable[[], T]) -> T:
            # Read once per version of the run (a run's graph grows with its calls, which bump it).
            return reads.memo(("knowledge-browser", ref.key, key), compute) if reads is not None else compute()

        browser = memo("graph", lambda: services.knowledge.browse(ref.key))
        if browser is None:
            st.caption(GONE)
            return
        counts = memo("counts", browser.counts)
        if not counts.entities:
            st.caption(EMPTY)
            return
        st.caption(
            f"{counts.entities:,} entities · {counts.relations:,} relations · {counts.chunks_done:,} chunks extracted"
        )
        _Browse(browser, f"kg-{run.id}-{node.id}", memo).show(ref.entities)


class _Browse:
    """One node's browser: which entity is shown (kept in the session, with the way back)."""

    def __init__(self, browser: GraphBrowser, prefix: str, memo) -> None:
        self.browser, self.prefix, self.memo = browser, prefix, memo
        self.current_key, self.trail_key = f"{prefix}-entity", f"{prefix}-trail"
        self.pick_key, self.find_key = f"{prefix}-pick", f"{prefix}-find"

    # -------------------------------------------------------------- moving

    def go(self, name: str) -> None:
        state = st.session_state
        current = state.get(self.current_key)
        if current and current != name:
            state[self.trail_key] = [*state.get(self.trail_key, []), current][-TRAIL_KEPT:]
        state[self.current_key] = name

    def back(self) -> None:
        trail = list(st.session_state.get(self.trail_key, []))
        if trail:
            st.session_state[self.current_key] = trail.pop()
            st.session_state[self.trail_key] = trail

    def picked(self) -> None:
        name = st.session_state.get(self.pick_key)
        if name:
            self.go(name)
        st.session_state[self.pick_key] = None  # choosing the same one again later is a change again

    def found(self, name: str) -> None:
        self.go(name)
        st.session_state[self.find_key] = ""

    # -------------------------------------------------------------- drawing

    def show(self, offered: tuple[str, ...]) -> None:
        choices = self.memo(("known", offered), lambda: self.browser.known(offered))[:CHOICES_SHOWN]
        state = st.session_state
        if not state.get(self.current_key) and choices:
            state[self.current_key] = choices[0]
        if choices:
            st.selectbox(
                "Entities this node names",
                choices,
                index=None,
                key=self.pick_key,
                on_change=self.picked,
                format_func=one_line,
                placeholder=f"Choose one of {len(choices)}",
            )
        self.lookup()
        current = state.get(self.current_key)
        if not current:
            st.caption("Look an entity up by name to see its relations and sources.")
            return
        trail = state.get(self.trail_key, [])
        if trail:
            st.button(
                f"Back to {inline_text(trail[-1])}",
                key=f"{self.prefix}-back",
                on_click=self.back,
                type="tertiary",
                icon=":material/arrow_back:",
            )
        hood = self.memo(("around", current), lambda: self.browser.around(current, limit=RELATIONS_SHOWN))
        if hood is None:
            st.caption(f"The graph has no entity named “{inline_text(current)}”.")
            return
        self.entity(hood)

    def lookup(self) -> None:
        typed = st.text_input(
            "Look up an entity",
            key=self.find_key,
            placeholder="Type part of a name",
            help="Entity names starting with what you type come first, then those containing it.",
        )
        if not typed.strip():
            return
        names = self.memo(("names", typed), lambda: self.browser.names(typed, limit=SUGGESTIONS))
        if not names:
            st.caption(f"No entity's name contains “{inline_text(typed)}”.")
            return
        with st.container(horizontal=True, wrap=True, gap="small"):
            for number, name in enumerate(names):
                st.button(
                    inline_text(name),
                    key=f"{self.prefix}-found-{number}",
                    on_click=self.found,
                    args=(name,),
                    type="tertiary",
                    icon=":material/search:",
                )

    def entity(self, hood: Neighbourhood) -> None:
        entity = hood.entity
        kind = f" · {inline_text(entity.type)}" if entity.type else ""
        st.markdown(f"**{inline_text(entity.name)}**{kind}")
        if entity.description:
            # Plain text, like the names and triples: a model's description, which must not make a
            # link (https ones included) that lies about where it goes.
            st.markdown(inline_text(entity.description))
        st.markdown(f"**Relations** ({_shown(len(hood.triples), hood.relations_total)})")
        if not hood.triples:
            st.caption("No relation of this entity was extracted.")
        else:
            st.markdown("\n".join(_triple_item(t) for t in hood.triples))
        _more(hood.relations_total - len(hood.triples), "relation")
        neighbours = list(dict.fromkeys(t.object if t.subject == entity.name else t.subject for t in hood.triples))
        neighbours = [name for name in neighbours if name != entity.name]
        if neighbours:
            st.caption("Go to a related entity:")
            with st.container(horizontal=True, wrap=True, gap="small"):
                for number, name in enumerate(neighbours):
                    st.button(
                        inline_text(name),
                        key=f"{self.prefix}-to-{number}",
                        on_click=self.go,
                        args=(name,),
                        type="tertiary",
                        icon=":material/arrow_forward:",
                    )
        sources = hood.sources[:SOURCES_SHOWN]
        st.markdown(f"**Source chunks** ({_shown(len(sources), hood.sources_total)})")
        if sources:
            st.markdown("\n".join(_source_item(hit) for hit in sources))
        _more(hood.sources_total - len(sources), "source chunk")


def _triple_item(triple: Triple) -> str:
    """A relation as a list item: subject — relation → object, its description on the next line."""
    line = f"- {inline_text(triple.subject)} — *{inline_text(triple.relation)}* → {inline_text(triple.object)}"
    return line + (f"  \n  {inline_text(triple.description)}" if triple.description else "")


def _source_item(hit: Hit) -> str:
    """A source chunk as a list item: its document's title, URL (or corpus ref), then an excerpt."""
    where = url_text(hit.url) if hit.url else inline_text(hit.ref)
    excerpt = inline_text(hit.snippet[:EXCERPT_CHARS]) + ("…" if len(hit.text) > EXCERPT_CHARS else "")
    return f"- **{inline_text(hit.title) or 'Untitled'}** — {where}  \n  {excerpt}"


def _shown(shown: int, total: int) -> str:
    return f"{total}" if shown >= total else f"{shown} of {total}"


def _more(count: int, what: str) -> None:
    if count > 0:
        st.caption(f"… and {count:,} more {what}{'s' if count != 1 else ''}, not shown here.")
