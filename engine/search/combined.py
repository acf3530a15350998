"""Putting searchers together: several backends at once, no search, and the mode factory."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from itertools import zip_longest
from typing import TYPE_CHECKING

from engine.config import SearchMode, Settings
from engine.search.protocol import Hit, Searcher, SearchError, titled_page

if TYPE_CHECKING:  # only for annotations: "none" and "web" never import the corpus (below)
    from engine.search.local import LocalCorpusSearcher
    from engine.search.vectors import CorpusEmbedding

logger = logging.getLogger(__name__)

ErrorHandler = Callable[[Searcher, SearchError], None]


def _log_error(searcher: Searcher, error: SearchError) -> None:
    logger.warning("%s failed: %s (%s)", searcher.description, error, error.hint)


class NullSearcher:
    """A searcher that finds nothing: methods reason from the model's own knowledge."""

    @property
    def description(self) -> str:
        return "no search"

    def search(self, query: str, k: int = 5) -> list[Hit]:
        return []


class CombinedSearcher:
    """Searches several backends and interleaves their hits (1st of each, then 2nd of each...).

    Hits are deduplicated by `ref` and cut to `k`. A backend that raises SearchError is reported
    to `on_error` (logged by default) and the others' hits are still returned; only when every
    backend fails is an error raised.
    """

    def __init__(self, searchers: Sequence[Searcher], *, on_error: ErrorHandler | None = None) -> None:
        if not searchers:
            raise ValueError("CombinedSearcher needs at least one searcher")
        self.searchers = list(searchers)
        self.on_error = on_error or _log_error

    @property
    def description(self) -> str:
        return " + ".join(s.description for s in self.searchers)

    def web_first(self) -> Searcher:
        web = [s for s in self.searchers if is_web(s)]
        rest = [s for s in self.searchers if not is_web(s)]
        return WebFirstSearcher(web, rest) if web and rest else self

    def titled(self, title: str) -> Hit | None:
        """The first backend's page titled `title` (protocol.titled_page)."""
        return next((page for page in (titled_page(s, title) for s in self.searchers) if page is not None), None)

    def search(self, query: str, k: int = 5) -> list[Hit]:
        results: list[list[Hit]] = []
        errors: list[SearchError] = []
        for searcher in self.searchers:
            try:
                results.append(searcher.search(query, k))
            except SearchError as exc:
                errors.append(exc)
                self.on_error(searcher, exc)
        if errors and not results:
            if len(errors) == 1:
                raise errors[0]
            raise SearchError(
                "every search backend failed: " + "; ".join(str(e) for e in errors),
                hint=next((e.hint for e in errors if e.hint), ""),
            )
        merged: list[Hit] = []
        seen: set[str] = set()
        for row in zip_longest(*results):
            for hit in row:
                if hit is not None and hit.ref not in seen:
                    seen.add(hit.ref)
                    merged.append(hit)
        return merged[:k]


def is_web(searcher: Searcher) -> bool:
    """Whether a searcher searches the web (its hits are web pages)."""
    return getattr(searcher, "hit_kind", None) == "web"


class WebFirstSearcher:
    """The web backends first; the others only fill what the web did not find (or when it failed).
    What a news question wants: recent pages before an offline corpus's nearest matches."""

    def __init__(self, web: Sequence[Searcher], rest: Sequence[Searcher]) -> None:
        self.web = CombinedSearcher(web, on_error=lambda *_: None) if len(web) > 1 else web[0]
        self.rest = (CombinedSearcher(rest) if len(rest) > 1 else rest[0]) if rest else None

    @property
    def description(self) -> str:
        return self.web.description + (f", then {self.rest.description}" if self.rest else "")

    def titled(self, title: str) -> Hit | None:
        return titled_page(self.rest, title) if self.rest is not None else None

    def search(self, query: str, k: int = 5) -> list[Hit]:
        try:
            hits = self.web.search(query, k)
        except SearchError as exc:
            if self.rest is None:
                raise
            _log_error(self.web, exc)
            hits = []
        if len(hits) >= k or self.rest is None:
            return hits[:k]
        seen = {hit.ref for hit in hits}
        more = [hit for hit in self.rest.search(query, k) if hit.ref not in seen]
        return (hits + more)[:k]


def web_first(searcher: Searcher) -> Searcher:
    """The same search with its web backends asked first (`WebFirstSearcher`), when it has both web
    and other backends; otherwise the searcher itself. A wrapper that keeps hits out (a benchmark's
    exclusions) passes the request on by its own `web_first` method, so nothing it excludes returns."""
    preferring = getattr(searcher, "web_first", None)
    return preferring() if callable(preferring) else searcher


def build_searcher(
    mode: SearchMode,
    settings: Settings,
    *,
    web_factory: Callable[[], object] | None = None,
    progress: Callable[[str, float], None] | None = None,
    local: Callable[[LocalCorpusSearcher], Searcher] | None = None,
    embedding: CorpusEmbedding | None = None,
) -> Searcher:
    """The searcher for a search mode: "local" (bundled corpus + ingested files), "web",
    "both" or "none". `web_factory` makes the ddgs client (tests pass a fake). `progress` hears
    about the corpus index's first build, or the wait for another process building it. `local`
    makes the first stage that searches the corpus (`engine/search/retrieval.py`); BM25 without it.
    `embedding`: the `CorpusEmbedding` the corpus's vectors are of (its ingests embed with it)."""
    # Imported here so "none"/"web" never open the corpus and "local" never imports the web stack.
    if mode == "none":
        return NullSearcher()
    if mode not in ("local", "web", "both"):
        raise ValueError(f"unknown search mode '{mode}': use local, web, both or none")
    searchers: list[Searcher] = []
    if mode in ("local", "both"):
        from engine.search.bundled import open_default_corpus

        corpus = open_default_corpus(settings, progress, embedding=embedding)
        searchers.append(local(corpus) if local is not None else corpus)
    if mode in ("web", "both"):
        from engine.search.web import WebSearcher

        searchers.append(WebSearcher(ddgs_factory=web_factory))
    return searchers[0] if len(searchers) == 1 else CombinedSearcher(searchers)
