"""Share a run read-only (multi-user mode): with named people, or with everyone signed in. Only the
run's owner sees these controls; the rules are `engine/access.py`'s."""

from __future__ import annotations

import streamlit as st

from components import identity
from engine.access import AccessDenied
from engine.reads import Run
from engine.safe_text import inline_text
from engine.services import Services


def shared_with(services: Services, run: Run) -> list[str]:
    """Whom the run is shared with: emails, and "everyone signed in"."""
    return services.access.shared_with(run.id, everyone="everyone signed in")


def share_controls(services: Services, run: Run) -> None:
    person = identity.viewer(services)
    if not person.signed_in or not services.access.can_change(person, run):
        return
    shares = shared_with(services, run)
    st.caption("Shared read-only with: " + (", ".join(inline_text(s) for s in shares) if shares else "nobody yet"))
    with st.form(f"share-form-{run.id}", border=False, enter_to_submit=True):
        email = st.text_input(
            "Share with (email)", key=f"share-email-{run.id}", placeholder="someone who has signed in once"
        )
        shared = st.form_submit_button("Share", key=f"share-{run.id}")
    if shared and email.strip():
        _act(lambda: services.access.share(person, run, email.strip()), f"Shared with {email.strip()}")
    everyone = "everyone signed in" in shares
    if st.button(
        "Stop sharing with everyone" if everyone else "Share with everyone signed in", key=f"share-everyone-{run.id}"
    ):
        action = services.access.unshare if everyone else services.access.share
        _act(lambda: action(person, run, None), "Sharing changed")
    named = [s for s in shares if s != "everyone signed in"]
    if named:
        gone = st.selectbox(
            "Stop sharing with", named, index=None, key=f"unshare-{run.id}", placeholder="choose a person"
        )
        if gone and st.button("Stop sharing", key=f"unshare-button-{run.id}"):
            _act(lambda: services.access.unshare(person, run, gone), f"No longer shared with {gone}")


def _act(action, done: str) -> None:  # type: ignore[no-untyped-def]
    try:
        action()
    except (AccessDenied, LookupError) as exc:
        st.error(inline_text(str(exc)))
    else:
        st.session_state["flash"] = done
        st.rerun()
