"""Part of a stored knowledge graph, chosen to be drawn (the app's knowledge graph tab, issue 43): its
entities as nodes and its relations as labelled edges, never more than a cap of relations.

Why a cap: a question's graph holds a few hundred relations on a real run, and a collection's tens
of thousands; past about a hundred edges a drawing in a side column is a hairball whose labels
nobody reads. So a drawing holds the relations that matter to the reader first, then the rest by
how connected their entities are, and says how many it left out:

* `around` (the default when a node used knowledge units): the relations of the units' entities
  (those between two of them first), then those of their neighbours, at most `AROUND_CAP`;
* the whole graph: all of it when it has at most `WHOLE_CAP` relations, else the units' relations
  first, then the relations of the most connected entities, up to the cap.

Read only, no LLM; the store is asked bounded questions (`relations_touching`, `busiest_entities`),
so a hub entity or a collection's graph is never loaded whole."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from engine.knowledge.merge import entity_key
from storage.knowledge import KnowledgeStore
from storage.models import KnowledgeRelation

AROUND_CAP = 60
WHOLE_CAP = 150
DESCRIPTION_CHARS = 300  # a tooltip's worth; the graph browser shows the whole description


@dataclass(frozen=True)
class DrawnEntity:
    key: str
    name: str
    type: str = ""
    description: str = ""


@dataclass(frozen=True)
class DrawnRelation:
    source: str  # entity keys
    target: str
    label: str  # its keywords, or "related to"
    description: str = ""


@dataclass(frozen=True)
class GraphDrawing:
    """What to draw, and how much of the graph it is."""

    entities: tuple[DrawnEntity, ...]
    relations: tuple[DrawnRelation, ...]
    entities_total: int
    relations_total: int
    cap: int
    around: bool  # drawn around the focus entities (else the whole graph, capped)
    focus: frozenset[str] = frozenset()  # the focus entities' keys the graph holds

    @property
    def capped(self) -> bool:
        return self.relations_total > len(self.relations) and len(self.relations) >= self.cap

    def says(self) -> str:
        """How much of the graph is drawn and why, in a reader's words (one line)."""
        shown = (
            f"{len(self.relations):,} of {self.relations_total:,} relations and {len(self.entities):,} of "
            f"{self.entities_total:,} entities"
        )
        if self.around:
            if not self.focus:
                return f"{shown}: none of the node's entities is in the graph"
            rule = (
                f"the relations of the {len(self.focus)} entities the node's units name first, then their neighbours'"
            )
            return f"{shown}: {rule}" + (f" (at most {self.cap})" if self.capped else "")
        if not self.capped:
            return f"{shown}: the whole graph"
        return (
            f"{shown}: at most {self.cap}, the relations of the node's units first, then those of the "
            "most connected entities"
        )


def draw(
    store: KnowledgeStore,
    graph_id: int,
    focus_names: Iterable[str],
    *,
    around: bool,
    cap: int | None = None,
    first: Sequence[tuple[str, str]] = (),
) -> GraphDrawing:
    """The part of graph `graph_id` to draw: around the entities named `focus_names` (`around`), or
    the whole graph, at most `cap` relations (`AROUND_CAP` or `WHOLE_CAP` by default). `first`: pairs
    of entity names whose relation goes before any other (a node's own triples, the cited ones first),
    so the cap never leaves what the node used without its relations."""
    cap = cap if cap is not None else (AROUND_CAP if around else WHOLE_CAP)
    counts = store.counts(graph_id)
    wanted = list(dict.fromkeys(k for k in (entity_key(n) for n in focus_names) if k))
    focus = {e.key for e in store.entities_by_keys(graph_id, wanted)}
    chosen = _focus_relations(store, graph_id, focus, cap, [frozenset(map(entity_key, pair)) for pair in first])
    if around:
        first_ring = {end for r in chosen for end in (r.source_key, r.target_key)} - focus
        chosen = _more(chosen, store.relations_touching(graph_id, sorted(first_ring), cap), cap)
    elif counts.relations <= cap:
        chosen = _more(chosen, store.contents(graph_id).relations, cap)
    else:
        busiest = store.busiest_entities(graph_id, cap)
        chosen = _more(chosen, store.relations_touching(graph_id, busiest, cap), cap)
    ends = list(dict.fromkeys(end for r in chosen for end in (r.source_key, r.target_key)))
    # A focus entity whose relations the cap left out would float alone: drawn only when nothing is cut.
    keys = ends if len(chosen) >= cap else list(dict.fromkeys([*sorted(focus), *ends]))
    rows = {e.key: e for e in store.entities_by_keys(graph_id, keys)}
    entities = tuple(
        DrawnEntity(k, rows[k].name, rows[k].type, rows[k].description[:DESCRIPTION_CHARS]) for k in keys if k in rows
    )
    relations = tuple(
        DrawnRelation(
            r.source_key, r.target_key, ", ".join(r.keywords) or "related to", r.description[:DESCRIPTION_CHARS]
        )
        for r in chosen
        if r.source_key in rows and r.target_key in rows
    )
    return GraphDrawing(entities, relations, counts.entities, counts.relations, cap, around, frozenset(focus))


def _focus_relations(
    store: KnowledgeStore, graph_id: int, focus: set[str], cap: int, first: Sequence[frozenset[str]] = ()
) -> list[KnowledgeRelation]:
    """The focus entities' relations: those of the `first` pairs in their order, then the others between
    two focus entities, then the rest, at most `cap`. Read with room to spare, so the ones between two
    focus entities are found among a hub's others."""
    if not focus:
        return []
    touching = store.relations_touching(graph_id, sorted(focus), max(cap * 4, len(first) * 2))
    by_pair = {frozenset((r.source_key, r.target_key)): r for r in touching}
    named = [by_pair[pair] for pair in dict.fromkeys(first) if pair in by_pair]
    inside = [r for r in touching if r.source_key in focus and r.target_key in focus]
    return _more(_more(named, inside, cap), touching, cap)


def _more(
    chosen: Sequence[KnowledgeRelation], others: Sequence[KnowledgeRelation], cap: int
) -> list[KnowledgeRelation]:
    """`chosen`, then those of `others` not in it, at most `cap` in all."""
    out = list(chosen[:cap])
    seen = {r.id for r in out}
    for relation in others:
        if len(out) >= cap:
            break
        if relation.id not in seen:
            seen.add(relation.id)
            out.append(relation)
    return out
