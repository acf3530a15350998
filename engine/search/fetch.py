"""Fetch a web page safely and return its main text.

Safety rules (pages are requested on behalf of an LLM, so URLs are untrusted):
* http and https only;
* the host must resolve to public addresses only (no loopback, private, link-local, site-local,
  reserved, multicast or unspecified, nor an IPv6 form that embeds such an IPv4 address: 6to4,
  Teredo, NAT64, IPv4-mapped or -compatible) unless `allow_private`;
* the host is resolved once per request and the connection goes to an address that was checked
  (`PinnedTransport`), never to a second lookup's answer: a DNS server that answers a public
  address to the check and 127.0.0.1 next (DNS rebinding) gets no request to an internal server.
  Every redirect hop is resolved, checked and pinned again, which is why redirects are followed by
  hand. (Through an HTTP proxy the proxy resolves the name: there the check is all we can do.)
* the body is streamed and abandoned past `max_bytes`; one deadline covers the whole fetch.
"""

from __future__ import annotations

import codecs
import ipaddress
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from engine.search.extract import ExtractionError, html_to_text, pdf_to_text
from engine.search.pinned_transport import PinnedTransport
from engine.search.protocol import FetchError
from engine.text import storable_text

Resolver = Callable[[str, int], list[str]]
# An address -> why it may not be fetched ("a loopback address"...), or None if it may.
AddressPolicy = Callable[[str], str | None]

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
    """All addresses `host` resolves to, in the system's order of preference."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    # str() for the checker: the stubs also allow an (int, bytes) address, which IP families never give.
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


# RFC 6052's well-known NAT64 prefix: the last 32 bits are the IPv4 address the gateway reaches.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# IPv4-compatible addresses (RFC 4291, deprecated): ::a.b.c.d, except :: and ::1 themselves.
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def address_problem(address: str) -> str | None:
    """Why `address` may not be fetched by default ("a loopback address"...), or None if public."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped:  # ::ffff:127.0.0.1 is 127.0.0.1
            return _ip_problem(ip.ipv4_mapped)
        # Tunnelling and translating forms carry packets on to the IPv4 address inside them:
        # 2002:7f00:1:: (6to4) reaches 127.0.0.1 through a relay, whatever ipaddress says of 2002::/16.
        for form, ipv4 in _embedded_ipv4(ip):
            why = _ip_problem(ipv4)
            if why:
                return f"{form} embedding {ipv4}, {why}"
        if ip.sixtofour or ip in _NAT64:
            # A public IPv4 address reached through 6to4 or a NAT64 gateway (a DNS64 resolver
            # answers these for IPv4-only sites): as public as that address. Python versions
            # disagree on whether the prefixes themselves are "global".
            return None
    return _ip_problem(ip)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[tuple[str, ipaddress.IPv4Address]]:
    """The IPv4 addresses an IPv6 address tunnels or translates to, each with its form's name."""
    if ip.sixtofour:
        return [("a 6to4 address", ip.sixtofour)]
    if ip.teredo:  # (server, client): the client is stored inverted; ipaddress undoes that
        return [("a Teredo address", ipv4) for ipv4 in ip.teredo]
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF)
    if ip in _NAT64:
        return [("a NAT64 address", low32)]
    if ip in _IPV4_COMPATIBLE and int(ip) > 1:
        return [("an IPv4-compatible address", low32)]
    return []


def _ip_problem(ip: IPAddress) -> str | None:
    # Order matters: link-local and unspecified addresses are also "private" to ipaddress.
    checks = (
        (ip.is_loopback, "a loopback address"),
        (ip.is_link_local, "a link-local address"),
        # fec0::/10, deprecated but still routed inside some networks; ipaddress calls it global.
        (isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local, "a site-local address"),
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
        address_policy: AddressPolicy = address_problem,
    ) -> None:
        self.allow_private = allow_private
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.max_redirects = max_redirects
        # Injected in tests: a resolver answering what a DNS server would (a rebinding one too), and a
        # policy that pretends a loopback test server is a public host.
        self.resolver = resolver
        self.address_policy = address_policy
        # trust_env: honour HTTP(S)_PROXY / NO_PROXY like other tools on the machine.
        self.trust_env = trust_env

    def checked_addresses(self, host: str, port: int) -> list[str]:
        """The addresses `host` resolves to (one lookup), each allowed by the policy; else FetchError."""
        try:
            ipaddress.ip_address(host.split("%", 1)[0])
            addresses = [host]
        except ValueError:
            try:
                addresses = self.resolver(host, port)
            except (OSError, UnicodeError) as exc:  # socket.gaierror is an OSError
                raise FetchError(
                    f"cannot resolve host '{host}'",
                    hint="check the URL and your network connection",
                ) from exc
            if not addresses:
                raise FetchError(
                    f"cannot resolve host '{host}'", hint="check the URL and your network connection"
                ) from None
        for address in addresses:
            why = self.address_policy(address)
            if why:
                shown = address if address == host else f"{host} ({address})"
                raise FetchError(f"refused: {shown} is {why}; {ALLOW_HINT}", hint=ALLOW_HINT)
        return addresses

    def fetch(self, url: str) -> FetchedPage:
        """Fetch `url` and extract its text. Raises FetchError with a readable message."""
        deadline = time.monotonic() + self.timeout_s
        current = url
        # Allowed private fetching needs no pinning: any address may be reached, so httpx resolves
        # names (and picks proxies) itself, as any other client would.
        transport = None if self.allow_private else PinnedTransport(self.checked_addresses, trust_env=self.trust_env)
        with httpx.Client(
            transport=transport,
            follow_redirects=False,
            trust_env=self.trust_env,
            headers={"User-Agent": USER_AGENT, "Accept": ACCEPT},
        ) as client:
            for _hop in range(self.max_redirects + 1):
                _check_url_form(current)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._timeout(url)
                try:
                    request = client.stream("GET", current, timeout=httpx.Timeout(remaining))
                    with request as response:
                        if response.is_redirect:
                            location = response.headers.get("location")
                            if not location:
                                raise FetchError(f"{current} redirected without a Location header")
                            current = str(response.url.join(location))
                            continue
                        if response.status_code >= 400:
                            raise FetchError(f"HTTP {response.status_code} from {current}")
                        content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
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

    def _timeout(self, url: str) -> FetchError:
        return FetchError(f"timed out after {self.timeout_s:g}s fetching {url}")

    def _read_body(self, response: httpx.Response, deadline: float, url: str) -> bytes:
        too_big = FetchError(f"page is larger than the {self.max_bytes:,}-byte limit: {url}")
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

    def _to_page(self, url: str, final_url: str, content_type: str, body: bytes, encoding: str) -> FetchedPage:
        kind = _kind(content_type, body)
        try:
            if kind == "html":
                title, text = html_to_text(body.decode(encoding, errors="replace"))
            elif kind == "pdf":
                title, text = pdf_to_text(body)
            elif kind == "text":
                title, text = "", body.decode(encoding, errors="replace").strip()
            else:
                raise FetchError(f"unsupported content type '{content_type or 'unknown'}' at {final_url}")
        except ExtractionError as exc:
            raise FetchError(f"{final_url}: {exc}") from exc
        # A page is untrusted text on its way into the database: no NUL, no lone surrogates.
        text, title = storable_text(text).strip(), storable_text(title)
        if not text:
            raise FetchError(f"no text found at {final_url}")
        return FetchedPage(url, final_url, title or final_url, text, content_type or kind)


def _check_url_form(url: str) -> None:
    """Raise FetchError unless `url` is an http(s) URL with a host and a valid port."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise FetchError(f"refused: only http and https URLs can be fetched, not '{parts.scheme or url}'")
    if not parts.hostname:
        raise FetchError(f"refused: '{url}' has no host")
    try:
        _ = parts.port  # urlsplit checks the port only when it is read
    except ValueError as exc:
        raise FetchError(f"refused: bad port in '{url}'") from exc


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
