"""A stored knowledge graph read by a person, around one entity at a time (the app's graph browser;
MTQA, issue 14): the entity, its relations as triples, the chunks it came from as citable hits, and
names to look an entity up by. No LLM call, nothing written; the whole graph is never loaded."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.knowledge.drawing import GraphDrawing, draw
from engine.knowledge.merge import entity_key
from engine.knowledge.units import Entity, Neighbourhood, Triple
from engine.search.protocol import Hit
from storage.knowledge import GraphCounts, KnowledgeStore
from storage.models import KnowledgeChunk, KnowledgeGraph, KnowledgeRelation, stored_id

SNIPPET_CHARS = 300


def neighbourhood(store: KnowledgeStore, graph_id: int, name: str, *, limit: int = 20) -> Neighbourhood | None:
    """The entity named `name` (matched as dedup matches names) with at most `limit` of its relations
    and of its source chunks, and how many of each it has; None when the graph has no such entity."""
    key = entity_key(name)
    found = store.entities_by_keys(graph_id, [key]) if key else []
    if not found:
        return None
    entity = found[0]
    relations, relations_total = store.relations_of(graph_id, key, limit)
    ends = {
        e.key: e.name
        for e in store.entities_by_keys(graph_id, [k for r in relations for k in (r.source_key, r.target_key)])
    }
    chunks, sources_total = store.chunks_of_entity(stored_id(entity), limit)
    return Neighbourhood(
        entity=Entity(entity.name, entity.type, entity.description),
        triples=tuple(triple(r, lambda k: ends.get(k, k)) for r in relations),
        sources=tuple(chunk_hit(c) for c in chunks),
        relations_total=relations_total,
        sources_total=sources_total,
    )


def triple(relation: KnowledgeRelation, name_of: Callable[[str], str]) -> Triple:
    """A stored relation as a triple, its ends named as the graph names them (`name_of`: key -> name)."""
    return Triple(
        subject=name_of(relation.source_key),
        relation=", ".join(relation.keywords) or "related to",
        object=name_of(relation.target_key),
        description=relation.description,
    )


def chunk_hit(chunk: KnowledgeChunk, score: float = 0.0, with_text: bool = True) -> Hit:
    """A chunk as a citable source: the document's ref, title, URL and kind, and the chunk's text."""
    text = chunk.text if with_text else ""
    return Hit(
        title=chunk.title,
        ref=chunk.ref,
        snippet=text[:SNIPPET_CHARS],
        text=text,
        kind=chunk.kind,  # type: ignore[arg-type]
        url=chunk.url,
        score=score,
    )


@dataclass
class GraphBrowser:
    """One stored graph, read only: what it holds, an entity's neighbourhood, names to look up."""

    store: KnowledgeStore
    graph: KnowledgeGraph

    @property
    def key(self) -> str:
        return self.graph.key

    @property
    def graph_id(self) -> int:
        return stored_id(self.graph)

    def counts(self) -> GraphCounts:
        return self.store.counts(self.graph_id)

    def around(self, name: str, *, limit: int = 20) -> Neighbourhood | None:
        return neighbourhood(self.store, self.graph_id, name, limit=limit)

    def drawing(
        self, focus_names: Sequence[str], *, around: bool, cap: int | None = None, first: Sequence[tuple[str, str]] = ()
    ) -> GraphDrawing:
        """The part of the graph to draw around `focus_names` (or the whole graph), capped, the
        relations of the `first` pairs before the others (`drawing.py`)."""
        return draw(self.store, self.graph_id, focus_names, around=around, cap=cap, first=first)

    def names(self, text: str, *, limit: int = 10) -> list[str]:
        """At most `limit` entity names for typed text: those starting with it (shortest first), then
        those containing it; matched as dedup matches names (case, spacing, quotes, a leading "the")."""
        fragment = entity_key(text)
        return [e.name for e in self.store.find_entities(self.graph_id, fragment, limit)]

    def known(self, names: Sequence[str]) -> list[str]:
        """Those of `names` the graph holds, as the graph names them, in the given order, once each."""
        keys = [entity_key(n) for n in names]
        rows = self.store.entities_by_keys(self.graph_id, [k for k in keys if k])
        stored = {e.key: e.name for e in rows}
        return list(dict.fromkeys(stored[k] for k in keys if k in stored))
