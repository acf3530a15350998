"""The knowledge layer's seam (MTQA, paper 004, Steps 1-2): what a method asks of it and gets back.

A method never sees the graph's tables: it gets a `KnowledgeBase` from its run context, adds the
documents it retrieved (per-question scope) or reuses a collection's graph built once (collection
scope), and asks for knowledge units. A knowledge unit is a set of triples together with the source
text they were extracted from, so every unit is citable as the source it came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from engine.search.protocol import Hit

KnowledgeScope = Literal["question", "collection"]


@dataclass(frozen=True)
class Triple:
    """One relation of the graph: subject -[relation]-> object, with the LLM's description."""

    subject: str
    relation: str
    object: str
    description: str = ""


@dataclass(frozen=True)
class Entity:
    """One entity of the graph (deduplicated): its name, type and the merged description."""

    name: str
    type: str = ""
    description: str = ""


@dataclass(frozen=True)
class Keywords:
    """Dual-level keywords of a question: detailed ones are matched to entity keys, generalised ones
    to relation keys."""

    detailed: tuple[str, ...]
    general: tuple[str, ...]
    # False when the model's answer was unusable and the keywords were read from the question's
    # own words (its capitalised names as detailed keywords, its other content words as general).
    from_model: bool = True


@dataclass(frozen=True)
class KnowledgeUnit:
    """Triples plus the source chunk they came from. `hit` is the chunk as a citable source (its `ref`
    is the corpus document id or URL the run stores as a Source)."""

    id: str
    hit: Hit
    triples: tuple[Triple, ...] = ()
    score: float = 0.0
    # How the unit was reached: "entity", "relation", "hop1", "hop2" (for the app and the tests).
    via: tuple[str, ...] = field(default=())
    # The reached entities extracted from this chunk (with their descriptions), besides the triples.
    entities: tuple[Entity, ...] = ()


@dataclass(frozen=True)
class Neighbourhood:
    """The graph around one entity, for a reader to browse: the entity, its relations (as triples)
    and the chunks it and they came from (citable hits)."""

    entity: Entity
    triples: tuple[Triple, ...] = ()
    sources: tuple[Hit, ...] = ()
    # How many the graph holds in all (more than shown when a limit applied).
    relations_total: int = 0
    sources_total: int = 0


@dataclass(frozen=True)
class BuildProgress:
    """Where a graph build stands: chunks extracted so far of all, and what it cost."""

    chunks_done: int
    chunks_total: int
    entities: int
    relations: int
    failed_chunks: int = 0


class KnowledgeBase(Protocol):
    """The knowledge graph a run reads from. Every LLM call it makes goes through the LLM it was
    opened with (the run's, so calls are budgeted, accounted and narrated like any other)."""

    scope: KnowledgeScope
    # The stored graph's key ("run:<id>:<chunk tokens>", "collection:<name>:<chunk tokens>"), so a
    # method can record which graph it read and the app can open it for a reader ("" if not stored).
    key: str

    def add_documents(self, documents: Sequence[Hit]) -> BuildProgress:
        """Chunk the documents and extract entities and relations from every chunk not yet
        extracted (chunks concurrently); merge them into the graph without duplicating. Question
        scope only: a collection's graph is built by `thoughtmap kg build` (`KnowledgeError`)."""
        ...

    def keywords(self, question: str) -> Keywords:
        """The question's detailed and generalised keywords (one LLM call)."""
        ...

    def retrieve(
        self,
        question: str,
        keywords: Keywords,
        *,
        top_k: int,
        hops: int,
        with_triples: bool = True,
        with_text: bool = True,
        max_units: int = 10,
    ) -> list[KnowledgeUnit]:
        """Knowledge units for a question: keys matched to the keywords, expanded 1..hops hops.
        `top_k` keys are matched per level (entities, relations); at most `max_units` units come
        back, best first. `with_triples=False` leaves out triples and entities, `with_text=False`
        the source text (the hit keeps its ref and title, so the unit is still citable)."""
        ...

    def progress(self) -> BuildProgress:
        """Where the graph stands now (chunks extracted of all, entities, relations, failures)."""
        ...

    def around(self, name: str, *, limit: int = 20) -> Neighbourhood | None:
        """The entity named `name` (matched as dedup matches names) with at most `limit` of its
        relations and source chunks; None when the graph has no such entity. No LLM call."""
        ...
