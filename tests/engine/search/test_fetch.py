"""PageFetcher against a local http.server on 127.0.0.1 (no internet)."""

from __future__ import annotations

import re
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engine.search.fetch import PageFetcher, address_problem
from engine.search.protocol import FetchError, SearchError
from tests.support.fixtures_corpus import make_pdf

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
    hosts: list[str]  # the Host header of every request, in order

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
        self.hosts.append(self.headers.get("Host", ""))
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
    """The test server's address, with its port, the event its /slow page sets when it answers and
    the Host headers it received."""

    def __new__(cls, url: str, port: int, answered: threading.Event, hosts: list[str]) -> _ServerURL:
        value = super().__new__(cls, url)
        value.port, value.answered, value.hosts = port, answered, hosts
        return value


class _CountingServer(ThreadingHTTPServer):
    """Counts every connection it accepts, before reading a byte of it."""

    connections = 0

    def verify_request(self, request, client_address) -> bool:
        self.connections += 1
        return True


@contextmanager
def _serving(
    handler: type[BaseHTTPRequestHandler],
    address: str = "127.0.0.1",
    port: int = 0,
    server_class: type[ThreadingHTTPServer] = ThreadingHTTPServer,
) -> Iterator[ThreadingHTTPServer]:
    httpd = server_class((address, port), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


def _test_handler() -> tuple[type[_Handler], threading.Event, threading.Event, list[str]]:
    release, answered, hosts = threading.Event(), threading.Event(), []
    handler = type("Handler", (_Handler,), {"release": release, "answered": answered, "hosts": hosts})
    return handler, release, answered, hosts


@pytest.fixture
def server():
    handler, release, answered, hosts = _test_handler()
    with _serving(handler) as httpd:
        port = httpd.server_address[1]
        yield _ServerURL(f"http://127.0.0.1:{port}", port, answered, hosts)
        release.set()


def _fetcher(**kwargs) -> PageFetcher:
    kwargs.setdefault("allow_private", True)
    return PageFetcher(trust_env=False, **kwargs)


def _pretend_public(*addresses: str):
    """The default address policy, except that these loopback test servers count as public hosts."""
    return lambda address: None if address in addresses else address_problem(address)


def _pinned_fetcher() -> PageFetcher:
    """A fetcher with the address policy on, whose DNS answers the test server's 127.0.0.1 for every
    name."""
    return PageFetcher(
        trust_env=False, resolver=lambda host, port: ["127.0.0.1"], address_policy=_pretend_public("127.0.0.1")
    )


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
    # "public.test" is a public host served by the test server, so the first hop is allowed; the
    # redirect target (10.1.2.3) must then be checked and refused before any connection is made.
    url = f"http://public.test:{server.port}/redirect-private"
    with pytest.raises(FetchError, match="10.1.2.3 is a private address"):
        _pinned_fetcher().fetch(url)


class _RebindingDNS:
    """A rebinding attacker's DNS server: the first lookup gets a public answer, every later one
    127.0.0.1 (the internal server)."""

    def __init__(self, public: str) -> None:
        self.public = public
        self.lookups: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        return [self.public] if len(self.lookups) == 1 else ["127.0.0.1"]


@contextmanager
def _public_and_internal_servers() -> Iterator[tuple[int, _CountingServer]]:
    """The "public" test site on 127.0.0.2 and an internal server on 127.0.0.1, on the same port (a
    URL names a port, DNS only the address), the internal one counting the connections it gets."""
    handler, release, _answered, _hosts = _test_handler()
    with _serving(handler, "127.0.0.2") as public:
        port = public.server_address[1]
        with _serving(_Handler, "127.0.0.1", port, _CountingServer) as internal:
            yield port, internal
        release.set()


def test_dns_rebinding_reaches_no_internal_address():
    # The name is looked up once per request, checked, and the connection goes to that answer: the
    # later answer (127.0.0.1) is never asked for, let alone connected to.
    dns = _RebindingDNS("127.0.0.2")
    fetcher = PageFetcher(trust_env=False, resolver=dns, address_policy=_pretend_public("127.0.0.2"))
    with _public_and_internal_servers() as (port, internal):
        page = fetcher.fetch(f"http://rebind.test:{port}/page.html")
    assert page.title == "The Okapi"
    assert dns.lookups == ["rebind.test"]
    assert internal.connections == 0


def test_dns_rebinding_on_a_redirect_hop_is_refused_before_connecting():
    # The first hop reaches the public site, which redirects to the same name; the second hop's
    # lookup answers 127.0.0.1 and is refused there, with no connection to the internal server.
    dns = _RebindingDNS("127.0.0.2")
    fetcher = PageFetcher(trust_env=False, resolver=dns, address_policy=_pretend_public("127.0.0.2"))
    with _public_and_internal_servers() as (port, internal):
        with pytest.raises(FetchError) as info:
            fetcher.fetch(f"http://rebind.test:{port}/redirect-ok")
    assert str(info.value) == (
        "refused: rebind.test (127.0.0.1) is a loopback address; set THOUGHTMAP_ALLOW_PRIVATE_FETCH=1 to allow"
    )
    assert dns.lookups == ["rebind.test", "rebind.test"]
    assert internal.connections == 0


def test_every_address_is_checked_and_a_dead_one_falls_back_to_the_next():
    handler, release, _answered, _hosts = _test_handler()
    with _serving(handler, "127.0.0.2") as site, socket.socket() as dead:
        port = site.server_address[1]
        dead.bind(("127.0.0.1", port))  # bound, never listening: a connection to it is refused
        policy = _pretend_public("127.0.0.1", "127.0.0.2")
        # One internal answer among public ones refuses the name, whatever the order.
        mixed = PageFetcher(
            trust_env=False, resolver=lambda host, port: ["127.0.0.2", "10.0.0.1"], address_policy=policy
        )
        with pytest.raises(FetchError, match=r"two.test \(10.0.0.1\) is a private address"):
            mixed.fetch(f"http://two.test:{port}/page.html")
        # Like the system's own connect, a refused connection moves on to the next checked address.
        both = PageFetcher(
            trust_env=False, resolver=lambda host, port: ["127.0.0.1", "127.0.0.2"], address_policy=policy
        )
        assert both.fetch(f"http://two.test:{port}/page.html").title == "The Okapi"
        release.set()


@pytest.mark.parametrize(
    "address, reason",
    [
        ("2002:7f00:1::", "a 6to4 address embedding 127.0.0.1, a loopback address"),
        ("2002:a9fe:a9fe::", "a 6to4 address embedding 169.254.169.254, a link-local address"),
        ("2002:a00:1::", "a 6to4 address embedding 10.0.0.1, a private address"),
        # Teredo: 2001:0::/32, the server's IPv4 in bits 32-63, the client's inverted in the last 32.
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", "a Teredo address embedding 127.0.0.1, a loopback address"),
        ("2001:0:a00:1:8000:63bf:a247:27dd", "a Teredo address embedding 10.0.0.1, a private address"),
        ("64:ff9b::7f00:1", "a NAT64 address embedding 127.0.0.1, a loopback address"),
        ("64:ff9b::a00:1", "a NAT64 address embedding 10.0.0.1, a private address"),
        ("64:ff9b::a9fe:a9fe", "a NAT64 address embedding 169.254.169.254, a link-local address"),
        ("::7f00:1", "an IPv4-compatible address embedding 127.0.0.1, a loopback address"),
        ("::ffff:a9fe:a9fe", "a link-local address"),  # IPv4-mapped: it is that IPv4 address
    ],
)
def test_ipv6_forms_embedding_an_internal_ipv4_are_refused(address, reason):
    assert address_problem(address) == reason
    fetcher = PageFetcher(trust_env=False, resolver=lambda host, port: [address])
    with pytest.raises(FetchError, match=re.escape(f"refused: embedded.test ({address}) is {reason};")):
        fetcher.fetch("http://embedded.test/")


def test_other_internal_ipv6_forms_are_refused_and_public_translations_allowed():
    for address in (
        "64:ff9b:1::a00:1",  # NAT64 local-use prefix (RFC 8215)
        "::ffff:0:7f00:1",  # IPv4-translated (SIIT)
        "fec0::1",  # site-local
        "2001:0:5db8:d822:8000:63bf:a247:27dd",
    ):  # Teredo, both ends public: not global
        assert address_problem(address) is not None, address
    assert address_problem("2002:5db8:d822::1") is None  # 6to4 for 93.184.216.34
    assert address_problem("64:ff9b::5db8:d822") is None  # NAT64 (DNS64) for 93.184.216.34


def test_pinned_fetch_follows_redirects_and_keeps_the_host_name(server):
    # The name resolves to the (pretend public) test server: the connection goes to that address,
    # and both hops still say "pinned.test" in their Host header.
    page = _pinned_fetcher().fetch(f"http://pinned.test:{server.port}/redirect-ok")
    assert page.title == "The Okapi"
    assert page.final_url == f"http://pinned.test:{server.port}/page.html"
    assert server.hosts == [f"pinned.test:{server.port}"] * 2


def test_tls_to_a_pinned_address_uses_the_original_host_name():
    # A TLS listener on 127.0.0.1 records the server name the client sends (SNI). Python's ssl
    # verifies the certificate against that same name (`server_hostname`), so seeing "pinned.test"
    # here, not 127.0.0.1, is seeing which name the certificate would be checked for. The listener
    # has no certificate, so the handshake then fails, as a certificate for another name would.
    names: list[str] = []
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.sni_callback = lambda _sock, name, _context: names.append(name)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def handshake_once() -> None:
        connection, _ = listener.accept()
        with connection:
            try:
                context.wrap_socket(connection, server_side=True)
            except (ssl.SSLError, OSError):
                pass  # no certificate to offer: expected

    thread = threading.Thread(target=handshake_once, daemon=True)
    thread.start()
    try:
        with pytest.raises(FetchError, match="could not fetch https://pinned.test"):
            _pinned_fetcher().fetch(f"https://pinned.test:{port}/page.html")
        thread.join(timeout=30)  # backstop only: the handshake has ended when the fetch has failed
    finally:
        listener.close()
    assert names == ["pinned.test"]


class _Proxy(BaseHTTPRequestHandler):
    """A forward proxy that answers every request itself, keeping the request targets it got."""

    targets: list[str]

    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802 - http.server naming
        self.targets.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(ARTICLE_HTML)))
        self.end_headers()
        self.wfile.write(ARTICLE_HTML)


def test_through_a_proxy_the_name_is_checked_and_the_proxy_reaches_it(monkeypatch):
    # A proxy resolves the name itself, so the address can only be checked, not pinned: the request
    # goes to the proxy with the original URL, and a refused name never reaches the proxy.
    targets: list[str] = []
    with _serving(type("Proxy", (_Proxy,), {"targets": targets})) as proxy:
        for name in ("no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY", "HTTP_PROXY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy.server_address[1]}")
        page = PageFetcher(resolver=lambda host, port: ["93.184.216.34"]).fetch("http://proxied.test/page.html")
        assert page.title == "The Okapi"
        with pytest.raises(FetchError, match=r"refused: proxied.test \(10.0.0.1\) is a private address"):
            PageFetcher(resolver=lambda host, port: ["10.0.0.1"]).fetch("http://proxied.test/other.html")
    assert targets == ["http://proxied.test/page.html"]


def test_an_unusable_proxy_is_a_clear_error_without_its_password(monkeypatch):
    monkeypatch.setenv("http_proxy", "ftp://user:SECRET@127.0.0.1:9")
    monkeypatch.delenv("no_proxy", raising=False)
    with pytest.raises(FetchError, match="the proxy set in HTTP_PROXY, HTTPS_PROXY or ALL_PROXY") as info:
        PageFetcher(resolver=lambda host, port: ["93.184.216.34"]).fetch("http://proxied.test/page.html")
    assert "SECRET" not in str(info.value) + info.value.hint


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
