"""Web results are read, not only their snippets (`engine/search/pages.py`, `RunContext.read_pages`):
`focus` keeps the passages of a page that match the query, in the page's order; DEoT's search
tools and OmniThink's information tree store the page's passage about the query as the source's
text (so do rag and MTQA, the latter about one extraction chunk of it), FGDIP the whole page (its
Lookup reads it); a page that cannot be read keeps its snippet;
`read_pages=0` fetches nothing. (The research agent's own tests are in test_research_trace.py.)"""

from __future__ import annotations

import pytest

from engine.search.fetch import PageFetcher
from engine.search.pages import focus
from storage.models import RunStatus
from tests.engine.methods.research.research_scripts import RESEARCHY, FakeDDGS
from tests.support.fixtures_engine import run_to_end
from tests.support.local_site import site, site_rows  # noqa: F401 - site is a fixture


def test_focus_keeps_the_matching_paragraphs_in_page_order():
    page = "\n".join(
        ["Menu: home, news, sport."] * 20
        + ["The shortage of chips began in 2020.", "Weather today: sunny.", "Chip fabs take years."]
    )
    kept = focus(page, "why is there a chip shortage", 80)
    # Both matching paragraphs fit, in the page's order; the menu and the weather do not match.
    assert kept == "The shortage of chips began in 2020.\nChip fabs take years."
    assert focus("short page", "anything", 80) == "short page"  # a page that fits is kept whole
    assert focus("a" * 500, "chip", 100) == "a" * 100  # one paragraph longer than the room: its start


def _web_run(services, monkeypatch, base, method: str, params: dict) -> str:
    monkeypatch.setattr("engine.search.web.default_ddgs_factory", lambda *a, **k: lambda: FakeDDGS(site_rows(base)))
    # The loopback site stands for the web: only a test lets the fetcher reach a private address.
    services.runner.services.provide(PageFetcher, PageFetcher(allow_private=True, trust_env=False))
    run_id = run_to_end(services, RESEARCHY, method, {"relevance_floor": 0.0, **params}, search="web", timeout=120)
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.DONE, (run.status, run.error)
    return run_id


PAGE_ROOM = {"deot": 1200, "omnithink": 900, "fgdip": 20_000, "rag": 1500, "mtqa": 5400}  # what each keeps of a page


@pytest.mark.parametrize(
    "method, params",
    [
        ("deot", {"max_layers": 2}),
        ("omnithink", {"max_depth": 1}),
        ("fgdip", {"read_pages": 2}),
        ("rag", {}),
        ("mtqa", {}),
    ],
)
def test_a_method_that_searches_the_web_reads_the_pages(services, fake_llm, monkeypatch, site, method, params):
    base, requested = site
    run_id = _web_run(services, monkeypatch, base, method, params)
    by_ref = {s.ref: s for s in services.repo.list_sources(run_id)}
    page, dead = by_ref[f"{base}/chip.html"], by_ref[f"{base}/gone"]
    # The article's text (the query the method wrote decides which passages), not its menu or the snippet.
    assert "wafer" in page.text and "Section 3" not in page.text and "snippet" not in page.text
    # Each read keeps at most the method's room; a page read for several searches keeps every read's
    # passages (`united_text`), so each citation still has the text its writer was shown.
    reads = [link for link in services.repo.node_source_links(run_id) if link.source_id == page.id]
    assert len(page.text) <= PAGE_ROOM[method] * len(reads)
    if method in ("fgdip", "mtqa"):  # FGDIP's Lookup reads the page; MTQA's chunk holds all this one
        assert "carmakers cancelled wafer orders" in page.text and "Background 11" in page.text
    assert page.snippet == "Chip shortage snippet."  # the engine's snippet stays the short description
    assert dead.text == "Chip shortage archived snippet."  # a page that failed keeps its snippet
    assert "/chip.html" in requested and "/gone" in requested
    told = [e for e in services.repo.list_events(run_id) if e.text.startswith("read ")]
    assert told and any("kept their snippet" in e.text for e in told)


@pytest.mark.parametrize("method", ["deot", "omnithink", "fgdip", "rag", "mtqa"])
def test_read_pages_zero_fetches_nothing(services, fake_llm, monkeypatch, site, method):
    base, requested = site
    run_id = _web_run(services, monkeypatch, base, method, {"read_pages": 0})
    assert requested == []
    assert {s.text for s in services.repo.list_sources(run_id)} <= {
        "Chip shortage snippet.",
        "Chip shortage archived snippet.",
    }
