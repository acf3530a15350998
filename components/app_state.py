"""The app's process-wide services and the session's LLM choice (Streamlit side)."""

from __future__ import annotations

import os
from typing import Any

import streamlit as st

from components.corpus_index import search_description
from engine.config import load_settings
from engine.config_values import ConfigError
from engine.person_models import person_llm_info, same_endpoint
from engine.preferences import Preferences, load_preferences
from engine.redact import redact_url
from engine.safe_text import inline_text
from engine.services import Services, build_services


@st.cache_resource(show_spinner=False)
def get_services() -> Services:
    """One Services per server process: runs keep going in its threads across page reruns.
    Runs left `running` by a previous server process are marked interrupted here. A configuration
    that cannot work is said on the page, as the CLI says it, instead of a traceback."""
    try:
        services = build_services(load_settings())
    except ConfigError as exc:
        # Raised, so not cached: once the variable is fixed and the server restarted, it starts.
        st.error(f"**Thoughtmap cannot start.** {inline_text(str(exc))}", icon=":material/error:")
        st.stop()
    services.runner.recover_interrupted()
    return services


def start_local_model(services: Services) -> bool:
    """Start the built-in model (once per process) before a run; on failure say why and what to do."""
    from engine.llm.protocol import LLMError

    try:
        with st.spinner("Starting the built-in model (llama.cpp)…"):
            services.llm("local").preflight()
    except LLMError as exc:
        st.error(
            f"**The built-in model cannot start.** {exc.user_message}\n\nNothing was started. You can "
            f"{CONNECT_HINT}, or choose *Offline fake* there for a demo.",
            icon=":material/error:",
        )
        return False
    return True


def api_key() -> str | None:
    """The key from the session (typed in Settings), the environment, or Streamlit secrets. With
    sign-in on, never a typed one: the model adapter serves everyone's runs, and one person's key
    must not pay for, or be used by, another's."""
    typed = st.session_state.get("api_key")
    if typed and not _signed_in():
        return typed
    if os.environ.get("OPENAI_API_KEY"):
        return os.environ["OPENAI_API_KEY"]
    try:
        return st.secrets.get("OPENAI_API_KEY")  # type: ignore[no-any-return]
    except Exception:  # no secrets file: that is normal
        return None


def _signed_in() -> bool:
    viewer = st.session_state.get("viewer")
    return bool(getattr(viewer, "signed_in", False))


def preferences(services: Services) -> Preferences:
    """The app's choices. With sign-in on, where to search is each person's own, and so is the model
    when they chose their own (`own_model`); otherwise the model is the admins' choice for the team."""
    if "preferences" not in st.session_state:
        prefs = team = load_preferences(services.settings)  # the team's (admins') choice
        viewer = st.session_state.get("viewer")
        if _signed_in():
            own = load_preferences(services.settings, viewer.user_id)  # type: ignore[union-attr]
            prefs = own if own.own_model else team.model_copy(update={"search": own.search, "own_model": False})
        st.session_state["preferences"] = prefs
    return st.session_state["preferences"]  # type: ignore[no-any-return]


def team_llm(services: Services) -> str:
    """The LLM kind of the team's model (single-user: the app's), with the process's OpenAI-compatible
    adapter configured to match: every session configures it the same way, whatever its own choice."""
    prefs = preferences(services)
    if _signed_in():
        # Read afresh, not kept per session: an admin's new choice must not be undone by a session
        # that read the old one (every session configures the one shared adapter). The file holds
        # the URL with its credentials masked: the configured one is kept when it is the same.
        prefs = load_preferences(services.settings)
        if redact_url(services.settings.llm.base_url) == prefs.base_url:
            prefs = prefs.model_copy(update={"base_url": services.settings.llm.base_url})
    key = api_key()
    kind = services.resolve_llm(prefs.llm, key, prefs)
    if kind == "openai":
        wanted = prefs.llm_settings(services.settings.llm, key)
        if wanted != services.settings.llm or wanted.api_key != services.settings.llm.api_key:
            services.configure_openai(wanted)
    return kind


def own_model(services: Services) -> Preferences | None:
    """A signed-in person's own model choice (their preferences), or None: the team's model."""
    prefs = preferences(services)
    return prefs if _signed_in() and prefs.own_model else None


def _held_key(services: Services, prefs: Preferences) -> str | None:
    viewer = st.session_state.get("viewer")
    held = services.keys.get(viewer.user_id, prefs.base_url) if viewer is not None else None
    return held.api_key if held is not None else None


def active_llm(services: Services) -> str:
    """The LLM kind new runs use. A person's own model is an endpoint of its own (`run_llm_info`)."""
    kind = team_llm(services)
    return "openai" if own_model(services) is not None else kind


def run_llm_info(services: Services, kind: str) -> dict[str, Any]:
    """What a new run of this session records as its model: a signed-in person's own endpoint (and
    whether their own key pays), else the process's LLM of that kind. Never a key."""
    own = own_model(services)
    if own is None or kind != "openai":
        return services.llm_info(kind)
    settings = own.llm_settings(services.settings.llm, None)
    return person_llm_info(settings, own_key=_held_key(services, own) is not None)


CONNECT_HINT = (
    "connect OpenAI, Ollama, vLLM or any OpenAI-compatible server in **Settings** (or set "
    "OPENAI_API_KEY / OPENAI_BASE_URL)"
)


@st.cache_data(ttl=30, show_spinner=False)
def ollama_models(url: str) -> list[str] | None:
    """The models of an Ollama running at `url`, or None when none answers (checked every 30 s)."""
    from engine.ollama import detect_ollama

    return detect_ollama(url)


def running_on_notice(services: Services, *, compact: bool = False) -> None:
    """Say plainly what the app runs on. `compact`: in one line (a run is open: the map below is
    what the page is for, and a four-line box pushed it half off the screen)."""
    kind = active_llm(services)
    prefs = preferences(services)
    search = search_description(services, prefs.search)
    if services.embedder_notice:  # the built-in embedding model is missing or damaged: BM25 instead
        search = f"{search} ({services.embedder_notice})"
    if compact and kind in ("fake", "local"):
        missing = " (the built-in model is not installed: scripts/setup installs it)" if prefs.llm != "fake" else ""
        llm = (
            f"the scripted fake LLM{missing}, offline: placeholder answers"
            if kind == "fake"
            else f"the built-in {services.llm_info('local')['model']}, offline on this CPU: weak answers, slowly"
        )
        st.caption(f"LLM: {llm} · search: {search} · for real answers, connect a model in Settings")
        return
    ollama = ollama_models(services.settings.local.ollama_url) if kind != "openai" else None
    ollama_note = (
        f" **Ollama is running on this machine** ({', '.join(ollama[:3]) or 'no models pulled yet'}): "
        "pick the *Ollama (detected)* preset in Settings to use it."
        if ollama is not None
        else ""
    )
    if kind == "fake":
        missing = (
            "" if prefs.llm == "fake" else (" (the built-in local model is not installed: scripts/setup installs it)")
        )
        st.info(
            f"**Running offline on the scripted fake LLM**{missing} — it quotes its sources and does not reason, "
            f"so answers are placeholders. Search: {search}. To get real answers, {CONNECT_HINT}.{ollama_note}",
            icon=":material/info:",
        )
    elif kind == "local":
        info = services.llm_info("local")
        st.info(
            f"**Running on the built-in local model: {info['model']}**, with llama.cpp on this computer's CPU, "
            "offline. It is a 0.5B model: answers are weak and sometimes wrong, and a run takes minutes, so new "
            f"runs start with the quick profile (small trees, short texts). Search: {search}. For better answers, "
            f"{CONNECT_HINT}.{ollama_note}",
            icon=":material/memory:",
        )
    elif own_model(services) is not None:
        info = run_llm_info(services, kind)
        paid = (
            "your own key"
            if info.get("own_key")
            else "the team's key"
            if same_endpoint(info["base_url"], services.settings.llm.base_url)
            else "no key"
        )
        st.caption(f"LLM: your own model, {inline_text(info['description'])} ({paid}) · search: {search}")
    else:
        cfg = services.settings.llm
        st.caption(f"LLM: {cfg.model} at {redact_url(cfg.base_url)} · search: {search}")
