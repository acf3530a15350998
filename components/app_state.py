"""The app's process-wide services and the session's LLM choice (Streamlit side)."""

from __future__ import annotations

import os

import streamlit as st

from engine.config import load_settings
from engine.preferences import Preferences, load_preferences
from engine.services import Services, build_services


@st.cache_resource(show_spinner=False)
def get_services() -> Services:
    """One Services per server process: runs keep going in its threads across page reruns.
    Runs left `running` by a previous server process are marked interrupted here."""
    services = build_services(load_settings())
    services.runner.recover_interrupted()
    return services


def api_key() -> str | None:
    """The key from the session (typed in Settings), the environment, or Streamlit secrets."""
    typed = st.session_state.get("api_key")
    if typed:
        return typed
    if os.environ.get("OPENAI_API_KEY"):
        return os.environ["OPENAI_API_KEY"]
    try:
        return st.secrets.get("OPENAI_API_KEY")  # type: ignore[no-any-return]
    except Exception:  # no secrets file: that is normal
        return None


def preferences(services: Services) -> Preferences:
    if "preferences" not in st.session_state:
        st.session_state["preferences"] = load_preferences(services.settings)
    return st.session_state["preferences"]


def active_llm(services: Services) -> str:
    """The LLM kind new runs use, with the OpenAI-compatible adapter configured to match."""
    prefs = preferences(services)
    key = api_key()
    kind = prefs.resolved_llm(key)
    if kind == "openai":
        wanted = prefs.llm_settings(services.settings.llm, key)
        if wanted != services.settings.llm or wanted.api_key != services.settings.llm.api_key:
            services.configure_openai(wanted)
    return kind


def running_on_notice(services: Services) -> None:
    """Say plainly what the app runs on."""
    kind = active_llm(services)
    prefs = preferences(services)
    search = services.searcher(prefs.search).description
    if kind == "fake":
        st.info(
            "**Running offline on the scripted fake LLM** — it quotes its sources and does not reason, "
            f"so answers are placeholders. Search: {search}. To get real answers, connect OpenAI, Ollama, "
            "vLLM or any OpenAI-compatible server in **Settings** (or set OPENAI_API_KEY / OPENAI_BASE_URL).",
            icon=":material/info:",
        )
    else:
        cfg = services.settings.llm
        st.caption(f"LLM: {cfg.model} at {cfg.base_url} · search: {search}")
