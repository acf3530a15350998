"""`StoredKnowledgeBase`: the `KnowledgeBase` a run gets, over one stored graph.

Per question, the graph is the run's own (deleted with it) and grows with the documents the run
adds; per collection, it was built by `thoughtmap kg build` and is only read. Retrieval (MTQA Step 2):
the question's detailed keywords matched to entity keys and its general keywords to relation keys
(`index.py`: by the run's embedder and BM25, fused; by BM25 alone without an embedder or when it
fails, which `on_embedding_error` is told once per failure), the matched entities (and the ends of
matched relations) expanded 1..hops relations away (`expand.py`), and every chunk those entities and
relations came from made a knowledge unit: the chunk as a citable `Hit`, with the reached triples and
entities extracted from it. The keys' vectors are made ahead, so retrieval, which follows, embeds
only the keywords: a question's graph's as each chunk's answer comes (`add_documents`), while the
other chunks are still being extracted; a collection's while the model is asked for the keywords
(`keywords`).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from engine.knowledge.browse import chunk_hit, neighbourhood, triple
from engine.knowledge.chunks import chunk_documents
from engine.knowledge.expand import adjacency, expand
from engine.knowledge.extract import EXTRACT_MAX_TOKENS, PURPOSE, Asker, ChunkExtractor, Parallel
from engine.knowledge.index import KeyIndex, OnError, embeds_level, relation_key_text
from engine.knowledge.merge import MAX_KEYWORD_CHARS, clean
from engine.knowledge.prompts import KEYWORDS
from engine.knowledge.schemas import QuestionKeywords
from engine.knowledge.units import (
    BuildProgress,
    Entity,
    Keywords,
    KnowledgeScope,
    KnowledgeUnit,
    Neighbourhood,
    Triple,
)
from engine.llm.protocol import StructuredOutputError
from engine.names import content_words, proper_names
from engine.search.embeddings import Embedder, EmbeddingError, remembering
from engine.search.protocol import Hit
from storage.knowledge import EntityInput, KnowledgeStore, RelationInput
from storage.models import KnowledgeChunkStatus, KnowledgeEntity, KnowledgeGraph, KnowledgeRelation, stored_id

log = logging.getLogger(__name__)

KEYWORDS_MAX_TOKENS = 300
# Entities kept per hop of the expansion, the most connected first (see expand.expand).
NEIGHBOURS_PER_HOP = 50
# An entity reached at hop h adds HOP_WEIGHT**h to its chunks' scores; a matched key adds its match
# score (index.py: BM25's and cosine's fused, or BM25's) over the best one of its level (so at most
# 1). Chunks rank by their best matched key first, then by that sum: a chunk naming what the question
# asks about comes before one that only names many of its neighbours (summed, three neighbours
# outranked the matched entity's own passage).
HOP_WEIGHT = 0.5
# A chunk whose answers stayed unusable this many times is not asked again by a run (a collection
# build, started by the user, tries its failed chunks once more each time).
MAX_CHUNK_ATTEMPTS = 3


class KnowledgeError(ValueError):
    """The knowledge base cannot do what was asked (the message says why and what to do)."""


@dataclass
class GraphView:
    """What retrieval reads of a graph (its key index and who neighbours whom), at one version."""

    version: tuple[str, int]  # the graph's key and version (KnowledgeStore.version)
    index: KeyIndex
    neighbours: dict[str, set[str]]


class GraphViews:
    """Graph views kept while their graph does not change: every run reading a collection's graph
    shares one view instead of loading the graph again. Bounded: the least recently used goes."""

    def __init__(self, store: KnowledgeStore, keep: int = 8) -> None:
        self._store = store
        self._keep = keep
        self._views: OrderedDict[int, GraphView] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, graph_id: int) -> GraphView:
        # With the key: SQLite gives a deleted run's graph id to the next graph, which reaches the
        # same version number too, and must not be served the deleted graph's view.
        version = self._store.version(graph_id)
        with self._lock:
            view = self._views.get(graph_id)
            if view is not None and view.version == version:
                self._views.move_to_end(graph_id)
                return view
        # Read after the version: a merge in between makes the next reader build it again.
        contents = self._store.contents(graph_id)
        # The same graph grown (same key): its keys' vectors are reused, only new keys are embedded.
        previous = view.index if view is not None and view.version[0] == version[0] else None
        view = GraphView(
            version,
            KeyIndex(contents, previous=previous),
            adjacency((r.source_key, r.target_key) for r in contents.relations),
        )
        with self._lock:
            self._views[graph_id] = view
            self._views.move_to_end(graph_id)
            while len(self._views) > self._keep:
                self._views.popitem(last=False)
        return view


class StoredKnowledgeBase:
    def __init__(
        self,
        store: KnowledgeStore,
        graph: KnowledgeGraph,
        *,
        ask: Asker,
        parallel: Parallel,
        writable: bool,
        views: GraphViews | None = None,
        checkpoint: Callable[[], None] | None = None,
        extract_max_tokens: int = EXTRACT_MAX_TOKENS,
        embedder: Embedder | None = None,
        on_embedding_error: OnError | None = None,
    ) -> None:
        self._store = store
        self.graph_id: int = graph.id  # type: ignore[assignment]
        self.key = graph.key
        self.scope: KnowledgeScope = graph.scope  # type: ignore[assignment]
        self.chunk_tokens = graph.chunk_tokens
        self.collection = graph.collection
        self._ask = ask
        self._writable = writable
        self._parallel = parallel
        self._views = views or GraphViews(store, keep=1)
        # Keys are matched by meaning with it (index.py); without it, or when it fails, by BM25. A
        # graph that grows here embeds its keys ahead, so its embedder remembers what it embedded:
        # retrieval does not embed them again. A collection's graph is only read (its keys' vectors
        # are kept by its shared index, `GraphViews`).
        self._embedder = remembering(embedder) if embedder is not None and writable else embedder
        # With an embedder, each chunk's keys are queued as its answer comes and embedded once it is
        # merged, in the thread that asked it, while the other chunks are still being extracted:
        # retrieval finds them made.
        self._extractor = ChunkExtractor(
            store,
            self.graph_id,
            ask,
            parallel,
            checkpoint,
            extract_max_tokens,
            on_extracted=self._queue_keys if embedder is not None else None,
            on_merged=self._embed_queued_keys if embedder is not None else None,
        )
        self._on_embedding_error = on_embedding_error
        self._told: set[str] = set()  # embedding failures already told: once each, not every retrieval
        self._queued_keys = _QueuedKeys()  # guarded by `_queue_lock`, as is the next
        self._seen_keys = _QueuedKeys()  # every key queued by this graph, to tell a level too big to embed
        self._queue_lock = threading.Lock()
        self._embedding_keys = threading.Lock()

    # ------------------------------------------------------------------ building

    def add_documents(self, documents: Sequence[Hit]) -> BuildProgress:
        if not self._writable:
            raise KnowledgeError(
                f"the graph of collection '{self.collection}' is built with `thoughtmap kg build --collection "
                f"{self.collection}`; a run reads it. Add a run's own documents to the question scope."
            )
        chunks = chunk_documents(documents, self.chunk_tokens)
        if chunks:
            self._store.add_chunks(self.graph_id, chunks)
            stored = self._store.chunks_by_keys(self.graph_id, [c.key for c in chunks])
            # Failed chunks too (a resumed run tries them again), a few times at most; done ones never.
            todo = sorted(
                (
                    c
                    for c in stored
                    if c.status == KnowledgeChunkStatus.PENDING
                    or (c.status == KnowledgeChunkStatus.FAILED and c.attempts < MAX_CHUNK_ATTEMPTS)
                ),
                key=stored_id,
            )
            if todo:
                self._extractor.extract(todo)
        return self.progress()

    def progress(self) -> BuildProgress:
        counts = self._store.counts(self.graph_id)
        return BuildProgress(
            chunks_done=counts.chunks_done,
            chunks_total=counts.chunks_total,
            entities=counts.entities,
            relations=counts.relations,
            failed_chunks=counts.chunks_failed,
        )

    # ------------------------------------------------------------------ keywords

    def keywords(self, question: str) -> Keywords:
        def ask() -> QuestionKeywords | None:
            try:
                return self._ask(
                    KEYWORDS.render(question=question),
                    QuestionKeywords,
                    purpose=PURPOSE,
                    max_tokens=KEYWORDS_MAX_TOKENS,
                )
            except StructuredOutputError:
                return None

        # The keys are embedded while the model thinks of the keywords: retrieval, which comes next,
        # then finds their vectors made (a question's graph of 10 documents: about 0.3 s of CPU on
        # 2 cores, otherwise spent after the call). A question's graph has them made already, as its
        # chunks' answers came; a collection's graph, built by another process, has them made here.
        answer = ask() if self._embedder is None else self._parallel([ask, self._embed_keys])[0]
        if answer is None:
            return keywords_from_words(question)
        detailed = _clean_keywords(answer.detailed)
        general = _clean_keywords(answer.general)
        if not detailed and not general:
            return keywords_from_words(question)
        return Keywords(detailed=detailed, general=general)

    # ------------------------------------------------------------------ retrieval

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
        view = self._views.get(self.graph_id)
        index = view.index
        weights: dict[tuple[str, int], float] = {}  # ("entity"|"relation", id) -> weight
        vias: dict[tuple[str, int], str] = {}
        entity_hits = index.match_entities(
            keywords.detailed, top_k, embedder=self._embedder, on_error=self._embedding_failed
        )
        relation_hits = index.match_relations(
            keywords.general, top_k, embedder=self._embedder, on_error=self._embedding_failed
        )
        for level, hits in (("entity", entity_hits), ("relation", relation_hits)):
            best = max((h.score for h in hits), default=0.0) or 1.0
            for hit in hits:
                weights[(level, hit.id)] = hit.score / best
                vias[(level, hit.id)] = level
        seeds = {index.entities[h.id].key for h in entity_hits}
        for hit in relation_hits:
            relation = index.relations[hit.id]
            seeds |= {relation.source_key, relation.target_key}
        distance = expand(seeds, view.neighbours, hops, per_hop=NEIGHBOURS_PER_HOP)
        reached_entities = [index.entity_by_key[k] for k in distance if k in index.entity_by_key]
        for entity in reached_entities:
            hop = distance[entity.key]
            if hop > 0:
                weights[("entity", stored_id(entity))] = HOP_WEIGHT**hop
                vias[("entity", stored_id(entity))] = f"hop{hop}"
        matched_relations = {h.id for h in relation_hits}
        reached_relations = [
            r
            for r in index.relations.values()
            if r.id in matched_relations or (r.source_key in distance and r.target_key in distance)
        ]
        return self._units(
            index,
            reached_entities,
            reached_relations,
            weights,
            vias,
            with_triples=with_triples,
            with_text=with_text,
            max_units=max_units,
        )

    def _queue_keys(self, entities: Sequence[EntityInput], relations: Sequence[RelationInput]) -> None:
        """Queue the keys a chunk's answer brings (its entities' names, its relations' keywords) as it
        comes. Mostly they are the index's keys; not quite: a relation met again has its keywords
        merged (retrieval embeds that key), an entity met again keeps its first name (the new
        spelling is embedded for nothing), and a chunk whose merge raised leaves its keys queued for
        the next embedding."""
        names, keywords = [e.name for e in entities], [relation_key_text(r) for r in relations]
        with self._queue_lock:
            for keys in (self._queued_keys, self._seen_keys):
                keys.entities.update(dict.fromkeys(names))
                keys.relations.update(dict.fromkeys(keywords))

    def _embed_queued_keys(self) -> None:
        """Embed every key queued so far, once a chunk is merged, in the thread that asked it: a head
        start only. One embedding at a time, of all that is queued when it starts: answers that
        come together are embedded in one call (batched on every core), not each on its own in a
        crowd of calls. Returns once this chunk's keys are embedded, here or by the thread before.
        A level of more keys than are embedded (`index.embeds_level`) is matched by BM25 alone: once
        the keys it has queued for a level pass that, they are not embedded (counted here, not read
        from the store: a graph grown by an earlier process may still embed ahead a level retrieval
        will not use). Nothing it meets fails the extraction; retrieval embeds what is missing and
        tells what fails."""
        assert self._embedder is not None
        with self._embedding_keys:
            with self._queue_lock:
                queued, self._queued_keys = self._queued_keys, _QueuedKeys()
                embedded = embeds_level(len(self._seen_keys.entities)), embeds_level(len(self._seen_keys.relations))
            if not queued.entities and not queued.relations:
                return
            try:
                texts = [*(queued.entities if embedded[0] else ()), *(queued.relations if embedded[1] else ())]
                if texts:
                    self._embedder.embed(list(dict.fromkeys(texts)))
            except Exception:  # noqa: BLE001 - retrieval meets the same failure and says it
                log.debug("the keys of merged chunks could not be embedded ahead", exc_info=True)

    def _embed_keys(self) -> None:
        """Make the graph's key vectors now (retrieval reuses them). A failure is left to retrieval,
        which embeds again and tells it. Only called with an embedder. One embedding of keys at a
        time: keys queued as a chunk's answer came are not embedded here as well, meanwhile."""
        assert self._embedder is not None
        with self._embedding_keys:
            index = self._views.get(self.graph_id).index
            for level in (index.entity_keys, index.relation_keys):
                if level.texts:
                    try:
                        level.vectors(self._embedder)
                    except EmbeddingError:
                        return

    def _embedding_failed(self, exc: EmbeddingError) -> None:
        if self._on_embedding_error is not None and str(exc) not in self._told:
            self._told.add(str(exc))
            self._on_embedding_error(exc)

    def around(self, name: str, *, limit: int = 20) -> Neighbourhood | None:
        return neighbourhood(self._store, self.graph_id, name, limit=limit)

    def _units(
        self,
        index: KeyIndex,
        entities: list[KnowledgeEntity],
        relations: list[KnowledgeRelation],
        weights: dict[tuple[str, int], float],
        vias: dict[tuple[str, int], str],
        *,
        with_triples: bool,
        with_text: bool,
        max_units: int,
    ) -> list[KnowledgeUnit]:
        """One unit per chunk the reached entities and relations came from, best first."""
        score: dict[int, float] = {}
        direct: dict[int, float] = {}  # the chunk's best matched key (entity or relation), 0 for none
        via: dict[int, list[str]] = {}
        chunk_entities: dict[int, list[KnowledgeEntity]] = {}
        chunk_relations: dict[int, list[KnowledgeRelation]] = {}
        by_entity = self._store.entity_chunks([stored_id(e) for e in entities])
        by_relation = self._store.relation_chunks([stored_id(r) for r in relations])
        for level, items, links in (("entity", entities, by_entity), ("relation", relations, by_relation)):
            for item in items:
                for chunk_id in links.get(stored_id(item), []):
                    if isinstance(item, KnowledgeEntity):
                        chunk_entities.setdefault(chunk_id, []).append(item)
                    else:
                        chunk_relations.setdefault(chunk_id, []).append(item)
                    weight = weights.get((level, stored_id(item)), 0.0)
                    score[chunk_id] = score.get(chunk_id, 0.0) + weight
                    how = vias.get((level, stored_id(item)))
                    if how in ("entity", "relation"):
                        direct[chunk_id] = max(direct.get(chunk_id, 0.0), weight)
                    if how and how not in via.setdefault(chunk_id, []):
                        via[chunk_id].append(how)
        chosen = sorted(score, key=lambda c: (-direct.get(c, 0.0), -score[c], c))[: max(0, max_units)]
        chunks = {c.id: c for c in self._store.chunks_by_ids(chosen)}
        units = []
        for chunk_id in chosen:
            hit = chunk_hit(chunks[chunk_id], score[chunk_id], with_text)
            triples = tuple(_triple(index, r) for r in chunk_relations.get(chunk_id, [])) if with_triples else ()
            facts = (
                tuple(Entity(e.name, e.type, e.description) for e in chunk_entities.get(chunk_id, []))
                if with_triples
                else ()
            )
            units.append(
                KnowledgeUnit(
                    id=f"kg{self.graph_id}-c{chunk_id}",
                    hit=hit,
                    triples=triples,
                    score=score[chunk_id],
                    via=tuple(sorted(via.get(chunk_id, []))),
                    entities=facts,
                )
            )
        return units


@dataclass
class _QueuedKeys:
    """Keys queued for embedding ahead (or all those seen), by level, each once, in the order they came."""

    entities: dict[str, None] = field(default_factory=dict)
    relations: dict[str, None] = field(default_factory=dict)


def _triple(index: KeyIndex, relation: KnowledgeRelation) -> Triple:
    def name(key: str) -> str:
        entity = index.entity_by_key.get(key)
        return entity.name if entity is not None else key

    return triple(relation, name)


def _clean_keywords(words: Sequence[str]) -> tuple[str, ...]:
    out: list[str] = []
    for word in words:
        word = clean(word, MAX_KEYWORD_CHARS)
        if word and word.casefold() not in {w.casefold() for w in out}:
            out.append(word)
    return tuple(out)


def keywords_from_words(question: str) -> Keywords:
    """Keywords read from the question itself: its names are the detailed ones, its other content
    words the general ones (used when the model's answer is unusable)."""
    names = proper_names(question)
    name_words = {w.lower() for name in names for w in name.split()}
    general = content_words(question, skip=name_words, limit=8)
    return Keywords(detailed=tuple(names[:8]) or tuple(general[:3]), general=tuple(general), from_model=False)
