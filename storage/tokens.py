"""The HTTP API's bearer tokens: stored by hash, listed, revoked. The token itself is made and hashed
by `engine/service/tokens.py`; this store never sees it."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import update
from sqlmodel import col, select

from storage.db import Store
from storage.models import ApiToken, utcnow
from storage.users import local_user_id

LAST_USED_EVERY = timedelta(minutes=1)


class TokenNotFound(LookupError):
    def __init__(self, which: str) -> None:
        super().__init__(f"no API token with id or name '{which}'. List them with: thoughtmap token list")
        self.which = which


class TokenStore(Store):
    def add_token(self, name: str, token_hash: str, prefix: str, user_id: int | None = None) -> ApiToken:
        """`user_id`: whose token (the local user by default)."""
        with self._session() as s:
            owner = user_id if user_id is not None else local_user_id(s)
            row = ApiToken(name=name, token_hash=token_hash, prefix=prefix, user_id=owner)
            s.add(row)
            s.commit()
            s.refresh(row)
            return row

    def list_tokens(self, *, user_id: int | None = None) -> list[ApiToken]:
        """Every token, or (`user_id`) that person's."""
        query = select(ApiToken)
        if user_id is not None:
            query = query.where(ApiToken.user_id == user_id)
        with self._session() as s:
            return list(s.exec(query.order_by(col(ApiToken.id))).all())

    def active_token_count(self) -> int:
        with self._session() as s:
            return len(s.exec(select(ApiToken.id).where(col(ApiToken.revoked_at).is_(None))).all())

    def find_active(self, token_hash: str) -> ApiToken | None:
        """The unrevoked token with this hash, its last use recorded; None when there is none."""
        with self._session() as s:
            row = s.exec(
                select(ApiToken).where(ApiToken.token_hash == token_hash, col(ApiToken.revoked_at).is_(None))
            ).first()
            if row is None:
                return None
            now = utcnow()
            # Once a minute at most: a client polling a run's status must not write on every request.
            last = row.last_used_at
            if last is None or (now - (last if last.tzinfo else last.replace(tzinfo=now.tzinfo))) > LAST_USED_EVERY:
                s.execute(update(ApiToken).where(col(ApiToken.id) == row.id).values(last_used_at=now))
                s.commit()
                row.last_used_at = now
            return row

    def revoke(self, which: str, *, user_id: int | None = None) -> list[ApiToken]:
        """Revoke the token with this id, or every unrevoked token with this name (`user_id`: among
        that person's); the ones revoked. TokenNotFound when none matches."""
        with self._session() as s:
            query = select(ApiToken).where(col(ApiToken.revoked_at).is_(None))
            if user_id is not None:
                query = query.where(ApiToken.user_id == user_id)
            query = (
                query.where(col(ApiToken.id) == int(which)) if which.isdigit() else query.where(ApiToken.name == which)
            )
            rows = list(s.exec(query).all())
            if not rows:
                raise TokenNotFound(which)
            now = utcnow()
            s.execute(update(ApiToken).where(col(ApiToken.id).in_([r.id for r in rows])).values(revoked_at=now))
            s.commit()
            for row in rows:
                row.revoked_at = now
            return rows
