"""Configuration that cannot work, said once and plainly: `ConfigError`, and the readers of
environment values that raise it (engine/config.py reads every variable through them).

A bad value is refused where it is read, not where it is first used: a port of 99999 in
OPENAI_BASE_URL would otherwise surface as "connection refused" minutes into a run, and `abc` as
a traceback from the HTTP client. Each message is one line that names the variable, shows the
value (credentials hidden, engine/redact.py) and says what to set instead; the CLI prints it with
exit code 2 (`engine.cli.main`) and the app shows it instead of its pages
(components/app_state.py `get_services`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar, cast
from urllib.parse import urlsplit

from engine.redact import redact_url

# `parse=int` gives an int, `parse=float` a float; a choice among literals is one of them.
Number = TypeVar("Number", int, float)
Choice = TypeVar("Choice", bound=str)


class ConfigError(ValueError):
    """The configuration (an environment variable) cannot work; the message names the variable
    and the fix, in one line, with no credential in it."""


def url_problem(url: str) -> str | None:
    """What makes `url` unusable as an http(s) endpoint, or None when it can be used."""
    try:
        parts = urlsplit(url)
        port = parts.port  # parsed lazily: a port that is not a number, or above 65535, raises here
    except ValueError as exc:
        return "its port must be a number from 1 to 65535" if "port" in str(exc).lower() else "it is not a URL"
    if parts.scheme.lower() not in ("http", "https"):
        return "it must start with http:// or https://"
    if not parts.hostname:
        return "it has no host name"
    if port == 0:
        return "its port must be a number from 1 to 65535"
    return None


def endpoint_url(env: Mapping[str, str], name: str, default: str = "", *, example: str) -> str:
    """The http(s) URL in `name` (stripped), `default` when unset; ConfigError when unusable."""
    url = (env.get(name) or "").strip() or default
    if url and (problem := url_problem(url)):
        raise ConfigError(
            f"{name}={redact_url(url)} cannot be used: {problem}. "
            f"Set it to the server's URL, e.g. {example}, or unset it"
        )
    return url


def number(
    env: Mapping[str, str],
    name: str,
    parse: Callable[[str], Number],
    default: Number,
    *,
    minimum: float,
    maximum: float | None = None,
    above_minimum: bool = False,
) -> Number:
    """The number in `name` (`parse=int`: a whole number), `default` when unset; ConfigError when
    it is not a finite number within its range (NaN and infinity would defeat every comparison)."""
    text = (env.get(name) or "").strip()
    if not text:
        return default
    value: Number | None
    try:
        value = parse(text)
    except ValueError:
        value = None
    too_low = value is not None and (value <= minimum if above_minimum else value < minimum)
    too_high = value is not None and maximum is not None and value > maximum
    if value is None or not math.isfinite(value) or too_low or too_high:
        kind = "a whole number" if parse is int else "a number"
        bound = (
            f"from {minimum:g} to {maximum:g}"
            if maximum is not None
            else f"above {minimum:g}"
            if above_minimum
            else f"of at least {minimum:g}"
        )
        raise ConfigError(
            f"{name}={text!r} cannot be used: it must be {kind} {bound}. "
            f"Set such a number, or unset it for the default ({default:g})"
        )
    return value


def choice(env: Mapping[str, str], name: str, choices: Sequence[Choice], default: Choice) -> Choice:
    """One of `choices` in `name` (case and spaces ignored), `default` when unset; ConfigError
    for anything else."""
    text = (env.get(name) or "").strip()
    value = text.lower()
    if not value:
        return default
    if value not in choices:
        raise ConfigError(
            f"{name}={text!r} cannot be used: choose one of {', '.join(choices)}, "
            f"or unset it for the default ({default})"
        )
    return cast(Choice, value)  # one of `choices`: checked just above
