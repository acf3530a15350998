"""Credentials never leave the process in a URL: not in the database, an export, a notice or a log.

People put secrets in endpoint URLs (`http://user:secret@host/v1`, `...?api-key=...` for Azure-style
gateways). The URL itself must still be used as given to reach the endpoint; everything that is
*shown or stored* goes through `redact_url` (one URL) or `redact_secrets` (any text that may quote
one, such as an error message from the HTTP client).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

MASK = "***"

# Query parameters whose values are credentials (compared lower-case, '-' treated as '_').
_SECRET_PARAMS = frozenset(
    {
        "api_key",
        "apikey",
        "key",
        "token",
        "access_token",
        "auth",
        "authorization",
        "secret",
        "client_secret",
        "password",
        "pass",
        "pwd",
        "sig",
        "signature",
        "x_api_key",
        "code",
        "session",
        "sessionid",
        "jwt",
        "bearer",
    }
)
_URL_IN_TEXT = re.compile(r"[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s\"'<>`]+")
# A secret parameter quoted without its URL (an error message that shows only the path and query).
_SECRET_PAIR = re.compile(r"(?i)\b((?:api[-_]?key|access[-_]?token|token|secret|password|sig|signature)=)[^&\s\"'<>]+")
# Bearer tokens and OpenAI-style keys that a server may echo back in an error body.
_KEY_LIKE = re.compile(r"\b(sk-[A-Za-z0-9_*.\-]{4,})|(?i:\bbearer\s+)[A-Za-z0-9_.\-]{8,}")


def _is_secret_param(name: str) -> bool:
    normalised = name.strip().lower().replace("-", "_")
    return normalised in _SECRET_PARAMS or normalised.endswith(("_key", "_token", "_secret", "_password"))


def redact_url(url: str) -> str:
    """The URL with its user, password and secret-looking query values replaced by `***`."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "://" not in url and "@" in url:
            # No scheme, so no netloc: `user:SECRET@host/db` reads as scheme `user` and path
            # `SECRET@host/db`. Up to the last `@` is a user and password all the same.
            return f"{MASK}@{url.rsplit('@', 1)[1]}"
        scheme, _, rest = url.partition("://")
        if "@" in rest:
            # A password may hold `/`, `?` or `#` (SQLAlchemy reads it up to the last `@`), which
            # ends urlsplit's netloc before its `@`: everything up to the last `@` is hidden, even
            # where that hides a path too (this text is only ever shown).
            parts = urlsplit(f"{scheme}://{MASK}@{rest.rsplit('@', 1)[1]}")
            netloc = parts.netloc
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            query = urlencode([(k, MASK if _is_secret_param(k) else v) for k, v in pairs], safe="*", quote_via=quote)
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        # Not parseable as a URL (e.g. a bad port): hide everything after the scheme.
        scheme, sep, _ = url.partition("://")
        return f"{scheme}{sep}{MASK}" if sep else MASK


def redact_secrets(text: str, *, known: tuple[str, ...] = ()) -> str:
    """Any text with the URLs in it redacted, known secrets (an API key) masked, and key-like tokens
    hidden."""
    if not text:
        return text
    for secret in known:
        if secret and len(secret) >= 4:
            text = text.replace(secret, MASK)
    text = _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)
    text = _SECRET_PAIR.sub(lambda m: m.group(1) + MASK, text)
    return _KEY_LIKE.sub(lambda m: "sk-" + MASK if m.group(1) else "Bearer " + MASK, text)
