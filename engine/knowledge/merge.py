"""Deduplication and merging (MTQA Step 1, Eq. 4; incremental merge of a new subgraph as a union).

Entities are the same when their normalised names are (case, whitespace, quotes and surrounding
punctuation, a leading "the" do not count). Relations are the same when they join the same two
entities, in either direction. Merging keeps the first name and type seen, and joins descriptions
and keywords without repeating one already there. Everything here is untrusted model text: names,
descriptions and keywords are cut to bounded lengths.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from engine.knowledge.schemas import Extraction
from engine.text import storable_text
from storage.knowledge import EntityInput, RelationInput

MAX_NAME_CHARS = 200
MAX_TYPE_CHARS = 60
MAX_DESCRIPTION_CHARS = 1500  # a merged description keeps its first mentions, up to this
MAX_KEYWORD_CHARS = 60
MAX_KEYWORDS = 12  # a merged relation's keywords
DESCRIPTION_SEPARATOR = "\n"

# Quotes, brackets and Markdown emphasis around a name; sentence punctuation after it. Not "#", "+"
# or a leading ".": "C#", "C++" and ".NET" are names of their own, not "C" and "NET".
_QUOTES = "\"'`“”‘’«»()[]{}<>*_|"
_LEADING = _QUOTES
_TRAILING = _QUOTES + ".,;:!?"
_SPACES = re.compile(r"\s+")
_LEADING_ARTICLE = re.compile(r"^the\s+")


def entity_key(name: str) -> str:
    """The normalised name two mentions of one entity share ("" only for a blank name). Invisible
    format characters (a soft hyphen, a zero-width space) do not count; a name of punctuation alone
    ("!!!", a band) is its own key rather than none."""
    text = unicodedata.normalize("NFKC", name).casefold()
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    text = _SPACES.sub(" ", text).strip()
    bare = text.lstrip(_LEADING).rstrip(_TRAILING).strip()
    bare = _LEADING_ARTICLE.sub("", bare) or bare  # "The" alone stays a name
    return (bare or text)[:MAX_NAME_CHARS]


def clean(text: str, limit: int) -> str:
    """Model text as stored: storable, one run of spaces per gap, bounded."""
    return _SPACES.sub(" ", storable_text(text or "")).strip()[:limit]


def merge_descriptions(old: str, new: str) -> str:
    """`old` plus the parts of `new` it does not already hold (compared without case or spacing)."""
    parts = [p for p in old.split(DESCRIPTION_SEPARATOR) if p.strip()]
    seen = {_comparable(p) for p in parts}
    for part in new.split(DESCRIPTION_SEPARATOR):
        if part.strip() and _comparable(part) not in seen:
            seen.add(_comparable(part))
            parts.append(part.strip())
    merged = DESCRIPTION_SEPARATOR.join(parts)
    return merged[:MAX_DESCRIPTION_CHARS]


def merge_keywords(old: Iterable[str], new: Iterable[str]) -> tuple[str, ...]:
    out: list[str] = []
    seen: set[str] = set()
    for keyword in [*old, *new]:
        keyword = clean(keyword, MAX_KEYWORD_CHARS)
        if keyword and _comparable(keyword) not in seen:
            seen.add(_comparable(keyword))
            out.append(keyword)
    return tuple(out[:MAX_KEYWORDS])


def _comparable(text: str) -> str:
    return _SPACES.sub(" ", text).strip().casefold()


def merge_entity(stored: EntityInput, new: EntityInput) -> EntityInput:
    """One entity from a stored one and a new mention: first name, first known type, both descriptions."""
    kind = stored.type if stored.type and stored.type != "other" else (new.type or stored.type)
    return EntityInput(stored.key, stored.name, kind, merge_descriptions(stored.description, new.description))


def merge_relation(stored: RelationInput, new: RelationInput) -> RelationInput:
    """One relation from a stored one and a new mention (the stored direction is kept)."""
    return RelationInput(
        stored.source_key,
        stored.target_key,
        merge_descriptions(stored.description, new.description),
        merge_keywords(stored.keywords, new.keywords),
    )


def normalise_extraction(extraction: Extraction) -> tuple[list[EntityInput], list[RelationInput]]:
    """One chunk's extraction as unique entities and relations, ready to merge into the graph.

    Mentions of one entity (or one pair) within the chunk are merged first. A relation whose end is
    not among the entities gets that entity (with no description), so every relation joins two
    entities of the graph; a relation of an entity with itself is dropped."""
    entities: dict[str, EntityInput] = {}
    for item in extraction.entities:
        name = clean(item.name, MAX_NAME_CHARS)
        key = entity_key(name)
        if not key:
            continue
        new = EntityInput(
            key, name, clean(item.type, MAX_TYPE_CHARS).lower(), clean(item.description, MAX_DESCRIPTION_CHARS)
        )
        entities[key] = merge_entity(entities[key], new) if key in entities else new
    relations: dict[str, RelationInput] = {}
    for extracted in extraction.relations:
        ends = []
        for name in (extracted.source, extracted.target):
            name = clean(name, MAX_NAME_CHARS)
            key = entity_key(name)
            if key and key not in entities:
                entities[key] = EntityInput(key, name, "", "")
            ends.append(key)
        source, target = ends
        if not source or not target or source == target:
            continue
        relation = RelationInput(
            source, target, clean(extracted.description, MAX_DESCRIPTION_CHARS), merge_keywords((), extracted.keywords)
        )
        relations[relation.pair] = (
            merge_relation(relations[relation.pair], relation) if relation.pair in relations else relation
        )
    return list(entities.values()), list(relations.values())
