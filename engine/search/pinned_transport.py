"""An httpx transport that connects only to addresses the fetcher's address policy has checked.

httpx resolves a URL's host again when it connects. A name whose DNS answers a public address to
the check and 127.0.0.1 a moment later (DNS rebinding) would then reach an internal server, which
receives the request even if the answer is thrown away. So the host is resolved once, here, every
address it resolves to is checked, and the request is sent to one of those addresses: the URL's
host becomes the address, while the original name stays in the Host header and in httpx's
documented `sni_hostname` request extension, which httpcore uses for TLS SNI and for verifying the
certificate's name. Redirects are separate requests, so every hop is resolved, checked and pinned.

Through a proxy the proxy resolves the name itself: the addresses are still checked first, but they
cannot be pinned. httpx ignores proxy variables once a transport is given, so the proxy is chosen
here, from the same environment variables (HTTP(S)_PROXY, ALL_PROXY, NO_PROXY).
"""

from __future__ import annotations

import urllib.request
from collections.abc import Callable

import httpx

from engine.search.protocol import FetchError

# (host, port) -> the addresses to connect to, each already allowed; raises FetchError otherwise.
CheckedAddresses = Callable[[str, int], list[str]]

_DEFAULT_PORTS = {"http": 80, "https": 443}


class PinnedTransport(httpx.BaseTransport):
    """Sends each request to an address `checked_addresses` returned for its host."""

    def __init__(self, checked_addresses: CheckedAddresses, *, trust_env: bool = True) -> None:
        self._checked_addresses = checked_addresses
        self._trust_env = trust_env
        # One connection pool per host name: a pooled TLS connection is keyed by address, and one
        # whose certificate was verified for one name must never carry a request for another name
        # that resolved to the same address.
        self._direct: dict[str, httpx.HTTPTransport] = {}
        self._proxies: dict[str, httpx.HTTPTransport] = {}

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        host = url.raw_host.decode("ascii")  # IDNA-encoded: what DNS and SNI use
        addresses = self._checked_addresses(host, url.port or _DEFAULT_PORTS.get(url.scheme, 80))
        proxy = self._proxy_for(url.scheme, host)
        if proxy:
            return self._proxy_transport(proxy).handle_request(request)
        direct = self._direct.get(host)
        if direct is None:
            direct = self._direct[host] = httpx.HTTPTransport(trust_env=self._trust_env)
        *others, last = addresses  # checked_addresses never returns an empty list
        for address in others:
            try:
                return direct.handle_request(_pinned(request, address))
            except httpx.ConnectError:
                # Nothing was sent: the connection (or its TLS handshake) failed. Like the system's
                # own connect, try the name's next address; every one of them was checked.
                continue
        return direct.handle_request(_pinned(request, last))

    def close(self) -> None:
        for transport in (*self._direct.values(), *self._proxies.values()):
            transport.close()

    def _proxy_for(self, scheme: str, host: str) -> str | None:
        """The proxy URL the environment names for this request, or None to connect directly."""
        if not self._trust_env:
            return None
        proxies = urllib.request.getproxies()
        proxy = proxies.get(scheme) or proxies.get("all")
        if not proxy or urllib.request.proxy_bypass(host):
            return None
        return proxy if "://" in proxy else f"http://{proxy}"

    def _proxy_transport(self, proxy: str) -> httpx.HTTPTransport:
        transport = self._proxies.get(proxy)
        if transport is None:
            try:
                transport = httpx.HTTPTransport(proxy=proxy, trust_env=self._trust_env)
            except (ValueError, ImportError) as exc:
                # Never echo the proxy URL: it may hold a password.
                raise FetchError(
                    "the proxy set in HTTP_PROXY, HTTPS_PROXY or ALL_PROXY cannot be used",
                    hint="use an http://, https:// or socks5:// proxy URL, or unset the variable",
                ) from exc
            self._proxies[proxy] = transport
        return transport


def _pinned(request: httpx.Request, address: str) -> httpx.Request:
    """`request` sent to `address`, still naming its host in the Host header and for TLS."""
    return httpx.Request(
        request.method,
        request.url.copy_with(host=address),
        headers=request.headers,  # already holds Host: the original name (and port)
        stream=request.stream,
        extensions={**request.extensions, "sni_hostname": request.url.raw_host.decode("ascii")},
    )
