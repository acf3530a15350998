"""Issue 12, findings 2, 10 and 11 (`[n]`): nothing internal reaches the reader; citations are
links; the report downloads as PDF and DOCX with its citations.

Rules tested here, one each: placeholders ("Field required.", a field name, a schema word) are not
content; a summary renders under its own headings, each paragraph once; a structured failure is
shown in plain words with the detail apart; a report or section the model could not write is a note
and the run is not `done`; `[n]` links to its anchored source entry; PDF and DOCX keep the text,
the markers and the source links, and a hostile string comes out as literal text."""

from __future__ import annotations

import io

import docx
import pypdf
import pytest

from engine import cli
from engine.citation_links import anchor, entry_heading, link_citations
from engine.export import build_document, to_docx, to_pdf
from engine.export.document import body_blocks
from engine.methods.deot.method import render_summary
from engine.reader_text import (
    REPORT_NOT_WRITTEN,
    RUN_FAILED_ADVICE,
    SECTION_NOT_WRITTEN,
    STRUCTURED_FAILURE,
    is_placeholder,
    readable_sections,
    reader_error,
    run_failure,
)
from engine.report import render_markdown
from storage.models import RunStatus
from storage.repository import SourceInput
from tests.support.fixtures_engine import run_to_end
from tests.support.markdown_rendering import RENDERERS, links, tag_names

FIELDS = ("key_findings", "evidence_and_data", "analysis", "conflicting_information", "conclusion")
HOSTILE = "<script>alert('x')</script> **bold** # not a heading ![img](https://evil.example/p.png)"

# ---------------------------------------------------------------- what is not content


@pytest.mark.parametrize(
    "text",
    [
        "",
        "  ",
        "Field required.",
        "field required",
        "analysis",
        "conflicting_information",
        "Conflicting information",
        "**Analysis**",
        "- evidence_and_data",
        "string",
        "N/A",
        "null",
        "[]",
        "...",
        "evidence_and_data: Field required",
        "the model's answer did not match NodeSummary after 3 attempts",
    ],
)
def test_placeholders_are_not_content(text):
    assert is_placeholder(text, FIELDS)


@pytest.mark.parametrize(
    "text",
    [
        "Solar capacity doubled in 2023 [[S1]].",
        "Analysis of the grid shows a shortfall.",
        "No.",
        "A long answer that quotes an error message: 'Field required' " + "and goes on. " * 20,
    ],
)
def test_real_text_is_content(text):
    assert not is_placeholder(text, FIELDS)


def test_summary_sections_have_human_headings_no_field_names_and_each_paragraph_once():
    junk = {
        "key_findings": "Solar grew fast [[S1]].",
        "evidence_and_data": ["analysis", "conflicting_information", "Solar grew fast [[S1]].", "Wind fell 3%."],
        "analysis": "The grid lags.\n\nThe grid lags.\n\nField required.",
        "conflicting_information": ["string"],
        "conclusion": "The grid lags.",
    }
    sections = readable_sections(junk)
    assert [s.heading for s in sections] == ["Key findings", "Evidence and data", "Analysis"]
    assert [s.paragraphs for s in sections] == [("Solar grew fast [[S1]].",), ("Wind fell 3%.",), ("The grid lags.",)]
    assert sections[1].as_list and not sections[0].as_list


def test_deot_node_content_is_prose_under_headings_without_junk():
    content = render_summary(
        {
            "key_findings": "Found it.",
            "evidence_and_data": ["evidence_and_data"],
            "analysis": "Found it.",
            "conflicting_information": [],
            "conclusion": "Done here.",
        }
    )
    assert content == "**Key findings**\n\nFound it.\n\n**Conclusion**\n\nDone here."
    assert (
        render_summary(
            {
                f: "Field required." if f not in ("evidence_and_data", "conflicting_information") else ["string"]
                for f in FIELDS
            }
        )
        == ""
    )


def test_a_structured_failure_reads_in_plain_words_with_the_detail_apart():
    stored = (
        "nothing was answered: no question node succeeded (the first failure: the model's answer did not "
        "match NodeSummary after 3 attempts (evidence_and_data: Field required))"
    )
    shown = reader_error(stored)
    assert shown.message.startswith("Nothing was answered: no question node succeeded. ")
    assert STRUCTURED_FAILURE in shown.message and "NodeSummary" not in shown.message
    assert shown.technical == stored
    assert reader_error("every search failed: timeout") == type(shown)("every search failed: timeout")


def test_a_failed_runs_message_gives_one_thing_to_do_and_one_period_per_sentence():
    # Issue 43: "… a larger model fails less often.. Fix the cause (see Settings), then press Resume",
    # two periods and two contradicting pieces of advice.
    structured = run_failure(
        "nothing was answered: no question node succeeded (the first failure: the model's "
        "answer did not match NodeSummary after 3 attempts (conclusion: Field required))"
    )
    assert structured.message == (
        "The run failed: Nothing was answered: no question node succeeded. " + STRUCTURED_FAILURE
    )
    assert RUN_FAILED_ADVICE not in structured.message and "NodeSummary" in structured.technical
    plain = run_failure("every search failed: the endpoint answered 401.")
    assert plain.message == f"The run failed: every search failed: the endpoint answered 401. {RUN_FAILED_ADVICE}"
    for shown in (structured, plain):
        assert ".." not in shown.message and "Retry" in shown.message or "Resume" in shown.message


# ---------------------------------------------------------------- report writers


def test_a_deot_report_the_model_cannot_write_is_retried_then_a_note_and_the_run_is_not_done(services, fake_llm):
    fake_llm.when(prompt="deot.final_report", respond="Field required.")
    run_id = run_to_end(services, "Why did the Apollo program end?", "deot", {"max_nodes": 2, "max_layers": 2})
    report = services.repo.latest_report(run_id)
    assert "Field required" not in report.markdown and report.markdown.startswith(REPORT_NOT_WRITTEN)
    assert len(fake_llm.calls_for("deot.final_report")) == 2  # retried once
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.FAILED and "could not write the report" in run.error
    assert "Field required" not in render_markdown(services.repo, run_id)


def test_omnithink_sections_the_model_cannot_write_are_notes_and_no_article_is_not_done(services, fake_llm):
    fake_llm.when(prompt="omnithink.write_section", respond="Field required.")
    run_id = run_to_end(services, "The history of the printing press", "omnithink", {"max_depth": 1, "subnodes": 2})
    report = services.repo.latest_report(run_id)
    sections = report.data["sections"]
    assert sections and all(s["unwritten"] and SECTION_NOT_WRITTEN in s["markdown"] for s in sections)
    assert len(fake_llm.calls_for("omnithink.write_section")) == 2 * len(sections)  # each retried once
    assert report.markdown == REPORT_NOT_WRITTEN and report.data["unwritten"]
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.FAILED and "could not write the report" in run.error


def test_a_summary_of_only_junk_fails_its_node_in_plain_words(services, fake_llm):
    junk = {
        "key_findings": "key_findings",
        "evidence_and_data": ["Field required."],
        "analysis": "analysis",
        "conflicting_information": [],
        "conclusion": "string",
    }
    fake_llm.when(prompt="deot.summarize_results", respond=junk)
    run_id = run_to_end(services, "Why did the Apollo program end?", "deot", {"max_nodes": 1, "max_layers": 1})
    root = services.repo.list_nodes(run_id)[0]
    assert root.status == "failed" and "held no content" in root.error and "Retry" in root.error
    assert services.repo.get_run(run_id).status == RunStatus.FAILED


# ---------------------------------------------------------------- [n] as links


def test_citation_links_point_at_the_entry_heading_anchor():
    assert anchor(("source",), 3) == "source-3" and entry_heading(("source",), 3) == "Source 3"
    assert entry_heading(("node", "7", "source"), 1) == "Node 7 source 1"
    linked = link_citations("A [1], B [2][3], C [9], [4](https://x) and [[1]].", {1, 2, 3, 4})
    assert linked == ("A [[1]](#source-1), B [[2]](#source-2)[[3]](#source-3), C [9], [4](https://x) and [[1]].")


@pytest.fixture
def cited_run(services):
    """A stored run whose report cites two sources, with hostile text everywhere."""
    repo = services.repo
    run = repo.create_run(question="Which came first?", method="deot", params={}, llm_info={"model": "m"})
    web, corpus = repo.add_sources(
        run.id,
        [
            SourceInput(ref="https://example.org/a", title=f"Web {HOSTILE}", url="https://example.org/a", kind="web"),
            SourceInput(ref="doc-1", title="Corpus doc"),
        ],
    )
    root = repo.add_node(run.id, kind="question", label="Which came first?")
    repo.finish_node(root.id, content="done")
    repo.save_report(
        run.id,
        f"# Answer\n\nFirst [[S{web.id}]] then [[S{corpus.id}]].\n\n{HOSTILE}\n\nTitle\n===\n- item [[S{web.id}]]",
    )
    repo.set_status(run.id, RunStatus.DONE)
    return run.id


def test_markdown_report_links_each_citation_to_its_source_entry(services, cited_run):
    markdown = render_markdown(services.repo, cited_run)
    for name, render in RENDERERS.items():
        html = render(markdown)
        assert links(html).count("#source-1") == 2 and links(html).count("#source-2") == 1, name
        assert "https://example.org/a" in links(html), name
        assert tag_names(html).count("h6") == 2 and "img" not in tag_names(html), name
    assert "###### Source 1\n[1] " in markdown and "###### Source 2\n[2] " in markdown


# ---------------------------------------------------------------- PDF and DOCX


def _pdf_text_and_links(data: bytes) -> tuple[str, list[str], int]:
    reader = pypdf.PdfReader(io.BytesIO(data))
    text = "\n".join(page.extract_text() for page in reader.pages)
    uris, internal = [], 0
    for page in reader.pages:
        for annotation in page.get("/Annots") or []:
            action = annotation.get_object().get("/A")
            if action is not None and action.get("/URI"):
                uris.append(str(action["/URI"]))
            elif annotation.get_object().get("/Dest") is not None:
                internal += 1
    return text, uris, internal


def test_pdf_keeps_text_citations_and_source_links_and_shows_hostile_text_literally(services, cited_run):
    text, uris, internal = _pdf_text_and_links(to_pdf(build_document(services.repo, cited_run)))
    flat = " ".join(text.split())
    assert "First [1] then [2]." in flat and "item [1]" in flat
    assert "<script>alert('x')</script> bold # not a heading ![img](https://evil.example/p.png)" in flat
    assert "[1] Web <script>" in flat and "[2] Corpus doc — doc-1 (corpus)" in flat
    assert set(uris) == {"https://example.org/a"}  # only the source's own URL; nothing from the text
    assert internal == 3  # each citation marker links to its entry


def test_docx_keeps_text_citations_and_source_links_and_shows_hostile_text_literally(services, cited_run):
    document = docx.Document(io.BytesIO(to_docx(build_document(services.repo, cited_run))))
    paragraphs = [p.text for p in document.paragraphs]
    # The stored text is the model's: its lines stay lines of text ("- item" is not a bullet).
    lines = [line for paragraph in paragraphs for line in paragraph.split("\n")]
    assert "First [1] then [2]." in lines and "- item [1]" in lines and "# Answer" in lines
    assert "<script>alert('x')</script> bold # not a heading ![img](https://evil.example/p.png)" in paragraphs
    body = document.element.body
    anchors = [h.get(docx.oxml.ns.qn("w:anchor")) for h in body.iter(docx.oxml.ns.qn("w:hyperlink"))]
    assert anchors.count("source_1") == 2 and anchors.count("source_2") == 1
    bookmarks = [b.get(docx.oxml.ns.qn("w:name")) for b in body.iter(docx.oxml.ns.qn("w:bookmarkStart"))]
    assert bookmarks == ["source_1", "source_2"]
    external = [r.target_ref for r in document.part.rels.values() if r.is_external]
    assert external == ["https://example.org/a"]
    headings = [p.text for p in document.paragraphs if p.style.name.startswith("Heading")]
    assert headings == ["Which came first?", "Sources"]  # no heading from the text's "# " or "==="


def test_blocks_take_only_known_citations_and_no_markup():
    blocks = body_blocks("## Head [1]\n**Bold** [7] text\n\n1. first [2]", {1, 2})
    assert [(b.kind, b.parts) for b in blocks] == [
        ("heading", ("Head ", 1)),
        ("paragraph", ("Bold [7] text",)),
        ("numbered", ("first ", 2)),
    ]


@pytest.mark.parametrize("fmt", ["pdf", "docx"])
def test_cli_exports_pdf_and_docx_to_a_file_and_refuses_the_terminal(services, cited_run, tmp_path, capsys, fmt):
    out = tmp_path / f"report.{fmt}"
    assert cli.main(["export", cited_run, "--format", fmt, "--out", str(out)]) == cli.EXIT_OK
    assert out.read_bytes().startswith(b"%PDF" if fmt == "pdf" else b"PK")
    capsys.readouterr()
    assert cli.main(["export", cited_run, "--format", fmt]) == cli.EXIT_USAGE
    assert f"--out FILE.{fmt}" in capsys.readouterr().err
    from engine.cli import parser, runs  # the grammar offers exactly the formats a writer exists for

    assert set(parser.BINARY_FORMATS) == set(runs.BINARY_FORMATS)


def test_a_heading_inside_a_concept_of_the_pool_panel_stays_text():
    from components.safe_markdown import sanitize
    from engine.methods.omnithink.kinds import ConceptPool

    panel = ConceptPool(concepts=["Printing\n# GIANT from an uploaded document", "Type\n===", "Ink"]).panel_markdown()
    for name, render in RENDERERS.items():
        html = render(sanitize(panel))
        assert not {"h1", "h2", "h3", "h4", "h5", "h6"} & set(tag_names(html)), (name, html)
        assert "GIANT from an uploaded document" in html, name
