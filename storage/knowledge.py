"""The knowledge graphs' storage (MTQA's knowledge layer): graphs, their chunks with extraction
status, deduplicated entities and relations, and which chunks each came from. `engine/knowledge/`
reaches these tables only through `KnowledgeStore`.

Merging is the engine's rule (how two descriptions or keyword lists become one); the store applies
it inside the transaction that saves a chunk's extraction, so a chunk is either fully merged and
marked done, or not at all (a build killed at any moment resumes without losing or doubling a merge).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import func, insert, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Mapped
from sqlmodel import Session, col, select

from storage.db import Store
from storage.models import (
    KnowledgeChunk,
    KnowledgeChunkStatus,
    KnowledgeEntity,
    KnowledgeEntityChunk,
    KnowledgeGraph,
    KnowledgeGraphStatus,
    KnowledgeRelation,
    KnowledgeRelationChunk,
    stored_id,
    table_of,
    utcnow,
)

# Rows read or written per statement (keeps IN lists and inserts of a large build bounded).
_BATCH = 500
# A merge that lost a race for a new entity's key is read and merged again, this many times at most.
_MERGE_ATTEMPTS = 3


@dataclass(frozen=True)
class ChunkInput:
    """A chunk to register: `key` is the hash of its text (unique per graph)."""

    key: str
    ref: str
    title: str
    text: str
    url: str | None = None
    kind: str = "corpus"


@dataclass(frozen=True)
class EntityInput:
    key: str  # the normalised name
    name: str
    type: str = ""
    description: str = ""


@dataclass(frozen=True)
class RelationInput:
    source_key: str
    target_key: str
    description: str = ""
    keywords: tuple[str, ...] = ()

    @property
    def pair(self) -> str:
        """The relation's identity: its two entity keys sorted, whichever way it was written."""
        return "\x1f".join(sorted((self.source_key, self.target_key)))


@dataclass(frozen=True)
class ChunkExtraction:
    """What one chunk's extraction found, to be merged into the graph."""

    chunk_id: int
    entities: Sequence[EntityInput]
    relations: Sequence[RelationInput]


EntityMerge = Callable[[EntityInput, EntityInput], EntityInput]  # (stored, new) -> merged
RelationMerge = Callable[[RelationInput, RelationInput], RelationInput]


@dataclass(frozen=True)
class GraphCounts:
    chunks_total: int
    chunks_done: int
    chunks_failed: int
    entities: int
    relations: int


@dataclass
class GraphContents:
    """A whole graph's entities and relations (for the key-value index and hop expansion)."""

    entities: list[KnowledgeEntity] = field(default_factory=list)
    relations: list[KnowledgeRelation] = field(default_factory=list)


class GraphNotFound(LookupError):
    pass


class KnowledgeStore(Store):
    # ------------------------------------------------------------------ graphs

    def open_graph(
        self, key: str, *, scope: str, chunk_tokens: int, run_id: str | None = None, collection: str | None = None
    ) -> KnowledgeGraph:
        """The graph named `key`, created empty the first time (safe when two processes race)."""
        found = self.find_graph(key)
        if found is not None:
            return found
        try:
            with self._session() as s:
                graph = KnowledgeGraph(
                    key=key, scope=scope, run_id=run_id, collection=collection, chunk_tokens=chunk_tokens
                )
                s.add(graph)
                s.commit()
                s.refresh(graph)
                return graph
        except IntegrityError:  # created by another process in the meantime
            found = self.find_graph(key)
            if found is None:
                raise
            return found

    def find_graph(self, key: str) -> KnowledgeGraph | None:
        with self._session() as s:
            return s.exec(select(KnowledgeGraph).where(KnowledgeGraph.key == key)).first()

    def get_graph(self, graph_id: int) -> KnowledgeGraph:
        with self._session() as s:
            graph = s.get(KnowledgeGraph, graph_id)
        if graph is None:
            raise GraphNotFound(f"no knowledge graph {graph_id}")
        return graph

    def version(self, graph_id: int) -> tuple[str, int]:
        """The graph's key and version: the version changes with every merge (one column of one row),
        and the key tells a graph from a deleted one whose id SQLite gave out again."""
        with self._session() as s:
            key, version = s.exec(
                select(KnowledgeGraph.key, KnowledgeGraph.version).where(KnowledgeGraph.id == graph_id)
            ).one()
            return key, version

    def list_graphs(self, *, scope: str | None = None) -> list[KnowledgeGraph]:
        stmt = select(KnowledgeGraph)
        if scope:
            stmt = stmt.where(KnowledgeGraph.scope == scope)
        with self._session() as s:
            return list(s.exec(stmt.order_by(col(KnowledgeGraph.id))).all())

    def claim_graph(
        self, graph_id: int, owner: str, owner_alive: Callable[[KnowledgeGraph], bool]
    ) -> KnowledgeGraph | None:
        """Make `owner` the graph's builder, unless another living process is building it (then None)."""
        with self._session() as s:
            graph = s.get(KnowledgeGraph, graph_id, with_for_update=True)
            if graph is None:
                raise GraphNotFound(f"no knowledge graph {graph_id}")
            busy = graph.status in (KnowledgeGraphStatus.BUILDING, KnowledgeGraphStatus.STOPPING)
            if busy and graph.owner and graph.owner != owner and owner_alive(graph):
                return None
            graph.status, graph.owner, graph.error, graph.updated_at = (
                KnowledgeGraphStatus.BUILDING,
                owner,
                "",
                utcnow(),
            )
            s.add(graph)
            s.commit()
            s.refresh(graph)
            return graph

    def set_status(self, graph_id: int, status: str, *, error: str = "", only_if: Sequence[str] = ()) -> bool:
        """Set the graph's status (only from one of `only_if`, when given); whether it changed."""
        stmt = update(KnowledgeGraph).where(col(KnowledgeGraph.id) == graph_id)
        if only_if:
            stmt = stmt.where(col(KnowledgeGraph.status).in_(list(only_if)))
        with self._session() as s:
            result = s.exec(stmt.values(status=status, error=error[:2000], updated_at=utcnow()))
            s.commit()
            return bool(result.rowcount)

    def set_llm_info(self, graph_id: int, llm_info: dict[str, Any]) -> None:
        with self._session() as s:
            s.exec(update(KnowledgeGraph).where(col(KnowledgeGraph.id) == graph_id).values(llm_info=llm_info))
            s.commit()

    def add_usage(
        self,
        graph_id: int,
        *,
        calls: int = 0,
        failed_calls: int = 0,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        cost: float = 0.0,
    ) -> None:
        """Add what building cost (atomic increments: concurrent writers lose nothing)."""
        if not (calls or failed_calls or prompt_tokens or completion_tokens or cost):
            return
        g = KnowledgeGraph
        with self._session() as s:
            s.exec(
                update(g)
                .where(col(g.id) == graph_id)
                .values(
                    calls=g.calls + calls,
                    failed_calls=g.failed_calls + failed_calls,
                    prompt_tokens=g.prompt_tokens + prompt_tokens,
                    completion_tokens=g.completion_tokens + completion_tokens,
                    cost=g.cost + cost,
                    updated_at=utcnow(),
                )
            )
            s.commit()

    def counts(self, graph_id: int) -> GraphCounts:
        with self._session() as s:
            by_status = dict(
                s.exec(
                    select(KnowledgeChunk.status, func.count())
                    .where(KnowledgeChunk.graph_id == graph_id)
                    .group_by(KnowledgeChunk.status)
                ).all()
            )
            entities = s.exec(
                select(func.count()).select_from(KnowledgeEntity).where(KnowledgeEntity.graph_id == graph_id)
            ).one()
            relations = s.exec(
                select(func.count()).select_from(KnowledgeRelation).where(KnowledgeRelation.graph_id == graph_id)
            ).one()
        return GraphCounts(
            chunks_total=sum(by_status.values()),
            chunks_done=by_status.get(KnowledgeChunkStatus.DONE, 0),
            chunks_failed=by_status.get(KnowledgeChunkStatus.FAILED, 0),
            entities=entities,
            relations=relations,
        )

    # ------------------------------------------------------------------ chunks

    def add_chunks(self, graph_id: int, chunks: Iterable[ChunkInput]) -> int:
        """Register chunks not in the graph yet (by key); returns how many were new."""
        added = 0
        batch: dict[str, ChunkInput] = {}
        for chunk in chunks:
            batch.setdefault(chunk.key, chunk)
            if len(batch) >= _BATCH:
                added += self._add_chunk_batch(graph_id, batch)
                batch = {}
        if batch:
            added += self._add_chunk_batch(graph_id, batch)
        return added

    def _add_chunk_batch(self, graph_id: int, batch: dict[str, ChunkInput]) -> int:
        table = table_of(KnowledgeChunk)
        insert = postgresql.insert(table) if self.db.engine.dialect.name == "postgresql" else sqlite.insert(table)
        # Bounded as the columns are (PostgreSQL refuses longer text; a web page's URL can be anything).
        rows = [
            {
                "graph_id": graph_id,
                "key": c.key,
                "ref": c.ref[:1000],
                "title": c.title,
                "url": c.url[:2000] if c.url else c.url,
                "kind": c.kind,
                "text": c.text,
                "status": KnowledgeChunkStatus.PENDING,
                "attempts": 0,
                "error": "",
                "created_at": utcnow(),
            }
            for c in batch.values()
        ]
        with self._session() as s:
            # A chunk another writer registered at the same moment is simply there already.
            added = s.exec(
                insert.values(rows)
                .on_conflict_do_nothing(index_elements=[table.c.graph_id, table.c.key])
                .returning(table.c.id)
            ).all()
            s.commit()
        return len(added)

    def chunks_by_keys(self, graph_id: int, keys: Sequence[str]) -> list[KnowledgeChunk]:
        out: list[KnowledgeChunk] = []
        with self._session() as s:
            for start in range(0, len(keys), _BATCH):
                part = list(keys[start : start + _BATCH])
                out.extend(
                    s.exec(
                        select(KnowledgeChunk).where(
                            KnowledgeChunk.graph_id == graph_id, col(KnowledgeChunk.key).in_(part)
                        )
                    ).all()
                )
        return out

    def chunks_by_ids(self, chunk_ids: Sequence[int]) -> list[KnowledgeChunk]:
        out: list[KnowledgeChunk] = []
        with self._session() as s:
            for start in range(0, len(chunk_ids), _BATCH):
                part = list(chunk_ids[start : start + _BATCH])
                out.extend(s.exec(select(KnowledgeChunk).where(col(KnowledgeChunk.id).in_(part))).all())
        return sorted(out, key=lambda c: c.id or 0)

    def list_chunks(self, graph_id: int, *, status: str | None = None) -> list[KnowledgeChunk]:
        """The graph's chunks (of one status), in the order they were registered."""
        stmt = select(KnowledgeChunk).where(KnowledgeChunk.graph_id == graph_id)
        if status:
            stmt = stmt.where(KnowledgeChunk.status == status)
        with self._session() as s:
            return list(s.exec(stmt.order_by(col(KnowledgeChunk.id))).all())

    def pending_chunks(self, graph_id: int, limit: int, *, after_id: int = 0) -> list[KnowledgeChunk]:
        """Chunks still to extract, in order, after `after_id`."""
        with self._session() as s:
            return list(
                s.exec(
                    select(KnowledgeChunk)
                    .where(
                        KnowledgeChunk.graph_id == graph_id,
                        KnowledgeChunk.status == KnowledgeChunkStatus.PENDING,
                        col(KnowledgeChunk.id) > after_id,
                    )
                    .order_by(col(KnowledgeChunk.id))
                    .limit(limit)
                ).all()
            )

    def first_chunk_error(self, graph_id: int) -> str:
        """The error of the graph's first failed chunk ("" when none failed)."""
        with self._session() as s:
            return (
                s.exec(
                    select(KnowledgeChunk.error)
                    .where(KnowledgeChunk.graph_id == graph_id, KnowledgeChunk.status == KnowledgeChunkStatus.FAILED)
                    .order_by(col(KnowledgeChunk.id))
                    .limit(1)
                ).first()
                or ""
            )

    def retry_failed(self, graph_id: int) -> int:
        """Failed chunks become pending again (a new build tries them once more); how many."""
        with self._session() as s:
            result = s.exec(
                update(KnowledgeChunk)
                .where(
                    col(KnowledgeChunk.graph_id) == graph_id, col(KnowledgeChunk.status) == KnowledgeChunkStatus.FAILED
                )
                .values(status=KnowledgeChunkStatus.PENDING)
            )
            s.commit()
            return result.rowcount or 0

    def mark_chunk_failed(self, chunk_id: int, error: str) -> None:
        with self._session() as s:
            s.exec(
                update(KnowledgeChunk)
                .where(col(KnowledgeChunk.id) == chunk_id)
                .values(status=KnowledgeChunkStatus.FAILED, error=error[:2000], attempts=KnowledgeChunk.attempts + 1)
            )
            s.commit()

    # ------------------------------------------------------------------ merge

    def save_extraction(
        self,
        graph_id: int,
        chunk_id: int,
        entities: Sequence[EntityInput],
        relations: Sequence[RelationInput],
        *,
        merge_entity: EntityMerge,
        merge_relation: RelationMerge,
    ) -> bool:
        """Merge one chunk's entities and relations into the graph and mark the chunk done, in one
        transaction; False (and nothing changed) when the chunk was already done (extracted twice at
        once). Entities are matched by key, relations by their pair; `merge_*` combine a stored row
        with the new mention. Every relation's two entities must be among `entities` or stored."""
        merged = self.save_extractions(
            graph_id,
            [ChunkExtraction(chunk_id, tuple(entities), tuple(relations))],
            merge_entity=merge_entity,
            merge_relation=merge_relation,
        )
        return chunk_id in merged

    def save_extractions(
        self,
        graph_id: int,
        extractions: Sequence[ChunkExtraction],
        *,
        merge_entity: EntityMerge,
        merge_relation: RelationMerge,
    ) -> set[int]:
        """`save_extraction` for several chunks in one transaction, merged in their order (the graph
        ends as it would after saving them one by one); the ids of the chunks merged, those already
        done left out. Why: an MTQA run's chunks finish together, and one by one each cost about 12
        statements; together, about 12 for the lot."""
        if not extractions:
            return set()
        for attempt in range(_MERGE_ATTEMPTS):
            try:
                return self._save_extractions(graph_id, extractions, merge_entity, merge_relation)
            except IntegrityError:
                # Another writer added one of these entities or relations since we read: read again.
                if attempt == _MERGE_ATTEMPTS - 1:
                    raise
        return set()

    def _save_extractions(
        self,
        graph_id: int,
        extractions: Sequence[ChunkExtraction],
        merge_entity: EntityMerge,
        merge_relation: RelationMerge,
    ) -> set[int]:
        with self._session() as s:
            # The chunks are claimed first: this write opens the transaction (SQLite's write lock, the
            # chunks' row locks on PostgreSQL), so what the merge reads next is what it writes over.
            claimed = set(
                s.exec(
                    update(KnowledgeChunk)
                    .where(
                        col(KnowledgeChunk.id).in_({e.chunk_id for e in extractions}),
                        col(KnowledgeChunk.status) != KnowledgeChunkStatus.DONE,
                    )
                    .values(
                        status=KnowledgeChunkStatus.DONE,
                        error="",
                        extracted_at=utcnow(),
                        attempts=KnowledgeChunk.attempts + 1,
                    )
                    .returning(col(KnowledgeChunk.id))
                ).scalars()
            )
            if not claimed:
                s.rollback()
                return set()
            kept: dict[int, ChunkExtraction] = {}
            for extraction in extractions:  # a chunk given twice is merged once, as it was first given
                if extraction.chunk_id in claimed:
                    kept.setdefault(extraction.chunk_id, extraction)
            entity_ids = self._merge_entities(s, graph_id, [e for x in kept.values() for e in x.entities], merge_entity)
            relation_ids = self._merge_relations(
                s, graph_id, [r for x in kept.values() for r in x.relations], merge_relation
            )
            for chunk_id, extraction in kept.items():
                s.add_all(
                    [
                        KnowledgeEntityChunk(entity_id=e, chunk_id=chunk_id)
                        for e in sorted({entity_ids[entity.key] for entity in extraction.entities})
                    ]
                )
                s.add_all(
                    [
                        KnowledgeRelationChunk(relation_id=r, chunk_id=chunk_id)
                        for r in sorted({relation_ids[relation.pair] for relation in extraction.relations})
                    ]
                )
            s.exec(
                update(KnowledgeGraph)
                .where(col(KnowledgeGraph.id) == graph_id)
                .values(version=KnowledgeGraph.version + 1)
            )
            s.commit()
            return set(kept)

    @staticmethod
    def _merge_entities(
        s: Session, graph_id: int, entities: Sequence[EntityInput], merge: EntityMerge
    ) -> dict[str, int]:
        def created(entity: EntityInput) -> KnowledgeEntity:
            return KnowledgeEntity(
                graph_id=graph_id, key=entity.key, name=entity.name, type=entity.type, description=entity.description
            )

        def merged(row: KnowledgeEntity, entity: EntityInput) -> None:
            new = merge(EntityInput(row.key, row.name, row.type, row.description), entity)
            row.name, row.type, row.description = new.name, new.type, new.description

        return _upsert(
            s, KnowledgeEntity, col(KnowledgeEntity.key), graph_id, entities, lambda e: e.key, created, merged
        )

    @staticmethod
    def _merge_relations(
        s: Session, graph_id: int, relations: Sequence[RelationInput], merge: RelationMerge
    ) -> dict[str, int]:
        def created(relation: RelationInput) -> KnowledgeRelation:
            return KnowledgeRelation(
                graph_id=graph_id,
                pair=relation.pair,
                source_key=relation.source_key,
                target_key=relation.target_key,
                description=relation.description,
                keywords=list(relation.keywords),
            )

        def merged(row: KnowledgeRelation, relation: RelationInput) -> None:
            new = merge(RelationInput(row.source_key, row.target_key, row.description, tuple(row.keywords)), relation)
            row.description, row.keywords = new.description, list(new.keywords)

        return _upsert(
            s, KnowledgeRelation, col(KnowledgeRelation.pair), graph_id, relations, lambda r: r.pair, created, merged
        )

    # ------------------------------------------------------------------ reading the graph

    def contents(self, graph_id: int) -> GraphContents:
        with self._session() as s:
            entities = list(
                s.exec(
                    select(KnowledgeEntity)
                    .where(KnowledgeEntity.graph_id == graph_id)
                    .order_by(col(KnowledgeEntity.id))
                ).all()
            )
            relations = list(
                s.exec(
                    select(KnowledgeRelation)
                    .where(KnowledgeRelation.graph_id == graph_id)
                    .order_by(col(KnowledgeRelation.id))
                ).all()
            )
        return GraphContents(entities=entities, relations=relations)

    def entity_chunks(self, entity_ids: Sequence[int]) -> dict[int, list[int]]:
        """Entity id -> the ids of the chunks it was extracted from (done chunks)."""
        return self._links(KnowledgeEntityChunk, col(KnowledgeEntityChunk.entity_id), entity_ids)

    def relation_chunks(self, relation_ids: Sequence[int]) -> dict[int, list[int]]:
        return self._links(KnowledgeRelationChunk, col(KnowledgeRelationChunk.relation_id), relation_ids)

    # ------------------------------------------------------------------ browsing one entity (the app)

    def entities_by_keys(self, graph_id: int, keys: Sequence[str]) -> list[KnowledgeEntity]:
        """The graph's entities with these keys (normalised names), in no particular order."""
        keys = list(dict.fromkeys(keys))
        out: list[KnowledgeEntity] = []
        with self._session() as s:
            for start in range(0, len(keys), _BATCH):
                out.extend(
                    s.exec(
                        select(KnowledgeEntity).where(
                            KnowledgeEntity.graph_id == graph_id,
                            col(KnowledgeEntity.key).in_(keys[start : start + _BATCH]),
                        )
                    ).all()
                )
        return out

    def find_entities(self, graph_id: int, fragment: str, limit: int) -> list[KnowledgeEntity]:
        """At most `limit` entities whose key (normalised name) starts with `fragment`, shortest first,
        then those that contain it elsewhere."""
        if limit < 1 or not fragment:
            return []
        escaped = fragment.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        key = col(KnowledgeEntity.key)
        starts = key.like(f"{escaped}%", escape="\\")
        order = (func.length(KnowledgeEntity.key), key)
        with self._session() as s:
            found = list(
                s.exec(
                    select(KnowledgeEntity)
                    .where(KnowledgeEntity.graph_id == graph_id, starts)
                    .order_by(*order)
                    .limit(limit)
                ).all()
            )
            if len(found) < limit:
                found += s.exec(
                    select(KnowledgeEntity)
                    .where(KnowledgeEntity.graph_id == graph_id, ~starts, key.like(f"%{escaped}%", escape="\\"))
                    .order_by(*order)
                    .limit(limit - len(found))
                ).all()
        return found

    def relations_of(self, graph_id: int, entity_key: str, limit: int) -> tuple[list[KnowledgeRelation], int]:
        """At most `limit` relations with the entity at either end (in the order they were found), and
        how many it has in all."""
        where = (
            KnowledgeRelation.graph_id == graph_id,
            (col(KnowledgeRelation.source_key) == entity_key) | (col(KnowledgeRelation.target_key) == entity_key),
        )
        with self._session() as s:
            total = s.exec(select(func.count()).select_from(KnowledgeRelation).where(*where)).one()
            rows = list(
                s.exec(
                    select(KnowledgeRelation).where(*where).order_by(col(KnowledgeRelation.id)).limit(max(0, limit))
                ).all()
            )
        return rows, total

    def chunks_of_entity(self, entity_id: int, limit: int) -> tuple[list[KnowledgeChunk], int]:
        """At most `limit` of the chunks the entity was extracted from (first registered first), and
        how many there are in all."""
        link = KnowledgeEntityChunk
        with self._session() as s:
            total = s.exec(select(func.count()).select_from(link).where(link.entity_id == entity_id)).one()
            rows = list(
                s.exec(
                    select(KnowledgeChunk)
                    .join(link, col(link.chunk_id) == col(KnowledgeChunk.id))
                    .where(link.entity_id == entity_id)
                    .order_by(col(KnowledgeChunk.id))
                    .limit(max(0, limit))
                ).all()
            )
        return rows, total

    # ------------------------------------------------------------------ drawing part of a graph (the app)

    def relations_touching(self, graph_id: int, keys: Sequence[str], limit: int) -> list[KnowledgeRelation]:
        """At most `limit` relations with an end among `keys` (entity keys), in the order they were
        found: a hub's thousands of relations are never read whole."""
        keys = list(dict.fromkeys(keys))
        out: list[KnowledgeRelation] = []
        seen: set[int] = set()
        with self._session() as s:
            for start in range(0, len(keys), _BATCH):
                if len(out) >= limit:
                    break
                part = keys[start : start + _BATCH]
                rows = s.exec(
                    select(KnowledgeRelation)
                    .where(
                        KnowledgeRelation.graph_id == graph_id,
                        col(KnowledgeRelation.source_key).in_(part) | col(KnowledgeRelation.target_key).in_(part),
                    )
                    .order_by(col(KnowledgeRelation.id))
                    .limit(limit - len(out))
                ).all()
                for row in rows:
                    if stored_id(row) not in seen:  # (a relation between two batches' keys comes twice)
                        seen.add(stored_id(row))
                        out.append(row)
        return out

    def busiest_entities(self, graph_id: int, limit: int) -> list[str]:
        """The keys of the `limit` entities with the most relations (ties by key), counted in SQL."""
        ends = (
            select(KnowledgeRelation.source_key.label("key"))  # type: ignore[attr-defined]
            .where(KnowledgeRelation.graph_id == graph_id)
            .union_all(
                select(KnowledgeRelation.target_key.label("key")).where(  # type: ignore[attr-defined]
                    KnowledgeRelation.graph_id == graph_id
                )
            )
            .subquery()
        )
        count = func.count().label("degree")
        with self._session() as s:
            rows = s.exec(
                select(ends.c.key, count).group_by(ends.c.key).order_by(count.desc(), ends.c.key).limit(max(0, limit))
            ).all()
        return [key for key, _ in rows]

    def _links(
        self,
        table: type[KnowledgeEntityChunk] | type[KnowledgeRelationChunk],
        owner_column: Mapped[int],
        ids: Sequence[int],
    ) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        ids = list(dict.fromkeys(ids))
        with self._session() as s:
            for start in range(0, len(ids), _BATCH):
                part = ids[start : start + _BATCH]
                rows = s.exec(
                    select(owner_column, table.chunk_id).where(owner_column.in_(part)).order_by(col(table.chunk_id))
                ).all()
                for owner, chunk in rows:
                    out.setdefault(owner, []).append(chunk)
        return out


_Stored = TypeVar("_Stored", KnowledgeEntity, KnowledgeRelation)
_Extracted = TypeVar("_Extracted", EntityInput, RelationInput)


def _upsert(
    s: Session,
    table: type[_Stored],
    key_column: Mapped[str],
    graph_id: int,
    items: Sequence[_Extracted],
    key_of: Callable[[_Stored | _Extracted], str],
    created: Callable[[_Extracted], _Stored],
    merged: Callable[[_Stored, _Extracted], None],
) -> dict[str, int]:
    """Insert each item whose key the graph does not hold yet, merge the others into their row; the
    id of each distinct key's row. The new rows go in one INSERT and
    their ids come back in one SELECT by key: the ORM inserts rows one by one on SQLite, to match
    each returned id to its row (a chunk's 10-20 entities and relations were 10-20 statements)."""
    keys = list(dict.fromkeys(key_of(item) for item in items))
    rows = s.exec(select(table).where(table.graph_id == graph_id, key_column.in_(keys))).all() if keys else []
    # key_of reads a row's key as an item's: the same attribute (`key`, `pair`) on both.
    stored = {key_of(row): row for row in rows}
    new: dict[str, _Stored] = {}
    for item in items:
        key = key_of(item)
        if key in stored:
            merged(stored[key], item)
            s.add(stored[key])
        elif key in new:
            merged(new[key], item)  # mentioned twice in this chunk
        else:
            new[key] = created(item)
    s.flush()  # the merged rows' UPDATEs
    ids = {key: stored_id(row) for key, row in stored.items()}
    if new:
        for start in range(0, len(new), _BATCH):
            part = list(new.values())[start : start + _BATCH]
            s.execute(insert(table), [row.model_dump(exclude={"id"}) for row in part])
            found = s.exec(
                select(key_column, table.id).where(
                    table.graph_id == graph_id, key_column.in_([key_of(row) for row in part])
                )
            ).all()
            ids.update((key, row_id) for key, row_id in found if row_id is not None)
    return ids


__all__ = [
    "ChunkExtraction",
    "ChunkInput",
    "EntityInput",
    "GraphContents",
    "GraphCounts",
    "GraphNotFound",
    "KnowledgeStore",
    "RelationInput",
]
