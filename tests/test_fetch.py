"""PageFetcher against a local http.server on 127.0.0.1 (no internet)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engine.search.fetch import PageFetcher, address_problem
from engine.search.protocol import FetchError, SearchError
from tests.fixtures_corpus import make_pdf

ARTICLE_HTML = b"""<!doctype html><html><head><title>The Okapi</title>
<style>.x{color:red}</style></head><body>
<nav><a href="/">Home</a> | <a href="/about">About</a> | <a href="/shop">Shop</a></nav>
<article><h1>The Okapi</h1>
<p>The okapi is an artiodactyl mammal native to the northeast of the Democratic Republic of the
Congo in central Africa. Although the okapi has striped markings reminiscent of zebras, it is
most closely related to the giraffe.</p>
<p>The okapi and the giraffe are the only living members of the family Giraffidae. The okapi was
described scientifically in 1901 after reports reached Europe of a forest animal.</p>
</article><footer>Copyright 2024 Example Footer Corp. All rights reserved.</footer>
<script>var tracking = "trackingcode";</script></body></html>"""


class _Handler(BaseHTTPRequestHandler):
    release: threading.Event  # set on the class by the fixture
    answered: threading.Event  # set by /slow just before it answers

    def log_message(self, *args):  # keep test output quiet
        pass

    def _send(self, status, body=b"", content_type="text/html; charset=utf-8", headers=None):
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802 - http.server naming
        path = self.path
        if path == "/page.html":
            self._send(200, ARTICLE_HTML)
        elif path == "/tiny.html":
            self._send(200, b"<html><head><title>Tiny</title></head><body><p>Just a word.</p></body></html>")
        elif path == "/doc.pdf":
            self._send(200, make_pdf(["Quokkas live on Rottnest Island."], "Quokka"), "application/pdf")
        elif path == "/plain.txt":
            self._send(200, "Plain text with ünïcode.".encode(), "text/plain; charset=utf-8")
        elif path == "/image.png":
            self._send(200, b"\x89PNG....", "image/png")
        elif path == "/big":
            self._send(200, b"x" * 5000, "text/plain")
        elif path == "/big-stream":
            # No Content-Length: the limit must be enforced while reading.
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.close_connection = True
            try:
                for _ in range(50):
                    self.wfile.write(b"y" * 1000)
            except OSError:  # the client hung up at its limit, as it should
                pass
        elif path == "/slow":
            self.release.wait(5)
            self.answered.set()
            self._send(200, b"late")
        elif path == "/redirect-ok":
            self._send(302, headers={"Location": "/page.html"})
        elif path == "/redirect-private":
            self._send(302, headers={"Location": "http://10.1.2.3/secret"})
        elif path == "/redirect-file":
            self._send(302, headers={"Location": "file:///etc/passwd"})
        elif path == "/loop":
            self._send(302, headers={"Location": "/loop"})
        else:
            self._send(404, b"not found")


class _ServerURL(str):
    """The test server's address, with the event its /slow page sets when it answers."""

    def __new__(cls, url: str, answered: threading.Event) -> "_ServerURL":
        value = super().__new__(cls, url)
        value.answered = answered
        return value


@pytest.fixture
def server():
    release, answered = threading.Event(), threading.Event()
    handler = type("Handler", (_Handler,), {"release": release, "answered": answered})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield _ServerURL(f"http://127.0.0.1:{httpd.server_address[1]}", answered)
    release.set()
    httpd.shutdown()
    httpd.server_close()


def _fetcher(**kwargs) -> PageFetcher:
    kwargs.setdefault("allow_private", True)
    return PageFetcher(trust_env=False, **kwargs)


def test_address_policy():
    assert address_problem("127.0.0.1") == "a loopback address"
    assert address_problem("::1") == "a loopback address"
    assert address_problem("::ffff:127.0.0.1") == "a loopback address"
    assert address_problem("10.0.0.5") == "a private address"
    assert address_problem("192.168.1.1") == "a private address"
    assert address_problem("169.254.169.254") == "a link-local address"  # cloud metadata
    assert address_problem("0.0.0.0") == "an unspecified address"
    assert address_problem("224.0.0.1") == "a multicast address"
    assert address_problem("240.0.0.1") == "a reserved address"
    assert address_problem("100.64.0.1") == "not a public address"
    assert address_problem("93.184.216.34") is None
    assert address_problem("2606:4700::1111") is None


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://example.org/x", "javascript:alert(1)", "gopher://x", "/relative"]
)
def test_scheme_refused(url):
    with pytest.raises(FetchError, match="only http and https"):
        PageFetcher().fetch(url)


def test_fetch_error_is_a_search_error():
    assert issubclass(FetchError, SearchError)


def test_loopback_refused_by_default(server):
    with pytest.raises(FetchError) as info:
        PageFetcher(trust_env=False).fetch(server + "/page.html")
    message = str(info.value)
    assert "refused: 127.0.0.1 is a loopback address" in message
    assert "THOUGHTMAP_ALLOW_PRIVATE_FETCH=1" in message
    assert "THOUGHTMAP_ALLOW_PRIVATE_FETCH" in info.value.hint


def test_localhost_name_is_resolved_and_refused(server):
    url = server.replace("127.0.0.1", "localhost") + "/page.html"
    with pytest.raises(FetchError, match=r"localhost \(.*\) is a loopback address"):
        PageFetcher(trust_env=False).fetch(url)


def test_private_ip_literal_refused():
    with pytest.raises(FetchError, match="10.0.0.1 is a private address"):
        PageFetcher().fetch("http://10.0.0.1/admin")


def test_redirect_to_private_address_is_refused(server):
    # Pretend "localhost" is a public host so the first hop is allowed; the redirect target
    # (10.1.2.3) must then be checked and refused before any connection is made.
    fetcher = PageFetcher(trust_env=False, resolver=lambda host, port: ["93.184.216.34"],
                          peer_problem=lambda address: None)
    url = server.replace("127.0.0.1", "localhost") + "/redirect-private"
    with pytest.raises(FetchError, match="10.1.2.3 is a private address"):
        fetcher.fetch(url)


def test_dns_rebinding_is_refused_at_the_connection(server):
    # The name's first answer is public (the check passes), but the connection reaches 127.0.0.1, as
    # when a DNS server answers differently the second time: refused before the body is read.
    fetcher = PageFetcher(trust_env=False, resolver=lambda host, port: ["93.184.216.34"])
    url = server.replace("127.0.0.1", "localhost") + "/page.html"
    with pytest.raises(FetchError, match=r"refused: localhost answered from 127\.0\.0\.1, a loopback address"):
        fetcher.fetch(url)
    # Allowed private fetching still reads it.
    assert PageFetcher(trust_env=False, allow_private=True).fetch(url).title == "The Okapi"


def test_redirect_to_other_scheme_is_refused(server):
    with pytest.raises(FetchError, match="only http and https"):
        _fetcher().fetch(server + "/redirect-file")


def test_redirects_are_followed_and_limited(server):
    page = _fetcher().fetch(server + "/redirect-ok")
    assert page.final_url == server + "/page.html"
    assert page.url == server + "/redirect-ok"
    with pytest.raises(FetchError, match="too many redirects"):
        _fetcher(max_redirects=3).fetch(server + "/loop")


def test_html_main_text_extraction(server):
    page = _fetcher().fetch(server + "/page.html")
    assert page.title == "The Okapi"
    assert page.content_type == "text/html"
    assert "most closely related to the giraffe" in page.text
    assert "trackingcode" not in page.text and "color:red" not in page.text
    assert "All rights reserved" not in page.text  # boilerplate dropped by trafilatura


def test_tiny_html_falls_back_to_stripped_text(server):
    page = _fetcher().fetch(server + "/tiny.html")
    assert page.title == "Tiny" and "Just a word." in page.text


def test_pdf_and_plain_text(server):
    pdf = _fetcher().fetch(server + "/doc.pdf")
    assert "Rottnest Island" in pdf.text and pdf.title == "Quokka"
    plain = _fetcher().fetch(server + "/plain.txt")
    assert plain.text == "Plain text with ünïcode."


def test_unsupported_type_and_http_errors(server):
    with pytest.raises(FetchError, match="unsupported content type 'image/png'"):
        _fetcher().fetch(server + "/image.png")
    with pytest.raises(FetchError, match="HTTP 404"):
        _fetcher().fetch(server + "/nope")


def test_size_limit(server):
    with pytest.raises(FetchError, match="larger than the 1,000-byte limit"):
        _fetcher(max_bytes=1000).fetch(server + "/big")
    with pytest.raises(FetchError, match="larger than the 10,000-byte limit"):
        _fetcher(max_bytes=10_000).fetch(server + "/big-stream")


def test_timeout(server):
    # /slow answers when the fixture releases it after the test (or after 5 s): the fetch must have
    # given up before the server answered, which only our deadline does (no clock read here).
    with pytest.raises(FetchError, match="timed out after 0.5s"):
        _fetcher(timeout_s=0.5).fetch(server + "/slow")
    assert not server.answered.is_set()


def test_unreachable_port_is_a_fetch_error():
    with pytest.raises(FetchError, match="could not fetch"):
        _fetcher(timeout_s=2).fetch("http://127.0.0.1:9/")
