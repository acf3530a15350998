"""The embeddings seam: semantic similarity where the papers use it, BM25 where no model is at hand.

OmniThink retrieves each section's evidence by Sentence-BERT similarity; MTQA's key matching and a
deep-research reranker can use the same seam. An `Embedder` is either a client of an
OpenAI-compatible `/embeddings` endpoint (Ollama, vLLM, llama.cpp's server with `--embeddings`,
OpenAI), configured by `THOUGHTMAP_EMBEDDINGS_URL` and `THOUGHTMAP_EMBEDDINGS_MODEL` (key:
`THOUGHTMAP_EMBEDDINGS_KEY`), or, when none is configured, the built-in all-MiniLM-L6-v2 on the CPU
(`engine/search/builtin_embedder.py`; deterministic, so `--llm fake` runs stay reproducible). When
neither is there (the built-in model missing or damaged), `top_for_each` ranks by BM25 over the same
texts (`engine/search/rerank.py`).

- `Embedder`: `description`, `embed(texts) -> list[vector]` (one vector per text, in order);
  failures are `EmbeddingError` (a `SearchError`).
- `OpenAIEmbeddings`: the client, through the `openai` package's `embeddings.create` (floats asked
  for explicitly: not every server speaks base64), in batches; the endpoint's URL is shown redacted.
- `EmbeddingReranker`: the `Reranker` protocol by cosine similarity, for the rerankers to come.
- `RememberingEmbedder` (`remembering(embedder)`): an embedder that keeps the vectors it made, for
  texts embedded ahead of the call that needs them (a question graph's keys, `engine/knowledge`).
- `top_for_each(queries, hits, k, embedder)`: each query's best k hits, with how they were ranked
  (one embedding call for all queries and hits; BM25 when there is no embedder or the call failed).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from operator import mul
from typing import Any, Protocol, runtime_checkable

from engine.config import DEFAULT_EMBEDDINGS_MODEL, EmbeddingsSettings
from engine.redact import redact_url
from engine.search.protocol import Hit, SearchError
from engine.search.rerank import BM25Reranker

Vector = list[float]
DEFAULT_MODEL = DEFAULT_EMBEDDINGS_MODEL
BATCH = 64  # texts per request: well under every server's limit
HIT_CHARS = 2000  # what of a hit is embedded: its title and opening text
REMEMBERED_TEXTS = 10_000  # texts a `RememberingEmbedder` keeps the vectors of


class EmbeddingError(SearchError):
    """The embeddings endpoint failed or answered something unusable."""


@runtime_checkable
class Embedder(Protocol):
    @property
    def description(self) -> str:
        """Which model at which endpoint, for a node's data and the 'running on' notice."""
        ...

    def embed(self, texts: Sequence[str]) -> list[Vector]: ...


class OpenAIEmbeddings:
    """An `Embedder` over an OpenAI-compatible `/embeddings` endpoint."""

    def __init__(self, settings: EmbeddingsSettings, *, client: Any = None) -> None:
        self.settings = settings
        if client is None:
            import openai

            client = openai.OpenAI(
                api_key=settings.api_key or "not-needed",
                base_url=settings.base_url.rstrip("/"),
                timeout=settings.timeout_s,
                max_retries=2,
            )
        self._client = client

    @property
    def description(self) -> str:
        return f"embeddings {self.settings.model} at {redact_url(self.settings.base_url)}"

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        vectors: list[Vector] = []
        for start in range(0, len(texts), BATCH):
            batch = [text if text.strip() else " " for text in texts[start : start + BATCH]]
            vectors.extend(self._embed_batch(batch))
        return vectors

    def _embed_batch(self, batch: list[str]) -> list[Vector]:
        import openai

        try:
            response = self._client.embeddings.create(model=self.settings.model, input=batch, encoding_format="float")
        except openai.OpenAIError as exc:
            raise EmbeddingError(
                f"{self.description} failed: {type(exc).__name__}: {exc}"[:500],
                hint="check THOUGHTMAP_EMBEDDINGS_URL and THOUGHTMAP_EMBEDDINGS_MODEL",
            ) from exc
        data = sorted(response.data, key=lambda item: item.index)
        if len(data) != len(batch) or not all(isinstance(item.embedding, list) and item.embedding for item in data):
            raise EmbeddingError(f"{self.description} returned {len(data)} vectors for {len(batch)} texts")
        return [[float(x) for x in item.embedding] for item in data]


class RememberingEmbedder:
    """An `Embedder` that remembers the vectors its inner one made (of the last `limit` texts, as
    float32 rows), so texts embedded ahead of the call that needs them (a question graph's keys, as
    each chunk's answer comes) are not embedded again. Texts asked by two threads at once may be
    embedded twice: it spares work, it does not promise uniqueness. Vectors of the wrong count, of
    no or unequal size, or of another size than those kept are an `EmbeddingError`, and none of that
    call's is kept. Use `remembering`."""

    remembers_texts = True

    def __init__(self, inner: Embedder, *, limit: int = REMEMBERED_TEXTS) -> None:
        self._inner = inner
        self._limit = limit
        self._vectors: OrderedDict[str, Any] = OrderedDict()  # text -> float32 row (numpy)
        self._dims: int | None = None
        self._lock = threading.Lock()

    @property
    def description(self) -> str:
        return self._inner.description

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        with self._lock:
            known = {text: self._vectors[text] for text in texts if text in self._vectors}
            for text in known:
                self._vectors.move_to_end(text)
        missing = list(dict.fromkeys(text for text in texts if text not in known))
        if missing:
            rows = self._checked(self._inner.embed(missing), len(missing))
            known.update(zip(missing, rows))
            with self._lock:
                self._vectors.update(zip(missing, rows))
                while len(self._vectors) > self._limit:
                    self._vectors.popitem(last=False)
        return [known[text].tolist() for text in texts]

    def _checked(self, vectors: Sequence[Vector], count: int) -> Any:
        rows = float32_rows(vectors, count, self.description)
        with self._lock:
            if self._dims is not None and rows.shape[1] != self._dims:
                raise EmbeddingError(
                    f"{self.description} gave vectors of {rows.shape[1]} dimensions, before of {self._dims}"
                )
            self._dims = rows.shape[1]
        return rows


def float32_rows(vectors: Sequence[Sequence[float]], count: int, description: str) -> Any:
    """An embedder's answer for `count` texts as a float32 matrix (numpy), one row per text;
    `EmbeddingError` when the vectors are not `count` vectors of one size, at least 1."""
    import numpy as np  # not at import: the CLI's start-up loads this module

    try:
        rows = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise EmbeddingError(f"{description} returned vectors of unequal or non-numeric size") from exc
    if rows.ndim != 2 or rows.shape[0] != count or not rows.shape[1]:
        raise EmbeddingError(f"{description} returned {rows.shape[0] if rows.ndim else 0} vectors for {count} texts")
    return rows


def remembering(embedder: Embedder) -> Embedder:
    """`embedder` if it remembers what it embedded (the built-in one does), else it wrapped so."""
    return embedder if getattr(embedder, "remembers_texts", False) else RememberingEmbedder(embedder)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    # map(mul): the same products added in the same order as a generator's, at twice its speed.
    dot = sum(map(mul, a, b))
    norm = math.sqrt(sum(map(mul, a, a))) * math.sqrt(sum(map(mul, b, b)))
    return dot / norm if norm else 0.0


def hit_text(hit: Hit) -> str:
    return f"{hit.title}\n{hit.text or hit.snippet}"[:HIT_CHARS]


def _top(scores: Sequence[float], k: int) -> list[int]:
    # Best first; equal scores keep the hits' order (deterministic).
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:k]


class EmbeddingReranker:
    """The `Reranker` protocol by cosine similarity of the query's and each hit's embedding."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    @property
    def description(self) -> str:
        return f"cosine similarity of {self.embedder.description}"

    def rerank(self, query: str, hits: Sequence[Hit], k: int) -> list[Hit]:
        if k <= 0 or not hits:
            return []
        vectors = self.embedder.embed([query, *(hit_text(h) for h in hits)])
        scores = [cosine(vectors[0], v) for v in vectors[1:]]
        return [replace(hits[i], score=scores[i]) for i in _top(scores, k)]


@dataclass(frozen=True)
class Ranked:
    """Each query's best hits (with their scores), and how they were ranked."""

    per_query: list[list[Hit]]
    by: str  # "embeddings: <description>" or "bm25" (with why, when embeddings failed)


def top_for_each(
    queries: Sequence[str],
    hits: Sequence[Hit],
    k: int,
    embedder: Embedder | None = None,
    *,
    on_error: Callable[[EmbeddingError], None] | None = None,
) -> Ranked:
    """Each query's top `k` hits: by cosine similarity when an embedder is given (every hit ranks,
    as Sentence-BERT retrieval does), else by BM25 (a hit sharing no word with the query is left
    out: it is not evidence). One embedding request covers all queries and hits; if it fails, BM25
    ranks and `on_error` is told."""
    if not hits or not queries:
        return Ranked([[] for _ in queries], "none")
    if embedder is not None:
        try:
            vectors = embedder.embed([*queries, *(hit_text(h) for h in hits)])
            query_vectors, hit_vectors = vectors[: len(queries)], vectors[len(queries) :]
            per_query = []
            for qv in query_vectors:
                scores = [cosine(qv, hv) for hv in hit_vectors]
                per_query.append([replace(hits[i], score=scores[i]) for i in _top(scores, k)])
            return Ranked(per_query, f"embeddings: {embedder.description}")
        except EmbeddingError as exc:
            if on_error is not None:
                on_error(exc)
            fallback = f"bm25 (embeddings failed: {exc})"[:300]
        else:  # pragma: no cover - returned above
            fallback = "bm25"
    else:
        fallback = "bm25"
    reranker = BM25Reranker()
    per_query = [[h for h in reranker.rerank(query, hits, k) if h.score > 0] for query in queries]
    return Ranked(per_query, fallback)


__all__ = [
    "Embedder",
    "EmbeddingError",
    "EmbeddingReranker",
    "EmbeddingsSettings",
    "OpenAIEmbeddings",
    "Ranked",
    "cosine",
    "top_for_each",
]
