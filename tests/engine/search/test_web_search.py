"""WebSearcher with a fake DDGS, CombinedSearcher, NullSearcher and build_searcher."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException

from engine.config import load_settings
from engine.search.combined import CombinedSearcher, NullSearcher, build_searcher
from engine.search.fetch import PageFetcher
from engine.search.local import LocalCorpusSearcher
from engine.search.pages import read_pages
from engine.search.protocol import Hit, Searcher, SearchError
from engine.search.web import WebSearcher
from tests.support.fixtures_corpus import bundled_corpus, no_bundled_reading, prebuilt_corpus_home  # noqa: F401

ROWS = [
    {"title": "Okapi - Wikipedia", "href": "https://en.wikipedia.org/wiki/Okapi", "body": "The okapi is  a mammal."},
    {"title": "Okapi facts", "href": "https://example.org/okapi", "body": "Okapis live in forests."},
    {"title": "Duplicate", "href": "https://example.org/okapi", "body": "same url again"},
    {"title": "No link", "body": "dropped"},
    {"title": "Third", "href": "https://example.com/3", "body": "third"},
]  # fmt: skip


class FakeDDGS:
    def __init__(self, rows=None, error=None, hang: threading.Event | None = None):
        self.rows = ROWS if rows is None else rows
        self.error = error
        self.hang = hang
        self.calls: list[tuple[str, dict]] = []

    def text(self, query, **kwargs):
        self.calls.append((query, kwargs))
        if self.hang is not None:
            self.hang.wait(10)
        if self.error is not None:
            raise self.error
        return self.rows[: kwargs.get("max_results") or None]


@pytest.fixture
def release():
    event = threading.Event()
    yield event
    event.set()  # let any worker stuck in a hanging fake finish


def test_results_are_mapped_to_hits():
    fake = FakeDDGS()
    searcher = WebSearcher(ddgs_factory=lambda: fake, region="uk-en", safesearch="off")
    assert isinstance(searcher, Searcher)
    hits = searcher.search("okapi", k=5)
    assert [h.ref for h in hits] == [
        "https://en.wikipedia.org/wiki/Okapi",
        "https://example.org/okapi",
        "https://example.com/3",
    ]
    first = hits[0]
    assert first == Hit(
        title="Okapi - Wikipedia",
        ref="https://en.wikipedia.org/wiki/Okapi",
        snippet="The okapi is a mammal.",
        text="The okapi is a mammal.",
        kind="web",
        url="https://en.wikipedia.org/wiki/Okapi",
        score=1.0,
    )
    assert hits[0].score > hits[1].score > hits[2].score
    query, kwargs = fake.calls[0]
    assert query == "okapi"
    assert kwargs == {"max_results": 5, "backend": "auto", "region": "uk-en", "safesearch": "off"}
    assert len(searcher.search("okapi", k=1)) == 1
    assert searcher.search("   ", k=5) == []
    assert "web search" in searcher.description


def test_hanging_ddgs_hits_our_deadline(release):
    # The fake hangs until the fixture releases it, after the test: only our deadline ends this.
    searcher = WebSearcher(ddgs_factory=lambda: FakeDDGS(hang=release), deadline_s=0.3)
    with pytest.raises(SearchError) as info:
        searcher.search("anything")
    assert "within 0.3s" in str(info.value)
    assert "--search local" in info.value.hint


@pytest.mark.parametrize(
    ("error", "message", "hint"),
    [
        (RatelimitException("202 Ratelimit"), "rate limited", "wait a minute"),
        (TimeoutException("timed out"), "timed out", "--search local"),
        (DDGSException("engine broke"), "web search failed: engine broke", "--search local"),
        (OSError("Network is unreachable"), "unreachable", "--search local"),
        (RuntimeError("weird"), "RuntimeError", "--search local"),
    ],
)
def test_ddgs_errors_become_search_errors(error, message, hint):
    searcher = WebSearcher(ddgs_factory=lambda: FakeDDGS(error=error))
    with pytest.raises(SearchError, match=message) as info:
        searcher.search("q")
    assert hint in info.value.hint


def test_no_results_is_not_an_error():
    searcher = WebSearcher(ddgs_factory=lambda: FakeDDGS(error=DDGSException("No results found.")))
    assert searcher.search("q") == []


def test_factory_failure_is_a_search_error():
    def broken():
        raise OSError("no network")

    with pytest.raises(SearchError, match="unreachable"):
        WebSearcher(ddgs_factory=broken).search("q")


class _PageHandler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802
        if self.path == "/okapi":
            body = b"Full page text: the okapi is the closest living relative of the giraffe."
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
        else:
            body = b"gone"
            self.send_response(404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _web_hit(title: str, url: str, snippet: str) -> Hit:
    return Hit(title=title, ref=url, snippet=snippet, text=snippet, kind="web", url=url)


def test_read_pages_replaces_text_and_keeps_snippet_on_failure():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _PageHandler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        hits = [
            _web_hit("Okapi", base + "/okapi", "short snippet"),
            _web_hit("Gone", base + "/gone", "gone snippet"),
            _web_hit("Not fetched", base + "/okapi?3", "third snippet"),
        ]
        got = read_pages(PageFetcher(allow_private=True, trust_env=False, timeout_s=3), hits, limit=2, max_chars=20_000)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert "closest living relative" in got.hits[0].text and got.hits[0].snippet == "short snippet"
    assert got.hits[1].text == "gone snippet"  # the fetch failed: the snippet stays, the failure is said
    assert got.read == 1 and len(got.failures) == 1 and "/gone" in got.failures[0]
    assert got.hits[2].text == "third snippet"  # beyond the limit


def test_read_pages_respects_the_private_address_policy():
    got = read_pages(PageFetcher(), [_web_hit("Local", "http://127.0.0.1:9/x", "snippet")], limit=1, max_chars=1000)
    assert got.hits[0].text == "snippet" and got.read == 0 and got.failures


# -- combined / null / factory -------------------------------------------------------------------


class ListSearcher:
    def __init__(self, name, refs=(), error: SearchError | None = None):
        self.name = name
        self.refs = refs
        self.error = error

    @property
    def description(self):
        return self.name

    def search(self, query, k=5):
        if self.error:
            raise self.error
        return [Hit(title=r, ref=r, snippet=r, text=r, kind="corpus") for r in self.refs][:k]


def test_combined_interleaves_and_dedups():
    combined = CombinedSearcher([ListSearcher("a", ["a1", "a2", "x"]), ListSearcher("b", ["b1", "x", "b3"])])
    assert [h.ref for h in combined.search("q", 10)] == ["a1", "b1", "a2", "x", "b3"]
    assert [h.ref for h in combined.search("q", 3)] == ["a1", "b1", "a2"]
    assert combined.description == "a + b"


def test_combined_survives_one_failure_and_reports_it():
    seen = []
    failing = ListSearcher("web", error=SearchError("down", hint="use local"))
    combined = CombinedSearcher(
        [failing, ListSearcher("local", ["l1"])], on_error=lambda s, e: seen.append((s.description, str(e)))
    )
    assert [h.ref for h in combined.search("q")] == ["l1"]
    assert seen == [("web", "down")]


def test_combined_raises_when_all_fail():
    one = CombinedSearcher([ListSearcher("web", error=SearchError("down", hint="h"))], on_error=lambda s, e: None)
    with pytest.raises(SearchError, match="down"):
        one.search("q")
    two = CombinedSearcher(
        [ListSearcher("a", error=SearchError("x down")), ListSearcher("b", error=SearchError("y down", hint="hint-b"))],
        on_error=lambda s, e: None,
    )
    with pytest.raises(SearchError, match="every search backend failed: x down; y down") as info:
        two.search("q")
    assert info.value.hint == "hint-b"


def test_null_searcher():
    null = NullSearcher()
    assert isinstance(null, Searcher)
    assert null.search("anything") == [] and null.description == "no search"


def test_build_searcher_modes(prebuilt_corpus_home):
    settings = load_settings()
    assert settings.corpus_index_path.parent == prebuilt_corpus_home
    assert isinstance(build_searcher("none", settings), NullSearcher)

    fake = FakeDDGS()
    web = build_searcher("web", settings, web_factory=lambda: fake)
    assert isinstance(web, WebSearcher)
    assert web.search("okapi", 2)[0].kind == "web"

    with no_bundled_reading():  # the prebuilt index is reused, not rebuilt
        local = build_searcher("local", settings)
    assert isinstance(local, LocalCorpusSearcher)
    assert local.search("Arthur's Magazine", 1)[0].kind == "corpus"

    both = build_searcher("both", settings, web_factory=lambda: fake)
    assert isinstance(both, CombinedSearcher)
    kinds = {h.kind for h in both.search("okapi magazine", 6)}
    assert kinds == {"corpus", "web"}

    with pytest.raises(ValueError, match="unknown search mode"):
        build_searcher("bing", settings)  # type: ignore[arg-type]
