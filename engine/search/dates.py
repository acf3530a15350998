"""The date a source gives: the first full date in its title or opening text.

Neither the corpus nor the web search (ddgs text results) carries a publication date, so a search
agent that must say when something happened reads it from the text: an ISO date (2024-05-03), a
"May 3, 2024" or a "3 May 2024". Only whole dates count (a bare year is too often a date in the
story, not of it). Returned as written in ISO form; `None` when the source gives none.
"""

from __future__ import annotations

import re
from datetime import date

from engine.search.protocol import Hit

_MONTHS = {
    name: index
    for index, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTH_FIRST = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}}),?\s+(\d{{4}})\b", re.IGNORECASE)
_DAY_FIRST = re.compile(rf"\b(\d{{1,2}})\s+{_MONTH}\s+(\d{{4}})\b", re.IGNORECASE)
# How far into a source to look: a date further in is about the story, not the page.
SCAN_CHARS = 600


def _valid(year: int, month: int, day: int) -> str | None:
    try:
        return date(year, month, day).isoformat()
    except ValueError:
        return None


def date_in(text: str) -> str | None:
    """The first whole date written in `text`, as YYYY-MM-DD; None when there is none."""
    found: list[tuple[int, str]] = []
    for match in _ISO.finditer(text):
        if (value := _valid(int(match[1]), int(match[2]), int(match[3]))) is not None:
            found.append((match.start(), value))
            break
    for match in _MONTH_FIRST.finditer(text):
        if (value := _valid(int(match[3]), _MONTHS[match[1].lower()], int(match[2]))) is not None:
            found.append((match.start(), value))
            break
    for match in _DAY_FIRST.finditer(text):
        if (value := _valid(int(match[3]), _MONTHS[match[2].lower()], int(match[1]))) is not None:
            found.append((match.start(), value))
            break
    return min(found)[1] if found else None


def source_date(source: Hit | object) -> str | None:
    """The date a search hit or stored source gives in its title or opening text, if any."""
    title = getattr(source, "title", "") or ""
    opening = (getattr(source, "snippet", "") or getattr(source, "text", "") or "")[:SCAN_CHARS]
    return date_in(title) or date_in(opening)
