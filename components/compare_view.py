"""Runs side by side: for each, its method, its usage (calls, tokens, cost, time), its map and its
report, live while any of them runs. Built from each run's method contract, like Explore."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from components import mindmap
from components.live_run import RunReads, run_reads
from components.run_view import progress_line
from components.safe_markdown import render_document
from components.step_log import lifecycle_events
from engine.methods.registry import UnknownMethod
from engine.reads import Run, RunNotFound, RunStatus
from engine.safe_text import inline_text
from engine.services import Services

REFRESH_SECONDS = 1.0
MAP_HEIGHT = 480  # px: two or three maps side by side, each still readable, above the reports
REPORT_HEIGHT = 520  # px: reports scroll in their own column, so a long one does not push the others apart


def any_active(services: Services, run_ids: Sequence[str]) -> bool:
    return any(services.reads.get_run(run_id).status in RunStatus.ACTIVE for run_id in run_ids)


def usage_line(reads: RunReads, lifecycle) -> str:
    """The run's progress line (status, nodes, active and wall time, tokens, cost) and its LLM calls."""
    run = reads.run
    calls = f"{run.llm_calls:,} LLM call" + ("" if run.llm_calls == 1 else "s")
    return progress_line(run, reads.nodes, lifecycle) + f" · {calls}"


def without_title(markdown: str) -> str:
    """The report without its first-level title: the question is shown once above the columns, and a
    title as large as a page's in a third of the page pushed the answer out of view. (The title is
    `engine.report`'s own heading line; dropping it leaves the rest as built.)"""
    first, newline, rest = markdown.partition("\n")
    return rest.lstrip("\n") if newline and first.startswith("# ") else markdown


def compared_setups(services: Services, run_ids: Sequence[str]) -> list[Run]:
    """The compared runs that are still stored (a deleted one says so in its column)."""
    runs = []
    for run_id in run_ids:
        try:
            runs.append(services.reads.get_run(run_id))
        except RunNotFound:
            continue
    return runs


def compared_runs(services: Services, run_ids: Sequence[str]) -> None:
    """The runs in columns; refreshes itself every second while any of them is active."""

    @st.fragment(run_every=REFRESH_SECONDS if any_active(services, run_ids) else None)
    def live(was_active: bool) -> None:
        active = any_active(services, run_ids)
        if was_active and not active:
            st.rerun(scope="app")  # all ended: stop polling
        for column, run_id in zip(st.columns(len(run_ids), gap="medium"), run_ids):
            with column:
                _run_column(services, run_id)

    live(any_active(services, run_ids))


def _run_column(services: Services, run_id: str) -> None:
    try:
        reads = run_reads(services, run_id, slot=f"compare-reads-{run_id}")
    except RunNotFound:
        st.error(f"There is no run '{run_id}' any more (deleted?). Start a new comparison above.")
        return
    run = reads.run
    try:
        method = services.method(run.method)
        title, contract = method.title, method.contract()
    except UnknownMethod:  # a plugin this process does not load: its map is drawn plainly
        title, contract = run.method, None
    st.subheader(inline_text(title))
    st.caption(inline_text(usage_line(reads, lifecycle_events(services, reads))))
    if run.status == RunStatus.FAILED and run.error:
        st.error(inline_text(f"The run failed: {run.error}"))
    elif run.stop_reason and run.status == RunStatus.STOPPED:
        st.warning(inline_text(f"Stopped: {run.stop_reason}"))
    data = reads.memo(
        "compare-map", lambda: mindmap.build_map(reads.nodes, reads.snapshot.edges, None, contract=contract)
    )
    mindmap.mind_map(data, key=f"compare-map-{run_id}", height=MAP_HEIGHT, min_scale=mindmap.OVERVIEW_SCALE)
    report = reads.memo("compare-report", lambda: services.reads.latest_report(run_id))
    with st.container(height=REPORT_HEIGHT, border=True):
        if report is None:
            st.caption("The report appears here when the run has written it.")
        else:
            # Each column's source entries are named by its method ("Deot source 1"): the columns share a
            # page, and a citation must jump to its own report's entry, not the first column's.
            words = (run.method, "source")
            render_document(
                st,
                reads.memo(
                    "compare-markdown", lambda: without_title(services.reads.markdown(run_id, source_words=words))
                ),
            )
    if st.button("Open on Explore", key=f"compare-open-{run_id}"):
        st.session_state["run_id"] = run_id
        st.switch_page("pages/explore.py", query_params={"run": run_id})
