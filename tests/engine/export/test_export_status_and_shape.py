"""Reports and exports say a run's status and keep the text's shape (from review 16, findings 3, 8, 9,
12, 16 and 17).

One rule each: a character XML 1.0 forbids never reaches python-docx; the Markdown, DOCX and PDF
of a failed, stopped, warned or out-of-date run say the same status note (the error in plain words,
as what happened, never as the report); a node label or title cannot take a source entry's anchor
or read as our Sources heading; code, tables, numbered lists, quotes and dunder names keep their
shape in DOCX/PDF; `direct`'s made-up reference list is not shown; an error shown in the app or the CLI is text
on one line."""

from __future__ import annotations

import io
import re

import docx
import markdown as python_markdown
import pypdf
import pytest

from engine import cli
from engine import services as services_module
from engine.export import build_document, to_docx, to_pdf
from engine.export.document import Block, body_blocks
from engine.graph import OWN_TEXT_FROM
from engine.llm.protocol import LLMError
from engine.reader_text import STRUCTURED_FAILURE
from engine.report import render_markdown, status_note
from engine.safe_text import inline_text
from storage.models import RunStatus
from storage.repository import SourceInput
from tests.engine.methods.fgdip.test_app_fgdip import app_services
from tests.pages.test_app_pages import joined, open_page
from tests.support.fixtures_engine import run_to_end
from tests.support.markdown_rendering import RENDERERS, assert_inert, links, visible_text


def docx_texts(data: bytes) -> list[str]:
    document = docx.Document(io.BytesIO(data))
    cells = [cell.text for table in document.tables for row in table.rows for cell in row.cells]
    return [p.text for p in document.paragraphs] + cells


def pdf_text(data: bytes) -> str:
    return " ".join(" ".join(page.extract_text() for page in pypdf.PdfReader(io.BytesIO(data)).pages).split())


def stored_run(
    repo,
    *,
    status: str,
    report: str | None = None,
    labels: tuple[str, ...] = ("Finding",),
    question: str = "Which came first?",
    title: str = "",
    source_title: str = "Web page",
    url: str = "https://example.org/a",
    **outcome,
) -> tuple[str, int]:
    """A run with one web source, a finished answer citing it under each label, an optional
    report, and the given outcome (`stop_reason`, `error`, `warning`)."""
    run = repo.create_run(question=question, method="deot", params={}, llm_info={"model": "m"}, title=title)
    [source] = repo.add_sources(run.id, [SourceInput(ref=url, title=source_title, url=url, kind="web")])
    root = repo.add_node(run.id, kind="question", label=question)
    repo.finish_node(root.id, content="root")
    for label in labels:
        node = repo.add_node(run.id, kind="subquery", label=label, parent_id=root.id, depth=1)
        repo.finish_node(node.id, content=f"An answer to {label} [[S{source.id}]].")
    if report is not None:
        repo.save_report(run.id, report.replace("{S}", f"[[S{source.id}]]"))
    repo.set_status(run.id, status, **outcome)
    return run.id, source.id


# ---------------------------------------------------------------- finding 3: XML 1.0


def test_docx_export_drops_the_characters_xml_forbids(services):
    repo = services.repo
    run_id, _ = stored_run(
        repo,
        status=RunStatus.DONE,
        question="Which\uffff came first?",
        source_title="Title\uffff \ufffeend",
        url="https://example.org/a\uffff",
        report="Plain ASCII report that mentions the entity &#65535; literally {S}.\n\n"
        "# Head\ufffe\n\n- item &#65534; raw \uffff\n\n```\ncode \uffff\n```",
    )
    texts = docx_texts(to_docx(build_document(repo, run_id)))
    joined_text = "\n".join(texts)
    assert "\uffff" not in joined_text and "\ufffe" not in joined_text
    assert "Plain ASCII report that mentions the entity  literally [1]." in texts
    assert "Which came first?" in texts and "# Head" in texts  # the stored text is the model's: a line of text
    assert any(t.startswith("[1] Title end — https://example.org/a") for t in texts)
    assert to_pdf(build_document(repo, run_id)).startswith(b"%PDF")


# ---------------------------------------------------------------- finding 8: the status note


def exports_say(repo, run_id: str) -> str:
    """The note, checked to be the same words in the Markdown's quote, the DOCX facts and the PDF."""
    run = repo.get_run(run_id)
    note = status_note(repo, run, repo.latest_report(run_id))
    assert note
    markdown = render_markdown(repo, run_id)
    assert f"\n> {inline_text(note)}\n" in markdown
    document = build_document(repo, run_id)
    assert document.facts[-1] == note
    assert note in docx_texts(to_docx(document))
    assert " ".join(note.split()) in pdf_text(to_pdf(document))
    return note


def test_a_failed_run_without_a_report_says_its_error_as_the_reason(services):
    repo = services.repo
    run_id, _ = stored_run(repo, status=RunStatus.FAILED, error="the endpoint http://localhost:9 could not be reached")
    note = exports_say(repo, run_id)
    assert note == (
        "Partial results: the run failed: the endpoint http://localhost:9 could not be reached. "
        "These are the results it had."
    )
    # The finished answer is the content; the error is not.
    assert [b.parts[0] for b in build_document(repo, run_id).blocks] == ["Node 2", "Finding", "An answer to Finding "]


def test_a_failed_run_says_a_structured_failure_in_plain_words(services):
    repo = services.repo
    technical = (
        "nothing was answered: no question node succeeded (the first failure: the model's answer "
        "did not match NodeSummary after 3 attempts)"
    )
    run_id, _ = stored_run(repo, status=RunStatus.FAILED, report="Written before {S}.", error=technical)
    note = exports_say(repo, run_id)
    assert note == f"The run failed: Nothing was answered: no question node succeeded. {STRUCTURED_FAILURE}"
    assert "NodeSummary" not in note


def test_a_hostile_error_is_text_in_the_note_and_never_report_content(services):
    repo = services.repo
    hostile = (
        "<script>alert(1)</script> **boom**\n# Sources\n[1](https://evil.example) ![x](https://evil.example/p.png)"
    )
    run_id, _ = stored_run(repo, status=RunStatus.FAILED, error=hostile)
    markdown = render_markdown(repo, run_id)
    assert_inert(markdown)
    for name, render in RENDERERS.items():
        html = render(markdown)
        assert "https://evil.example" not in links(html), name
        assert re.findall(r"<h\d>Sources</h\d>", html) == ["<h2>Sources</h2>"], name
        assert "<script>alert(1)</script> **boom** # Sources" in visible_text(html), name
    document = build_document(repo, run_id)
    assert "<script>alert(1)</script> **boom** # Sources [1](https://evil.example)" in document.facts[-1]
    assert not any("evil" in str(part) for block in document.blocks for part in block.parts)


def test_a_done_run_with_a_warning_says_it(services):
    repo = services.repo
    run_id, _ = stored_run(
        repo, status=RunStatus.DONE, report="The answer {S}.", warning="2 nodes failed; resume the run to retry them"
    )
    assert exports_say(repo, run_id) == "Warning: 2 nodes failed; resume the run to retry them."


def test_a_stopped_run_keeps_its_stop_reason_in_docx_and_pdf(services):
    repo = services.repo
    run_id, _ = stored_run(repo, status=RunStatus.STOPPED, stop_reason="token budget reached (1,000 tokens)")
    assert exports_say(repo, run_id) == "Partial results: the run is stopped (token budget reached (1,000 tokens))."
    texts = docx_texts(to_docx(build_document(repo, run_id)))
    assert "Partial results: the run is stopped (token budget reached (1,000 tokens))." in texts


def test_a_report_from_before_the_last_change_says_so_in_docx_too(services, monkeypatch):
    repo = services.repo
    run_id, _ = stored_run(repo, status=RunStatus.STOPPED, report="The old answer {S}.")
    monkeypatch.setattr("engine.report._steered_since", lambda repo, run, report: True)
    assert exports_say(repo, run_id).startswith(
        "This report was written before your last change to the run, which the run did not finish (it is stopped)."
    )


def test_a_done_run_without_warning_has_no_note(services):
    repo = services.repo
    run_id, _ = stored_run(repo, status=RunStatus.DONE, report="The answer {S}.")
    assert status_note(repo, repo.get_run(run_id), repo.latest_report(run_id)) == ""
    assert "\n> " not in render_markdown(repo, run_id)
    assert len(build_document(repo, run_id).facts) == 2


def test_the_reports_node_count_says_how_many_of_its_nodes_are_pruned(services):
    # The map draws pruned nodes faded; a bare "Nodes: 3" beside a map showing 2 kept nodes misleads.
    repo = services.repo
    run_id, _ = stored_run(repo, status=RunStatus.DONE, report="The answer {S}.", labels=("One", "Two"))
    assert "*Nodes:* 3 ·" in render_markdown(repo, run_id)
    [one] = [node for node in repo.list_nodes(run_id) if node.label == "One"]
    repo.update_node(one.id, status="pruned")
    assert "*Nodes:* 3 (1 pruned) ·" in render_markdown(repo, run_id)


# ---------------------------------------------------------------- finding 9: headings from labels


def heading_ids(markdown: str) -> list[tuple[str, str]]:
    html = python_markdown.markdown(markdown, extensions=["toc"])
    return re.findall(r'<h\d id="([^"]+)">(.*?)</h\d>', html)


def test_partial_results_headings_take_no_source_anchor_and_forge_no_sources_heading(services):
    repo = services.repo
    run_id, _ = stored_run(
        repo,
        status=RunStatus.STOPPED,
        stop_reason="stopped by the user",
        labels=("Source 1", "Sources", "**Sources:**", "Sources of iron"),
        title="Source 1",
    )
    markdown = render_markdown(repo, run_id)
    ids = heading_ids(markdown)
    assert ("source-1", "Source 1") in ids  # our entry keeps its anchor, so [1] jumps to it
    assert [text for _, text in ids].count("Sources") == 1  # ours only
    # A node's heading is ours ("Node 2"); its label, the model's words, is a line of text under it.
    assert "### Node 2\n\n*Source 1*" in markdown and "### Node 3\n\n*Sources*" in markdown
    assert "### Node 5\n\n*Sources of iron*" in markdown
    assert markdown.startswith("# Report: Source 1\n")
    for name, render in RENDERERS.items():
        assert links(render(markdown)).count("#source-1") == 4, name
    headings = [b.parts for b in build_document(repo, run_id).blocks if b.kind == "heading"]
    assert headings == [("Node 2",), ("Node 3",), ("Node 4",), ("Node 5",)]
    assert build_document(repo, run_id).title == "Report: Source 1"


# ---------------------------------------------------------------- finding 12: structure in DOCX/PDF

STRUCTURED = """Define `__init__` and `if __name__ == "__main__":` in **bold** __words__ [1]; snake__case__name stays.

| Country | Capital |
|---|:---:|
| France | Paris [1] |
| Japan | Tokyo \\| Edo |

```python
# compute the total
- not a bullet
total = values[1]
```

2. second [1]
3. third

> A note from the model."""


def test_body_blocks_keep_code_tables_numbers_and_dunder_names():
    blocks = body_blocks(STRUCTURED, {1})
    assert blocks == [
        Block(
            "paragraph",
            ('Define `__init__` and `if __name__ == "__main__":` in bold words ', 1, "; snake__case__name stays."),
        ),
        Block(
            "table",
            (),
            rows=((("Country",), ("Capital",)), (("France",), ("Paris ", 1)), (("Japan",), ("Tokyo | Edo",))),
        ),
        Block("code", ("# compute the total\n- not a bullet\ntotal = values[1]",)),
        Block("numbered", ("second ", 1), number=2),
        Block("numbered", ("third",), number=3),
        Block("paragraph", ("A note from the model.",)),
    ]


def test_italics_lose_their_markers_like_bold_but_literal_and_inner_ones_stay():
    """FGDIP writes its notes in italics (`_The search explored ..._`): the PDF and DOCX show the
    words, not the underscores. A model's literal marker (escaped by the sanitiser), one inside a
    word, and one in a code span stay as written."""
    text = (
        r"_The search explored 21 nodes [1]._ Then *this* and **bold *inner* words**; "
        r"a\_b, \*star\*, a_b_c, 2*3*4, x * y * z, `_kept_` and *unclosed"
    )
    (block,) = body_blocks(text, {1})
    assert block.parts == (
        "The search explored 21 nodes ",
        1,
        ". Then this and bold inner words; a_b, *star*, a_b_c, 2*3*4, x * y * z, `_kept_` and *unclosed",
    )
    # A web address keeps its markers (a model's bare URL, or a link's target).
    (block,) = body_blocks("See https://x.org/a_b/_c_/**d** and _this_.", set())
    assert block.parts == ("See https://x.org/a_b/_c_/**d** and this.",)


def test_an_unclosed_fence_runs_to_the_end_and_a_quoted_heading_stays_text():
    assert body_blocks("> # Not a heading\n\n~~~\n# comment\n~~~~ not a close", set()) == [
        Block("paragraph", ("# Not a heading",)),
        Block("code", ("# comment\n~~~~ not a close",)),
    ]


@pytest.fixture
def structured_run(services) -> str:
    """A report whose text is all the method's own (`RunGraph.save_report`'s `own`): its structure
    keeps its shape. (The model's text makes none: tests/engine/export/test_untrusted_structure.py.)"""
    run_id, _ = stored_run(services.repo, status=RunStatus.DONE, report=STRUCTURED.replace(" [1]", " {S}"))
    report = services.repo.latest_report(run_id)
    services.repo.save_report(run_id, report.markdown, data={OWN_TEXT_FROM: 0})
    return run_id


def test_docx_keeps_code_lines_a_table_and_list_numbers(services, structured_run):
    document = docx.Document(io.BytesIO(to_docx(build_document(services.repo, structured_run))))
    paragraphs = [p.text for p in document.paragraphs]
    assert "# compute the total\n- not a bullet\ntotal = values[1]" in paragraphs
    code = next(p for p in document.paragraphs if p.text.startswith("# compute"))
    assert code.runs[0].font.name == "Courier New" and code.style.name == "Normal"
    assert "2. second [1]" in paragraphs and "3. third" in paragraphs
    assert "A note from the model." in paragraphs
    assert paragraphs[3].startswith('Define `__init__` and `if __name__ == "__main__":` in bold words [1]')
    [table] = document.tables
    assert [[c.text for c in row.cells] for row in table.rows] == [
        ["Country", "Capital"],
        ["France", "Paris [1]"],
        ["Japan", "Tokyo | Edo"],
    ]
    anchors = [h.get(docx.oxml.ns.qn("w:anchor")) for h in document.element.body.iter(docx.oxml.ns.qn("w:hyperlink"))]
    assert anchors.count("source_1") == 3  # paragraph, table cell, numbered item; none from the code
    assert [p.text for p in document.paragraphs if p.style.name.startswith("Heading")] == [
        "Which came first?",
        "Sources",
    ]


def test_pdf_keeps_code_lines_table_rows_and_list_numbers(services, structured_run):
    data = to_pdf(build_document(services.repo, structured_run))
    reader = pypdf.PdfReader(io.BytesIO(data))
    lines = [" ".join(line.split()) for page in reader.pages for line in page.extract_text().splitlines()]
    assert "# compute the total" in lines and "- not a bullet" in lines and "total = values[1]" in lines
    assert "Country | Capital" in lines and "France | Paris [1]" in lines and "Japan | Tokyo | Edo" in lines
    assert "2. second [1]" in lines and "3. third" in lines and "A note from the model." in lines
    assert any(line.startswith("Define `__init__` and `if __name__ ==") for line in lines)
    fonts = {
        str(font)
        for page in reader.pages
        for font in page["/Resources"]["/Font"].values()
        for font in [font.get_object()["/BaseFont"]]
    }
    assert any("Mono" in font for font in fonts)


# ---------------------------------------------------------------- finding 16: direct's own [n]


def test_directs_made_up_reference_list_is_not_shown_and_its_answer_is_stored_as_written(services, fake_llm):
    """Direct is the benchmarks' baseline: its answer is stored as the model wrote it (a bracketed
    "[0, 1]" is data, not a citation to drop). The reference list it made up is cut where the
    report is shown, so no invented title or address stands as a source; its `[n]` link nowhere."""
    written = (
        "Paris is the capital [1], in the interval [0, 1].\n\n```python\nfirst = cities[1]\n```\n\n"
        "References:\n[1] Britannica, https://www.britannica.com/place/Paris"
    )
    fake_llm.when(prompt="direct.answer", respond={"answer": written, "confidence": "high"})
    run_id = run_to_end(services, "What is the capital of France?", "direct")
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.DONE, (run.error, [n.error for n in services.repo.list_nodes(run_id)])
    answer = services.repo.list_nodes(run_id, kind="answer")[0]
    assert answer.content == written and answer.data["confidence"] == "high"
    shown = render_markdown(services.repo, run_id)
    assert "britannica" not in shown.lower() and "References" not in shown
    # Its code is shown as written, line by line (the model's text makes no code block of its own).
    html = RENDERERS["markdown-it (commonmark, html on)"](shown)
    assert "<p>```python<br />\nfirst = cities[1]<br />\n```</p>" in html and "the interval [0, 1]." in shown
    assert "](#source-" not in shown  # direct has no sources: nothing is linked


# ---------------------------------------------------------------- finding 17: errors as text


def test_cli_show_prints_a_multi_line_error_on_the_status_line(services, capsys):
    run_id, _ = stored_run(services.repo, status=RunStatus.FAILED, error="502 Bad Gateway\n<html>\nbody</html>")
    assert cli.main(["show", run_id]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "status    failed error: 502 Bad Gateway <html> body</html>\n" in out
    assert "\nbody</html>" not in out


@pytest.fixture
def app(prebuilt_corpus_home, fake_llm):
    yield from app_services(fake_llm)


def test_a_citation_check_error_is_shown_as_text(app, monkeypatch):
    run_id = run_to_end(app, "Who wrote the play Hamlet?", "rag")

    def refused(*args, **kwargs):
        raise LLMError("**the endpoint said** [click](https://evil.example) # not a heading")

    monkeypatch.setattr(services_module, "check_and_store", refused)  # what Services.check_citations calls
    at = open_page("pages/report.py", run_id=run_id)
    at.button(key=f"check-citations-{run_id}").click().run()
    assert joined(at.error) == (
        r"The check could not run: \*\*the endpoint said\*\* \[click\](https://evil.example) "
        "# not a heading"
    )


def test_a_pdf_says_which_characters_its_font_could_not_print():
    """No font of the PDF has Devanagari: fpdf2 drops such characters without a word, so the PDF
    says how many it left out and which (by code point), and points to the DOCX and Markdown."""
    from engine.export.document import ReportDocument

    text = pdf_text(to_pdf(ReportDocument(title="Namaste नमस्ते", facts=["Question: where?"])))
    assert "6 different characters of this report are not in the PDF's font and are left out" in text
    assert "U+0924, U+0928, U+092E, U+0938, U+0947, U+094D" in text and "DOCX and Markdown downloads keep them" in text
    assert "fonts-wqy-microhei" not in text  # no CJK among them: that font would not help
    assert "left out" not in pdf_text(to_pdf(ReportDocument(title="Tokyo Tower", facts=["Question: where?"])))
    assert b"WenQuanYi" not in to_pdf(ReportDocument(title="Tokyo Tower", facts=[]))  # the CJK font only where needed


def test_chinese_japanese_and_korean_print_in_the_cjk_font_and_its_absence_is_said(monkeypatch):
    """DejaVu has no CJK: its glyphs come from WenQuanYi Micro Hei (scripts/test installs it), in
    headings and code too. Without that font they are left out, and the PDF names the package."""
    from engine.export import pdf as pdf_module
    from engine.export.document import Block, ReportDocument

    assert pdf_module.CJK_FILE.is_file(), "scripts/test installs Debian's fonts-wqy-microhei"
    document = ReportDocument(
        title="Tokyo 東京タワー",
        facts=["Question: 서울?"],
        blocks=[Block("heading", ("見出し",), level=2), Block("code", ("name = '中文'",))],
    )
    pdf = to_pdf(document)
    text = pdf_text(pdf)
    assert "left out" not in text and b"WenQuanYi" in pdf
    assert all(words in text for words in ("東京タワー", "서울", "見出し", "中文"))

    monkeypatch.setattr(pdf_module, "CJK_FILE", pdf_module.CJK_FILE.with_name("absent.ttc"))
    text = pdf_text(to_pdf(document))
    assert "different characters of this report are not in the PDF's font and are left out" in text
    assert "Chinese, Japanese and Korean print once Debian's fonts-wqy-microhei font is installed" in text


def test_the_pdf_checks_each_text_against_the_font_it_is_set_in():
    """Code is set in DejaVu Sans Mono, which lacks Hebrew that the regular font has."""
    from engine.export.document import Block, ReportDocument

    document = ReportDocument(
        title="Greeting",
        facts=["Question: hello?"],
        blocks=[Block("paragraph", ("שלום in prose",)), Block("code", ("print('שלום')",))],
    )
    text = pdf_text(to_pdf(document))
    assert "4 different characters of this report are not in the PDF's font" in text, text
