"""The conceptual pool: insights merged without duplicates (Merge(I, P) of the paper)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from engine.citations import without_model_citations

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the their this to was were with".split()
)


def _terms(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in _STOP)


def same_concept(a: str, b: str, threshold: float = 0.8) -> bool:
    """Equal after normalisation, or nearly the same words (Jaccard >= threshold)."""
    ta, tb = _terms(a), _terms(b)
    if not ta or not tb:
        return a.strip().lower() == b.strip().lower()
    return len(ta & tb) / len(ta | tb) >= threshold


@dataclass
class MergeResult:
    pool: list[str]
    added: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)


def merge(insights: list[str], pool: list[str]) -> MergeResult:
    merged = list(pool)
    result = MergeResult(pool=merged)
    for insight in insights:
        # The `[n]` a reflection copies from its numbered sources: a concept outlives that numbering.
        text = " ".join(without_model_citations(insight).split())
        if not text:
            continue
        if any(same_concept(text, existing) for existing in merged):
            result.duplicates.append(text)
        else:
            merged.append(text)
            result.added.append(text)
    return result
