"""MTQA's side of the knowledge layer (`engine/knowledge/units.py`): where the run's knowledge base
comes from (the one injection point), knowledge units as a node stores them, pins and drops applied
to a retrieval, the retrieval query of a later column, and the units as a prompt shows them.

The knowledge graph itself (extraction, deduplication, keys, hops) is the knowledge layer's; this
module only asks it through the `KnowledgeBase` protocol."""

from __future__ import annotations

import re
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Self

from pydantic import BaseModel, ConfigDict, Field

from engine.citations import CitableSource, source_blocks, strip_markers
from engine.knowledge.units import Keywords, KnowledgeBase, KnowledgeScope, KnowledgeUnit
from engine.methods.base import RunContext
from engine.methods.mtqa.params import MtqaParams
from engine.safe_text import one_line
from storage.models import Node


def open_knowledge_base(
    ctx: RunContext[MtqaParams], scope: KnowledgeScope, *, collection: str, chunk_tokens: int, node: Node
) -> KnowledgeBase:
    """THE injection point: the run's knowledge base from the knowledge layer's entry point
    (`RunContext.knowledge`), its LLM calls accounted to `node`. Tests replace this function to
    inject their own `KnowledgeBase`."""
    return ctx.knowledge(scope, collection=collection or None, chunk_tokens=chunk_tokens, node=node)


# --------------------------------------------------------------------------- units as stored


class TripleRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    subject: str
    relation: str
    object: str
    description: str = ""

    def line(self) -> str:
        return f"({self.subject}) -[{self.relation}]-> ({self.object})"


class UnitRecord(BaseModel):
    """A knowledge unit as a node keeps it: its triples and the source (stored, so citable) it came
    from; `pinned`/`dropped` say what you chose for it."""

    model_config = ConfigDict(extra="forbid")

    id: str
    source_id: int | None = None
    title: str = ""
    ref: str = ""
    triples: list[TripleRecord] = Field(default_factory=list)
    via: list[str] = Field(default_factory=list, description="How it was reached: entity, relation, hop1, hop2.")
    text: str = Field(
        default="",
        description="The unit's own source text (its chunk, which may be part of a longer "
        "document); empty under the no-source-text ablation.",
    )
    score: float = 0.0
    pinned: bool = False
    dropped: bool = False

    def with_source(self, source_id: int | None) -> UnitRecord:
        return self.model_copy(update={"source_id": source_id})


# A unit's chunk is kept up to this many characters (a prompt shows `unit_chars` of it).
UNIT_TEXT_CHARS = 4000


def unit_record(unit: KnowledgeUnit) -> UnitRecord:
    # The title is a page's or a document's: kept on one line and without storage markers, so even a
    # view that forgot to escape it could not get a list entry or a citation from it (the views
    # escape it too, `kinds.unit_line`).
    title = one_line(strip_markers(unit.hit.title))
    return UnitRecord(
        id=unit.id,
        title=title,
        ref=unit.hit.ref,
        score=round(unit.score, 4),
        text=(unit.hit.text or unit.hit.snippet or "")[:UNIT_TEXT_CHARS],
        triples=[
            TripleRecord(subject=t.subject, relation=t.relation, object=t.object, description=t.description)
            for t in unit.triples
        ],
        via=list(unit.via),
    )


class Choices(BaseModel):
    """Knowledge units you pinned (kept in every later retrieval) or dropped (left out of it)."""

    model_config = ConfigDict(extra="forbid")

    pinned: list[UnitRecord] = Field(default_factory=list)
    dropped: list[str] = Field(default_factory=list)
    # A dropped unit's title (or reference) by id, so the choices panel can name it.
    dropped_titles: dict[str, str] = Field(default_factory=dict)
    # The node (knowledge base or summary) each choice was made on, by unit id: undoing a choice
    # thinks again what it changed, from there (the node may no longer list the unit by then).
    made_on: dict[str, int] = Field(default_factory=dict)
    # Each choice's number, given when it was made and kept: undoing Choice 1 leaves Choice 2 as it
    # was, so a list read before an undo still names the same choices.
    numbers: dict[str, int] = Field(default_factory=dict)
    next_number: int = 1

    def listed(self) -> list[tuple[int, str, str, str]]:
        """(number, pinned | dropped, unit id, title), by number. Choices stored before numbers were
        kept are numbered after the others, in the order the panel used to list them."""
        choices = [("pinned", u.id, u.title or u.ref) for u in self.pinned] + [
            ("dropped", d, self.dropped_titles.get(d) or d) for d in self.dropped
        ]
        known = [(self.numbers[i], kind, i, title) for kind, i, title in choices if i in self.numbers]
        later = max([n for n, *_ in known] + [self.next_number - 1, 0])
        unknown = [
            (later + place, kind, i, title)
            for place, (kind, i, title) in enumerate((c for c in choices if c[1] not in self.numbers), start=1)
        ]
        return sorted(known) + unknown

    def _kept_numbers(self, new: str | None = None) -> tuple[dict[str, int], int]:
        """Every listed choice's number but `new`'s (an older version's given once, as listed), and
        the next number."""
        numbers = {unit_id: number for number, _, unit_id, _ in self.listed() if unit_id != new}
        return numbers, max([self.next_number, *(n + 1 for n in numbers.values())])

    def without(self, unit_id: str) -> Self:
        """These choices with none left for `unit_id` (the others keep their numbers)."""
        numbers, following = self._kept_numbers()
        return type(self)(
            pinned=[p for p in self.pinned if p.id != unit_id],
            dropped=[d for d in self.dropped if d != unit_id],
            dropped_titles={k: v for k, v in self.dropped_titles.items() if k != unit_id},
            made_on={k: v for k, v in self.made_on.items() if k != unit_id},
            numbers={k: v for k, v in numbers.items() if k != unit_id},
            next_number=following,
        )

    def numbered(self, unit_id: str) -> Self:
        """These choices with the next number given to `unit_id`'s (just made)."""
        numbers, following = self._kept_numbers(new=unit_id)
        return self.model_copy(update={"numbers": {**numbers, unit_id: following}, "next_number": following + 1})


def apply_choices(units: Sequence[UnitRecord], choices: Choices) -> list[UnitRecord]:
    """A retrieval's units with your choices: dropped units left out, pinned ones added (once)."""
    dropped = set(choices.dropped)
    kept = [u for u in units if u.id not in dropped]
    present = {u.id for u in kept}
    pinned_ids = {p.id for p in choices.pinned}
    kept = [u.model_copy(update={"pinned": u.id in pinned_ids}) for u in kept]
    kept += [
        p.model_copy(update={"pinned": True}) for p in choices.pinned if p.id not in present and p.id not in dropped
    ]
    return kept


def active(units: Sequence[UnitRecord]) -> list[UnitRecord]:
    return [u for u in units if not u.dropped]


# --------------------------------------------------------------------------- a later column's query

_NAME = re.compile(r"\b[A-Z][\w'’-]+(?:\s+(?:of|the|de|van|von|for|and|[A-Z][\w'’-]+))*\s*(?<=[\w'’-])")
_NOT_NAMES = frozenset(
    """The A An This That These Those It Its In On At By For From To Of And Or But If So
Thus Therefore However First Second Third Finally Both Either Neither Which What Who When Where Why How Yes No
Thought Column Step Answer Question Summary Knowledge Based According""".split()
)


def names_in(text: str, limit: int = 8) -> list[str]:
    """Proper names in a text (capitalised word runs), in order, without repeats: a later column's
    retrieval adds the names its thoughts reached to the question's detailed keywords, so S(Q, ΣTn)
    costs no LLM call."""
    found: list[str] = []
    seen: set[str] = set()
    for match in _NAME.finditer(text):
        name = match.group(0).strip()
        words = name.split()
        while words and words[0] in _NOT_NAMES:
            words = words[1:]
        while words and words[-1].lower() in {"of", "the", "de", "van", "von", "for", "and"}:
            words = words[:-1]
        name = " ".join(words)
        if len(name) < 3 or name.lower() in seen:
            continue
        seen.add(name.lower())
        found.append(name)
        if len(found) == limit:
            break
    return found


def column_keywords(question_keywords: Keywords, thoughts: str) -> Keywords:
    """Keywords for KU' of a column: the question's, plus the names the column's thoughts reached."""
    known = {k.lower() for k in question_keywords.detailed}
    extra = [n for n in names_in(thoughts) if n.lower() not in known]
    return Keywords(detailed=tuple(question_keywords.detailed) + tuple(extra), general=question_keywords.general)


# --------------------------------------------------------------------------- units in a prompt


def unit_blocks(
    units: Sequence[UnitRecord],
    sources: Sequence[CitableSource],
    *,
    with_triples: bool,
    with_text: bool,
    max_chars: int,
) -> str:
    """The numbered knowledge units of a prompt: `[n] Title`, its triples, its source text (each as
    the ablation switches allow). `sources[i]` is unit i's stored source: citations [n] are
    converted with that list."""
    blocks = []
    for number, (unit, source) in enumerate(zip(units, sources), start=1):
        lines = [f"[{number}] {(source.title or unit.title).strip() or 'Untitled'}"]
        if with_triples:
            lines += [t.line() + (f": {t.description}" if t.description else "") for t in unit.triples]
        if with_text:
            # The unit's own chunk (part of a longer document, maybe); the stored source's text when the
            # knowledge base gave none.
            own = SimpleNamespace(title=source.title, text=unit.text, snippet="") if unit.text else source
            body = source_blocks([own], max_chars=max_chars).split("\n", 1)
            if len(body) == 2 and body[1].strip():
                lines.append(body[1].strip())
        blocks.append("\n".join(" ".join(line.split()) for line in lines))
    return "\n\n".join(blocks) or "(no knowledge unit was found)"
