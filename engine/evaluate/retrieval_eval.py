"""Retrieval quality with no LLM: how well a searcher's ranking finds an item's gold documents.

For each benchmark item with gold supporting titles (HotpotQA, 2WikiMultihopQA, NQ), the searcher
is asked the raw question; its hits are turned into a ranking of distinct documents (a title counts
once, at its best rank: several chunks, or the same article in two collections, are one document)
and scored against the gold titles, compared as `metrics.retrieval_recall` compares them:

- **all-gold@10**: 1 when every gold title is among the first 10 documents (a multi-hop question
  needs all its paragraphs; the issue's headline number);
- **recall@k** for k in `RECALL_KS`: the share of the gold titles among the first k;
- **nDCG@10**: binary relevance (a gold title is 1, anything else 0), DCG = sum of 1/log2(rank + 1)
  over the gold documents in the first 10, over the ideal DCG of min(gold, 10) gold documents first;
- **MRR**: 1/rank of the first gold document in the whole ranking returned (0 when none is);
- **query time p50/p95**: the wall time of each `search` call, after a few untimed warm-up queries
  (lazy imports, the first page reads of the index, a model's first call).

Items without gold titles (an NQ item none of whose passages holds the answer) are skipped and
counted, as `retrieval_recall` leaves them out of a mean rather than scoring them 0 or 1.

The metric functions are pure (rankings in, numbers out); `evaluate_retrieval` is the runner that
`thoughtmap search-eval` and `benchmarks/bench_retrieval.py` share.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np

from engine.evaluate.datasets import Item
from engine.evaluate.metrics import title_key
from engine.search.protocol import Searcher

RECALL_KS = (2, 5, 10, 20)
ALL_GOLD_AT = 10
NDCG_AT = 10
# Hits asked of the searcher per question: enough chunks for 20 distinct documents (recall@20)
# where several chunks share a title, and the depth the baseline was measured at.
SEARCH_DEPTH = 50
WARMUP_QUERIES = 3


# ---------------------------------------------------------------- metrics (pure)


def distinct_titles(titles: Iterable[str]) -> list[str]:
    """The ranking of distinct documents: each title's key (`metrics.title_key`) once, at its first
    (best) rank; empty titles are left out."""
    ranking: dict[str, None] = {}
    for title in titles:
        key = title_key(title)
        if key:
            ranking.setdefault(key, None)
    return list(ranking)


def gold_keys(gold_titles: Iterable[str]) -> set[str]:
    return {title_key(title) for title in gold_titles if title.strip()}


def recall_at(ranking: Sequence[str], gold: set[str], k: int) -> float:
    """The share of the gold documents among the first k of `ranking` (distinct keys)."""
    return len(gold.intersection(ranking[:k])) / len(gold)


def all_gold_at(ranking: Sequence[str], gold: set[str], k: int) -> float:
    """1.0 when every gold document is among the first k, else 0.0."""
    return float(gold.issubset(ranking[:k]))


def ndcg_at(ranking: Sequence[str], gold: set[str], k: int) -> float:
    """Binary-relevance nDCG@k: the gold documents' discounted gain over the best possible,
    min(len(gold), k) gold documents at the top."""
    dcg = sum(1.0 / math.log2(rank + 1) for rank, key in enumerate(ranking[:k], start=1) if key in gold)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(gold), k) + 1))
    return dcg / ideal


def reciprocal_rank(ranking: Sequence[str], gold: set[str]) -> float:
    """1/rank of the first gold document in the whole ranking; 0.0 when none is in it."""
    for rank, key in enumerate(ranking, start=1):
        if key in gold:
            return 1.0 / rank
    return 0.0


@dataclass(frozen=True)
class QueryScore:
    """One item's scores (the ranking they were computed from is not kept)."""

    item_id: str
    all_gold_at_10: float
    recall_at_k: dict[int, float]
    ndcg_at_10: float
    reciprocal_rank: float
    seconds: float


def score_ranking(
    titles: Sequence[str], gold_titles: Sequence[str], *, item_id: str = "", seconds: float = 0.0
) -> QueryScore | None:
    """Every metric of one ranked list of hit titles against the gold titles; None when there are no
    gold titles (the item is skipped, not scored)."""
    gold = gold_keys(gold_titles)
    if not gold:
        return None
    return QueryScore(item_id=item_id, seconds=seconds, **_metrics(distinct_titles(titles), gold))


class _Metrics(TypedDict):
    all_gold_at_10: float
    recall_at_k: dict[int, float]
    ndcg_at_10: float
    reciprocal_rank: float


def _metrics(ranking: Sequence[str], gold: set[str]) -> _Metrics:
    return {
        "all_gold_at_10": all_gold_at(ranking, gold, ALL_GOLD_AT),
        "recall_at_k": {k: recall_at(ranking, gold, k) for k in RECALL_KS},
        "ndcg_at_10": ndcg_at(ranking, gold, NDCG_AT),
        "reciprocal_rank": reciprocal_rank(ranking, gold),
    }


# ---------------------------------------------------------------- summary


@dataclass(frozen=True)
class RetrievalReport:
    """The means over the scored items, and what was measured. A metric is None when no item was
    scored."""

    dataset: str
    retriever: str
    reranker: str
    searcher: str  # the searcher's own description
    depth: int
    items: int  # items scored
    skipped: int  # items without gold titles
    all_gold_at_10: float | None
    recall_at_k: dict[int, float | None]
    ndcg_at_10: float | None
    mrr: float | None
    p50_ms: float | None
    p95_ms: float | None
    scores: tuple[QueryScore, ...] = field(default=(), repr=False)

    def to_json(self) -> dict[str, Any]:
        """The report as one JSON object (`thoughtmap search-eval --json`); recall's k are strings."""
        return {
            "dataset": self.dataset,
            "retriever": self.retriever,
            "reranker": self.reranker,
            "searcher": self.searcher,
            "depth": self.depth,
            "items": self.items,
            "skipped": self.skipped,
            "all_gold_at_10": self.all_gold_at_10,
            "ndcg_at_10": self.ndcg_at_10,
            "mrr": self.mrr,
            "recall_at_k": {str(k): v for k, v in self.recall_at_k.items()},
            "p50_ms": self.p50_ms,
            "p95_ms": self.p95_ms,
        }


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _percentile_ms(seconds: Sequence[float], q: float) -> float | None:
    # Linear interpolation between the nearest ranks (numpy's default), in milliseconds.
    return float(np.percentile(np.asarray(seconds) * 1000.0, q)) if seconds else None


def summarize(
    scores: Sequence[QueryScore],
    *,
    skipped: int,
    dataset: str = "",
    retriever: str = "",
    reranker: str = "",
    searcher: str = "",
    depth: int = SEARCH_DEPTH,
) -> RetrievalReport:
    times = [s.seconds for s in scores]
    return RetrievalReport(
        dataset=dataset,
        retriever=retriever,
        reranker=reranker,
        searcher=searcher,
        depth=depth,
        items=len(scores),
        skipped=skipped,
        all_gold_at_10=_mean([s.all_gold_at_10 for s in scores]),
        recall_at_k={k: _mean([s.recall_at_k[k] for s in scores]) for k in RECALL_KS},
        ndcg_at_10=_mean([s.ndcg_at_10 for s in scores]),
        mrr=_mean([s.reciprocal_rank for s in scores]),
        p50_ms=_percentile_ms(times, 50),
        p95_ms=_percentile_ms(times, 95),
        scores=tuple(scores),
    )


# ---------------------------------------------------------------- the runner

Progress = Callable[[int, int], None]  # (questions done, questions in all)


def evaluate_retrieval(
    searcher: Searcher,
    items: Sequence[Item],
    *,
    depth: int = SEARCH_DEPTH,
    warmup: int = WARMUP_QUERIES,
    dataset: str = "",
    retriever: str = "",
    reranker: str = "",
    clock: Callable[[], float] = time.perf_counter,
    progress: Progress | None = None,
) -> RetrievalReport:
    """Ask `searcher` each item's question for `depth` hits, score its ranking, and summarize.

    The first `warmup` questions are asked once more before any is timed, their answers unused.
    Items without gold titles are not searched; they are counted in `skipped`. A `SearchError`
    propagates: a measurement with a failed search in it would not be the searcher's."""
    scored_items = [item for item in items if gold_keys(item.supporting_titles)]
    for item in scored_items[:warmup]:
        searcher.search(item.question, depth)
    scores: list[QueryScore] = []
    for done, item in enumerate(scored_items, start=1):
        started = clock()
        hits = searcher.search(item.question, depth)
        seconds = clock() - started
        scores.append(
            QueryScore(
                item_id=item.id,
                seconds=seconds,
                **_metrics(distinct_titles(hit.title for hit in hits), gold_keys(item.supporting_titles)),
            )
        )
        if progress is not None:
            progress(done, len(scored_items))
    return summarize(
        scores,
        skipped=len(items) - len(scored_items),
        dataset=dataset,
        retriever=retriever,
        reranker=reranker,
        searcher=searcher.description,
        depth=depth,
    )
