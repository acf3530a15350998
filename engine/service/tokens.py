"""The HTTP API's bearer tokens: made here (shown once), stored as their SHA-256 only
(`storage/tokens.py`), checked per request. A token is 32 random bytes, so a plain SHA-256 is as
good as a slow hash: nothing short enough to guess is ever hashed."""

from __future__ import annotations

import hashlib
import secrets

from engine.access import Viewer
from storage.models import ApiToken
from storage.tokens import TokenStore

TOKEN_PREFIX = "tm_"
MAX_NAME_CHARS = 100


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_token(store: TokenStore, name: str, user_id: int | None = None) -> tuple[str, ApiToken]:
    """A new token named `name`, `user_id`'s (None: the local user's): (the token, shown once and
    never stored; its stored row)."""
    name = " ".join(name.split())
    if not name:
        raise ValueError("the token's name is empty; name it after who or what will use it")
    if len(name) > MAX_NAME_CHARS:
        raise ValueError(f"the token's name is {len(name)} characters; at most {MAX_NAME_CHARS}")
    if any(row.name == name and row.revoked_at is None for row in store.list_tokens(user_id=user_id)):
        # Two live tokens of one name could not be told apart, nor revoked one at a time by name.
        raise ValueError(f"a token named '{name}' exists already; revoke it first, or choose another name")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = store.add_token(name, hash_token(token), token[: len(TOKEN_PREFIX) + 6], user_id=user_id)
    return token, row


def check_token(store: TokenStore, presented: str | None) -> ApiToken | None:
    """The unrevoked token `presented` is, or None (absent, unknown or revoked)."""
    if not presented or not presented.startswith(TOKEN_PREFIX) or len(presented) > 200:
        return None
    return store.find_active(hash_token(presented))


# The app's Settings page: a person's own tokens (in single-user mode every token is the local user's).


def tokens_of(store: TokenStore, viewer: Viewer) -> list[ApiToken]:
    return store.list_tokens(user_id=viewer.user_id if viewer.signed_in else None)


def create_for(store: TokenStore, viewer: Viewer, name: str) -> tuple[str, ApiToken]:
    """A new token of the viewer's, shown once; ValueError for an empty, long or taken name."""
    return create_token(store, name, viewer.user_id)


def revoke_for(store: TokenStore, viewer: Viewer, token_id: int) -> None:
    """Revoke one of the viewer's tokens; TokenNotFound when it is not theirs or not live."""
    store.revoke(str(token_id), user_id=viewer.user_id if viewer.signed_in else None)
