"""A searcher that fails while an outage is on, then searches for real: for the tests of what a run
does when its search fails, and what a resume does after."""

from __future__ import annotations

from engine.search.protocol import SearchError


class SearchOutage:
    def __init__(self, services, message: str = "the corpus index is unreachable", mode: str = "local") -> None:
        self.real = services.searcher(mode)
        self.description = self.real.description
        self.message = message
        self.on = True
        services._searchers[mode] = self  # every run of these services searches through it

    def search(self, query: str, k: int = 5):
        if self.on:
            raise SearchError(self.message, hint="check the disk or the network")
        return self.real.search(query, k)
