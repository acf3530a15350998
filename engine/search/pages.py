"""Read the pages behind web hits: a search engine returns a title and a two-line snippet, while a
summarizer that cites a page should read what the page says. The top web hits are fetched at once
(`PageFetcher`: public addresses only, size limit, one deadline) and their snippet text replaced by
the page's main text. A page that cannot be read keeps its snippet, and the failure is reported,
never raised: one slow or hostile site must not cost a search its other results."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from engine.search.fetch import PageFetcher
from engine.search.protocol import Hit
from engine.search.rerank import bm25_scores


@dataclass(frozen=True)
class PagesRead:
    """The hits, with the page text where a page was read; which pages failed and why."""

    hits: list[Hit]
    read: int = 0
    failures: list[str] = field(default_factory=list)  # "url: why", for the node and the step log


def readable(hit: Hit) -> bool:
    """A web hit with a URL: the only kind whose text is a snippet standing in for a page."""
    return hit.kind == "web" and bool(hit.url or hit.ref)


def focus(text: str, query: str, max_chars: int) -> str:
    """At most `max_chars` of `text`: all of it when it fits, else the paragraphs that best match
    `query` (BM25), kept in the page's order. A page's first screen is often navigation or a
    preamble; the passage that answers the query can be anywhere."""
    text = text.strip()
    if len(text) <= max_chars or not query.strip():
        return text[:max_chars]
    paragraphs = [p.strip() for p in text.split("\n") if p.strip()]
    scores = bm25_scores(query, paragraphs)
    chosen: set[int] = set()
    used = 0
    for i in sorted(range(len(paragraphs)), key=lambda i: (-scores[i], i)):
        if used + len(paragraphs[i]) + 1 > max_chars:
            continue
        chosen.add(i)
        used += len(paragraphs[i]) + 1
    if not chosen:  # one paragraph longer than the room: its start
        best = max(range(len(paragraphs)), key=lambda i: (scores[i], -i))
        return paragraphs[best][:max_chars]
    return "\n".join(paragraphs[i] for i in sorted(chosen))


def read_pages(fetcher: PageFetcher, hits: Sequence[Hit], *, limit: int, max_chars: int, query: str = "") -> PagesRead:
    """The first `limit` web hits (in the given order) with their page's main text, at most
    `max_chars` of it (with a `query`, the passages that match it best: `focus`); every other hit
    unchanged, the order kept."""
    chosen = [i for i, hit in enumerate(hits) if readable(hit)][: max(limit, 0)]
    out = list(hits)
    if not chosen:
        return PagesRead(out)
    executor = ThreadPoolExecutor(max_workers=len(chosen), thread_name_prefix="thoughtmap-fetch")
    try:
        futures = {executor.submit(fetcher.fetch, hits[i].url or hits[i].ref): i for i in chosen}
        # The fetcher has its own deadline; the extra second covers the extraction.
        done, late = wait(futures, timeout=fetcher.timeout_s + 1.0)
        read, failures = 0, []
        for future in futures:
            i = futures[future]
            url = hits[i].url or hits[i].ref
            if future in late:
                failures.append(f"{url}: no answer within {fetcher.timeout_s:g}s")
                continue
            try:
                page = future.result()
            except Exception as exc:  # noqa: BLE001 - any failure keeps the snippet, and is said
                failures.append(f"{url}: {exc}"[:300])
                continue
            if not page.text.strip():
                failures.append(f"{url}: the page has no readable text")
                continue
            out[i] = dataclasses.replace(
                out[i], text=focus(page.text, query, max_chars), title=out[i].title or page.title
            )
            read += 1
        return PagesRead(out, read, failures)
    finally:
        executor.shutdown(wait=False, cancel_futures=True)  # never wait for a stuck site
