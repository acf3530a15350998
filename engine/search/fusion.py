"""Reciprocal rank fusion: one ranking from several, by position alone.

Cormack, Clarke & Büttcher (SIGIR 2009): a document's fused score is the sum over the rankings that
hold it of 1 / (k + rank), rank counted from 1, k = 60. Only positions count, so BM25's unbounded
scores and cosine similarities never need a common scale, and a document both rankings like beats
one that a single ranking puts first.

- `fuse(rankings, key, k)`: the fused order of items (each item's first occurrence is kept).
- `FusedSearcher`: a `Searcher` over several searchers, their top hits fused by `Hit.ref`.
- `FusedReranker`: the `Reranker` that fuses the order it is given with another reranker's
  (`builtin`: the first stage's order with the built-in embedder's cosine order). Fusing with the
  order it was given is why it cannot undo what the first stage got right; `benchmarks/bench_retrieval.py`
  measures that it is never worse on the gold sets.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

from engine.search.protocol import Candidates, Hit, Searcher, ranking_of
from engine.search.rerank import Reranker

if TYPE_CHECKING:  # only for annotations
    from storage.corpus_store import CorpusStore

RRF_K = 60
T = TypeVar("T")


def fuse(
    rankings: Sequence[Sequence[T]],
    key: Callable[[T], Hashable],
    k: int = RRF_K,
    weights: Sequence[float] | None = None,
) -> list[tuple[T, float]]:
    """Items of all rankings, best fused score first (ties: the earlier ranking's earlier item).
    `weights`: one per ranking (1 each by default), multiplying its 1 / (k + rank)."""
    scores: dict[Hashable, float] = {}
    first: dict[Hashable, T] = {}
    order: dict[Hashable, int] = {}
    for ranking, weight in zip(rankings, weights or [1.0] * len(rankings)):
        for rank, item in enumerate(ranking, start=1):
            ident = key(item)
            scores[ident] = scores.get(ident, 0.0) + weight / (k + rank)
            if ident not in first:
                first[ident] = item
                order[ident] = len(order)
    ranked = sorted(scores, key=lambda ident: (-scores[ident], order[ident]))
    return [(first[ident], scores[ident]) for ident in ranked]


class FusedSearcher:
    """Several searchers' top hits fused by reciprocal rank (hits are the same when their `ref` is).

    Each searcher is asked for `depth` hits (at least k), so a hit one of them ranks 30th can still
    reach the fused top 10 when another ranks it high."""

    def __init__(
        self, searchers: Sequence[Searcher], *, depth: int = 50, name: str = "", store: CorpusStore | None = None
    ) -> None:
        self.searchers = list(searchers)
        self.depth = depth
        self.name = name
        self.store = store  # the corpus index the searchers share, when they do (the hop linker reads it)

    @property
    def description(self) -> str:
        return self.name or " + ".join(s.description for s in self.searchers)

    def search(self, query: str, k: int = 5) -> list[Hit]:
        found = self.candidates(query, k)
        return found.finish(found.hits)

    def candidates(self, query: str, k: int) -> Candidates:
        """The fused top `k`, with snippets to come where a searcher's are (`Candidates`)."""
        if k <= 0:
            return Candidates([], list)
        stages = [ranking_of(s, query, max(k, self.depth)) for s in self.searchers]
        kept = fuse([stage.refs for stage in stages], key=lambda ref: ref)[:k]
        # A ref's hit is made by the first stage that ranks it, as `fuse` keeps an item's first
        # occurrence; only the kept refs' hits are made.
        owner: dict[str, int] = {}
        for number, stage in enumerate(stages):
            for ref in stage.refs:
                owner.setdefault(ref, number)
        made: dict[str, Hit] = {}
        for number, stage in enumerate(stages):
            mine = [(ref, score) for ref, score in kept if owner[ref] == number]
            if mine:
                refs, scores = zip(*mine)
                made.update(zip(refs, stage.hits(refs, scores)))
        fused = [made[ref] for ref, _score in kept]

        def finish(kept: list[Hit]) -> list[Hit]:
            for stage in stages:
                kept = stage.finish(kept)
            return kept

        return Candidates(fused, finish)

    def titled(self, title: str) -> Hit | None:
        for searcher in self.searchers:
            titled = getattr(searcher, "titled", None)
            hit: Hit | None = titled(title) if titled is not None else None
            if hit is not None:
                return hit
        return None


class FusedReranker:
    """The order a reranker is given, fused with `other`'s order of the same hits."""

    def __init__(self, other: Reranker, *, name: str = "", weight: float = 1.0) -> None:
        self.other = other
        self.name = name
        self.weight = weight  # of the order it is given, against the other's 1

    @property
    def description(self) -> str:
        return self.name or f"the first stage's order fused with {self.other.description}"

    def rerank(self, query: str, hits: Sequence[Hit], k: int) -> list[Hit]:
        if k <= 0 or not hits:
            return []
        # Two hits may share a ref (chunks of one page) and rerankers return copies: tag each hit
        # with its position so the other order maps back exactly.
        tagged = [replace(hit, ref=f"{i}\x00{hit.ref}") for i, hit in enumerate(hits)]
        other = [int(h.ref.split("\x00", 1)[0]) for h in self.other.rerank(query, tagged, len(tagged))]
        fused = fuse([list(range(len(hits))), other], key=lambda i: i, weights=(self.weight, 1.0))
        return [replace(hits[i], score=score) for i, score in fused[:k]]
