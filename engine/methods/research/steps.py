"""The search tool's steps as nodes of their own (issue 43): a search node (the query and what the
first stage found) → its rerank step (every hit the search returned, in the reranked order, kept
or dropped, each with its score and why it was dropped) → its summary step (the summarizer's text,
with a marker per document). The next reasoning turn hangs under the summary, so the map reads
search → rerank → summary → reasoning, as the paper's figure 1 draws the search tool.

Runs stored before the steps were drawn keep everything on the search node (`SearchData.stepped`
is False there): they are read and shown as they were."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.contract import NodeData
from engine.graph import RunGraph
from engine.safe_text import inline_text
from engine.search.protocol import Hit
from engine.search.relevance import Judged, RelevanceResult
from storage.models import Node, Source

RERANK, SUMMARY = "rerank", "summary"

ScoredBy = Literal["reranker", "first stage"]
# Said beside the scores, so a reader knows what the numbers are.
SCORES_ARE = {"reranker": "the reranker's score", "first stage": "the search's own score (no reranker ran)"}

TITLE_CHARS, REF_CHARS = 160, 300  # a hit as stored: enough to recognise it; the node's data stays small


class RankedHit(BaseModel):
    """One document the search returned, as the rerank step placed it."""

    model_config = ConfigDict(extra="forbid")

    rank: int = Field(description="Its place in the reranked order (1 = best).")
    first_rank: int = Field(description="Its place in the search's own order, before reranking.")
    title: str
    ref: str
    score: float = Field(description="The score `RerankData.scored_by` names.")
    kept: bool = False
    source_id: int | None = Field(default=None, description="The stored source, for a kept document.")
    dropped: str = Field(default="", description="Why it was not sent to the summarizer (empty when kept).")


class RerankData(NodeData):
    """The rerank step of one search: the reranker, which score is shown, and every hit ranked."""

    reranker: str = ""
    scored_by: ScoredBy = "reranker"
    top_n: int = 0
    rerank_error: str = ""
    rerank_scores: dict[str, float] = Field(
        default_factory=dict,
        description=("The LLM reranker's judgments so far (ref -> score), kept as they arrive for a resumed search."),
    )
    hits: list[RankedHit] = Field(default_factory=list, description="Every hit the search returned, reranked.")

    def kept(self) -> list[RankedHit]:
        return [h for h in self.hits if h.kept]

    def caption(self) -> str:
        if not self.hits:
            return f"reranking with {self.reranker}" if self.reranker else "reranking"
        return (
            f"{len(self.kept())} of {len(self.hits)} kept (the top {self.top_n} above the relevance floor) · "
            f"scores: {SCORES_ARE[self.scored_by]}"
        )

    def reader_fields(self) -> dict[str, str | list[str]] | None:
        # Titles are pages': escaped, so a title cannot make a link, a citation or a line of its own;
        # a kept one carries its source's marker (the panel numbers it as the summary's citations).
        def line(hit: RankedHit) -> str:
            # Where the search had placed it, when the reranker moved it.
            moved = f" (search's #{hit.first_rank})" if hit.first_rank != hit.rank else ""
            cite = f" [[S{hit.source_id}]]" if hit.source_id is not None else ""
            why = f" · {hit.dropped}" if hit.dropped else ""
            return f"{hit.rank}. {inline_text(hit.title) or 'Untitled'}{cite} — score {hit.score:.3f}{moved}{why}"

        # The ranking first (what the step did), then what ranked it and what its scores are.
        fields: dict[str, str | list[str]] = {
            "Rerank error": self.rerank_error,
            "Kept, sent to the summarizer": [line(h) for h in self.hits if h.kept],
            "Dropped": [line(h) for h in self.hits if not h.kept],
            "Reranker": self.reranker,
            "Scores shown": SCORES_ARE[self.scored_by].capitalize(),
        }
        return {k: v for k, v in fields.items() if v}


class SummaryData(NodeData):
    """The summary step of one search: the summarizer's text (the node's content), with a marker per
    document, and how it was checked."""

    documents: int = Field(
        default=0, description="Documents the summarizer read (the kept ones, less any you dropped)."
    )
    summary_attempts: int = 0
    removed_markers: list[str] = Field(default_factory=list, description="Bad markers removed from the summary.")
    uncited: bool = Field(default=False, description="The summary cites no document, even when asked again.")

    def caption(self) -> str:
        parts = [f"summary of {self.documents} document{'s' if self.documents != 1 else ''}"]
        if self.summary_attempts > 1:
            parts.append(f"written {self.summary_attempts} times")
        if self.removed_markers:
            parts.append(f"{len(self.removed_markers)} bad markers removed")
        if self.uncited:
            parts.append("cites no document")
        return " · ".join(parts)


def _below_floor(judged: Judged) -> str:
    """Why the relevance floor left a hit out: how much of the query it covers (and how close in
    meaning it is, when the floor judged that too)."""
    similarity = getattr(judged, "similarity", None)
    meaning = f", similarity {similarity:.2f}" if similarity is not None else ""
    return f"below the relevance floor (covers {judged.score:.0%} of the query's words{meaning})"


def ranking(
    found: Sequence[Hit],
    ranked: Sequence[Hit],
    relevance: RelevanceResult,
    kept: Sequence[Hit],
    sources: Sequence[Source],
    *,
    first_stage: bool,
    top_n: int,
) -> list[RankedHit]:
    """Every hit the search `found`, in the reranked order (`ranked`), each with its score (the
    reranker's, or with `first_stage` the search's own: the `none` reranker scores by position
    alone), kept (the `kept` ones, with their stored source) or why it was dropped."""
    first: dict[str, tuple[int, float]] = {}
    for place, hit in enumerate(found, start=1):
        first.setdefault(hit.ref, (place, hit.score))
    below_floor = {id(j.hit): j for j in relevance.dropped}
    kept_refs = {hit.ref for hit in kept}
    source_of = {s.ref: s.id for s in sources}
    out = []
    for rank, hit in enumerate(ranked, start=1):
        place, own_score = first.get(hit.ref, (rank, hit.score))
        is_kept = hit.ref in kept_refs and hit.ref in source_of
        if is_kept:
            why = ""
        elif id(hit) in below_floor:
            why = _below_floor(below_floor[id(hit)])
        elif hit.ref in kept_refs:
            why = "could not be stored"
        else:
            why = f"past the top {top_n}"
        out.append(
            RankedHit(
                rank=rank,
                first_rank=place,
                title=hit.title[:TITLE_CHARS],
                ref=hit.ref[:REF_CHARS],
                score=round(own_score if first_stage else hit.score, 6),
                kept=is_kept,
                source_id=source_of.get(hit.ref) if is_kept else None,
                dropped=why,
            )
        )
    return out


def step_node(graph: RunGraph, parent: Node, kind: str, label: str) -> Node:
    """`parent`'s step of this kind, added once: a resumed search finds the one it added before."""
    made = next((child for child in graph.children(parent) if child.kind == kind), None)
    return made if made is not None else graph.add(kind=kind, label=label, parent=parent)
