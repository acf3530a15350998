"""Settings' API tokens: a person makes, lists and revokes their own bearer tokens for the HTTP API
(`thoughtmap serve`) and the MCP server, without a shell on the server. A token is shown once, when
made; only its SHA-256 is stored (engine/service/tokens.py)."""

from __future__ import annotations

import streamlit as st

from components import identity
from engine.safe_text import inline_text
from engine.service.tokens import create_for, revoke_for, tokens_of
from engine.services import Services

_NEW = "api-token-new"  # session_state: the token just made, shown once


def api_tokens(services: Services) -> None:
    person = identity.viewer(services)
    st.subheader("API tokens")
    st.caption(
        "For the HTTP API (`thoughtmap serve`) and the MCP server: send `Authorization: Bearer <token>`."
        + (" A token acts as you: it sees your runs and those shared with you." if person.signed_in else "")
    )
    if (made := st.session_state.pop(_NEW, None)) is not None:
        st.success("Copy it now: it is shown only this once.", icon=":material/key:")
        st.code(made, language=None)
    with st.form("api-token-form", border=False, enter_to_submit=True):
        name = st.text_input(
            "New token's name", key="api-token-name", placeholder="what will use it, e.g. laptop agent"
        )
        create = st.form_submit_button("Create token")
    if create:
        try:
            token, _row = create_for(services.tokens, person, name)
        except ValueError as exc:
            st.error(inline_text(str(exc)))
        else:
            st.session_state[_NEW] = token
            st.rerun()
    live = [t for t in tokens_of(services.tokens, person) if t.revoked_at is None]
    for token in live:
        cols = st.columns([4, 3, 1], vertical_alignment="center")
        cols[0].markdown(f"**{inline_text(token.name)}** `{token.prefix}…`")
        used = f"{token.last_used_at:%Y-%m-%d %H:%M}" if token.last_used_at else "never"
        cols[1].caption(f"made {token.created_at:%Y-%m-%d}, last used {used}")
        if cols[2].button("Revoke", key=f"api-token-revoke-{token.id}"):
            try:
                revoke_for(services.tokens, person, token.id or 0)
            except LookupError as exc:  # revoked meanwhile (another tab, the CLI)
                st.error(inline_text(str(exc)))
            else:
                st.rerun()
