"""The search seam: every backend (local corpus, web, none) returns `Hit`s."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
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


# The snippet of a first-stage hit whose snippet is made later (`Candidates`); never in a search's result.
SNIPPET_LATER = "\x00snippet later"


@dataclass(frozen=True)
class Candidates:
    """A first stage's hits for a later stage that keeps a few of them (fusion, the hops). A hit
    whose snippet is `SNIPPET_LATER` gets it from `finish`, which the later stage calls on the hits
    it keeps: the local corpus's snippets cost more than its ranking, and 3 of its 50 candidates
    reach a node. Searchers that can define `candidates(query, k) -> Candidates`; this is the
    optional part of the seam that `candidates_of` asks for."""

    hits: list[Hit]
    finish: Callable[[list[Hit]], list[Hit]]


def candidates_of(searcher: Searcher, query: str, k: int) -> Candidates:
    """`searcher`'s top `k` as candidates: with snippets to come where it can (`candidates`), its
    search's hits otherwise."""
    # Asked of the class: a wrapper that hands other attributes to the searcher it wraps
    # (`ExcludingSearcher`'s __getattr__) would hand this one on too, and skip its own filter.
    if callable(getattr(type(searcher), "candidates", None)):
        found: Candidates = searcher.candidates(query, k)  # type: ignore[attr-defined]
        return found
    return Candidates(searcher.search(query, k), list)


@dataclass(frozen=True)
class Ranking:
    """A first stage's order as `Hit.ref`s, best first, for fusion, which ranks by ref and keeps
    half of what its stages rank: `hits(refs, scores)` makes the hits of the refs kept (a ref twice
    in `refs`: its first), each with the score given and its snippet to come as a `Candidates`' is
    (`finish`). A hit costs more to make than to rank. Searchers that can define
    `ranking(query, k) -> Ranking`; `ranking_of` makes one of any searcher's hits otherwise."""

    refs: list[str]
    hits: Callable[[Sequence[str], Sequence[float]], list[Hit]]
    finish: Callable[[list[Hit]], list[Hit]]


def ranking_of(searcher: Searcher, query: str, k: int) -> Ranking:
    """`searcher`'s top `k` as a `Ranking`: its own where it ranks before it makes hits
    (`ranking`), its candidates' otherwise."""
    if callable(getattr(type(searcher), "ranking", None)):  # asked of the class, as `candidates_of`
        ranked: Ranking = searcher.ranking(query, k)  # type: ignore[attr-defined]
        return ranked
    found = candidates_of(searcher, query, k)
    first: dict[str, Hit] = {}
    for hit in found.hits:
        first.setdefault(hit.ref, hit)
    return Ranking(
        [hit.ref for hit in found.hits],
        lambda refs, scores: [replace(first[ref], score=score) for ref, score in zip(refs, scores)],
        found.finish,
    )


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
