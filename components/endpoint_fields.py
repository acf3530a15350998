"""The fields that name an OpenAI-compatible endpoint in Settings: a preset, the base URL, the model,
the structured-output mode and a model per role. Shared by the team's model (admins, single-user
mode) and a person's own (components/own_model.py)."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from engine.config import LLMSettings
from engine.llm.protocol import LLMError
from engine.preferences import Preferences
from engine.redact import redact_url

MODES = ["auto", "json_schema", "json_object", "prompted"]


@dataclass(frozen=True)
class EndpointFields:
    preset: str
    base_url: str
    model: str
    structured_mode: str
    models: dict[str, str]


def endpoint_fields(
    prefs: Preferences, presets: dict[str, dict[str, str]], roles: tuple[tuple[str, str], ...]
) -> EndpointFields:
    def fill_from_preset() -> None:
        """A preset the user picks fills the fields; they may then edit them. (Only on a pick: the
        fields otherwise show the saved preferences, edits included.)"""
        defaults = presets[st.session_state["settings-preset"]]
        if defaults:
            st.session_state["settings-base-url"] = defaults["base_url"]
            st.session_state["settings-model"] = defaults["model"]
            st.session_state["settings-mode"] = defaults["structured_mode"]

    names = list(presets)
    preset = st.selectbox(
        "Preset",
        names,
        index=names.index(prefs.preset) if prefs.preset in names else 0,
        key="settings-preset",
        on_change=fill_from_preset,
    )
    for field_key, saved in (
        ("settings-base-url", prefs.base_url),
        ("settings-model", prefs.model),
        ("settings-mode", prefs.structured_mode),
    ):
        st.session_state.setdefault(field_key, saved)
    base_url = st.text_input("Base URL", key="settings-base-url")
    model = st.text_input("Model", key="settings-model")
    mode = st.selectbox(
        "Structured output mode",
        MODES,
        key="settings-mode",
        help="json_schema for OpenAI and vLLM; json_object for llama.cpp server and Ollama; "
        "prompted for servers with neither; auto tries them in that order.",
    )
    with st.expander("Model per role (optional)"):
        models = {
            purpose: st.text_input(
                f"{purpose} ({meaning})", value=prefs.models.get(purpose, ""), key=f"settings-model-{purpose}"
            )
            for purpose, meaning in roles
        }
    return EndpointFields(preset, base_url, model, str(mode), models)


def connection_test(settings: LLMSettings) -> None:
    """Test connection: one preflight call to the endpoint, said as a success or the error's words."""
    from engine.llm.limits import ConcurrencyLimiter
    from engine.llm.openai_compat import OpenAICompatibleLLM, missing_key_error

    try:
        if (problem := missing_key_error(settings)) is not None:
            raise problem
        # A slow or unreachable endpoint takes seconds (its time-out and retries): said meanwhile.
        with st.spinner(f"Connecting to {redact_url(settings.base_url)} …"):
            OpenAICompatibleLLM(settings, ConcurrencyLimiter(1)).preflight()
    except LLMError as exc:
        st.error(exc.user_message)
    else:
        st.success(f"Connected to {redact_url(settings.base_url)}.")
