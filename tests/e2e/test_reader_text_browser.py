"""Issue 12, findings 2 and 10 and the `[n]` item of 11, in the browser.

A DEoT run is written straight into the app's database (deterministic, no LLM): its root's summary
carries what a small model produced (field names as bullet points, one paragraph four times,
"Field required.", a `# heading` and a setext heading), a child failed with a structured-output
error, and the report holds hostile Markdown and citations. The page must show prose under our
headings, each paragraph once, no heading made by the text, the failure in plain words with the
detail collapsed; `[1]` must scroll to its source entry (in the node panel and on the Report page);
the Report page's PDF and DOCX downloads must produce files.
"""

from __future__ import annotations

import pytest

from storage.models import NodeStatus, RunStatus
from storage.repository import SourceInput
from tests.e2e.conftest import ARTIFACTS, choose_node, panel_node, poll

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

QUESTION = "How did the printing press change European science?"
REPEATED = "Printed tables let astronomers compare observations across Europe."
GIANT = "# GIANT HEADING FROM A DOCUMENT"
SETEXT = "Setext title from a web page\n==="
TECHNICAL = "the model's answer did not match NodeSummary after 3 attempts (evidence_and_data: Field required)"


def seed_run(repo) -> dict:
    run = repo.create_run(
        question=QUESTION, method="deot", params={}, llm_info={"kind": "fake", "model": "fake"}, search_mode="local"
    )
    [source] = repo.add_sources(
        run.id,
        [
            SourceInput(
                ref="https://example.org/press",
                title="The press and science",
                url="https://example.org/press",
                kind="web",
                snippet="Printing spread tables.",
            )
        ],
    )
    marker = f"[[S{source.id}]]"
    summary = {
        "key_findings": f"{REPEATED} {marker}",
        "evidence_and_data": [
            "analysis",
            "conflicting_information",
            f"{REPEATED} {marker}",
            f"Star catalogues were reprinted unchanged {marker}.",
        ],
        "analysis": f"{REPEATED} {marker}\n\n{REPEATED} {marker}\n\n{GIANT}\n\n{SETEXT}",
        "conflicting_information": ["Field required."],
        "conclusion": "string",
    }
    # The content as an older version stored it: the junk shows if the panel reads it.
    content = (
        f"**Key findings.** {REPEATED} {marker}\n\n**Evidence and data**\n- analysis\n"
        f"- conflicting_information\n\n**Analysis**\n\n{REPEATED} {marker}\n\n{GIANT}"
    )
    root = repo.add_node(
        run.id,
        kind="question",
        label=QUESTION,
        status=NodeStatus.DONE,
        depth=0,
        content=content,
        data={"engine": "root", "summary": summary},
    )
    repo.link_sources(root.id, [source.id])
    failed = repo.add_node(
        run.id,
        kind="question",
        label="Which observatories used printed tables?",
        parent_id=root.id,
        status=NodeStatus.FAILED,
        depth=1,
        data={"engine": "breadth"},
    )
    repo.update_node(failed.id, error=TECHNICAL)
    filler = "\n\n".join(
        f"Paragraph {i} of the report, long enough to push the sources below the fold. " * 3 for i in range(12)
    )
    # The stored report is the model's text: no `#` heading of it (its own, or the quoted document's in
    # a quote, a list or a setext underline) is a heading of the page.
    repo.save_report(run.id, f"# Findings\n\n{REPEATED} {marker}\n\n> {GIANT}\n\n- {GIANT}\n\n{SETEXT}\n\n{filler}")
    repo.set_status(run.id, RunStatus.DONE)
    return {"run": run.id, "root": root.id, "failed": failed.id}


def in_viewport(page, selector: str) -> bool:
    return page.locator(selector).first.evaluate(
        "el => { const r = el.getBoundingClientRect(); return r.top >= 0 && r.top < window.innerHeight; }"
    )


def test_reader_text_is_clean_and_citations_link_to_sources(streamlit_app, page, app_repo, tmp_path):
    ids = seed_run(app_repo)
    page.goto(f"{streamlit_app.url}/?run={ids['run']}")
    poll(page, lambda: panel_node(page) == ids["root"], what="the node panel to show the root")
    panel = page.locator('[data-testid="stMainBlockContainer"]')

    # Prose under our headings; no field name as a bullet; the repeated paragraph once.
    for heading in ("Key findings", "Evidence and data", "Analysis"):
        page.get_by_role("heading", name=heading, exact=True).first.wait_for()
    assert page.get_by_role("heading", name="Conclusion", exact=True).count() == 0  # "string": omitted
    assert page.locator("li", has_text="conflicting_information").count() == 0
    assert page.locator("li", has_text="Field required").count() == 0
    # Once in the node panel, once in the report (drawn after the panel: waited for, not read once).
    poll(page, lambda: panel.get_by_text(REPEATED).count() == 2, what="the paragraph in the panel and the report")
    # The document's headings are text, not headings.
    assert page.get_by_role("heading", name="GIANT HEADING FROM A DOCUMENT").count() == 0
    assert page.get_by_role("heading", name="Setext title from a web page").count() == 0
    panel.get_by_text(GIANT).first.wait_for()
    # The run's question is a line of text above the map (the headings are the node's label and the report's title).
    page.locator("p", has_text=f"Question: {QUESTION}").first.wait_for()
    assert page.get_by_role("heading", name=QUESTION).count() == 2

    page.get_by_role("heading", name="Key findings", exact=True).first.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "reader-node-panel.png"), full_page=False)

    # [1] in the node panel goes to the node's source entry (named by the root's number on the map, #1).
    page.locator('a[href="#node-1-source-1"]').first.click()
    poll(page, lambda: page.evaluate("location.hash") == "#node-1-source-1", what="the hash")
    poll(page, lambda: in_viewport(page, "#node-1-source-1"), what="the source entry in view")

    # The failed node: plain words, the technical detail collapsed.
    choose_node(page, ids["failed"])
    poll(page, lambda: panel_node(page) == ids["failed"], what="the node panel to show the failed node")
    page.get_by_text("could not give its answer in the form").first.wait_for()
    assert page.get_by_text("did not match NodeSummary").first.is_visible() is False
    page.get_by_text("Technical details").first.click()
    page.get_by_text("did not match NodeSummary").first.wait_for(state="visible")

    # The Report page: [1] goes to Source 1, which links to the page; PDF and DOCX download.
    page.goto(f"{streamlit_app.url}/report?run={ids['run']}")
    page.get_by_role("button", name="Download PDF").wait_for()
    page.get_by_text("# Findings", exact=True).first.wait_for()  # the model's "heading": a line of text
    assert page.get_by_role("heading", name="Findings", exact=True).count() == 0
    assert page.get_by_role("heading", name="GIANT HEADING FROM A DOCUMENT").count() == 0
    assert page.get_by_role("heading", name="Setext title from a web page").count() == 0
    page.locator('a[href="#source-1"]').first.click()
    poll(page, lambda: in_viewport(page, "#source-1"), what="Source 1 in view")
    assert page.locator('a[href="https://example.org/press"]').count() >= 1
    page.screenshot(path=str(ARTIFACTS / "reader-report-links.png"), full_page=False)
    # All four, one click right after the other, as a person grabs them: a download that reran the
    # page replaced the PDF's and DOCX's deferred files, and the next click then got nothing.
    for label, suffix, magic in (
        ("Download Markdown", "md", b"# "),
        ("Download JSON", "json", b"{"),
        ("Download PDF", "pdf", b"%PDF"),
        ("Download DOCX", "docx", b"PK"),
    ):
        with page.expect_download(timeout=30_000) as download_info:
            page.get_by_role("button", name=label).click()
        path = tmp_path / f"report.{suffix}"
        download_info.value.save_as(path)
        assert path.read_bytes().startswith(magic), label


def test_a_stopped_runs_partial_report_says_so_on_the_report_page(streamlit_app, page, app_repo):
    """A run stopped by its budget after one column's summary: its report (written without the
    model, marked partial) is shown under a note that says what it is and what to do."""
    reason = "token budget reached: 4000 tokens used, of a budget of 4000"
    run = app_repo.create_run(
        question=QUESTION, method="mtqa", params={}, llm_info={"kind": "fake", "model": "fake"}, search_mode="local"
    )
    [source] = app_repo.add_sources(
        run.id,
        [
            SourceInput(
                ref="hotpotqa/Printing press", title="Printing press", kind="corpus", snippet="Printing spread tables."
            )
        ],
    )
    app_repo.save_report(
        run.id,
        f"**Answer:** printed tables\n\n{REPEATED} [[S{source.id}]]\n\n> This is the "
        "summary of column 1 of 2: the later columns have not been written yet.",
        data={"method": "mtqa", "short_answer": "printed tables", "column": 1, "partial": reason},
    )
    app_repo.set_status(run.id, RunStatus.STOPPED, stop_reason=reason)
    page.goto(f"{streamlit_app.url}/report?run={run.id}")
    page.get_by_text("Partial report: the run stopped before its end").first.wait_for()
    page.get_by_text("summary of column 1 of 2").first.wait_for()
    assert page.locator('a[href="#source-1"]').count() >= 1  # its citation still resolves
    page.screenshot(path=str(ARTIFACTS / "partial-report.png"), full_page=False)
