"""Fetch a web page safely and return its main text.

Safety rules (pages are requested on behalf of an LLM, so URLs are untrusted):
* http and https only;
* the host must resolve to public addresses only (no loopback, private, link-local, reserved,
  multicast or unspecified) unless `allow_private`; every redirect hop is checked again, which is
  why redirects are followed by hand;
* the body is streamed and abandoned past `max_bytes`; one deadline covers the whole fetch.

* the address the connection really reached is checked too, before anything is read: the check
  above resolves the name before httpx resolves it again, and a DNS server that answers a public
  address first and 127.0.0.1 the second time (DNS rebinding) would otherwise get an internal
  page read into a report. (Through an HTTP proxy the peer is the proxy, which resolves the name
  itself: there the first check is all we can do.)
"""

from __future__ import annotations

import codecs
import ipaddress
import socket
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from engine.search.extract import ExtractionError, html_to_text, pdf_to_text
from engine.search.protocol import FetchError
from engine.text import storable_text

Resolver = Callable[[str, int], list[str]]

ALLOW_HINT = "set THOUGHTMAP_ALLOW_PRIVATE_FETCH=1 to allow"
USER_AGENT = "Mozilla/5.0 (compatible; Thoughtmap/0.1; research assistant)"
ACCEPT = "text/html,application/xhtml+xml,application/pdf,text/plain;q=0.9,*/*;q=0.5"
_HTML_TYPES = {"text/html", "application/xhtml+xml"}
_PLAIN_TYPES = {"text/plain", "text/markdown", "text/x-markdown"}
_PDF_TYPES = {"application/pdf", "application/x-pdf"}


@dataclass(frozen=True)
class FetchedPage:
    """A fetched page: `final_url` is where redirects ended; `text` is the extracted main text."""

    url: str
    final_url: str
    title: str
    text: str
    content_type: str


def system_resolver(host: str, port: int) -> list[str]:
    """All addresses `host` resolves to."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({info[4][0] for info in infos})


def address_problem(address: str) -> str | None:
    """Why `address` may not be fetched by default ("a loopback address"...), or None if public."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    if ip.version == 6 and ip.ipv4_mapped:  # ::ffff:127.0.0.1 is 127.0.0.1
        ip = ip.ipv4_mapped
    # Order matters: link-local and unspecified addresses are also "private" to ipaddress.
    checks = (
        (ip.is_loopback, "a loopback address"),
        (ip.is_link_local, "a link-local address"),
        (ip.is_unspecified, "an unspecified address"),
        (ip.is_multicast, "a multicast address"),
        (ip.is_reserved, "a reserved address"),
        (ip.is_private, "a private address"),
        (not ip.is_global, "not a public address"),
    )
    return next((why for flag, why in checks if flag), None)


class PageFetcher:
    """Fetches http(s) pages with an address policy, a size limit and an overall deadline."""

    def __init__(
        self,
        allow_private: bool = False,
        max_bytes: int = 2_000_000,
        timeout_s: float = 10.0,
        max_redirects: int = 5,
        *,
        resolver: Resolver = system_resolver,
        trust_env: bool = True,
        peer_problem: Callable[[str], str | None] = address_problem,
    ) -> None:
        self.allow_private = allow_private
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.max_redirects = max_redirects
        # Injected in tests to pretend a loopback test server is a public host (both: the name's
        # answer and the address connected to).
        self.resolver = resolver
        self.peer_problem = peer_problem
        # trust_env: honour HTTP(S)_PROXY / NO_PROXY like other tools on the machine.
        self.trust_env = trust_env

    def check_url(self, url: str) -> None:
        """Raise FetchError unless `url` is http(s) and its host is allowed."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise FetchError(
                f"refused: only http and https URLs can be fetched, not '{parts.scheme or url}'"
            )
        host = parts.hostname
        if not host:
            raise FetchError(f"refused: '{url}' has no host")
        if self.allow_private:
            return
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as exc:
            raise FetchError(f"refused: bad port in '{url}'") from exc
        try:
            ipaddress.ip_address(host.split("%", 1)[0])
            addresses = [host]
        except ValueError:
            try:
                addresses = self.resolver(host, port)
            except (socket.gaierror, UnicodeError) as exc:
                raise FetchError(
                    f"cannot resolve host '{host}'",
                    hint="check the URL and your network connection",
                ) from exc
        for address in addresses:
            why = address_problem(address)
            if why:
                shown = address if address == host else f"{host} ({address})"
                raise FetchError(f"refused: {shown} is {why}; {ALLOW_HINT}", hint=ALLOW_HINT)

    def fetch(self, url: str) -> FetchedPage:
        """Fetch `url` and extract its text. Raises FetchError with a readable message."""
        deadline = time.monotonic() + self.timeout_s
        current = url
        with httpx.Client(
            follow_redirects=False,
            trust_env=self.trust_env,
            headers={"User-Agent": USER_AGENT, "Accept": ACCEPT},
        ) as client:
            for _hop in range(self.max_redirects + 1):
                self.check_url(current)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._timeout(url)
                try:
                    request = client.stream("GET", current, timeout=httpx.Timeout(remaining))
                    with request as response:
                        self._check_peer(response, current)
                        if response.is_redirect:
                            location = response.headers.get("location")
                            if not location:
                                raise FetchError(f"{current} redirected without a Location header")
                            current = str(response.url.join(location))
                            continue
                        if response.status_code >= 400:
                            raise FetchError(f"HTTP {response.status_code} from {current}")
                        content_type = (
                            response.headers.get("content-type", "").split(";")[0].strip().lower()
                        )
                        body = self._read_body(response, deadline, url)
                        encoding = _usable_encoding(response.charset_encoding)
                except httpx.TimeoutException as exc:
                    raise self._timeout(url) from exc
                except httpx.HTTPError as exc:
                    raise FetchError(
                        f"could not fetch {current}: {exc or type(exc).__name__}",
                        hint="the site may be down or unreachable from this machine",
                    ) from exc
                return self._to_page(url, current, content_type, body, encoding)
        raise FetchError(f"too many redirects (more than {self.max_redirects}) from {url}")

    def _check_peer(self, response: httpx.Response, url: str) -> None:
        """Refuse a response from a non-public address, whatever the name resolved to when checked."""
        if self.allow_private or self._proxied(url):
            return
        stream = response.extensions.get("network_stream")
        peer = stream.get_extra_info("server_addr") if stream is not None else None
        if not peer:
            raise FetchError(f"refused: could not tell which address {url} connected to")
        why = self.peer_problem(str(peer[0]))
        if why:
            raise FetchError(f"refused: {urlsplit(url).hostname} answered from {peer[0]}, {why} (its address "
                             f"changed after it was checked); {ALLOW_HINT}", hint=ALLOW_HINT)

    def _proxied(self, url: str) -> bool:
        if not self.trust_env:
            return False
        parts = urlsplit(url)
        return bool(urllib.request.getproxies().get(parts.scheme)) and not urllib.request.proxy_bypass(
            parts.hostname or "")

    def _timeout(self, url: str) -> FetchError:
        return FetchError(f"timed out after {self.timeout_s:g}s fetching {url}")

    def _read_body(self, response: httpx.Response, deadline: float, url: str) -> bytes:
        too_big = FetchError(
            f"page is larger than the {self.max_bytes:,}-byte limit: {url}"
        )
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            raise too_big  # refuse before downloading anything
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > self.max_bytes:
                raise too_big
            if time.monotonic() > deadline:  # a server dripping bytes slowly
                raise self._timeout(url)
            chunks.append(chunk)
        return b"".join(chunks)

    def _to_page(
        self, url: str, final_url: str, content_type: str, body: bytes, encoding: str
    ) -> FetchedPage:
        kind = _kind(content_type, body)
        try:
            if kind == "html":
                title, text = html_to_text(body.decode(encoding, errors="replace"))
            elif kind == "pdf":
                title, text = pdf_to_text(body)
            elif kind == "text":
                title, text = "", body.decode(encoding, errors="replace").strip()
            else:
                raise FetchError(
                    f"unsupported content type '{content_type or 'unknown'}' at {final_url}"
                )
        except ExtractionError as exc:
            raise FetchError(f"{final_url}: {exc}") from exc
        # A page is untrusted text on its way into the database: no NUL, no lone surrogates.
        text, title = storable_text(text).strip(), storable_text(title)
        if not text:
            raise FetchError(f"no text found at {final_url}")
        return FetchedPage(url, final_url, title or final_url, text, content_type or kind)


def _usable_encoding(name: str | None) -> str:
    """The charset from the header if Python knows it, else UTF-8."""
    try:
        return codecs.lookup(name).name if name else "utf-8"
    except LookupError:
        return "utf-8"


def _kind(content_type: str, body: bytes) -> str | None:
    if content_type in _HTML_TYPES:
        return "html"
    if content_type in _PDF_TYPES:
        return "pdf"
    if content_type in _PLAIN_TYPES:
        return "text"
    if content_type in ("", "application/octet-stream", "binary/octet-stream"):
        # No useful type: look at the bytes.
        head = body[:1024].lstrip().lower()
        if head.startswith(b"%pdf-"):
            return "pdf"
        if head.startswith((b"<!doctype html", b"<html")) or b"<body" in head:
            return "html"
    return None
