"""The one searcher seam every method searches the local corpus through, and the rerankers by name.

`THOUGHTMAP_RETRIEVER` (`Settings.retrieval.retriever`) picks the first stage:

- `bm25`: SQLite FTS5's BM25 over titles and text (`LocalCorpusSearcher`).
- `dense`: cosine similarity of the embedding model's vectors (`DenseSearcher`).
- `hybrid` (the default): BM25 and dense fused by reciprocal rank (`FusedSearcher`), then the hops
  followed: documents whose titles the question or the best paragraphs name are brought in
  (`HopSearcher`, engine/search/hops.py). On the gold sets this is the best measured first stage by
  far on multi-hop questions (docs/benchmarks.md, "Retrieval").

Without an embedder (the built-in model missing or damaged, and no endpoint), `dense` and `hybrid`
fall back to what works without one (BM25, and BM25 with hops) and say so in their description, which
every run stores and the app and CLI show.

`THOUGHTMAP_RERANKER` (`Settings.retrieval.reranker`) names what orders a search's top K where a method
reranks (the research agent): `none` keeps the first stage's order; `builtin` fuses it with the
embedding model's cosine order (`FusedReranker`); `llm` and `endpoint` are `engine/search/rerankers.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from engine.config import RetrievalSettings, Settings
from engine.search.embeddings import Embedder, EmbeddingReranker
from engine.search.fusion import FusedReranker, FusedSearcher
from engine.search.local import LocalCorpusSearcher
from engine.search.protocol import NAMED_BY_QUESTION, Candidates, Hit, Searcher, candidates_of
from engine.search.rerank import Reranker

if TYPE_CHECKING:  # only for annotations: hops and the vectors are imported where first used
    from engine.search.hops import LinkerCache
    from engine.search.vectors import CorpusEmbedding, VectorIndex


def corpus_embedding(settings: Settings, embedder: Embedder | None = None) -> CorpusEmbedding | None:
    """The `CorpusEmbedding` the local corpus's vectors are of: the built-in model (its vectors of
    the bundled corpus are shipped; uploads are embedded as they are ingested), or None when it is
    off, missing or damaged. `embedder`: the built-in embedder already made, to share its weights."""
    from engine.search.builtin_embedder import BuiltinEmbedder, builtin_embedder
    from engine.search.embedding_model import EmbeddingModelUnavailable
    from engine.search.vectors import SHIPPED_MODEL, CorpusEmbedding

    if not settings.builtin_embeddings:
        return None
    if not isinstance(embedder, BuiltinEmbedder):
        try:
            embedder = builtin_embedder(settings.local.models_dir)
        except EmbeddingModelUnavailable:
            return None
    return CorpusEmbedding(SHIPPED_MODEL, embedder.embed, embedder=embedder)


class KeepOrder:
    """The `none` reranker: the first stage's order, cut to k (scores by position)."""

    description = "the first stage's order (no reranker)"

    def rerank(self, query: str, hits: Sequence[Hit], k: int) -> list[Hit]:
        kept = list(hits)[: max(k, 0)]
        return [replace(hit, score=1.0 / (rank + 1)) for rank, hit in enumerate(kept)]


class HopAwareCosine:
    """Cosine similarity to the query, where a document reached by a hop (`Hit.via`) scores at least
    what the document that named it scores, and one the question names at least the best score. A
    bridge page shares little with the question by design (the father's page for "where was X's
    father buried?"): ranked on its own similarity it would fall below every paraphrase of the
    question, undoing the hop (measured: all-gold@10 on HotpotQA fell from .87 to .71)."""

    def __init__(self, embedder: Embedder) -> None:
        self.cosine = EmbeddingReranker(embedder)

    @property
    def description(self) -> str:
        return self.cosine.description

    def rerank(self, query: str, hits: Sequence[Hit], k: int) -> list[Hit]:
        scored = self.cosine.rerank(query, hits, len(hits))
        best = max((h.score for h in scored), default=0.0)
        by_title = {h.title: h.score for h in scored}
        lifted = []
        for h in scored:
            score = h.score
            if h.via == NAMED_BY_QUESTION:
                score = best
            elif h.via in by_title:
                score = max(score, by_title[h.via])
            lifted.append(replace(h, score=score))
        order = sorted(range(len(lifted)), key=lambda i: (-lifted[i].score, i))
        return [lifted[i] for i in order[:k]]


def builtin_reranker(embedder: Embedder | None) -> Reranker:
    """The `builtin` reranker: the first stage's order fused with the embedder's cosine order (hops
    kept with their source: `HopAwareCosine`); the first stage's order alone without an embedder."""
    if embedder is None:
        return KeepOrder()
    return FusedReranker(
        HopAwareCosine(embedder), name=f"the first stage's order fused with cosine similarity of {embedder.description}"
    )


def build_local_retrieval(
    corpus: LocalCorpusSearcher,
    settings: RetrievalSettings,
    embedder: Embedder | None,
    *,
    vectors: VectorIndex | None = None,
    linkers: LinkerCache | None = None,
) -> Searcher:
    """The first stage `settings.retriever` names, over `corpus`. `vectors`: the corpus's
    `VectorIndex` for the embedder's model (None: dense retrieval is unavailable). `linkers`: the
    process's `LinkerCache`, so the hop linker is built once per corpus generation."""
    from engine.search.hops import HopSearcher

    retriever = settings.retriever
    if retriever == "bm25":
        return corpus
    dense = None
    if embedder is not None and vectors is not None:
        from engine.search.dense import DenseSearcher

        dense = DenseSearcher(corpus, vectors, embedder)
    if retriever == "dense":
        if dense is None:
            return _Described(
                corpus, f"{corpus.description}; dense retrieval unavailable (no embedding model), BM25 used"
            )
        return dense
    if dense is None:
        return _Described(
            HopSearcher(corpus, linkers=linkers),
            f"{corpus.description} by BM25, following the hops; dense retrieval unavailable (no embedding model)",
        )
    fused = FusedSearcher(
        [corpus, dense], store=corpus.store, name=f"{corpus.description} by BM25 + {dense.embedder.description}"
    )
    return HopSearcher(fused, linkers=linkers)


class _Described:
    """A searcher with a description that says what it fell back to."""

    def __init__(self, inner: Searcher, description: str) -> None:
        self.inner = inner
        self.description = description

    def search(self, query: str, k: int = 5) -> list[Hit]:
        return self.inner.search(query, k)

    def candidates(self, query: str, k: int) -> Candidates:
        return candidates_of(self.inner, query, k)

    def titled(self, title: str) -> Hit | None:
        titled = getattr(self.inner, "titled", None)
        return titled(title) if titled is not None else None


RETRIEVER_SAYS = {
    "bm25": "BM25 word match over the local corpus",
    "dense": "the embedding model's vectors (cosine similarity)",
    "hybrid": "BM25 and the embedding model's vectors fused by reciprocal rank, then the hops followed "
    "(the documents the question and the best passages name)",
}
RERANKER_SAYS = {
    "none": "the first stage's order",
    "builtin": "the first stage's order fused with the embedding model's cosine order",
    "llm": "the run's model judges each document (one call per document)",
    "endpoint": "the /rerank endpoint at THOUGHTMAP_RERANK_URL",
}


def describe_retrieval(settings: RetrievalSettings, embedder: str | None, notice: str = "") -> list[str]:
    """What searches and reranks, in words, for `thoughtmap methods` and the Settings page.
    `embedder`: the embedding model's description, None when there is none (`notice` says why)."""
    lines = [
        f"retriever (THOUGHTMAP_RETRIEVER): {settings.retriever}: {RETRIEVER_SAYS[settings.retriever]}",
        f"reranker (THOUGHTMAP_RERANKER, where a method reranks: the research agent): {settings.reranker}: "
        f"{RERANKER_SAYS[settings.reranker]}",
    ]
    if embedder:
        lines.append(f"embedding model: {embedder}")
    else:
        lines.append(
            "embedding model: none, so dense retrieval and the builtin reranker fall back to word "
            f"match and the first stage's order{': ' + notice if notice else ''}"
        )
    return lines
