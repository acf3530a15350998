"""Progress and controls of a run."""

from __future__ import annotations

import streamlit as st

from components.node_text import error_with_details
from engine.runner import RunnerError
from engine.safe_text import inline_text
from engine.services import Services
from storage.models import Node, NodeStatus, Run, RunStatus, utcnow


# Enough to recognise a question at a glance; the whole question is one click away.
QUESTION_PREVIEW_CHARS = 300


def question_line(run: Run) -> None:
    """The run's question as text (never a heading: a long question would fill the page), cut to a
    preview when long, the whole of it in an expander."""
    question = run.question or run.title
    if run.title and run.title != question[:len(run.title)]:
        st.markdown(f"**{inline_text(run.title)}**")  # a name the user gave the run
    preview = question if len(question) <= QUESTION_PREVIEW_CHARS else question[:QUESTION_PREVIEW_CHARS].rstrip() + " …"
    st.markdown(f"**Question:** {inline_text(preview)}")
    if preview != question:
        with st.expander(f"The whole question ({len(question):,} characters)"):
            st.text(question)


def elapsed(run: Run) -> str:
    if run.started_at is None:
        return "not started"
    end = run.finished_at if run.status not in RunStatus.ACTIVE and run.finished_at else utcnow()
    seconds = max(0, int((end - run.started_at).total_seconds()))
    return f"{seconds // 60}:{seconds % 60:02d}"


def progress(run: Run, nodes: list[Node]) -> None:
    done = sum(n.status == NodeStatus.DONE for n in nodes)
    running = [n for n in nodes if n.status == NodeStatus.RUNNING]
    cols = st.columns(5)
    cols[0].metric("Status", run.status)
    cols[1].metric("Nodes done", f"{done} / {len(nodes)}")
    cols[2].metric("Elapsed", elapsed(run))
    cols[3].metric("Tokens", f"{run.prompt_tokens + run.completion_tokens:,}")
    cols[4].metric("Cost", f"${run.cost:.4f}")
    if running:
        st.caption("Now: " + " · ".join(n.label[:80] for n in running[:3]) + (" …" if len(running) > 3 else ""))
    if run.status == RunStatus.STOPPED and run.stop_reason:
        st.warning(f"Stopped: {run.stop_reason}. Partial results are kept; press Resume to continue.")
    if run.status == RunStatus.FAILED and run.error:
        error_with_details(run.error, lead="The run failed: ", then=". Fix the cause (see Settings), then press "
                           "Resume: it also retries the failed nodes.")
    if run.status == RunStatus.DONE and run.warning:
        st.warning(f"Done, with failures: {run.warning}.")
    if run.status == RunStatus.INTERRUPTED:
        st.warning("This run was interrupted (its process ended). Press Resume to continue from where it stopped.")


def controls(services: Services, run: Run) -> None:
    runner = services.runner
    cols = st.columns(3)
    try:
        if run.status == RunStatus.RUNNING and cols[0].button("Pause", key=f"pause-{run.id}"):
            runner.pause(run.id)
            st.toast("Pausing at the next step")
        retryable = run.status == RunStatus.DONE and bool(run.warning)
        resumable = run.status in RunStatus.RESUMABLE and run.status != RunStatus.QUEUED
        if (resumable or retryable) and cols[1].button("Retry failed nodes" if retryable else "Resume",
                                                      key=f"resume-{run.id}"):
            runner.resume(run.id)
            st.session_state["flash"] = "Resuming"
            st.rerun(scope="app")  # the live view starts polling again
        if run.status in RunStatus.ACTIVE and cols[2].button("Stop", key=f"stop-{run.id}"):
            runner.stop(run.id)
            st.toast("Stopping at the next step")
    except RunnerError as exc:
        st.error(str(exc))
