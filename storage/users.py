"""People and what they may see: users (signed in through OpenID Connect, or the local user of
single-user mode), and the runs shared with them. The rules of who may do what are the engine's
(`engine/access.py`); this store answers the questions they ask."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, exists, func, or_, update
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, col, select

from storage.db import Store
from storage.models import LOCAL_ISSUER, LOCAL_SUBJECT, Benchmark, Run, RunShare, User, utcnow

# What the first admin to sign in takes over from the local user. Not its API tokens: one made in
# single-user mode may be in a bot's or a colleague's hands, and would then act as the admin. They
# stop working once sign-in is on (`Access.token_viewer`); each person makes their own.
_OWNED = (Run, Benchmark)


class UserNotFound(LookupError):
    def __init__(self, which: str) -> None:
        super().__init__(f"no user '{which}': a person is known once they have signed in to the web app")
        self.which = which


def local_user_id(session: Session) -> int:
    """The local user's id, made if missing (migration 14 makes it; a test may drop it)."""
    found = session.exec(select(User.id).where(User.issuer == LOCAL_ISSUER, User.subject == LOCAL_SUBJECT)).first()
    if found is not None:
        return found
    user = User(issuer=LOCAL_ISSUER, subject=LOCAL_SUBJECT, name="Local user", is_admin=True)
    session.add(user)
    session.commit()
    session.refresh(user)
    assert user.id is not None
    return user.id


def visible_to(user_id: int) -> Any:
    """The SQL condition of the runs a person may read: theirs, shared with them, or with everyone."""
    return or_(
        col(Run.user_id) == user_id,
        exists().where(
            col(RunShare.run_id) == col(Run.id), or_(col(RunShare.user_id) == user_id, col(RunShare.user_id).is_(None))
        ),
    )


class UserStore(Store):
    # ------------------------------------------------------------------ people
    def local_user(self) -> User:
        with self._session() as s:
            return s.get_one(User, local_user_id(s))

    def get_user(self, user_id: int) -> User:
        with self._session() as s:
            user = s.get(User, user_id)
        if user is None:
            raise UserNotFound(str(user_id))
        return user

    def find_user(self, which: str) -> User:
        """By email (case-insensitive) or id."""
        with self._session() as s:
            if which.isdigit():
                user = s.get(User, int(which))
            else:
                # Exactly (case aside): LIKE would read `_` and `%` in an address as wildcards.
                user = s.exec(
                    select(User)
                    .where(func.lower(User.email) == which.strip().lower())
                    .where(User.issuer != LOCAL_ISSUER)
                    .order_by(col(User.id))
                ).first()
        if user is None:
            raise UserNotFound(which)
        return user

    def has_people(self) -> bool:
        """Whether anyone has signed in to this database (it is a team's)."""
        try:
            with self._session() as s:
                return s.exec(select(User.id).where(User.issuer != LOCAL_ISSUER).limit(1)).first() is not None
        except SQLAlchemyError:  # a read-only database from before users existed: nobody has
            return False

    def list_users(self) -> list[User]:
        with self._session() as s:
            return list(s.exec(select(User).order_by(col(User.id))).all())

    def sign_in(self, *, issuer: str, subject: str, email: str, name: str, is_admin: bool) -> User:
        """The person as their provider names them now, made on their first sign-in. The first admin
        to sign in takes over what the local user owned (everything made before sign-in was on)."""
        with self._session() as s:
            user = s.exec(select(User).where(User.issuer == issuer, User.subject == subject)).first()
            first_admin = (
                is_admin and not s.exec(select(User.id).where(col(User.is_admin), User.issuer != LOCAL_ISSUER)).first()
            )
            if user is None:
                user = User(issuer=issuer, subject=subject)
            user.email, user.name, user.is_admin, user.last_seen_at = email, name, is_admin, utcnow()
            s.add(user)
            s.commit()
            s.refresh(user)
            if first_admin:
                local = local_user_id(s)
                for table in _OWNED:
                    s.exec(update(table).where(col(table.user_id) == local).values(user_id=user.id))
                s.commit()
            return user

    # ------------------------------------------------------------------ shares
    def share_run(self, run_id: str, user_id: int | None) -> None:
        """Share read-only with one person, or with everyone signed in (None). Sharing twice is once."""
        with self._session() as s:
            if s.exec(select(RunShare.id).where(RunShare.run_id == run_id, _same_user(user_id))).first() is None:
                s.add(RunShare(run_id=run_id, user_id=user_id))
                s.commit()

    def unshare_run(self, run_id: str, user_id: int | None) -> None:
        with self._session() as s:
            s.exec(delete(RunShare).where(col(RunShare.run_id) == run_id, _same_user(user_id)))
            s.commit()

    def list_shares(self, run_id: str) -> list[RunShare]:
        with self._session() as s:
            return list(s.exec(select(RunShare).where(RunShare.run_id == run_id).order_by(col(RunShare.id))).all())

    def shared_with(self, run_id: str, user_id: int) -> bool:
        with self._session() as s:
            return (
                s.exec(
                    select(RunShare.id).where(
                        RunShare.run_id == run_id,
                        or_(col(RunShare.user_id) == user_id, col(RunShare.user_id).is_(None)),
                    )
                ).first()
                is not None
            )

    def names(self, user_ids: Sequence[int]) -> dict[int, str]:
        """Each user's name (or email), for saying whose a run is."""
        if not user_ids:
            return {}
        with self._session() as s:
            rows = s.exec(select(User).where(col(User.id).in_(list(user_ids)))).all()
        return {u.id: (u.name or u.email or f"user {u.id}") for u in rows if u.id is not None}


def _same_user(user_id: int | None) -> Any:
    return col(RunShare.user_id).is_(None) if user_id is None else col(RunShare.user_id) == user_id
