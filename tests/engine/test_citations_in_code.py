"""Citations and headings in prose only (review 16, findings 1, 2, 5, 7, 10, 13, 14): code keeps its
brackets and comments, an answer cut off inside a code block does not swallow the Sources list,
citation ranges are expanded, a dropped marker tidies only its own space, and a citation can
neither show one number and open another nor lose its link by being glued to a word."""

from __future__ import annotations

from dataclasses import dataclass

from engine.citation_links import link_citations
from engine.citations import number_citations, to_stored_markers, without_reference_list
from engine.markdown_code import close_fence, split_code
from engine.methods.research.markers import write_cited
from engine.safe_text import markdown_block
from tests.support.markdown_rendering import _markdown_it, links


@dataclass
class Source:
    id: int
    title: str = "t"
    text: str = ""
    snippet: str = ""


SOURCES = [Source(11), Source(12), Source(13)]
CODE = "```python\nvalues = [1, 2, 3]\nfirst = values[0]\n# compute the total\n```\n"


def test_code_keeps_its_brackets_and_only_prose_cites():
    text = f"Lists are ordered [1].\n\n{CODE}\nUse `len([2])` to count [3]."
    stored, dropped = to_stored_markers(text, SOURCES)
    assert stored == f"Lists are ordered [[S11]].\n\n{CODE}\nUse `len([2])` to count [[S13]]."
    assert dropped == []  # `values[0]` is an index, not a citation error
    rendered = number_citations(stored, [11, 12, 13])
    assert rendered.numbering == {1: 11, 2: 13}  # the code's [2] and [3] cite nothing
    linked = link_citations(markdown_block(rendered.text, heading_floor=2), {1, 2})
    assert CODE in linked and "`len([2])`" in linked
    assert "count [[2]](#source-2)" in linked


def test_a_range_cites_each_source_in_it_and_a_span_of_years_is_text():
    text = "Both agree [1-3]; one [2–3]; a scale of [1-5]. Built [1990-2024], [1-40]."
    stored, dropped = to_stored_markers(text, SOURCES)
    # A range past the three sources shown is no citation: "[1-5]" is a scale here.
    assert (
        stored == "Both agree [[S11]][[S12]][[S13]]; one [[S12]][[S13]]; a scale of [1-5]. Built [1990-2024], [1-40]."
    )
    assert dropped == []


def test_a_dropped_marker_takes_only_its_own_space():
    text = "Export a .csv file on .NET, ratio 3 : 1 ; true [9]. Also [[S12]], and for (i = 0 ; i < n ; i++) [1]."
    stored, dropped = to_stored_markers(text, SOURCES)
    assert stored == "Export a .csv file on .NET, ratio 3 : 1 ; true. Also, and for (i = 0 ; i < n ; i++) [[S11]]."
    assert dropped == [12, 9]
    # Between two words it leaves one space; at the start of a line, the line's indentation.
    stored, dropped = to_stored_markers("cite [[S12]] in full\n  [[S12]] indented", SOURCES)
    assert stored == "cite in full\n   indented" and dropped == [12, 12]


def test_the_research_agents_malformed_markers_go_without_moving_other_text():
    written = "Built on .NET (#ab12). Ratio 3 : 1 [1]."
    cited = write_cited(lambda feedback: written, SOURCES[:1], retries=0)
    assert cited.text == "Built on .NET. Ratio 3 : 1 [[S11]]."


def test_a_citation_cannot_show_one_number_and_open_another():
    stored, _ = to_stored_markers("It [[2]](#source-3) lies, and [1](https://elsewhere.example) too.", SOURCES)
    assert stored == "It [[S12]] lies, and [[S11]] too."


def test_a_citation_glued_to_a_word_is_linked_like_any_other():
    assert link_citations("Paris[2] in 2020[1].", {1, 2}) == "Paris[[2]](#source-2) in 2020[[1]](#source-1)."


def test_an_answer_cut_off_inside_a_code_block_leaves_the_sources_list_outside_it():
    body = markdown_block("Use sum [1]. For example:\n\n```python\ntotal = sum(values", heading_floor=2)
    report = link_citations(body, {1}) + "\n\n## Sources\n\n###### Source 1\n\n[1] [Docs](https://docs.example)\n"
    html = _markdown_it().render(report)
    assert "<h2>Sources</h2>" in html and "https://docs.example" in links(html)
    assert html.count("<pre>") == 1 and "Sources" not in html.split("</pre>")[0]


def test_a_comment_in_code_stays_but_a_heading_that_would_take_our_anchor_does_not():
    block = markdown_block("```sh\n# install it\n---\n# Source 1\n\nSources\n===\n```", heading_floor=2)
    assert "# install it\n---\n" in block  # code as written
    assert "&#35; Source 1" in block and "&#61;==" in block  # not a heading in a viewer without fences
    # A setext heading's words are its whole paragraph: "Source" over "1" would get `source-1`.
    assert "&#45;--" in markdown_block("```\n\nSource\n1\n---\n```", heading_floor=2)


def test_a_fence_only_some_viewers_take_for_code_gets_every_heading_rule():
    """Python-Markdown's fenced blocks start at the margin and end with the same fence: in any other
    (indented, or closed by a longer fence) a `#` line is a heading there, so it is disarmed."""
    indented = markdown_block("Text.\n\n  ```\n# Forged report title\n  ```\n", heading_floor=2)
    assert "## Forged report title" in indented  # at the floor, as outside code
    assert "# install it" in markdown_block("```\n# install it\n```", heading_floor=2)


def test_a_code_block_cut_off_in_a_list_item_ends_with_the_item():
    """CommonMark closes a list item's code block where the item ends: a fence added at the margin
    would open a new block and swallow the Sources list; none is needed, and none is added."""
    body = "Install it first:\n\n1. Install the package:\n   ```bash\n   pip install requests\n   python -c 'imp"
    assert close_fence(body) == body
    top = "Use it:\n\n  ```python\n  total = sum(val"
    assert close_fence(top) == top + "\n  ```"  # at the opener's indentation


def test_the_pdf_and_docx_see_code_where_the_markdown_viewers_do():
    """The exports' blocks take code from CommonMark's parser: a fence in a list item is code (its
    brackets no citation), a fence never closed runs to the end, and a table stops at a fence."""
    from engine.export.document import body_blocks

    listed = body_blocks("- install:\n- ```\n  pip install x[1]\n  ```\n- then run it [2]\n", {1, 2})
    assert [(b.kind, b.parts) for b in listed] == [
        ("bullet", ("install:",)),
        ("code", ("pip install x[1]",)),
        ("bullet", ("then run it ", 2)),
    ]
    cut = body_blocks("Steps [1]\n```python\nvalues = [2]\n# not a heading", {1, 2})
    assert [(b.kind, b.parts) for b in cut] == [
        ("paragraph", ("Steps ", 1)),
        ("code", ("values = [2]\n# not a heading",)),
    ]
    table = body_blocks("| a | b |\n|---|---|\n| 1 | 2 |\n```\nx | [1]\n```\n", {1})
    assert [b.kind for b in table] == ["table", "code"] and len(table[0].rows) == 2
    # A line end CommonMark does not count is a space in prose and in a cell, a line break in code.
    spaced = body_blocks("| a\u2028b | c |\n|---|---|\n| 1 | 2 |\n\n~~~\nx\u2028y\n~~~\n", set())
    assert spaced[0].rows[0] == (("a b",), ("c",)) and spaced[1].parts == ("x\ny",)


def test_a_fence_left_open_after_lone_carriage_returns_is_closed():
    assert close_fence("intro\rmore\r```python\rcode") == "intro\nmore\n```python\ncode\n```"


def test_split_code_gives_the_text_back_and_marks_only_code():
    text = "a `b` c\n```\nd [1]\n```\ne ``f`g`` h ` i\n~~~\nopen"
    segments = split_code(text)
    assert "".join(s.text for s in segments) == text
    assert [s.text for s in segments if s.code] == ["`b`", "```\nd [1]\n```\n", "``f`g``", "~~~\nopen"]
    assert close_fence("x\n~~~~ py\ny") == "x\n~~~~ py\ny\n~~~~" and close_fence("x\n```\ny\n```") == "x\n```\ny\n```"


def test_a_pages_own_reference_markers_never_become_our_citations():
    """FGDIP shows page text in its nodes: a page's "[41]" (Wikipedia's) would link to our source
    numbered 41 (or 1), another page; only our page marker cites."""
    from engine.methods.fgdip.kinds import StepData
    from engine.methods.fgdip.method import FgdipMethod

    content = FgdipMethod._content(
        StepData(
            thought="Search it [1].",
            action="search",
            argument="Collingwood",
            observation="Collingwood was founded in 1892.[1] It won [41][citation needed].",
            page_source=7,
        )
    )
    assert "Search it." in content
    assert "Collingwood was founded in 1892. It won. [[S7]]" in content
    assert number_citations(content, [7]).numbering == {1: 7}


def test_a_section_of_cited_content_under_such_a_name_is_never_cut():
    content = (
        "Historians rely on two kinds of evidence [[S1]].\n\n## Sources\n\n"
        "- Primary sources: letters and archives [[S1]]\n- Secondary sources: later histories [[S2]]"
    )
    assert without_reference_list(content) == content
    assert without_reference_list("Sources\n- [1] only a list") == "Sources\n- [1] only a list"  # never empty
    cut_off = "Body.\n\n```text\nSources\n- [1] a"
    assert without_reference_list(cut_off) == cut_off  # in code
    looping = "Answer [[S1]].\n" + "References:\n" * 4000
    assert without_reference_list(looping) == "Answer [[S1]]."


def test_a_pages_own_markers_go_but_its_indexes_and_years_stay():
    from engine.citations import without_page_markers

    assert without_page_markers("Won in 1892.[1] Span [1990-2024], x[3]y, ratings[41].") == (
        "Won in 1892. Span [1990-2024], x[3]y, ratings."
    )


def test_a_reference_list_the_model_wrote_is_not_kept_beside_ours():
    written = (
        "Moderate coffee intake is safe [1][2].\n\n**Sources:**\n1. [1] Harvard Health — https://health.example\n"
        "2. [2] Mayo Clinic 2021 — https://mayo.example\n\n## References\n\n[2] Journal — https://evil.example/\n"
    )
    stored, _ = to_stored_markers(written, SOURCES)
    assert without_reference_list(stored) == "Moderate coffee intake is safe [[S11]][[S12]]."
    # A section of that name with prose in it is the writer's own, and stays.
    kept = "Intro [[S11]].\n\n## Sources of error\n\nMeasurement drift [[S12]] matters.\n"
    assert without_reference_list(kept) == kept
    prose = "Intro [[S11]].\n\nSources:\nThe survey and the census [[S12]] agree.\n"
    assert without_reference_list(prose) == prose


def test_the_report_frame_shows_only_our_reference_list(services):
    """A report body ending in the model's own bibliography: the export has one Sources list (ours),
    in Markdown and in the document exports alike."""
    from engine.export import build_document, to_docx
    from engine.report import render_markdown
    from storage.models import RunStatus
    from tests.engine.export.test_export_status_and_shape import docx_texts, stored_run

    run_id, _ = stored_run(
        services.repo,
        status=RunStatus.DONE,
        url="https://who.example/coffee",
        report="Moderate intake is safe {S}.\n\n**References:**\n1. {S} Harvard Health — https://health.example\n",
    )
    markdown = render_markdown(services.repo, run_id)
    assert "health.example" not in markdown and "References" not in markdown
    assert "Moderate intake is safe [[1]](#source-1)." in markdown and "who.example/coffee" in markdown
    texts = docx_texts(to_docx(build_document(services.repo, run_id)))
    assert not any("health.example" in t for t in texts) and "Moderate intake is safe [1]." in texts


def test_the_research_agents_marker_check_does_not_read_code():
    written = "Use slicing to get items [1].\n\n```python\nfirst = values[5]\npart = values[2:4]\n```\n"
    calls = []

    def write(feedback):
        calls.append(feedback)
        return written

    cited = write_cited(write, SOURCES[:2], retries=2)
    assert len(calls) == 1 and cited.removed == []
    assert "first = values[5]\npart = values[2:4]" in cited.text
