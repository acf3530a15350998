"""The agent's tools (ReAct-style, as FGDIP uses them): search an entity or phrase through the
run's searcher (local corpus, the web when enabled) with the relevance floor, look a keyword up in
the last page the branch retrieved, finish with an answer. Each returns the node's observation and
the data to store with it; nothing here calls the model."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.citations import without_page_markers
from engine.methods.base import RunContext
from engine.methods.fgdip.kinds import step_of
from engine.methods.fgdip.params import FgdipParams
from engine.search.protocol import SearchError, titled_page
from engine.search.relevance import relevant_hits
from storage.models import Node, Source, stored_id

_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@dataclass
class Observation:
    text: str
    data: dict[str, Any] = field(default_factory=dict)
    sources: list[int] = field(default_factory=list)  # stored sources to link to the node


def run_action(ctx: RunContext[FgdipParams], node: Node, path: Sequence[Node]) -> Observation:
    """Carry out `node`'s action; `path` is its branch's trajectory before it."""
    step = step_of(node)
    action, argument = step.action, step.argument.strip()
    if action == "finish":
        return Observation(f"Answer proposed: {argument}")
    if action == "lookup":
        return lookup(ctx, argument, path)
    return search(ctx, node, argument)


PAGE_CHARS = 20_000  # a long Wikipedia article's text; the web searcher's own page limit


def search(ctx: RunContext[FgdipParams], node: Node, query: str) -> Observation:
    params = ctx.params
    # The page titled exactly so first, as a Wikipedia search opens it: ranking alone put "Dua Lipa
    # (album)" and a tour before the singer's article, and the floor dropped "Serializer"'s neighbours.
    titled = titled_page(ctx.searcher, query)
    try:
        hits = ctx.search(query, k=params.search_results, node=node)
    except SearchError as exc:
        if titled is None:
            return Observation(f"The search for {query} failed.", {"search_error": exc.user_message})
        hits = []
    if titled is not None:
        # Only the titled document's own chunks go: another collection's page of the same title stays.
        document = titled.ref.rsplit("#", 1)[0]
        hits = [h for h in hits if h.ref.rsplit("#", 1)[0] != document]
    relevant = relevant_hits(query, hits, floor=params.relevance_floor, embedder=ctx.embedder)
    ctx.note_unrelated(query, relevant, node)
    dropped = {"dropped_as_unrelated": relevant.dropped_summary()}
    found = ([titled] if titled is not None else []) + relevant.kept
    if not found:
        similar = ", ".join(h.title for h in hits[:5])
        return Observation(
            f"Could not find a page about {query}." + (f" Similar: {similar}." if similar else ""), dropped
        )
    found = found[: params.search_results]
    # Web results: the page itself (the search shows its start, Lookup reads all of it), not its snippet.
    kept = ctx.read_pages(query, found, limit=params.read_pages, max_chars=PAGE_CHARS, node=node).hits
    sources = ctx.graph.add_sources(kept, node=node)
    page = sources[0]
    text = without_page_markers(page.text or page.snippet or "").strip()
    if len(text) > params.observation_chars:
        text = text[: params.observation_chars].rsplit(" ", 1)[0] + " ..."
    others = [s.title for s in sources[1:]]
    more = f" Other results: {'; '.join(others)}." if others else ""
    return Observation(
        f"{page.title}: {text}{more}", {**dropped, "page_source": page.id}, [stored_id(s) for s in sources]
    )


LOOKUP_RESULTS = 2  # sentences one Lookup shows; the same Lookup again shows the next ones


def lookup(ctx: RunContext[FgdipParams], keyword: str, path: Sequence[Node]) -> Observation:
    """Sentences of the branch's last retrieved page that contain `keyword`: the first ones, or,
    when the branch already looked the same keyword up in that page, the next ones (as ReAct's
    Lookup steps through its results)."""
    page = last_page(ctx, path)
    if page is None:
        return Observation("No page has been retrieved on this branch yet: search first.")
    sentences = [s.strip() for s in _SENTENCE.split(without_page_markers(page.text or page.snippet or "")) if s.strip()]
    wanted = keyword.strip().casefold()
    found = [s for s in sentences if wanted and wanted in s.casefold()]
    shown_before = sum(LOOKUP_RESULTS for n in path if _looked_up(n, wanted, stored_id(page)))
    if not found[shown_before:]:
        # No page_source: this node read nothing to cite, and the next Lookup reads the same page.
        return Observation(f"No more results for {keyword} in {page.title}.")
    shown = " ".join(
        f"(Result {i} / {len(found)}) {s}"
        for i, s in enumerate(found[shown_before : shown_before + LOOKUP_RESULTS], start=shown_before + 1)
    )
    return Observation(shown, {"page_source": page.id}, [stored_id(page)])


def _looked_up(node: Node, keyword: str, page_id: int) -> bool:
    step = step_of(node)
    return step.action == "lookup" and step.page_source == page_id and step.argument.strip().casefold() == keyword


def last_page(ctx: RunContext[FgdipParams], path: Sequence[Node]) -> Source | None:
    """The page the branch retrieved last: the nearest node on the path that read one."""
    for node in reversed(path):
        source_id = step_of(node).page_source
        if source_id is None:
            continue
        page = next((s for s in ctx.graph.sources(node) if s.id == source_id), None)
        if page is not None:
            return page
    return None
