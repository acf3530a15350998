"""Compare runs already stored: pick a question two or more runs answered, then two or three of its
runs; the comparison is their ids in the page's address, as for a new one."""

from __future__ import annotations

import hashlib

import streamlit as st

from components import identity
from components.mindmap import short_label
from engine.evaluate.compare import MAX_COMPARED, MIN_COMPARED, comparable_runs, default_pick
from engine.reads import Run
from engine.services import Services

RUNS_LOOKED_AT = 500  # the newest runs; an older one is reopened by its address


def _run_label(services: Services, run: Run) -> str:
    # Nothing that changes while the page is open (a status, a count): the browser sends the chosen
    # labels back, and one it drew before the change no longer names an option (benchmark_view's
    # picker met it with "· running").
    method = services.methods[run.method].title if run.method in services.methods else run.method
    model = (run.llm_info or {}).get("model") or (run.llm_info or {}).get("kind") or "?"
    return f"{method} · {model} · {run.created_at:%Y-%m-%d %H:%M} · {run.id}"


def pick_existing_runs(services: Services) -> list[str] | None:
    """The widgets; the chosen run ids once "Compare these runs" is pressed with 2 or 3 of them."""
    groups = comparable_runs(services.reads.list_runs(limit=RUNS_LOOKED_AT, visible_to=identity.visible_to(services)))
    if not groups:
        st.caption(
            "No question has two runs yet. Run the same question with another method in Explore, "
            "or start a new comparison above."
        )
        return None
    question = st.selectbox(
        "Question with two runs or more",
        list(groups),
        key="compare-existing-question",
        format_func=lambda q: short_label(q, 120),
    )
    runs = groups[question]
    labels = {run.id: _run_label(services, run) for run in runs}
    # A key per question: its own preselection (the newest run of each method) when the question changes.
    digest = hashlib.sha1(question.encode("utf-8", "replace")).hexdigest()[:12]
    picked = st.multiselect(
        "Runs",
        list(labels),
        default=default_pick(runs),
        format_func=labels.get,
        max_selections=MAX_COMPARED,
        key=f"compare-existing-runs-{digest}",
        help=f"{MIN_COMPARED} or {MAX_COMPARED} runs of this question, side by side.",
    )
    if not st.button("Compare these runs", key="compare-existing-start"):
        return None
    if len(picked) < MIN_COMPARED:
        st.error(f"Choose {MIN_COMPARED} or {MAX_COMPARED} runs to compare (chosen: {len(picked)}).")
        return None
    return picked
