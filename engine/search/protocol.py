"""The search seam: every backend (local corpus, web, none) returns `Hit`s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

HitKind = Literal["corpus", "web"]


@dataclass(frozen=True)
class Hit:
    """One search result. `ref` is the stable identity: a URL for web hits, a document id
    (``<collection>/<title>#<chunk>``) for corpus hits. `via`: why a hit that need not match the
    query's words was retrieved: `NAMED_BY_QUESTION`, or the title of the document that names it (a
    hop, engine/search/hops.py); "" for a hit found by matching the query."""

    title: str
    ref: str
    snippet: str
    text: str
    kind: HitKind
    url: str | None = None
    score: float = 0.0
    via: str = ""


# `Hit.via` of a document the question itself names.
NAMED_BY_QUESTION = "\x00question"


@runtime_checkable
class Searcher(Protocol):
    @property
    def description(self) -> str:
        """What this searcher searches, for the 'running on' notice."""
        ...

    def search(self, query: str, k: int = 5) -> list[Hit]: ...


def titled_page(searcher: Searcher, title: str) -> Hit | None:
    """The page titled `title`, when the searcher can open a page by its title (the local corpus
    can; a web search engine cannot): what an agent's Search[entity] opens before any ranking.
    Searchers that can define `titled(title) -> Hit | None`; this is the optional part of the seam."""
    opener = getattr(searcher, "titled", None)
    return opener(title) if callable(opener) else None


class SearchError(Exception):
    """A search backend failed (deadline passed, rate limited, network down). `hint` says what to do."""

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint

    @property
    def user_message(self) -> str:
        """What went wrong and what to do, in one line (as `LLMError.user_message`)."""
        return f"{self} {self.hint}".strip()


class FetchError(SearchError):
    """A page could not be fetched or was refused (scheme, private address, size, time)."""
