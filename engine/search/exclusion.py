"""Sources a run may not see: a benchmark item's own answer is kept out of its retrieval.

A FreshWiki topic's reference article is both in the bundled corpus and on the web; a run on that
topic that found it would copy the answer it is scored against. `ExcludingSearcher` wraps any
searcher and drops the excluded documents before a method sees a hit: by title (the corpus names a
Wikipedia article by its title; a web page titles it "<title> - Wikipedia") and by URL (scheme,
`www.`/`m.` and a trailing slash or fragment ignored). It asks the searcher for more hits than it
was asked for, so a run still gets k hits when the excluded article filled the top of the list.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, Field

from engine.search.protocol import Hit, Searcher, titled_page
from engine.search.uploads import uploaded_by_someone_else

# How many more hits to ask for: a long article is many chunks, all of which may rank first.
OVERFETCH = 4
MAX_FETCH = 200


class SearchExclusions(BaseModel):
    """What a run may not retrieve; stored with the run (`Run.search_exclusions`)."""

    titles: list[str] = Field(default_factory=list, description="Document titles, compared case-insensitively.")
    urls: list[str] = Field(default_factory=list, description="Page URLs, compared without scheme or www.")

    def __bool__(self) -> bool:
        return bool(self.titles or self.urls)


def _title_key(title: str) -> str:
    return " ".join(title.casefold().replace("_", " ").split())


def _url_key(url: str) -> str:
    parts = urlsplit(url.strip())
    host = parts.netloc.casefold()
    host = re.sub(r"^(www\.|m\.)", "", host).replace(".m.wikipedia.org", ".wikipedia.org")
    return host + unquote(parts.path).rstrip("/").replace(" ", "_")


_WEB_TITLE_SUFFIX = re.compile(r"\s+[-–—|]\s+wikipedia$")


class ExcludingSearcher:
    """A searcher that never returns the excluded documents (see the module's docstring)."""

    def __init__(self, searcher: Searcher, exclusions: SearchExclusions) -> None:
        self.searcher = searcher
        self.exclusions = exclusions
        self._titles = {_title_key(t) for t in exclusions.titles if t.strip()}
        self._urls = {_url_key(u) for u in exclusions.urls if u.strip()}

    @property
    def description(self) -> str:
        return self.searcher.description

    def excludes(self, hit: Hit) -> bool:
        title = _title_key(hit.title)
        if title in self._titles or _WEB_TITLE_SUFFIX.sub("", title) in self._titles:
            return True
        return bool(hit.url and _url_key(hit.url) in self._urls)

    def search(self, query: str, k: int = 5) -> list[Hit]:
        fetch = min(MAX_FETCH, max(k * OVERFETCH, k + 20))
        kept = [hit for hit in self.searcher.search(query, fetch) if not self.excludes(hit)]
        return kept[:k]

    def titled(self, title: str) -> Hit | None:
        # Defined here, not left to __getattr__: the wrapped searcher's page may be an excluded one.
        page = titled_page(self.searcher, title)
        return None if page is None or self.excludes(page) else page

    def web_first(self) -> ExcludingSearcher:
        """The wrapped searcher's web-first search (`combined.web_first`), still without the excluded."""
        from engine.search.combined import web_first

        return ExcludingSearcher(web_first(self.searcher), self.exclusions)

    def __getattr__(self, name: str) -> Any:
        # Anything else (the corpus store, ingest...) is the wrapped searcher's.
        return getattr(self.searcher, name)


class OwnUploadsOnly:
    """A searcher that never returns another person's uploads (multi-user mode): a run sees the
    shared corpus and its own person's files."""

    def __init__(self, searcher: Searcher, user_id: int | None) -> None:
        self.searcher = searcher
        self.user_id = user_id

    @property
    def description(self) -> str:
        return self.searcher.description

    def search(self, query: str, k: int = 5) -> list[Hit]:
        fetch = min(MAX_FETCH, max(k * OVERFETCH, k + 20))
        kept = [h for h in self.searcher.search(query, fetch) if not uploaded_by_someone_else(h.ref, self.user_id)]
        return kept[:k]

    def titled(self, title: str) -> Hit | None:
        page = titled_page(self.searcher, title)
        return None if page is None or uploaded_by_someone_else(page.ref, self.user_id) else page

    def web_first(self) -> OwnUploadsOnly:
        """The wrapped searcher's web-first search (`combined.web_first`), still without others' uploads."""
        from engine.search.combined import web_first

        return OwnUploadsOnly(web_first(self.searcher), self.user_id)

    def __getattr__(self, name: str) -> object:
        # Anything else a method asks of its searcher (web_first, the corpus' own helpers) is the
        # wrapped searcher's.
        return getattr(self.searcher, name)


__all__ = ["ExcludingSearcher", "OwnUploadsOnly", "SearchExclusions"]
