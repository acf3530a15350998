"""Web search through the `ddgs` metasearch library, under our own deadline."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from typing import Any

from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException

from engine.search.protocol import Hit, SearchError

LOCAL_HINT = "check the network connection, or use --search local (the bundled offline corpus)"
RATE_LIMIT_HINT = "wait a minute before searching again, or use --search local"

DDGSFactory = Callable[[], Any]


def default_ddgs_factory(timeout_s: int = 5) -> DDGSFactory:
    def make() -> Any:
        from ddgs import DDGS

        return DDGS(timeout=timeout_s)

    return make


class WebSearcher:
    """`Searcher` over ddgs text search (DuckDuckGo and the other engines ddgs aggregates).

    ddgs has its own per-engine timeout, but its `auto` backend tries engines in turn and can take
    several times that, so the call runs in a worker thread and we stop waiting at `deadline_s`.
    A call we gave up on finishes (or times out) in the background; its result is dropped.
    """

    hit_kind = "web"  # what `combined.web_first` looks for

    def __init__(
        self,
        *,
        ddgs_factory: DDGSFactory | None = None,
        backend: str = "auto",
        region: str = "us-en",
        safesearch: str = "moderate",
        deadline_s: float = 20.0,
    ) -> None:
        self.ddgs_factory = ddgs_factory or default_ddgs_factory()
        self.backend = backend
        self.region = region
        self.safesearch = safesearch
        self.deadline_s = deadline_s

    @property
    def description(self) -> str:
        return f"web search (ddgs, backend {self.backend})"

    def search(self, query: str, k: int = 5) -> list[Hit]:
        if not query.strip() or k <= 0:
            return []
        rows = self._run_with_deadline(query, k)
        hits: list[Hit] = []
        seen: set[str] = set()
        for row in rows:
            url = (row.get("href") or row.get("url") or "").strip()
            if not url or url in seen:
                continue
            seen.add(url)
            body = " ".join(str(row.get("body") or "").split())
            hits.append(
                Hit(
                    title=str(row.get("title") or url).strip(),
                    ref=url,
                    snippet=body,
                    text=body,
                    kind="web",
                    url=url,
                    score=1.0 / (len(hits) + 1),  # ddgs returns results best first
                )
            )
            if len(hits) >= k:
                break
        # Pages are read by the method that chose these hits (`RunContext.read_pages`), not here.
        return hits

    def _call(self, query: str, k: int) -> list[dict[str, Any]]:
        ddgs = self.ddgs_factory()
        return list(
            ddgs.text(
                query,
                max_results=k,
                backend=self.backend,
                region=self.region,
                safesearch=self.safesearch,
            )
            or []
        )

    def _run_with_deadline(self, query: str, k: int) -> list[dict[str, Any]]:
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="thoughtmap-web")
        try:
            future = executor.submit(self._call, query, k)
            try:
                return future.result(timeout=self.deadline_s)
            except FuturesTimeout as exc:
                raise SearchError(
                    f"web search gave no answer within {self.deadline_s:g}s; web search is unreachable or very slow",
                    hint=LOCAL_HINT,
                ) from exc
            except Exception as exc:  # noqa: BLE001 - every backend failure becomes SearchError
                mapped = map_ddgs_error(exc)
                if mapped is None:
                    return []
                raise mapped from exc
        finally:
            # Never wait for a stuck worker: that would defeat the deadline.
            executor.shutdown(wait=False, cancel_futures=True)


def map_ddgs_error(exc: BaseException) -> SearchError | None:
    """The SearchError for a ddgs/network failure; None means "no results" (not an error)."""
    if isinstance(exc, SearchError):
        return exc
    if isinstance(exc, RatelimitException):
        return SearchError(f"web search is rate limited: {exc}", hint=RATE_LIMIT_HINT)
    if isinstance(exc, TimeoutException):
        return SearchError(f"web search timed out: {exc}", hint=LOCAL_HINT)
    if isinstance(exc, DDGSException):
        # ddgs raises "No results found." when every engine answered with nothing.
        if str(exc).strip().rstrip(".").lower() == "no results found":
            return None
        return SearchError(f"web search failed: {exc}", hint=LOCAL_HINT)
    if isinstance(exc, (OSError, TimeoutError)):
        return SearchError(f"web search is unreachable: {exc}", hint=LOCAL_HINT)
    return SearchError(f"web search failed: {type(exc).__name__}: {exc}", hint=LOCAL_HINT)
