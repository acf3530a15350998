"""Reranking: order a handful of search hits by how well they answer a query, keep the best k.

A `Reranker` sees only the hits it is given (a searcher's results, a node's sources), never the
whole corpus. This interface is what the other rerankers will implement later: an LLM reranker
(pointwise: one yes/no "does this passage answer the query?" per hit, ordered by the answer's
probability) and a client of an OpenAI-compatible `/rerank` endpoint (cross-encoders served by
vLLM, llama.cpp, Infinity...). Each returns the same hits with its own score in `Hit.score`.

`BM25Reranker` is the offline one: Okapi BM25 over the hits' title and text (the snippet when the
text is empty), written here rather than taken from a library:

- `rank-bm25`'s Okapi variant computes IDF as log((N - n + 0.5) / (n + 0.5)), which is 0 for a term
  in exactly half the documents and negative (then floored to a fraction of the mean IDF) for a term
  in more than half. Reranking works on 3-20 hits, where that is the common case: with two hits, a
  query word found in one of them scores nothing (its issues #39 and #43, open; no release since
  2022). `bm25s` avoids it but needs scipy, which nothing else here uses.
- So: Okapi's term-frequency saturation (k1 = 1.5, b = 0.75) with Lucene's IDF,
  log(1 + (N - n + 0.5) / (n + 0.5)), which is positive for every term present in a hit.

Words are the ones `engine/search/relevance.py` counts (`engine/search/words.py`) (its word pattern, stopwords and light
stemmer), kept with their repeats, so the floor and the reranker agree on what a query term is.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol, runtime_checkable

from engine.search.protocol import Hit
from engine.search.words import STOPWORDS, WORD, stem  # the relevance floor's words


@runtime_checkable
class Reranker(Protocol):
    """Orders hits by relevance to a query; returns at most `k` of them, best first, each with
    this reranker's score in `Hit.score` (higher is better). Must not call out for hits it was not
    given, and must be safe to call from several threads."""

    @property
    def description(self) -> str:
        """What ranks the hits, for the 'running on' notice and a node's data."""
        ...

    def rerank(self, query: str, hits: Sequence[Hit], k: int) -> list[Hit]: ...


class RerankEndpoint(Reranker, Protocol):
    """The /rerank endpoint the user configured (THOUGHTMAP_RERANK_URL), as a run's service: a
    method asks `ctx.service(RerankEndpoint)` for it, apart from the rerankers it builds itself."""


def tokens(text: str) -> list[str]:
    """The words of `text` as `relevance.terms` sees them, in order and with their repeats
    (`set(tokens(t)) == relevance.terms(t)`)."""
    words = (w.lower() for w in WORD.findall(text))
    return [stem(w) for w in words if (len(w) > 1 or w.isdigit()) and w not in STOPWORDS]


class BM25Reranker:
    """Okapi BM25 over the given hits (see the module's docstring for the IDF).

    The result: the hits that share a word with the query, by score (ties keep the original
    order), then the others in their original order, each with its BM25 score in `Hit.score`
    (0.0 for those), cut to `k`. The zero-score hits are kept after the matching ones rather than
    dropped, so `k` hits come back whenever `k` were given: deciding that a hit is too weak to
    cite is the relevance floor's job (`engine/search/relevance.py`), not the ranking's. An empty
    query (or one of stopwords only) keeps the original order, every score 0.0.
    Deterministic: a pure function of the query and the hits.
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        if k1 < 0 or not 0 <= b <= 1:
            raise ValueError("BM25 needs k1 >= 0 and 0 <= b <= 1")
        self.k1 = k1
        self.b = b

    @property
    def description(self) -> str:
        return f"BM25 over the hits (k1={self.k1:g}, b={self.b:g})"

    def scores(self, query: str, hits: Sequence[Hit]) -> list[float]:
        """The BM25 score of each hit for `query`, in the hits' order."""
        return bm25_scores(query, [f"{hit.title} {hit.text or hit.snippet}" for hit in hits], self.k1, self.b)

    def rerank(self, query: str, hits: Sequence[Hit], k: int) -> list[Hit]:
        if k <= 0 or not hits:
            return []
        scores = self.scores(query, hits)
        # Positive scores first, best first; equal scores (and all the zeros) keep the given order.
        order = sorted(range(len(hits)), key=lambda i: (-scores[i], i))
        return [replace(hits[i], score=scores[i]) for i in order[:k]]


def bm25_scores(query: str, documents: Sequence[str], k1: float = 1.5, b: float = 0.75) -> list[float]:
    """Okapi BM25 with Lucene's IDF (see the module's docstring) of each document for `query`, in
    the documents' order."""
    return bm25_term_scores(query, [Counter(tokens(document)) for document in documents], k1, b)


def bm25_term_scores(query: str, docs: Sequence[Counter[str]], k1: float = 1.5, b: float = 0.75) -> list[float]:
    """`bm25_scores` of documents already counted into terms (`Counter(tokens(text))`): the knowledge
    layer's key index (`engine/knowledge/index.py`) counts its keys once and matches them often."""
    wanted = set(tokens(query))  # a word repeated in the query counts once
    if not docs or not wanted:
        return [0.0] * len(docs)
    lengths = [sum(doc.values()) for doc in docs]
    average = sum(lengths) / len(docs) or 1.0
    n_docs = len(docs)
    idf = {}
    for term in wanted:
        having = sum(1 for doc in docs if term in doc)
        idf[term] = math.log(1.0 + (n_docs - having + 0.5) / (having + 0.5))
    result = []
    for doc, length in zip(docs, lengths):
        norm = k1 * (1.0 - b + b * length / average)
        score = 0.0
        for term in wanted:
            tf = doc.get(term, 0)
            if tf:
                score += idf[term] * tf * (k1 + 1.0) / (tf + norm)
        result.append(score)
    return result
