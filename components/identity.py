"""Who is using the app (Streamlit side): the sign-in gate, the person's name and Sign out, and the
page-side questions of `engine/access.py` (may this person read, change this run).

Sign-in is Streamlit's own `st.login` with the OpenID Connect provider in `.streamlit/secrets.toml`
`[auth]` (docs/teams.md). Off (no `[auth]`), the app is the single-user local app it always was:
no gate, every run the local user's, and the sidebar says so."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

import streamlit as st

from engine.access import AccessDenied, Viewer
from engine.reads import Run, RunNotFound
from engine.safe_text import code_span, inline_text
from engine.services import Services

_USER_ID = "signed-in-user-id"  # session_state: the person's `users.id`, once signed in this session


def _providers() -> list[str | None]:
    """The providers `[auth]` names (`[auth.keycloak]`...), or [None]: the one configured at its top."""
    try:
        auth: Any = st.secrets.get("auth") or {}
    except Exception:  # no secrets file: no providers
        return [None]
    named = [name for name, value in auth.items() if isinstance(value, dict) or hasattr(value, "items")]
    return named or [None]  # type: ignore[return-value]


def _streamlit_reads_auth() -> bool:
    try:
        return bool(st.secrets.get("auth"))
    except Exception:  # no secrets file at all
        return False


def _only(page: Callable[[], None]) -> NoReturn:
    """Show `page` as the app's only page (no navigation: no page of the app is listed to someone
    not signed in), and end this script run."""
    st.navigation([st.Page(page, title="Thoughtmap", default=True, url_path="sign-in")], position="hidden").run()
    st.stop()
    raise AssertionError("st.stop() returned")  # never reached: for the type checker


def _sign_in_page(note: str = "") -> None:
    _only(lambda: _sign_in_form(note))


def _sign_in_form(note: str) -> None:
    st.title("Thoughtmap")
    st.write("Deep research with LLM reasoning trees. **Sign in** to see your runs and start new ones.")
    if note:
        st.warning(note, icon=":material/lock:")
    for provider in _providers():
        label = "Sign in" if provider is None else f"Sign in with {provider.replace('_', ' ').title()}"
        if st.button(label, type="primary", key=f"sign-in-{provider or 'default'}"):
            if provider:
                st.login(provider)
            else:
                st.login()


def _refused_page(email: str, why: str) -> None:
    def refused() -> None:
        st.title("Thoughtmap")
        st.error(
            f"**{inline_text(email) or 'This account'} cannot use this Thoughtmap.** {why}", icon=":material/block:"
        )
        if st.button("Sign out", key="sign-out-refused"):
            st.logout()

    _only(refused)


def gate(services: Services) -> Viewer:
    """Called by app.py before any page: with sign-in on, a person who is not signed in sees only the
    sign-in page, and one the configuration does not allow sees why; the person is recorded (their
    first sign-in makes them). Returns whom the pages serve."""
    team = services.settings.team
    if not team.sign_in:
        st.session_state.pop(_USER_ID, None)
        return services.access.local_viewer()
    if not _streamlit_reads_auth():
        # Every process reads the same file (engine/team_config.py); this one was started without it.
        st.error(
            f"**Sign-in is on** ({inline_text(str(team.secrets_file))} has `[auth]`), but this web app was "
            "started without that file, so nobody can sign in and nothing is shown. Start it with "
            "`scripts/run` (it passes THOUGHTMAP_SECRETS_FILE to Streamlit), or put the file at "
            "`.streamlit/secrets.toml`.",
            icon=":material/error:",
        )
        st.stop()
    if not st.user.is_logged_in:
        st.session_state.pop(_USER_ID, None)
        _sign_in_page()
    claims = st.user.to_dict()
    email = str(claims.get("email") or "")
    if not email:
        _refused_page(email, "The provider did not say your email; ask your admin to release the email claim.")
    if claims.get("email_verified") is False:
        _refused_page(email, "Your provider has not verified this email; verify it there, then sign in again.")
    if not team.allows(email):
        _refused_page(email, "Ask an admin to add your email (or your domain) to THOUGHTMAP_ALLOWED_EMAILS.")
    user_id = st.session_state.get(_USER_ID)
    if user_id is None:  # recorded once per session, not on every rerun
        user = services.access.users.sign_in(
            issuer=str(claims.get("iss") or ""),
            subject=str(claims.get("sub") or email),
            email=email,
            name=str(claims.get("name") or claims.get("preferred_username") or email.split("@")[0]),
            is_admin=team.is_admin(email),
        )
        user_id = st.session_state[_USER_ID] = user.id
    person = services.access.viewer_for(user_id)
    st.session_state["viewer"] = person
    return person


def sidebar(services: Services, person: Viewer) -> None:
    """Whom the app serves, in the sidebar: the person and Sign out, or single-user mode. Signing
    out forgets the keys the person typed (held in this process's memory only)."""
    with st.sidebar:
        if not person.signed_in:
            st.caption("Single-user mode: no sign-in; every run here is yours. (Teams: docs/teams.md)")
            return
        st.caption(
            f"Signed in as **{inline_text(person.name)}** ({inline_text(person.email)})"
            + (" · admin" if person.is_admin else "")
        )
        if st.button("Sign out", key="sign-out", icon=":material/logout:"):
            st.session_state.pop(_USER_ID, None)
            services.keys.forget(person.user_id)
            st.logout()


def viewer(services: Services) -> Viewer:
    """Whom this page serves (set by `gate`; a page run alone, in tests, serves the local user)."""
    person = st.session_state.get("viewer")
    if not services.settings.team.sign_in:
        return services.access.local_viewer()
    if not isinstance(person, Viewer):
        _sign_in_page()
    return person  # type: ignore[no-any-return]


def visible_to(services: Services) -> int | None:
    """The run lists' filter for this person: their runs and those shared with them (None in
    single-user mode: every run). An admin's lists are theirs too; Sessions shows everyone's when
    they ask."""
    person = viewer(services)
    return person.user_id if person.signed_in else None


def may_change(services: Services, run: Run) -> bool:
    return services.access.can_change(viewer(services), run)


def open_run(services: Services, run_id: str) -> Run:
    """The run a page was asked to show, when this person may read it; otherwise the page says why
    and shows nothing of it."""
    try:
        run = services.reads.get_run(run_id)
    except RunNotFound:
        st.error(f"There is no run {code_span(run_id[:80])}. Pick one in Sessions.")
        st.stop()
    try:
        services.access.check_read(viewer(services), run)
    except AccessDenied:
        st.error(
            f"Run {code_span(run_id[:80])} is not yours and was not shared with you, so nothing of it is "
            "shown. Ask its owner to share it with you.",
            icon=":material/lock:",
        )
        st.stop()
    return run


def whose(services: Services, run: Run) -> None:
    """Said above a run that is not the reader's: shared with them read-only, or read as an admin."""
    person = viewer(services)
    if not person.signed_in or run.user_id == person.user_id:
        return
    owner = inline_text(services.access.owner_name(run))
    if services.access.reads_as_admin(person, run):
        st.warning(
            f"You are reading **{owner}**'s run as an admin: it was not shared with you.",
            icon=":material/admin_panel_settings:",
        )
    else:
        st.info(
            f"**{owner}** shared this run with you: you can read it; only {owner} can change it.",
            icon=":material/visibility:",
        )


def refuse_change(services: Services, run: Run) -> bool:
    """True (and said) when this person may not change the run: the last guard of every action."""
    try:
        services.access.check_change(viewer(services), run)
    except AccessDenied as exc:
        st.error(inline_text(str(exc)), icon=":material/lock:")
        return True
    return False
