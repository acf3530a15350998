"""A small, honest, in-memory `KnowledgeBase` (engine/knowledge/units.py) for MTQA's tests: built
from the documents the run adds, without an LLM, so a test counts exactly the method's own calls.

Entities are the capitalised names of each document (and its title); a relation joins two names of
one sentence, keyed by that sentence's other content words. Keywords: the question's names are its
detailed keywords, its other content words the general ones. Retrieval matches detailed keywords to
entity names and general ones to relation keys, then follows relations 1..hops hops; every unit is a
document with the triples found in it. Not product code: the knowledge layer is
`engine/knowledge/`."""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from engine.knowledge.units import BuildProgress, Keywords, KnowledgeUnit, Triple
from engine.search.protocol import Hit

_NAME = re.compile(r"\b[A-Z][\w'-]+(?:\s+(?:(?:of|for|the)\s+)?[A-Z][\w'-]+)*")
_WORD = re.compile(r"[a-z][a-z'-]{3,}")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_COMMON = frozenset(
    """which what when where who whom whose that this with from have were was first started
magazine""".split()
) - {"magazine"}
_SKIP_NAMES = frozenset({"The", "A", "An", "It", "In", "Which", "What", "Who", "When", "Where", "He", "She", "This"})


def _names(text: str) -> list[str]:
    return [n for n in (m.group(0) for m in _NAME.finditer(text)) if n not in _SKIP_NAMES]


@dataclass
class InMemoryKnowledge:
    scope: str = "question"
    key: str = ""  # not a stored graph: the app has none to browse
    chunks: dict[str, Hit] = field(default_factory=dict)
    entities: dict[str, set[str]] = field(default_factory=dict)  # name (lower) -> chunk refs
    relations: list[tuple[Triple, str, frozenset[str]]] = field(default_factory=list)  # triple, chunk, keys
    added: list[list[str]] = field(default_factory=list)
    keyword_calls: list[str] = field(default_factory=list)
    retrievals: list[dict] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add_documents(self, documents: Sequence[Hit]) -> BuildProgress:
        with self._lock:
            self.added.append([d.ref for d in documents])
            for hit in documents:
                if hit.ref in self.chunks:
                    continue  # incremental: a chunk is extracted once
                self.chunks[hit.ref] = hit
                for name in {hit.title, *_names(hit.text)}:
                    self.entities.setdefault(name.lower(), set()).add(hit.ref)
                for sentence in _SENTENCE.split(hit.text):
                    names = list(dict.fromkeys([hit.title, *_names(sentence)]))
                    keys = frozenset(_WORD.findall(sentence.lower()))
                    for other in names[1:3]:
                        triple = Triple(names[0], "mentioned with", other, sentence[:200])
                        self.relations.append((triple, hit.ref, keys))
            return self.progress()

    def progress(self) -> BuildProgress:
        return BuildProgress(
            chunks_done=len(self.chunks),
            chunks_total=len(self.chunks),
            entities=len(self.entities),
            relations=len(self.relations),
        )

    def keywords(self, question: str) -> Keywords:
        self.keyword_calls.append(question)
        names = tuple(dict.fromkeys(_names(question)))
        words = tuple(w for w in dict.fromkeys(_WORD.findall(question.lower())) if w not in _COMMON)
        return Keywords(detailed=names, general=words)

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
        with self._lock:
            self.retrievals.append(
                {
                    "question": question,
                    "keywords": keywords,
                    "top_k": top_k,
                    "hops": hops,
                    "max_units": max_units,
                    "with_triples": with_triples,
                    "with_text": with_text,
                }
            )
            scores: dict[str, float] = {}
            via: dict[str, list[str]] = {}
            reached: set[str] = set()
            for key in keywords.detailed:
                for ref in self.entities.get(key.lower(), ()):
                    scores[ref] = scores.get(ref, 0) + 2
                    via.setdefault(ref, []).append("entity")
                    reached.add(key.lower())
            general = {k.lower() for k in keywords.general}
            for triple, ref, keys in self.relations:
                if general & keys:
                    scores[ref] = scores.get(ref, 0) + len(general & keys) / 4
                    via.setdefault(ref, []).append("relation")
            frontier = set(reached)
            for hop in range(1, hops + 1):
                nxt = set()
                for triple, ref, _ in self.relations:
                    ends = {triple.subject.lower(), triple.object.lower()}
                    if ends & frontier:
                        for end in ends - reached:
                            for other in self.entities.get(end, ()):
                                if other not in scores:
                                    scores[other] = 1.0 / (hop + 1)
                                    via.setdefault(other, []).append(f"hop{hop}")
                            nxt.add(end)
                reached |= nxt
                frontier = nxt
            ranked = sorted(scores, key=lambda ref: (-scores[ref], ref))[:max_units]
            units = []
            for ref in ranked:
                hit = self.chunks[ref]
                triples = tuple(t for t, r, _ in self.relations if r == ref)[:4] if with_triples else ()
                units.append(
                    KnowledgeUnit(
                        id=f"unit:{ref}",
                        hit=hit if with_text else replace(hit, text="", snippet=""),
                        triples=triples,
                        score=scores[ref],
                        via=tuple(dict.fromkeys(via[ref])),
                    )
                )
            return units


class KnowledgeInjector:
    """Stands in for the run context's knowledge entry point: one in-memory base per run opened."""

    def __init__(self, documents: Sequence[Hit] = ()) -> None:
        self.opened: list[InMemoryKnowledge] = []
        self.requests: list[dict] = []
        self._documents = list(documents)  # a collection's graph, built before the run

    def __call__(self, ctx, scope, *, collection: str, chunk_tokens: int, node) -> InMemoryKnowledge:
        self.requests.append(
            {
                "scope": scope,
                "collection": collection,
                "chunk_tokens": chunk_tokens,
                "node": node.kind if node is not None else None,
            }
        )
        base = InMemoryKnowledge(scope=scope)
        if self._documents:
            base.add_documents(self._documents)
            base.added.clear()  # built before the run: the run itself added nothing
        self.opened.append(base)
        return base
