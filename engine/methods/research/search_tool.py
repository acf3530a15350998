"""The search tool of the paper (section 2.1): query → the searcher's top K (local corpus and/or the
web, the run's search setting) → the reranker → the top N of those above the relevance floor, stored as the
run's sources → the summarizer, which keeps a citation marker per document (`markers.py`).

A search node is worked in two stored stages, so a resumed run redoes neither: the reranked
documents (with their scores), then the summary."""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from engine.citations import source_blocks
from engine.methods.base import RunContext
from engine.methods.research import prompts
from engine.methods.research.kinds import search_of
from engine.methods.research.markers import numbered, write_cited
from engine.methods.research.params import ResearchParams
from engine.methods.research.steps import RERANK, ranking, step_node
from engine.prompting import inert
from engine.search.protocol import SearchError
from engine.search.relevance import RelevanceResult, nothing_found, relevant_hits
from engine.search.rerank import BM25Reranker, RerankEndpoint, Reranker
from engine.search.rerankers import LLMReranker
from engine.search.retrieval import KeepOrder, builtin_reranker
from storage.models import Node, Source, stored_id

# A document number [n] (or [n, m]) in the agent's reasoning, left out of later prompts (`Chain.reasoning`).
RUN_WIDE_NUMBER = re.compile(r"\s*\[\d+(?:\s*[,;]\s*\d+)*\]")


# What a node says when the chosen reranker could not rank and the built-in one did.
FALLBACK_SAYS = "the built-in reranker ranked the documents instead"


class RerankerUnavailable(ValueError):
    """The `endpoint` reranker was chosen but THOUGHTMAP_RERANK_URL is not set."""


def choose_reranker(ctx: RunContext[ResearchParams], node: Node) -> Reranker:
    """The reranker the parameters ask for (`auto`: THOUGHTMAP_RERANKER's); the LLM one runs on this
    run's accounted LLM."""
    choice: str = ctx.params.reranker
    if choice == "auto":
        choice = ctx.default_reranker
    if choice == "llm":
        # Each judgment is stored as it arrives: a search stopped half-way (budget, kill) asks only
        # the rest on resume, not all K again.
        judged = dict(search_of(node).rerank_scores)
        lock = threading.Lock()

        def keep(ref: str, score: float) -> None:
            with lock:
                judged[ref] = score
                ctx.graph.update(node, merge_data={"rerank_scores": dict(judged)})

        return LLMReranker(ctx.llm.bound(node.id), parallel=ctx.parallel, known=judged, on_score=keep)
    if choice == "endpoint":
        endpoint = ctx.service(RerankEndpoint)
        if endpoint is None:
            raise RerankerUnavailable(
                "the endpoint reranker needs THOUGHTMAP_RERANK_URL (a /rerank server); "
                "set it or choose the builtin or llm reranker"
            )
        return endpoint
    if choice == "bm25":
        return BM25Reranker()
    if choice == "none":
        return KeepOrder()
    return builtin_reranker(ctx.embedder)


def retrieve(ctx: RunContext[ResearchParams], node: Node) -> Node:
    """Stage 1: search, rerank, keep the top N above the floor; stored with their scores."""
    params = ctx.params
    query = search_of(node).query
    try:
        # K found, N kept: the snippets to come (the local corpus's) are made for the N (`finish` below).
        found = ctx.candidates(query, k=params.search_top_k, node=node)
    except SearchError as exc:
        return ctx.graph.update(
            node,
            merge_data={
                "found": 0,
                "ranked": [],
                "searcher": ctx.searcher.description,
                "search_error": exc.user_message,
            },
        )
    # The rerank is a step of its own on the map, under the search: its LLM calls (the llm reranker)
    # are accounted to it, and it lists every hit with its score once it is done.
    step = ctx.graph.start(step_node(ctx.graph, node, RERANK, "rerank"))
    rerank_error = ""
    try:
        reranker = choose_reranker(ctx, step)
    except RerankerUnavailable as exc:  # a setting, not an outage: said on the node, BM25 goes on
        reranker, rerank_error = builtin_reranker(ctx.embedder), f"{exc}; {FALLBACK_SAYS}"
    hits = found.hits
    ctx.graph.narrate(f"reranking {len(hits)} documents: {reranker.description}", node_id=step.id)
    # All K ranked, the floor applied, then the top N kept: the summarizer gets the paper's N
    # documents whenever N pass the floor (cut first, 7 or 8 of 10 reached it).
    try:
        ranked = reranker.rerank(query, hits, len(hits))
    except SearchError as exc:  # the /rerank endpoint failed: the built-in one keeps the run going, said on the node
        rerank_error = f"{exc.user_message}; {FALLBACK_SAYS}"
        reranker = builtin_reranker(ctx.embedder)
        ranked = reranker.rerank(query, hits, len(hits))
    floored = relevant_hits(query, ranked, floor=params.relevance_floor, embedder=ctx.embedder)
    top = floored.kept[: params.rerank_top_n]
    # Told of all K (as the node's "found" counts them); stored, only the hits the floor left out
    # from among those the kept ones outranked (the node's data stays small).
    ctx.note_unrelated(query, floored, node)
    position = {id(hit): i for i, hit in enumerate(ranked)}
    last = position[id(top[-1])] if top else min(len(ranked), params.rerank_top_n)
    relevant = RelevanceResult(top, [j for j in floored.dropped if position[id(j.hit)] < last])
    kept = found.finish(top)  # with their snippets
    # The paper's search returns whole documents; a search engine, snippets: read the pages.
    pages = ctx.read_pages(query, kept, limit=params.read_pages, max_chars=params.doc_chars, node=node)
    sources = ctx.graph.add_sources(pages.hits, node=node) if pages.hits else []
    scores = {hit.ref: hit.score for hit in kept}
    docs = [
        {"rank": rank, "source_id": s.id, "title": s.title, "ref": s.ref, "score": round(scores.get(s.ref, 0.0), 6)}
        for rank, s in enumerate(sources, start=1)
    ]
    first_stage = isinstance(reranker, KeepOrder)  # it scores by position: the search's own scores say more
    listing = ranking(hits, ranked, floored, kept, sources, first_stage=first_stage, top_n=params.rerank_top_n)
    ctx.graph.finish(
        step,
        label=f"rerank: {len(docs)} of {len(hits)} kept",
        data={
            "reranker": reranker.description,
            "scored_by": "first stage" if first_stage else "reranker",
            "top_n": params.rerank_top_n,
            "rerank_error": rerank_error,
            "hits": listing,
        },
        content=f"{len(docs)} of the {len(hits)} documents found kept for the summary ({reranker.description}).",
    )
    return ctx.graph.update(
        node,
        content=f"{len(hits)} documents found in {ctx.searcher.description}.",
        merge_data={
            "found": len(hits),
            "ranked": docs,
            "searcher": ctx.searcher.description,
            "reranker": reranker.description,
            "rerank_error": rerank_error,
            "dropped_as_unrelated": relevant.dropped_summary(),
            "pages_read": pages.read,
            "page_failures": pages.failures,
            "stepped": True,
        },
    )


def documents_of(ctx: RunContext[ResearchParams], node: Node, dropped: set[int]) -> list[Source]:
    """The node's reranked documents as stored sources, best first, without the ones you dropped."""
    by_id = {s.id: s for s in ctx.graph.sources(node)}
    ranked = search_of(node).ranked or []
    return [by_id[d.source_id] for d in ranked if d.source_id in by_id and d.source_id not in dropped]


def summarize(
    ctx: RunContext[ResearchParams], node: Node, reasoning: Sequence[str], dropped: set[int], step: Node | None = None
) -> tuple[str, dict[str, Any]]:
    """Stage 2: the summary (stored markers) and its data. The first search's summary reads the
    query alone; a later one also reads the agent's reasoning so far (the paper's two prompts).
    `step`: the search's summary step, whose node the calls and the step log are told of (its data
    also counts the documents read); None for a search stored before the steps were drawn."""
    params = ctx.params
    search = search_of(node)
    documents = documents_of(ctx, node, dropped)
    counted = {"documents": len(documents)} if step is not None else {}
    node_id = (step or node).id
    if not documents:
        if search.search_error:  # its technical text stays in the node's "Search error" field
            return "This search failed, so it found nothing to summarise.", {"summary_attempts": 0, **counted}
        return f"Nothing to summarise: {nothing_found(search.searcher or 'the search')}", {
            "summary_attempts": 0,
            **counted,
        }
    blocks = inert(source_blocks(documents, max_chars=params.doc_chars))
    first = not reasoning

    def write(feedback: str) -> str:
        if first:
            messages = prompts.SUMMARIZE_FIRST.render(query=inert(search.query), documents=blocks, feedback=feedback)
        else:
            # The reasoning comes without its run-wide [n] (`Chain.reasoning`): here documents are
            # numbered per search from 1, where they would name this search's documents.
            messages = prompts.SUMMARIZE.render(
                query=inert(search.query), documents=blocks, feedback=feedback, reasoning=inert("\n\n".join(reasoning))
            )
        return ctx.llm.text(
            messages,
            purpose="summarizer",
            node_id=node_id,
            max_tokens=params.summary_max_tokens,
            temperature=params.temperature,
        )

    cited = write_cited(write, documents, params.citation_retries)
    if cited.removed:
        ctx.graph.narrate(
            f"the summary still cited wrongly after {cited.attempts} tries; removed {len(cited.removed)} bad markers",
            node_id=node_id,
            removed=cited.removed,
        )
    if cited.uncited:
        ctx.graph.narrate(f"the summary still cites no document after {cited.attempts} tries", node_id=node_id)
    text = cited.text or "The summarizer wrote nothing about these documents."
    return text, {
        "summary_attempts": cited.attempts,
        "removed_markers": cited.removed,
        "uncited": cited.uncited,
        **counted,
    }


def findings(searches: Sequence[Node], numbers: dict[int, int], summaries: Mapping[int, str]) -> str:
    """Every finished search's summary as the agent reads it, documents numbered run-wide.
    `summaries`: search node id -> its summary (`Chain.summaries`)."""
    parts = []
    for node in searches:
        body = numbered(summaries.get(stored_id(node), ""), numbers).strip()
        parts.append(
            f"Search {search_of(node).round}: {inert(search_of(node).query)}\n"
            f"{inert(body) or '(nothing relevant was found)'}"
        )
    return "\n\n".join(parts) or "(no search has finished yet)"
