"""Report: the rendered report of a run, its sources, downloads, regeneration."""

import json

import streamlit as st

from components import identity
from components.app_state import active_llm, get_services
from components.citation_check import citation_check
from components.routing import through_the_app
from components.safe_markdown import render_document, render_source
from engine.contract import CommandRejected
from engine.export import to_docx, to_pdf
from engine.export.pdf import pdf_font_missing
from engine.methods.base import UnsupportedCommand
from engine.reads import RunNotFound
from engine.runner import RunnerError
from engine.safe_text import code_span, inline_text

through_the_app()  # first: a deep link opened first after a start still runs through app.py

services = get_services()
reads = services.reads
st.title("Report")

asked = st.query_params.get("run")
if asked:
    try:
        named = reads.get_run(asked)
    except RunNotFound:
        pass  # said below, with the newest run shown instead
    else:
        if not services.access.can_read(identity.viewer(services), named):
            identity.open_run(services, asked)  # someone else's: said, nothing of it shown
runs = reads.list_runs(limit=200, visible_to=identity.visible_to(services))
if not runs:
    st.info("No runs yet. Start one on the Explore page.")
    st.stop()
ids = [r.id for r in runs]


def _title(r) -> str:
    return f"{(r.title or r.question)[:80]} · {r.method} · {r.status} · {r.created_at:%Y-%m-%d %H:%M} · {r.id}"


titles = {r.id: _title(r) for r in runs}
current = asked or st.session_state.get("run_id")
if current and current not in ids:
    try:
        older = reads.get_run(current)  # older than the newest 200: still this page's to show
        if not services.access.can_read(identity.viewer(services), older):
            raise RunNotFound(current)  # the session's last run, someone else's: not this page's
    except RunNotFound:
        if asked:  # a link or an address names it: say so, never show another run in its place
            st.error(
                f"There is no run {code_span(asked[:80])} (deleted?). The newest run is shown instead: pick another below "
                "or in Sessions."
            )
            del st.query_params["run"]
        current = None
    else:
        ids.append(older.id)
        titles[older.id] = _title(older)
if current in ids:
    # The run open elsewhere (Explore, a link, a reload) wins over this picker's last choice.
    st.session_state["report-run"] = current
elif st.session_state.get("report-run") not in ids:
    st.session_state["report-run"] = ids[0]


def _picked() -> None:
    st.session_state["run_id"] = st.query_params["run"] = st.session_state["report-run"]


run_id = st.selectbox("Run", ids, format_func=titles.get, key="report-run", on_change=_picked)
st.session_state["run_id"] = run_id
st.query_params["run"] = run_id

markdown = reads.markdown(run_id)
cols = st.columns(5)
# A download does not rerun the page (on_click="ignore"): a rerun replaces the PDF's and DOCX's
# deferred files, and a click on one of them while it ran found its file gone and did nothing.
cols[0].download_button(
    "Download Markdown",
    markdown,
    file_name=f"thoughtmap-{run_id}.md",
    mime="text/markdown",
    key="download-md",
    on_click="ignore",
)
cols[1].download_button(
    "Download JSON",
    json.dumps(reads.export_json(run_id), indent=2, ensure_ascii=False),
    file_name=f"thoughtmap-{run_id}.json",
    mime="application/json",
    key="download-json",
    on_click="ignore",
)
# Built when clicked (about a second each for a long report), not on every run of the page.
missing_font = pdf_font_missing()
if missing_font:
    cols[2].caption(f"No PDF: {missing_font}.")
else:
    cols[2].download_button(
        "Download PDF",
        lambda: to_pdf(reads.document(run_id)),
        file_name=f"thoughtmap-{run_id}.pdf",
        mime="application/pdf",
        key="download-pdf",
        on_click="ignore",
    )
cols[3].download_button(
    "Download DOCX",
    lambda: to_docx(reads.document(run_id)),
    file_name=f"thoughtmap-{run_id}.docx",
    mime="application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    key="download-docx",
    on_click="ignore",
)
opened = reads.get_run(run_id)
identity.whose(services, opened)
if identity.may_change(services, opened) and cols[4].button("Regenerate report", key="regenerate"):
    try:
        services.runner.steer(run_id, "regenerate_report")
    except (UnsupportedCommand, CommandRejected, RunnerError) as exc:  # e.g. one is already on its way
        st.error(inline_text(f"Could not regenerate the report: {exc}"))
    else:
        st.toast("Regenerating the report; it appears here when ready.")

render_document(st, markdown)
citation_check(services, run_id, active_llm(services))

sources = reads.list_sources(run_id)
with st.expander(f"All sources gathered by this run ({len(sources)})"):
    for source in sources:
        render_source(st, source.title, source.url or source.ref, source.snippet, source.kind)
