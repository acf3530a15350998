"""A run's report as plain structure for the DOCX and PDF writers: title, facts, blocks (headings,
paragraphs, bullet points, numbered items, code blocks, tables) whose text is split into plain text
and citation numbers, and the Sources list. The structure is ours: the model's text (a page's or a
document's in it) is read as the Markdown export shows it, through `safe_text.prose_block`, so it
gives paragraphs of lines and no heading, list, table or code block; the method's own sections keep
theirs. Every piece is text: the writers insert it as text, so nothing in a model's answer, a web
page or a document becomes markup, a link or a heading of its own in the file. The only links are
ours: a citation to its source entry, and a source entry's title to its http(s) URL."""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Literal

from engine.citations import number_citations, without_reference_list
from engine.markdown_code import Fence, fences
from engine.report import (
    heading_words,
    partial_heading,
    partial_label,
    partial_nodes,
    report_citations,
    report_title,
    status_note,
    written_block,
)
from engine.safe_text import names_report_section, one_line, prose_block, shown_text, terminal_text
from storage.repository import Repository

_WEB = ("http://", "https://")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_BULLET = re.compile(r"^[ \t]*[-*+][ \t]+(.*)$")
_NUMBERED = re.compile(r"^[ \t]*(\d{1,9})[.)][ \t]+(.*)$")
_QUOTE = re.compile(r"^ {0,3}(?:>[ \t]?)+")  # `> note`, `> > nested`: the markers, not the words
_RULE = re.compile(r"^[ \t]*(?:[-=*_][ \t]*)+$")  # setext underlines and rules: no text of their own
_HARD_BREAK = re.compile(r"  $")
# Line ends for a reader that CommonMark does not take as line ends: shown as spaces in prose and as
# line breaks in code, after the parser has said where the code is.
_OTHER_LINE_ENDS = re.compile("[\x0b\x0c\x1c-\x1e\u2028\u2029]")
# A GFM table's delimiter row, under its header row: `|---|:--:|`, `--- | ---`.
_TABLE_DELIMITER = re.compile(r"^ {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_CELL_BORDER = re.compile(r"(?<!\\)\|")
_CITATION = re.compile(r"\[(\d{1,4})\]")
# An inline code span: a run of backticks closed by a run of the same length. (Spans and bold are
# bounded in length, so a text of many unclosed markers cannot make the search quadratic.)
# An escaped backtick (`\``, as `safe_text` writes a line of code shown as prose) opens none.
_CODE_SPAN = re.compile(r"(?<![`\\])(`+)(?!`).{1,1000}?(?<!`)\1(?!`)")
# Bold as a viewer reads it: the markers go, the words stay. `__` pairs only outside a word, so
# `snake__case__name` keeps its underscores; in a code span (`__init__`) nothing is touched.
_STRONG = re.compile(r"\*\*(?=\S)(.{1,1000}?)(?<=\S)\*\*|(?<![\w_])__(?=\S)(.{1,1000}?)(?<=\S)__(?![\w_])")
# Italics likewise, after bold: `*word*` and `_a note_`, never an escaped marker (`\*`, `\_`, as the
# sanitiser writes a model's literal ones), never inside a word (`a_b_c`, `2*3*4`).
_EMPHASIS = re.compile(
    r"(?<![\w*\\])\*(?=[^\s*])(.{1,1000}?)(?<=[^\s*\\])\*(?![\w*])"
    r"|(?<![\w_\\])_(?=[^\s_])(.{1,1000}?)(?<=[^\s_\\])_(?![\w_])"
)
_URL = re.compile(r"https?://[^\s<>()\[\]`]+")
# Characters XML 1.0 does not allow, left after `terminal_text` (which removes the C0 controls and
# replaces lone surrogates): python-docx refuses a run that holds one, and a page or a model can
# write them, also as a reference (`&#65535;`) that `shown_text` decodes.
_NOT_XML = re.compile("[\ufffe\uffff]")


@dataclass(frozen=True)
class Block:
    """One block of the body. `parts`: text, and ints for citations `[n]`."""

    kind: Literal["heading", "paragraph", "bullet", "numbered", "code", "table"]
    parts: tuple[str | int, ...]  # code: one text, its lines joined by "\n", shown as written
    level: int = 0  # headings: 2..6 (1 is the document's title)
    number: int = 0  # numbered: the item's number as the writer gave it
    rows: tuple[tuple[tuple[str | int, ...], ...], ...] = ()  # table: rows of cells (parts), header first


@dataclass(frozen=True)
class SourceEntry:
    number: int
    title: str
    url: str  # an http(s) URL to link, or ""
    where: str  # what to print for the location (URL, or the corpus document's reference)
    kind: str


@dataclass
class ReportDocument:
    title: str
    facts: list[str]
    blocks: list[Block] = field(default_factory=list)
    sources: list[SourceEntry] = field(default_factory=list)


def _xml_text(text: str) -> str:
    return _NOT_XML.sub("", text)


def _line(text: str) -> str:
    """Untrusted text (a title, a URL) as one line the writers can take."""
    return _xml_text(one_line(text))


def _shown(text: str) -> str:
    """Text as a Markdown viewer shows it: the escapes and character references that writers put
    around untrusted text (`safe_text.inline_text`: `\\[`, `&amp;`, `&#35;`) give back their
    characters. Done after the citations are split off, so an escaped `\\[2\\]` stays text."""
    return _xml_text(terminal_text(shown_text(text)))


def _prose_parts(text: str, numbers: set[int]) -> list[str | int]:
    parts: list[str | int] = []
    last = 0
    for match in _CITATION.finditer(text):
        if int(match.group(1)) in numbers:
            parts.append(_shown(text[last : match.start()]))
            parts.append(int(match.group(1)))
            last = match.end()
    parts.append(_shown(text[last:]))
    return parts


def inline_parts(text: str, numbers: set[int]) -> tuple[str | int, ...]:
    """`text` split into plain text and the citation numbers among `numbers`, bold markers dropped.
    A code span stays as written (backticks included, as a viewer shows it literally): no citation
    and no bold is read in it."""
    spans: list[str] = []

    def set_aside(match: re.Match[str]) -> str:
        spans.append(match.group(0))
        return f"\x00{len(spans) - 1}\x00"

    # Code spans are set aside (as NUL-delimited indexes; the text holds no NUL of its own) so that
    # bold around one (`**Run `pip install`**`) still pairs, and nothing inside one is changed.
    held = _CODE_SPAN.sub(set_aside, text.replace("\x00", "").replace("\x01", ""))
    urls: list[str] = []

    def hold_url(match: re.Match[str]) -> str:
        urls.append(match.group(0))
        return f"\x01{len(urls) - 1}\x01"

    # A web address keeps its underscores and stars (`/a_b_c/_e_`): held aside from the bold and
    # italic markers, then read as prose again.
    held = _URL.sub(hold_url, held)
    held = _STRONG.sub(lambda m: m.group(1) or m.group(2), held)
    held = _EMPHASIS.sub(lambda m: m.group(1) or m.group(2), held)
    held = re.sub("\x01(\\d+)\x01", lambda m: urls[int(m.group(1))], held)
    parts: list[str | int] = []
    for index, piece in enumerate(held.split("\x00")):
        parts += [_xml_text(spans[int(piece)])] if index % 2 else _prose_parts(piece, numbers)
    joined: list[str | int] = []
    for part in parts:
        if isinstance(part, str) and joined and isinstance(joined[-1], str):
            joined[-1] += part
        elif part != "":
            joined.append(part)
    return tuple(joined)


def _code_block(fence: Fence) -> Block | None:
    """A fenced block as code, its lines as a viewer shows them (None when it holds nothing)."""
    code = _OTHER_LINE_ENDS.sub("\n", fence.content).rstrip("\n")
    return Block("code", (_xml_text(code),)) if code.strip() else None


def _cells(line: str, numbers: set[int]) -> list[tuple[str | int, ...]]:
    line = line.strip()
    line = line[1:] if line.startswith("|") else line
    line = line[:-1] if line.endswith("|") and not line.endswith("\\|") else line
    return [inline_parts(cell.strip().replace("\\|", "|"), numbers) for cell in _CELL_BORDER.split(line)]


def _table(lines: list[str], start: int, numbers: set[int], code_at: Collection[int] = ()) -> tuple[Block | None, int]:
    """A GFM table starting at `lines[start]` (a header row, then a delimiter row of as many cells),
    and the index after it; (None, start) when there is none. Its rows run to a blank line, a line
    without `|` or a code block (`code_at`: the lines where one starts); each has the header's
    number of cells."""
    if start + 1 >= len(lines) or "|" not in lines[start] or "|" not in lines[start + 1]:
        return None, start
    if not _TABLE_DELIMITER.match(lines[start + 1]):
        return None, start
    header = _cells(lines[start], numbers)
    if len(header) != len(_CELL_BORDER.split(lines[start + 1].strip().strip("|"))):
        return None, start
    rows = [tuple(header)]
    end = start + 2
    while end < len(lines) and lines[end].strip() and "|" in lines[end] and end not in code_at:
        cells = _cells(lines[end], numbers)[: len(header)]
        rows.append(tuple(cells + [()] * (len(header) - len(cells))))
        end += 1
    return Block("table", (), rows=tuple(rows)), end


def body_blocks(markdown: str, numbers: set[int]) -> list[Block]:
    """The blocks of a report body written in Markdown: headings, bullet points, numbered items,
    paragraphs, fenced code and GFM tables."""
    blocks: list[Block] = []
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            # A line that ends in a hard break (two spaces: `safe_text.prose_block` ends each line of
            # untrusted text so) stays a line; others join the next with a space, as in a viewer.
            joined = "".join(line if line.endswith("\n") else line + " " for line in paragraph)
            blocks.append(Block("paragraph", inline_parts(joined.rstrip(), numbers)))
            paragraph.clear()

    text = terminal_text(markdown)  # its line ends are \n, as CommonMark's parser counts them
    # Outside code, a line end CommonMark does not count (U+2028) is a space, in a table cell too.
    lines = [_OTHER_LINE_ENDS.sub(" ", line) for line in text.split("\n")]
    # Code is where CommonMark's parser says it is (a fence in a list item, one never closed), as in
    # the Markdown export's viewers: no heading, list or citation is read inside it.
    code_at = {fence.first: fence for fence in fences(text)}
    index = 0
    while index < len(lines):
        if fence := code_at.get(index):
            flush()
            block = _code_block(fence)
            blocks += [block] if block else []
            index = fence.end
            continue
        line = lines[index]
        table, after = _table(lines, index, numbers, code_at)
        if table:
            flush()
            blocks.append(table)
            index = after
            continue
        index += 1
        # A quote's words stay, its `>` goes; a `#` line in a quote is text, as in the Markdown export.
        quoted = _QUOTE.match(line)
        line = line[quoted.end() :] if quoted else line
        heading = None if quoted else _HEADING.match(line)
        bullet, numbered = _BULLET.match(line), _NUMBERED.match(line)
        if not line.strip() or _RULE.match(line):
            flush()
        elif heading and names_report_section(heading.group(2)):
            # A body heading named like our Sources section: its words as a line of text, as in the Markdown.
            paragraph.append(heading.group(2).strip())
        elif heading:
            flush()
            blocks.append(
                Block("heading", inline_parts(heading.group(2), numbers), level=max(2, len(heading.group(1))))
            )
        elif bullet:
            flush()
            blocks.append(Block("bullet", inline_parts(bullet.group(1), numbers)))
        elif numbered:
            flush()
            blocks.append(Block("numbered", inline_parts(numbered.group(2), numbers), number=int(numbered.group(1))))
        else:
            paragraph.append(line.strip() + ("\n" if _HARD_BREAK.search(line) else ""))
    flush()
    return blocks


def build_document(repo: Repository, run_id: str) -> ReportDocument:
    """The run's report (or, without one, its finished answers) as a ReportDocument."""
    run = repo.get_run(run_id)
    sources = {s.id: s for s in repo.list_sources(run_id) if s.id is not None}  # stored: all have ids
    report = repo.latest_report(run_id)
    model = run.llm_info.get("model") or run.llm_info.get("kind") or "?"
    document = ReportDocument(
        title=_line(heading_words(report_title(run.title or run.question), "Report: ")),
        facts=[
            f"Question: {_line(run.question)}",
            f"Method: {run.method} · Model: {_line(str(model))} · Status: {run.status} · Run: {run.id}",
        ],
    )
    # The same note as the Markdown's (stop reason, error, warning, out of date), as plain text.
    if note := status_note(repo, run, report):
        document.facts.append(_line(note))
    numbering: dict[int, int] = {}  # source id -> n, one numbering across the body
    if report is not None:
        written, own = report_citations(report, sources.keys())
        numbering = {sid: n for n, sid in own.numbering.items()}
        # The model's text as the Markdown shows it (`prose_block`): paragraphs of lines, no heading,
        # list, table or code block of its own; the method's own sections keep theirs.
        document.blocks = body_blocks(written_block(report, written.text), set(own.numbering)) + body_blocks(
            own.text, set(own.numbering)
        )
    else:
        for node, number in partial_nodes(repo.list_nodes(run_id)):
            rendered = number_citations(without_reference_list(node.content.strip()), sources.keys(), start=numbering)
            numbering = {sid: n for n, sid in rendered.numbering.items()}
            document.blocks.append(Block("heading", (partial_heading(number),), level=3))
            document.blocks.append(Block("paragraph", (_line(partial_label(node)),)))
            document.blocks += body_blocks(prose_block(rendered.text), set(rendered.numbering))
    for source_id, number in sorted(numbering.items(), key=lambda kv: kv[1]):
        source = sources[source_id]
        url = _line(source.url or "")
        link = url if url.lower().startswith(_WEB) else ""
        document.sources.append(
            SourceEntry(
                number,
                _line(source.title) or "Untitled",
                link,
                _line(source.url or source.ref),
                "web" if source.kind == "web" else "corpus",
            )
        )
    return document
