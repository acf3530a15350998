"""Is a search hit about the query at all? A floor under what a node may cite.

BM25 always returns its nearest documents, even when the corpus holds nothing on the question: a
DEoT node on the 1973 OPEC embargo, offline, was handed Hugo Chávez's biography as "evidence",
cited it, and built on it. A reader cannot tell such evidence from noise (the peers' most reported
failure). So before a hit reaches a prompt, it must cover enough of the query's content words
(in its title or text); what does not is dropped, named in the node's data, and a search that
keeps nothing says "no relevant source found" instead of citing noise.

The score is the share of the query's distinctive terms found in the hit, where a term counts
more when it is rare among the hits themselves (a word every hit shares, like "oil" for an oil
question, proves little) and double when it is in the hit's title (what the document is about).
The floor was chosen on the bundled datasets (`benchmarks/bench_relevance.py`, results in
docs/benchmarks.md): at 0.35 it keeps 98 % of HotpotQA's gold passages among the top-5 hits and
drops about 40 % of the hits for questions the corpus does not cover. A word count cannot tell a
passage that mentions "economic effects" from one about them: what passes the floor is then left
to the model's judgment, which every prompt that shows sources asks for (use and cite only the
sources that bear on the question).

Words are not meaning: "What causes the seasons on Earth?" kept *Avatar: The Last Airbender (season
2)* (season, earth), and the built-in model wrote from it that greenhouse gases cause the seasons. So
when the run has an embedder (`RunContext.embedder`: the built-in all-MiniLM-L6-v2 or an endpoint), a
hit found by its words must also be about the query by meaning: the cosine of query and passage at
least `SEMANTIC_FLOOR`. Chosen on the bundled data (`benchmarks/bench_semantic_floor.py`, results in
docs/benchmarks.md). A hit the question names, or a hop from a kept hit, passes as before: a bridge
document is evidence whatever its similarity. An embedder that fails leaves the word floor alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from engine.safe_text import inline_text  # Markdown-inert: a query may be the model's words
from engine.search.protocol import NAMED_BY_QUESTION, Hit, SearchError
from engine.search.words import STOPWORDS, WORD, stem, terms  # noqa: F401  (terms: this module's public words)

if TYPE_CHECKING:
    from engine.search.embeddings import Embedder

DEFAULT_FLOOR = 0.35
# The least cosine similarity of query and passage (all-MiniLM-L6-v2) for a hit found by its words.
SEMANTIC_FLOOR = 0.35


@dataclass(frozen=True)
class Judged:
    hit: Hit
    score: float  # 0..1, the weighted share of the query's terms the hit contains
    matched: tuple[str, ...]
    similarity: float | None = None  # cosine of query and passage, when an embedder judged it


@dataclass(frozen=True)
class RelevanceResult:
    kept: list[Hit]
    dropped: list[Judged]

    def dropped_summary(self) -> list[dict[str, object]]:
        """For the node's data: which hits were left out, and how little they matched."""
        return [
            {"title": j.hit.title[:120], "ref": j.hit.ref[:200], "score": round(j.score, 2)}
            | ({"similarity": round(j.similarity, 2)} if j.similarity is not None else {})
            for j in self.dropped
        ]


def judge(query: str, hits: Sequence[Hit]) -> list[Judged]:
    wanted = terms(query)
    if not wanted:
        return [Judged(hit, 1.0, ()) for hit in hits]
    hit_terms = [terms(f"{hit.title} {hit.text or hit.snippet}") for hit in hits]
    # Rare among the hits = distinctive: 2; present in every hit = common ground: 1. Weighed once
    # for all hits (100 hits of a research search: 100 times fewer membership tests).
    weights = {term: 2.0 - sum(term in other for other in hit_terms) / max(len(hit_terms), 1) for term in wanted}
    weight_all = 0.0
    for weight in weights.values():  # added in this order, as each hit's share is below
        weight_all += weight
    judged = []
    for hit, found in zip(hits, hit_terms):
        in_title = terms(hit.title)
        matched = wanted & found
        weight_matched = 0.0
        for term, weight in weights.items():
            if term in matched:
                # A query term in the title says what the whole document is about: it counts double.
                weight_matched += weight * (2.0 if term in in_title else 1.0)
        judged.append(Judged(hit, min(1.0, weight_matched / weight_all), tuple(sorted(matched))))
    return judged


def semantic_scores(query: str, hits: Sequence[Hit], embedder: Embedder | None) -> list[float] | None:
    """The cosine similarity of `query` and each hit's passage, or None without an embedder or when it
    fails (the word floor then decides alone)."""
    from engine.search.embeddings import cosine, hit_text

    if embedder is None or not hits:
        return None
    try:
        vectors = embedder.embed([query, *(hit_text(hit) for hit in hits)])
    except (SearchError, OSError, ValueError):  # EmbeddingError is a SearchError
        return None
    return [cosine(vectors[0], vector) for vector in vectors[1:]]


def relevant_hits(
    query: str,
    hits: Sequence[Hit],
    *,
    floor: float = DEFAULT_FLOOR,
    embedder: Embedder | None = None,
    semantic_floor: float = SEMANTIC_FLOOR,
) -> RelevanceResult:
    """Keep the hits that cover at least `floor` of the query (0 keeps everything) and, with an
    `embedder`, are about it by meaning (cosine at least `semantic_floor`), and the hits reached by a
    hop from what is kept: a document the question names, or one a kept document names (`Hit.via`).
    A multi-hop question's bridge document shares few words with it (the father's page for "Where
    was X's father buried?"), yet it is the evidence; a hop from a page that was itself dropped
    proves nothing and stays dropped. Kept hits keep their order. A floor of 0 turns both off."""
    if floor <= 0 or not hits:
        return RelevanceResult(list(hits), [])
    verdicts = judge(query, hits)
    passed = [v.score >= floor or v.hit.via == NAMED_BY_QUESTION for v in verdicts]
    similarity = semantic_scores(query, hits, embedder) if semantic_floor > 0 else None
    if similarity is not None:
        passed = [
            ok and (v.hit.via == NAMED_BY_QUESTION or sim >= semantic_floor)
            for ok, v, sim in zip(passed, verdicts, similarity)
        ]
    kept_titles = {v.hit.title for v, ok in zip(verdicts, passed) if ok}
    changed = True
    while changed:  # a hop of a hop: until nothing more is reached
        changed = False
        for i, verdict in enumerate(verdicts):
            if not passed[i] and verdict.hit.via and verdict.hit.via in kept_titles:
                passed[i] = changed = True
                kept_titles.add(verdict.hit.title)
    if similarity is not None:
        verdicts = [replace(v, similarity=round(sim, 3)) for v, sim in zip(verdicts, similarity)]
    kept = [v.hit for v, ok in zip(verdicts, passed) if ok]
    dropped = [v for v, ok in zip(verdicts, passed) if not ok]
    return RelevanceResult(kept, dropped)


NO_RELEVANT_SOURCE = (
    "No relevant source was found for this in {where}. Connect web search or upload documents "
    "on the Settings page to ground it."
)


SEARCH_OFF = (
    "Search was off for this run (no search). Connect web search or upload documents on the Settings page, "
    "and choose a search, to ground it."
)


def nothing_found(where: str) -> str:
    """Why there is no source, in words: nothing relevant in `where` (a searcher's description), or
    no search at all (a run with search off, whose searcher is described as "no search")."""
    return SEARCH_OFF if where == "no search" else NO_RELEVANT_SOURCE.format(where=where)


def ungrounded_note(where: str) -> str:
    """Appended to an answer that no source supports: said to the reader, not left to the model."""
    return "\n\n> " + nothing_found(where) + " This answer is the model's own and cites nothing."


NOT_COVERED = (
    "The sources at hand ({where}) do not cover this: no passage found was about “{query}”. The "
    "built-in model answers only from sources, so it does not guess. To research it, turn on web "
    "search or upload documents on the Settings page, or connect a model there for knowledge "
    "beyond the sources."
)


def not_covered(query: str, where: str) -> str:
    """A node's answer when nothing it found is about its question and the model answers only from
    sources (`RunContext.sources_only`): said plainly, with what to do, instead of an invented answer."""
    if where == "no search":
        return SEARCH_OFF + " The built-in model answers only from sources, so this is left unanswered."
    return NOT_COVERED.format(where=inline_text(where), query=inline_text(" ".join(query.split())[:300]))
