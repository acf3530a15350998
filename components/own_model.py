"""Settings → Language model for a signed-in person who is not an admin: the team's model, or their own
endpoint and models, paid by their own key or (on the team's endpoint) the team's. See
engine/person_models.py for what is kept where: a typed key only in this process's memory."""

from __future__ import annotations

import streamlit as st

from components.app_state import preferences, team_llm
from components.endpoint_fields import connection_test, endpoint_fields
from engine.access import Viewer
from engine.config import DEFAULT_BASE_URL
from engine.llm.protocol import LLMError
from engine.person_models import KeyRing, endpoint_problem, person_llm_info, run_llm_settings, same_endpoint
from engine.preferences import PRESETS, Preferences, save_preferences
from engine.safe_text import inline_text
from engine.services import Services

_SEARCHES = {"local": "Local corpus", "web": "Web (DuckDuckGo)", "both": "Both", "none": "None"}


def own_model_settings(services: Services, person: Viewer) -> None:
    prefs = preferences(services)
    team = services.settings.llm
    team_info = services.llm_info(team_llm(services))
    st.subheader("Language model")
    choice = st.radio(
        "Your runs use",
        ["team", "own"],
        index=1 if prefs.own_model else 0,
        key="settings-own-model",
        format_func={
            "team": f"The team's model ({inline_text(team_info['description'])}, chosen by your admins)",
            "own": "My own endpoint and model",
        }.get,
    )
    candidate = prefs
    typed = ""
    if choice == "own":
        candidate, typed = _own_fields(services, person, prefs)
    search = st.radio(
        "Search",
        list(_SEARCHES),
        index=list(_SEARCHES).index(prefs.search),
        horizontal=True,
        key="settings-search",
        format_func=_SEARCHES.get,
    )
    wanted = candidate.model_copy(update={"search": search, "own_model": choice == "own"})
    cols = st.columns(2)
    if cols[0].button("Save", type="primary", key="settings-save"):
        if choice == "own" and (problem := _problem(services, wanted, person, typed)):
            st.error(f"Not saved: {problem}.", icon=":material/error:")
            return
        if typed:
            services.keys.hold(person.user_id, wanted.base_url, typed)
        st.session_state["preferences"] = wanted
        save_preferences(services.settings, wanted, person.user_id)  # never the key
        st.success("Saved. Your new runs use these settings.")
    if choice == "own" and cols[1].button("Test connection", key="settings-test"):
        _test(services, wanted, person, typed)
    if (
        choice == "own"
        and team.base_url
        and same_endpoint(wanted.base_url, team.base_url)
        and not typed
        and not services.keys.has_key(person.user_id, wanted.base_url)
    ):
        st.caption("This is the team's endpoint: without a key of yours, the team's key pays for your runs.")


def _own_fields(services: Services, person: Viewer, prefs: Preferences) -> tuple[Preferences, str]:
    presets = {name: values for name, values in PRESETS.items() if name != "Ollama (local)"}

    fields = endpoint_fields(
        prefs, presets, (("report", "final reports"), ("planner", "task planning"), ("summarizer", "node summaries"))
    )
    base_url = fields.base_url
    typed = ""
    if services.queue is not None:
        # Workers in other processes execute the runs: a key reaches them only if it is stored.
        st.caption(
            "Runs here execute on workers, which receive no typed key (it would have to be stored): "
            "your own endpoint must need no key, or be the team's endpoint."
        )
    else:
        held = services.keys.has_key(person.user_id, base_url)
        typed = st.text_input(
            "API key",
            type="password",
            key="settings-api-key",
            help="Kept only in this server's memory while it runs, for your runs only: never "
            "saved, never shown. Type it again after the server restarts or you sign out.",
        )
        st.caption("Your API key: " + ("held for this endpoint (in memory only)" if held else "not set"))
        if held and st.button("Forget my key", key="settings-forget-key"):
            services.keys.forget(person.user_id)
            st.rerun()
    return Preferences(
        llm="openai",
        preset=fields.preset,
        base_url=base_url,
        model=fields.model,
        models=fields.models,
        structured_mode=fields.structured_mode,
        search=prefs.search,
        own_model=True,
    ), typed


def _problem(services: Services, wanted: Preferences, person: Viewer, typed: str) -> str | None:
    if not wanted.model.strip():
        return "the model is empty: type the model's name at your endpoint"
    team = services.settings.llm
    keyless = (
        not typed
        and not services.keys.has_key(person.user_id, wanted.base_url)
        and not (same_endpoint(wanted.base_url, team.base_url) and team.api_key)
    )
    if keyless and same_endpoint(wanted.base_url, DEFAULT_BASE_URL):
        return "OpenAI's API needs a key: type yours under API key (it is kept in memory only, never saved)"
    return endpoint_problem(
        wanted.base_url, team_url=team.base_url, allow_private=services.settings.allow_private_fetch
    )


def _test(services: Services, wanted: Preferences, person: Viewer, typed: str) -> None:
    if problem := _problem(services, wanted, person, typed):
        st.error(problem)
        return
    # The settings a run would get (engine/person_models.py), with the key typed now, else the one
    # held: tried without holding it yet.
    held = services.keys.get(person.user_id, wanted.base_url)
    key = typed or (held.api_key if held is not None else None)
    ring = KeyRing()
    if key:
        ring.hold(person.user_id, wanted.base_url, key)
    info = person_llm_info(wanted.llm_settings(services.settings.llm, None), own_key=bool(key))
    try:
        settings = run_llm_settings(info, services.settings.llm, ring, person.user_id)
    except LLMError as exc:
        st.error(exc.user_message)
        return
    connection_test(settings)
