"""The key-value index (MTQA Step 1): entity names are the keys of entities, the LLM's relation
keywords the keys of relations; the values are the chunks they came from (the store's chunk links).

Matching (Step 2 (2)): detailed keywords against entity keys, general keywords against relation keys,
"in the vector database" as the paper says, when an `Embedder` is given (the run's, `ctx.embedder`):
- Keys are embedded once per index, one batched call per level the first time an embedder matches
  it. A graph's index is shared by every run while the graph does not change (`stored.GraphViews`),
  and a grown graph's new index reuses the old one's vectors, so only new keys are embedded. Vectors
  are float32 rows of unit length: cosine is one matrix product.
- Each keyword is embedded on its own and a key scores its best cosine over the keywords (not one
  vector of the joined keywords, as LightRAG's code does). The paper makes keys "individual words or
  short phrases ... used as query terms" and matches the extracted keywords to them: a short phrase
  against a short phrase. A joined vector is a phrase unlike any key, between the question's several
  names, so one name can crowd out the other. `benchmarks/bench_kg_keys.py` measures both.
- Keys below `MIN_SIMILARITY` are no cosine match (LightRAG's threshold): a question about nothing in
  the graph seeds nothing, as with BM25, rather than its top_k nearest strangers.
- The cosine order is fused with BM25's (`engine/search/rerank.py`: the words, stemming and IDF of the
  rest of search) by reciprocal rank (`engine/search/fusion.py`), so a key that carries the keyword's
  own words is not lost when a small model puts another name nearer: a key both orders rank high
  comes first, and no constant needs tuning. Scores are the fused ones.

Without an embedder, when it fails (`EmbeddingError`, or vectors of the wrong count or size), or for a
level of more than `MAX_EMBEDDED_KEYS` keys (vectors live in the process, so a whole collection's
graph would be embedded again by every process), keys are matched by BM25 alone and `on_error` is
told why, as OmniThink's `top_for_each` tells its caller.

Keys are in the order of their identity (an entity's normalised name, a relation's pair), not of their
ids: a run's chunks are extracted concurrently, so ids follow whichever answer came first, and ties
(broken by that order) must not change from run to run."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from engine.search.embeddings import Embedder, EmbeddingError, float32_rows
from engine.search.fusion import fuse
from engine.search.rerank import bm25_term_scores, tokens
from storage.knowledge import GraphContents, RelationInput
from storage.models import KnowledgeEntity, KnowledgeRelation, stored_id

# LightRAG's `cosine_better_than_threshold`: below it a key is not a match by meaning.
MIN_SIMILARITY = 0.2
# Keys one level of one graph may embed, once per process and graph. The built-in model took 35-130 ms
# a short key on 2 cores shared with other work (`benchmarks/bench_kg_keys.py`), so this bounds the
# first run that reads a graph to a few minutes. A question's graph of 10 documents has about 100
# keys a level (27 s for its 210 keys, measured on those busy cores), of 50 documents about 750. A
# bigger graph (a whole collection's) is matched by BM25 until key vectors are stored with it.
MAX_EMBEDDED_KEYS = 2000

OnError = Callable[[EmbeddingError], None]


@dataclass(frozen=True)
class Matched:
    id: int
    score: float


class KeyLevel:
    """One level's keys (entity names, or relation keyword strings): their terms for BM25, their
    vectors per embedder (made on first use, under a lock so concurrent runs embed once)."""

    def __init__(self, name: str, ids: list[int], texts: list[str], previous: KeyLevel | None = None) -> None:
        self.name = name
        self.ids = ids
        self.texts = texts
        # Keys counted into terms once: a collection's graph is matched by every run that reads it.
        self._terms = [Counter(tokens(text)) for text in texts]
        self._vectors: dict[str, np.ndarray] = {}  # embedder description -> (keys, dims)
        # The level whose vectors can be reused: the previous one if it has any, else what it would
        # have reused (so a graph that grows unmatched keeps one old level alive, not all of them).
        self._previous: KeyLevel | None = previous if previous is None or previous._vectors else previous._previous
        self._lock = threading.Lock()

    def bm25(self, keywords: Sequence[str]) -> list[tuple[int, float]]:
        """(key position, score) of the keys sharing a word with the keywords, best first (ties: the
        first key in the index's order)."""
        if not keywords or not self.texts:
            return []
        scores = bm25_term_scores(" ".join(keywords), self._terms)
        order = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: (-scores[i], i))
        return [(i, scores[i]) for i in order]

    def cosine(self, keywords: Sequence[str], embedder: Embedder) -> list[tuple[int, float]]:
        """(key position, best cosine over the keywords) of the keys at `MIN_SIMILARITY` or more,
        best first (ties: the first key in the index's order). Raises `EmbeddingError`."""
        if not keywords or not self.texts:
            return []
        keys = self.vectors(embedder)
        queries = _unit_rows(embedder.embed(list(keywords)), len(keywords), embedder)
        if queries.shape[1] != keys.shape[1]:
            raise EmbeddingError(
                f"{embedder.description} gave keywords {queries.shape[1]} dimensions and keys {keys.shape[1]}"
            )
        best = (queries @ keys.T).max(axis=0)
        order = sorted((int(i) for i in np.flatnonzero(best >= MIN_SIMILARITY)), key=lambda i: (-best[i], i))
        return [(i, float(best[i])) for i in order]

    def vectors(self, embedder: Embedder) -> np.ndarray:
        """The keys' unit vectors by `embedder`, embedded once (a previous index's reused)."""
        if not embeds_level(len(self.texts)):
            raise EmbeddingError(
                f"the graph has {len(self.texts):,} {self.name} keys, more than the "
                f"{MAX_EMBEDDED_KEYS:,} embedded per graph"
            )
        model = embedder.description
        with self._lock:
            if model not in self._vectors:
                self._vectors[model] = self._embed(embedder, model)
                self._previous = None  # what it had is copied; the old index may go
            return self._vectors[model]

    def _known(self, model: str) -> dict[str, np.ndarray]:
        previous = self._previous
        if previous is None:
            return {}
        with previous._lock:
            rows = previous._vectors.get(model)
        return {} if rows is None else dict(zip(previous.texts, rows))

    def _embed(self, embedder: Embedder, model: str) -> np.ndarray:
        known = self._known(model)
        missing = list(dict.fromkeys(text for text in self.texts if text not in known))
        if missing:
            known.update(zip(missing, _unit_rows(embedder.embed(missing), len(missing), embedder)))
        dims = {row.shape[0] for row in known.values()}
        if len(dims) > 1:
            raise EmbeddingError(f"{embedder.description} gave vectors of {sorted(dims)} dimensions")
        return np.stack([known[text] for text in self.texts]).astype(np.float32, copy=False)

    def match(
        self, keywords: Sequence[str], top_k: int, embedder: Embedder | None, on_error: OnError | None
    ) -> list[Matched]:
        """The `top_k` best keys: BM25's and the cosine order fused, or BM25's alone (see the module)."""
        if top_k <= 0 or not keywords or not self.texts:
            return []
        lexical = self.bm25(keywords)
        if embedder is not None:
            try:
                semantic = self.cosine(keywords, embedder)
            except EmbeddingError as exc:
                if on_error is not None:
                    on_error(exc)
            else:
                fused = fuse([[i for i, _ in lexical], [i for i, _ in semantic]], key=lambda i: i)
                return [Matched(self.ids[i], score) for i, score in fused[:top_k]]
        return [Matched(self.ids[i], score) for i, score in lexical[:top_k]]


def embeds_level(keys: int) -> bool:
    """Whether a level of this many keys is matched by meaning (else by BM25 alone, see the module)."""
    return keys <= MAX_EMBEDDED_KEYS


def _unit_rows(vectors: Sequence[Sequence[float]], count: int, embedder: Embedder) -> np.ndarray:
    """The embedder's answer as float32 rows of unit length (a zero vector stays zero)."""
    rows: np.ndarray = float32_rows(vectors, count, embedder.description)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms > 0, norms, 1.0)


class KeyIndex:
    """A graph's keys, matched to keywords. Built from the graph's contents; its keys never change
    (their vectors are added on first use). `previous`: the same graph's index before it grew."""

    def __init__(self, contents: GraphContents, *, previous: KeyIndex | None = None) -> None:
        self.entities: dict[int, KnowledgeEntity] = {stored_id(e): e for e in contents.entities}
        self.relations: dict[int, KnowledgeRelation] = {stored_id(r): r for r in contents.relations}
        self.entity_by_key: dict[str, KnowledgeEntity] = {e.key: e for e in contents.entities}
        # In the order of their identity, not their ids (see the module's docstring).
        entities = sorted(contents.entities, key=lambda e: e.key)
        relations = sorted(contents.relations, key=lambda r: r.pair)
        self.entity_keys: KeyLevel = KeyLevel(
            "entity",
            [stored_id(e) for e in entities],
            [e.name for e in entities],
            previous.entity_keys if previous is not None else None,
        )
        self.relation_keys: KeyLevel = KeyLevel(
            "relation",
            [stored_id(r) for r in relations],
            [relation_key_text(r) for r in relations],
            previous.relation_keys if previous is not None else None,
        )

    def match_entities(
        self, keywords: Sequence[str], top_k: int, *, embedder: Embedder | None = None, on_error: OnError | None = None
    ) -> list[Matched]:
        return self.entity_keys.match(keywords, top_k, embedder, on_error)

    def match_relations(
        self, keywords: Sequence[str], top_k: int, *, embedder: Embedder | None = None, on_error: OnError | None = None
    ) -> list[Matched]:
        return self.relation_keys.match(keywords, top_k, embedder, on_error)


def relation_key_text(relation: KnowledgeRelation | RelationInput) -> str:
    """A relation's keys as one text: its keywords, as the LLM summarised the link (stored, or as a
    chunk's answer brings them)."""
    return " ; ".join(relation.keywords)
