"""Settings: the LLM endpoint and models, a connection test, the search backend, the local corpus.
API keys come from the environment or Streamlit secrets, or are typed for this session only:
they are masked and never stored."""

import streamlit as st

from components import identity
from components.api_tokens import api_tokens
from components.app_state import api_key, get_services, ollama_models, preferences
from components.corpus_index import corpus_error, corpus_progress, local_corpus
from components.endpoint_fields import connection_test, endpoint_fields
from components.own_model import own_model_settings
from components.routing import through_the_app
from components.safe_markdown import sanitize
from engine.llm.local_model import BUNDLED_MODEL, describe, model_available
from engine.ollama import ollama_preset
from engine.preferences import PRESETS, Preferences, save_preferences
from engine.search.bundled import rebuild_corpus
from engine.search.protocol import SearchError
from engine.search.retrieval import describe_retrieval
from engine.search.uploads import add_uploads

through_the_app()  # first: a deep link opened first after a start still runs through app.py

CORPUS_NOTICE = "settings-corpus-notice"

services = get_services()
prefs: Preferences = preferences(services)
st.title("Settings")

person = identity.viewer(services)
# With sign-in on, admins choose the team's model; each other person runs on it or on their own
# endpoint and key, and chooses where their own runs search.
limited = person.signed_in and not person.is_admin
if limited:  # the team's model, or their own endpoint and key (components/own_model.py)
    own_model_settings(services, person)
else:
    st.subheader("Language model")
    choices = ["auto", "local", "openai", "fake"]
    llm_choice = st.radio(
        "Use",
        choices,
        index=choices.index(prefs.llm),
        horizontal=True,
        format_func={
            "auto": "Automatic",
            "local": "Built-in local model",
            "openai": "OpenAI-compatible endpoint",
            "fake": "Offline fake (no model)",
        }.get,
        help="Automatic uses the endpoint below when a key or a non-OpenAI URL is set, else the built-in local model "
        "when it is installed, else the offline fake.",
        key="settings-llm",
    )
    local = services.settings.local
    if model_available(local):
        st.caption(
            f"Built-in model: {describe(local)} (licence {BUNDLED_MODEL.licence} for the bundled one), run by "
            "llama.cpp on this CPU. Set THOUGHTMAP_LOCAL_MODEL to use another GGUF file."
        )
    else:
        st.caption("Built-in model: not installed here (scripts/setup installs it).")

    presets = dict(PRESETS)
    detected = ollama_models(local.ollama_url)
    if detected is not None:
        presets = {"Ollama (detected)": ollama_preset(local.ollama_url, detected), **presets}
        st.success(
            f"Ollama is running at {local.ollama_url}"
            + (f" with {', '.join(detected[:5])}" if detected else " (no models pulled yet: `ollama pull qwen2.5`)")
            + ". Pick the *Ollama (detected)* preset and *OpenAI-compatible endpoint* to use it.",
            icon=":material/check_circle:",
        )

    fields = endpoint_fields(
        prefs,
        presets,
        (
            ("report", "final reports"),
            ("planner", "task planning"),
            ("judge", "evaluation judges"),
            ("summarizer", "node summaries"),
        ),
    )
    preset, base_url, model, mode, models = (
        fields.preset,
        fields.base_url,
        fields.model,
        fields.structured_mode,
        fields.models,
    )

    key_source = "environment or secrets" if api_key() and not st.session_state.get("api_key") else None
    if person.signed_in:  # one adapter serves everyone's runs: a typed key would pay for others'
        st.caption("API keys come from the server's environment (OPENAI_API_KEY) when people sign in.")
    else:
        typed = st.text_input(
            "API key",
            type="password",
            key="settings-api-key",
            help="Used for this browser session only; never saved. Leave empty for local servers "
            "or when OPENAI_API_KEY is set.",
        )
        if typed:
            st.session_state["api_key"] = typed
    current_key = api_key()
    st.caption(
        "API key: "
        + (
            f"set ({'…' + current_key[-4:] if len(current_key) > 8 else 'set'}, from {key_source or 'this session'})"
            if current_key
            else "not set"
        )
    )

    search = st.radio(
        "Search",
        ["local", "web", "both", "none"],
        index=["local", "web", "both", "none"].index(prefs.search),
        horizontal=True,
        key="settings-search",
        format_func={"local": "Local corpus", "web": "Web (DuckDuckGo)", "both": "Both", "none": "None"}.get,
    )

    new_prefs = Preferences(
        llm=llm_choice,
        preset=preset,
        base_url=base_url,
        model=model,
        models=models,
        structured_mode=mode,
        search=search,
    )
    cols = st.columns(2)
    if cols[0].button("Save", type="primary", key="settings-save"):
        st.session_state["preferences"] = new_prefs
        save_preferences(services.settings, new_prefs)
        if person.signed_in:  # where an admin's own runs search, as every person's
            save_preferences(services.settings, new_prefs, person.user_id)
        st.success("Saved. New runs use these settings.")
    if cols[1].button("Test connection", key="settings-test"):
        connection_test(new_prefs.llm_settings(services.settings.llm, current_key))

# What auto mode learned: a server that proved it cannot do json_schema (or JSON mode) is asked in a
# lower mode from then on, for that endpoint and model only. Shown so a surprise can be undone.
learned_modes = [] if limited else services.structured_modes.all()
if learned_modes:
    st.caption(
        "Structured output learned in automatic mode (only a server that said it does not support a "
        "format moves this; rate limits and server errors never do):"
    )
    for learned in learned_modes:
        st.caption(
            f"- {learned.model} at {learned.endpoint}: **{learned.mode.value}**, since "
            f"{learned.learned_at:%H:%M:%S} UTC (the server said: {sanitize(learned.reason) or 'no reason'})"
        )
    if st.button(
        "Reset to json_schema",
        key="settings-reset-modes",
        help="Forget what automatic mode learned; the next call tries json_schema again.",
    ):
        services.structured_modes.forget()
        st.success("Forgotten: the next structured call tries json_schema first.")

api_tokens(services)

st.subheader("Local corpus")
corpus = local_corpus(services)  # its first build shown as it goes
if corpus is None:
    st.stop()  # why is shown; the corpus is the page's last section
collections = corpus.store.collections()
st.write(f"{sum(collections.values()):,} documents in {corpus.store.count_chunks():,} passages")
# What every method's searches go through (THOUGHTMAP_RETRIEVER, THOUGHTMAP_RERANKER): plain words.
for line in describe_retrieval(
    services.settings.retrieval,
    services.embedder.description if services.embedder is not None else None,
    services.embedder_notice,
):
    st.caption(sanitize(line))
st.dataframe({"collection": list(collections), "documents": list(collections.values())}, hide_index=True)
# With sign-in on, a person's uploads are theirs: only their runs find them. An admin may add to the
# team's shared corpus instead.
shared_upload = not person.signed_in or (
    person.is_admin
    and st.checkbox("Add to the team's shared corpus (every person's runs search it)", key="settings-upload-shared")
)
if person.signed_in:
    st.caption(
        "Files you add here are yours: only your runs find them."
        if not shared_upload
        else "Files added now go to the shared corpus: every person's runs find them."
    )
uploads = st.file_uploader(
    "Add files (txt, md, html, pdf, jsonl)",
    accept_multiple_files=True,
    type=["txt", "md", "html", "htm", "pdf", "jsonl"],
    key="settings-upload",
)
# What an ingest or a rebuild did is shown after a rerun, so the counts above are already the new ones.
if uploads and st.button("Add to the corpus", key="settings-ingest"):
    try:
        with corpus_progress() as show:  # the new passages' embedding, when the corpus has an embedder
            report = add_uploads(
                corpus,
                services.uploads_dir,
                ((u.name, u.getvalue()) for u in uploads),
                show,
                owner=None if shared_upload else person.user_id,
            )
    except SearchError as exc:  # another process kept the index locked for too long
        corpus_error(exc)
    else:
        st.session_state[CORPUS_NOTICE] = report.summary()
        st.rerun()
if not limited and st.button(
    "Rebuild the index", key="settings-rebuild", help="Index the bundled data and your uploaded files again"
):
    try:
        with corpus_progress() as show:
            rebuild_corpus(corpus, services.uploads_dir, show)
    except SearchError as exc:
        corpus_error(exc)
    else:
        st.session_state[CORPUS_NOTICE] = "The index was rebuilt."
        st.rerun()
if CORPUS_NOTICE in st.session_state:
    # File names in the summary are the uploader's text: shown inert.
    st.success(sanitize(st.session_state.pop(CORPUS_NOTICE)))
