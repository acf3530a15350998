"""Who may do what with a run: the one place the rules live. Every door (the web app's pages, the
HTTP API, the MCP server, the Python API, the CLI) asks here with the person it serves, a `Viewer`.

The rules:
- Single-user mode (no sign-in configured): the local user may do everything, as before teams.
- Signed in: a person reads their own runs, the runs shared with them (by name or with everyone
  signed in), and, when an admin, every run (the app says so when an admin reads someone else's).
- Only a run's owner changes it: steer, pause, resume, stop, rename, share, delete.
- Per person: at most `max_active_runs` runs queued or running at once, and at most `max_cost`
  spent over the last 30 days (a new run's budget is capped to what is left).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from engine.team_config import SPENDING_WINDOW, TeamSettings
from storage.models import ApiToken, Run, User, utcnow
from storage.statuses import RunStatus
from storage.users import UserNotFound, UserStore

if TYPE_CHECKING:
    from storage.repository import Repository


class AccessDenied(PermissionError):
    """The person may not do this; the message says why, in words for them."""


class LimitReached(AccessDenied):
    """The person's own limit (active runs, spending) refuses a new run."""


@dataclass(frozen=True)
class Viewer:
    """The person a door serves. `signed_in` False: single-user mode's local user."""

    user_id: int
    name: str
    email: str = ""
    is_admin: bool = False
    signed_in: bool = False

    @classmethod
    def of(cls, user: User, *, signed_in: bool) -> Viewer:
        assert user.id is not None
        return cls(
            user_id=user.id,
            name=user.name or user.email or f"user {user.id}",
            email=user.email,
            is_admin=user.is_admin,
            signed_in=signed_in,
        )

    @property
    def sees_everything(self) -> bool:
        return not self.signed_in or self.is_admin


class Access:
    def __init__(self, repo: Repository, users: UserStore, team: TeamSettings | None = None) -> None:
        self.repo = repo
        self.users = users
        self.team = team or TeamSettings()
        self._local: Viewer | None = None

    def local_viewer(self) -> Viewer:
        """Single-user mode's person. Read once: the local user is never replaced, and the app asks
        for it on every rerun of every control."""
        if self._local is None:
            self._local = Viewer.of(self.users.local_user(), signed_in=False)
        return self._local

    def viewer_for(self, user_id: int, *, signed_in: bool = True) -> Viewer:
        """The person as the configuration sees them now: admin when THOUGHTMAP_ADMINS names them."""
        user = self.users.get_user(user_id)
        viewer = Viewer.of(user, signed_in=signed_in)
        if signed_in:
            viewer = replace(viewer, is_admin=self.team.is_admin(user.email))
        return viewer

    def token_viewer(self, token: ApiToken) -> Viewer | None:
        """Whom an API token serves: its person, while they may still sign in. In single-user mode,
        the local user (who may do everything), whoever made it."""
        if not self.team.sign_in:
            return self.local_viewer()
        if token.user_id is None:
            return None
        user = self.users.get_user(token.user_id)
        if user.is_local or not self.team.allows(user.email):
            return None
        return self.viewer_for(token.user_id)

    # ------------------------------------------------------------------ reading
    def can_read(self, viewer: Viewer, run: Run) -> bool:
        if viewer.user_id < 0:  # nobody (a server before a request says whose it is)
            return False
        return viewer.sees_everything or run.user_id == viewer.user_id or self.users.shared_with(run.id, viewer.user_id)

    def check_read(self, viewer: Viewer, run: Run) -> None:
        if not self.can_read(viewer, run):
            raise AccessDenied(
                f"run {run.id} is not yours and was not shared with you; ask its owner to share it with you"
            )

    def visible_to(self, viewer: Viewer) -> int | None:
        """The `visible_to` filter of run lists: None when the viewer sees every run."""
        return None if viewer.sees_everything else viewer.user_id

    def reads_as_admin(self, viewer: Viewer, run: Run) -> bool:
        """An admin reading a run that is neither theirs nor shared with them (the app says so)."""
        return (
            viewer.signed_in
            and viewer.is_admin
            and run.user_id != viewer.user_id
            and not self.users.shared_with(run.id, viewer.user_id)
        )

    # ------------------------------------------------------------------ changing
    def can_change(self, viewer: Viewer, run: Run) -> bool:
        return not viewer.signed_in or run.user_id == viewer.user_id

    def check_change(self, viewer: Viewer, run: Run) -> None:
        self.check_read(viewer, run)
        if not self.can_change(viewer, run):
            owner = self.owner_name(run)
            raise AccessDenied(
                f"only the owner of run {run.id} ({owner}) can change it; you can read it, "
                "or start a run of your own on its question"
            )

    def owner_name(self, run: Run) -> str:
        if run.user_id is None:
            return "nobody"
        return self.users.names([run.user_id]).get(run.user_id, f"user {run.user_id}")

    # ------------------------------------------------------------------ sharing
    def share(self, viewer: Viewer, run: Run, with_email: str | None) -> None:
        """Share read-only with a person (by email, once they have signed in) or, with None, with
        everyone signed in."""
        self.check_change(viewer, run)
        user_id = None
        if with_email is not None:
            try:
                user_id = self.users.find_user(with_email).id
            except UserNotFound as exc:
                raise LookupError(
                    f"nobody with the email '{with_email}' has signed in yet; they can be "
                    "given the run once they have signed in once"
                ) from exc
        self.users.share_run(run.id, user_id)

    def shared_with(self, run_id: str, *, everyone: str) -> list[str]:
        """Whom the run is shared with: emails, and `everyone` (the caller's word for everyone signed in)."""
        return [
            self.users.get_user(s.user_id).email if s.user_id is not None else everyone
            for s in self.users.list_shares(run_id)
        ]

    def unshare(self, viewer: Viewer, run: Run, with_email: str | None) -> None:
        self.check_change(viewer, run)
        user_id = None if with_email is None else self.users.find_user(with_email).id
        self.users.unshare_run(run.id, user_id)

    # ------------------------------------------------------------------ limits
    def budget_for_new_run(self, viewer: Viewer, max_cost: float | None, *, runs: int = 1) -> float | None:
        """The `max_cost` each of `runs` new runs of the viewer's gets: within what their limits
        leave (shared among them). Raises LimitReached when their limits refuse them. `runs=0`: a run
        already counted as active (a paused one resumed) asks only whether spending is left."""
        if not viewer.signed_in:
            return max_cost
        limits = self.team
        if limits.max_active_runs is not None:
            active = self.repo.count_runs(owned_by=viewer.user_id, statuses=RunStatus.ACTIVE)
            if active + runs > limits.max_active_runs:
                raise LimitReached(
                    f"you have {active} runs queued or running, your limit is "
                    f"{limits.max_active_runs}; wait for one to end, or stop one"
                )
        if limits.max_cost is None:
            return max_cost
        spent = self.repo.spent_by(viewer.user_id, since=utcnow() - SPENDING_WINDOW)
        left = limits.max_cost - spent
        if left <= 0:
            raise LimitReached(
                f"you have spent ${spent:.2f} in the last 30 days, your limit is "
                f"${limits.max_cost:.2f}; an admin can raise THOUGHTMAP_USER_MAX_COST"
            )
        share = left / max(runs, 1)
        return share if max_cost is None else min(max_cost, share)

    def admit_new_runs(self, user_id: int | None, run_ids: list[str]) -> None:
        """After a person's new runs are stored and before they start: their active runs, these
        counted, must be within THOUGHTMAP_USER_MAX_ACTIVE_RUNS. Two requests that both passed
        `budget_for_new_run` at the same moment both see each other's runs here, so the limit holds
        whatever the timing (at worst both are refused, and each may try again). Refused runs are
        deleted before LimitReached says why: nothing of them is left behind."""
        limit = self.team.max_active_runs
        if not self.team.sign_in or limit is None or user_id is None:
            return
        active = self.repo.count_runs(owned_by=user_id, statuses=RunStatus.ACTIVE)
        if active > limit:
            for run_id in run_ids:
                self.repo.delete_run(run_id)
            raise LimitReached(
                f"you have {active - len(run_ids)} runs queued or running, your limit is {limit}; "
                "wait for one to end, or stop one"
            )

    def check_may_run(self, viewer: Viewer, run: Run) -> None:
        """Before a run of the viewer's executes again (Resume, Retry, a steering reopen): their limits
        must leave room. LimitReached says why."""
        self.budget_for_new_run(viewer, None, runs=0 if run.status in RunStatus.ACTIVE else 1)
