"""Dense retrieval over the local corpus: the query's embedding against every chunk's, exactly.

The chunks' vectors live in the corpus index (`engine/search/vectors.py`; the bundled corpus's are
shipped, uploads are embedded as they are ingested). The query is embedded by the same model: the
vectors of two models never meet (the index keeps them apart by model name).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.search.embeddings import Embedder
from engine.search.local import LocalCorpusSearcher, corpus_hit, corpus_ref
from engine.search.protocol import Hit, Ranking
from engine.search.vectors import VectorIndex
from storage.corpus_store import ChunkHit


class DenseSearcher:
    """A `Searcher` by cosine similarity of the built-in (or configured) embedder's vectors."""

    def __init__(self, corpus: LocalCorpusSearcher, index: VectorIndex, embedder: Embedder) -> None:
        self.corpus = corpus
        self.store = corpus.store
        self.index = index
        self.embedder = embedder

    @property
    def description(self) -> str:
        return f"local corpus by {self.embedder.description}"

    def search(self, query: str, k: int = 5) -> list[Hit]:
        return [corpus_hit(chunk) for chunk in self._chunks(query, k)]

    def ranking(self, query: str, k: int) -> Ranking:
        """`search`'s order as refs (`Ranking`): the hits kept are made as `search` makes them."""
        first: dict[str, ChunkHit] = {}
        refs = []
        for chunk in self._chunks(query, k):
            refs.append(corpus_ref(chunk))
            first.setdefault(refs[-1], chunk)

        def hits(kept: Sequence[str], scores: Sequence[float]) -> list[Hit]:
            return [corpus_hit(first[ref], score=score) for ref, score in zip(kept, scores)]

        return Ranking(refs, hits, list)

    def _chunks(self, query: str, k: int) -> list[ChunkHit]:
        """The `k` chunks nearest the query's vector, best first, each with its cosine."""
        if k <= 0 or not query.strip():
            return []
        vector = np.asarray(self.embedder.embed([query])[0], dtype=np.float32)
        ranked = self.index.search(vector, k)
        # Scores go with their ids: a chunk deleted since the search is left out, not misaligned.
        return self.store.chunk_hits([chunk_id for chunk_id, _ in ranked], [score for _, score in ranked])

    def titled(self, title: str) -> Hit | None:
        return self.corpus.titled(title)
