"""The key-value index (MTQA Step 1): entity names are the keys of entities, the LLM's relation
keywords the keys of relations; the values are the chunks they came from (the store's chunk links).
Matching (Step 2 (2)): detailed keywords against entity keys, general keywords against relation keys,
by BM25 (`engine/search/rerank.py`: the same words, stemming and IDF as the rest of search). An
embeddings endpoint could replace BM25 here; none is used yet."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from engine.search.rerank import bm25_term_scores, tokens
from storage.knowledge import GraphContents
from storage.models import KnowledgeEntity, KnowledgeRelation


@dataclass(frozen=True)
class Matched:
    id: int
    score: float


class KeyIndex:
    """A graph's keys, matched to keywords. Built from the graph's contents; immutable."""

    def __init__(self, contents: GraphContents) -> None:
        self.entities: dict[int, KnowledgeEntity] = {e.id: e for e in contents.entities}  # type: ignore[misc]
        self.relations: dict[int, KnowledgeRelation] = {r.id: r for r in contents.relations}  # type: ignore[misc]
        self.entity_by_key: dict[str, KnowledgeEntity] = {e.key: e for e in contents.entities}
        self._entity_ids = list(self.entities)
        # Keys counted into terms once: a collection's graph is matched by every run that reads it.
        self._entity_keys = [Counter(tokens(e.name)) for e in contents.entities]
        self._relation_ids = list(self.relations)
        self._relation_keys = [Counter(tokens(" ; ".join(r.keywords))) for r in contents.relations]

    def match_entities(self, keywords: Sequence[str], top_k: int) -> list[Matched]:
        return _top(keywords, self._entity_ids, self._entity_keys, top_k)

    def match_relations(self, keywords: Sequence[str], top_k: int) -> list[Matched]:
        return _top(keywords, self._relation_ids, self._relation_keys, top_k)


def _top(keywords: Sequence[str], ids: list[int], keys: list[Counter[str]], top_k: int) -> list[Matched]:
    """The `top_k` keys that share a word with the keywords, best first (ties: the older key)."""
    if top_k <= 0 or not keywords or not keys:
        return []
    scores = bm25_term_scores(" ".join(keywords), keys)
    order = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: (-scores[i], i))
    return [Matched(ids[i], scores[i]) for i in order[:top_k]]
