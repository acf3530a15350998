"""A person's own model (multi-user mode): the endpoint and models their runs use, and their typed key.

With sign-in on, each person may run on the team's model (the admins' choice) or on their own: an
OpenAI-compatible endpoint, model, per-role models and structured-output mode, saved in their own
preferences. A run records which endpoint it uses (never a key) in its `llm_info`, and the process
executing it builds an adapter for that endpoint (`Services.llm_for_run`).

Keys:
- A person's typed key lives only in the memory of the app process they typed it in (`KeyRing`):
  never written, never logged, never shown again, used only for their own runs.
- The server's key (OPENAI_API_KEY) is sent only to the server's own endpoint, never to an address
  a person typed: otherwise anyone could read it by pointing "their" endpoint at a server of theirs.

Addresses: a person who is not an admin may not point the server at a private or loopback address
(the server would call its own network for them) unless it is the team's endpoint or
THOUGHTMAP_ALLOW_PRIVATE_FETCH=1."""

from __future__ import annotations

import ipaddress
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from engine.config import LLMSettings
from engine.llm.protocol import LLMAuthError, LLMRequestError
from engine.redact import redact_url
from engine.search.fetch import Resolver, address_problem, system_resolver

# `llm_info["endpoint"]` of a run on a person's own endpoint; absent on the team's.
PERSON_ENDPOINT = "person"


def _endpoint_key(base_url: str) -> str:
    return redact_url(base_url).rstrip("/")


@dataclass(frozen=True)
class HeldKey:
    base_url: str  # the full URL as typed (credentials in it too), for the adapter only
    api_key: str | None


class KeyRing:
    """People's typed API keys and endpoint URLs, in this process's memory only."""

    def __init__(self) -> None:
        self._keys: dict[tuple[int, str], HeldKey] = {}
        self._lock = threading.Lock()

    def hold(self, user_id: int, base_url: str, api_key: str | None) -> None:
        with self._lock:
            self._keys[(user_id, _endpoint_key(base_url))] = HeldKey(base_url, api_key or None)

    def get(self, user_id: int, base_url: str) -> HeldKey | None:
        with self._lock:
            return self._keys.get((user_id, _endpoint_key(base_url)))

    def has_key(self, user_id: int, base_url: str) -> bool:
        held = self.get(user_id, base_url)
        return held is not None and held.api_key is not None

    def forget(self, user_id: int) -> None:
        """A person signed out: their keys go with them."""
        with self._lock:
            for key in [k for k in self._keys if k[0] == user_id]:
                del self._keys[key]


def same_endpoint(a: str, b: str) -> bool:
    return _endpoint_key(a) == _endpoint_key(b)


def endpoint_problem(
    base_url: str, *, team_url: str, allow_private: bool, resolver: Resolver = system_resolver
) -> str | None:
    """Why a person (not an admin) may not use `base_url` as their endpoint, or None. Checked when they
    save it and each time an adapter is made for it. (A name that resolves to a public address
    when checked and a private one later is not caught: an admin who fears that keeps people on the
    team's model.)"""
    parts = urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"'{redact_url(base_url)}' is not an http(s) URL; give one like https://api.example.com/v1"
    if allow_private or same_endpoint(base_url, team_url):
        return None
    try:
        ipaddress.ip_address(parts.hostname)
        addresses = [parts.hostname]  # an address already: nothing to look up
    except ValueError:
        pass
    else:
        return _address_problem(base_url, addresses)
    try:
        addresses = resolver(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
    except OSError as exc:
        return f"the host of {redact_url(base_url)} cannot be found ({exc}); check the URL"
    return _address_problem(base_url, addresses)


def _address_problem(base_url: str, addresses: list[str]) -> str | None:
    for address in addresses:
        why = address_problem(address)
        if why:
            return (
                f"{redact_url(base_url)} is {why} ({address}): the server would call its own network for you. "
                "Use a public endpoint, the team's model, or ask an admin (THOUGHTMAP_ALLOW_PRIVATE_FETCH=1 "
                "allows private addresses)"
            )
    return None


def person_llm_info(settings: LLMSettings, *, own_key: bool) -> dict[str, Any]:
    """What a run on a person's own endpoint stores: where and which models, and whether the
    person's own key pays (`own_key`). Never the key, never credentials inside the URL."""
    base_url = redact_url(settings.base_url)
    return {
        "kind": "openai",
        "endpoint": PERSON_ENDPOINT,
        "model": settings.model,
        "base_url": base_url,
        "models": dict(settings.models),
        "structured_mode": settings.structured_mode,
        "own_key": own_key,
        "description": f"{settings.model} at {base_url}",
    }


def run_llm_settings(info: dict[str, Any], team: LLMSettings, keys: KeyRing, user_id: int | None) -> LLMSettings:
    """The settings a run on a person's endpoint is executed with, its key included. LLMAuthError
    when the person's key is not held in this process (it is never stored: it must be typed again);
    LLMRequestError when the stored endpoint is unusable."""
    base_url = str(info.get("base_url") or "")
    if not base_url:
        raise LLMRequestError("the run names no endpoint; start it again from the app")
    api_key: str | None = None
    if info.get("own_key"):
        held = keys.get(user_id, base_url) if user_id is not None else None
        if held is None or held.api_key is None:
            raise LLMAuthError(
                f"this run uses its owner's own API key for {base_url}, and this process does not hold it: a "
                "typed key is kept only in the memory of the app that it was typed into, never stored",
                hint="Its owner types the key again in Settings (Your model), then presses Resume.",
            )
        base_url, api_key = held.base_url, held.api_key
    elif same_endpoint(base_url, team.base_url):
        base_url, api_key = team.base_url, team.api_key  # the team's own endpoint: the server's key
    models = info.get("models") or {}
    return team.model_copy(
        update={
            "base_url": base_url,
            "api_key": api_key,
            "model": str(info.get("model") or team.model),
            "models": {str(k): str(v) for k, v in dict(models).items()},
            "structured_mode": info.get("structured_mode") or team.structured_mode,
        }
    )


def adapter_identity(settings: LLMSettings) -> tuple[Any, ...]:
    """What makes two adapters the same: one is built per distinct endpoint, models and key."""
    return (
        settings.base_url,
        settings.model,
        tuple(sorted(settings.models.items())),
        settings.structured_mode,
        settings.api_key,
    )
