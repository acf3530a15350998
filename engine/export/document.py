"""A run's report as plain structure for the DOCX and PDF writers: title, facts, blocks (headings,
paragraphs, bullet points) whose text is split into plain text and citation numbers, and the
Sources list. Every piece is text: the writers insert it as text, so nothing in a model's answer, a
web page or a document becomes markup, a link or a heading of its own in the file. The only links
are ours: a citation to its source entry, and a source entry's title to its http(s) URL."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from engine.citations import number_citations
from engine.graph import PARTIAL_REPORT
from engine.report import report_title
from engine.safe_text import names_report_section, one_line, shown_text, terminal_text
from storage.models import NodeStatus, RunStatus
from storage.repository import Repository

_WEB = ("http://", "https://")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_BULLET = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+(.*)$")
_RULE = re.compile(r"^[ \t]*(?:[-=*_][ \t]*)+$")  # setext underlines and rules: no text of their own
_CITATION = re.compile(r"\[(\d{1,4})\]")
_EMPHASIS = re.compile(r"\*\*|__")  # bold markers would show as asterisks; the words stay


@dataclass(frozen=True)
class Block:
    """One block of the body. `parts`: text, and ints for citations `[n]`."""

    kind: Literal["heading", "paragraph", "bullet"]
    parts: tuple[str | int, ...]
    level: int = 0  # headings: 2..6 (1 is the document's title)


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


def _shown(text: str) -> str:
    """Text as a Markdown viewer shows it: the escapes and character references that writers put
    around untrusted text (`safe_text.inline_text`: `\\[`, `&amp;`, `&#35;`) give back their
    characters. Done after the citations are split off, so an escaped `\\[2\\]` stays text."""
    return terminal_text(shown_text(text))


def inline_parts(text: str, numbers: set[int]) -> tuple[str | int, ...]:
    """`text` split into plain text and the citation numbers among `numbers`."""
    parts: list[str | int] = []
    last = 0
    for match in _CITATION.finditer(text):
        if int(match.group(1)) in numbers:
            parts.append(_shown(text[last:match.start()]))
            parts.append(int(match.group(1)))
            last = match.end()
    parts.append(_shown(text[last:]))
    return tuple(p for p in parts if p != "")


def body_blocks(markdown: str, numbers: set[int]) -> list[Block]:
    """The blocks of a report body written in Markdown: headings, bullet points and paragraphs."""
    blocks: list[Block] = []
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            blocks.append(Block("paragraph", inline_parts(_EMPHASIS.sub("", " ".join(paragraph)), numbers)))
            paragraph.clear()

    for line in terminal_text(markdown).splitlines():
        heading, bullet = _HEADING.match(line), _BULLET.match(line)
        if not line.strip() or _RULE.match(line):
            flush()
        elif heading and names_report_section(heading.group(2)):
            # A body heading named like our Sources section: its words as a line of text, as in the Markdown.
            paragraph.append(heading.group(2).strip())
        elif heading:
            flush()
            blocks.append(Block("heading", inline_parts(_EMPHASIS.sub("", heading.group(2)), numbers),
                                level=max(2, len(heading.group(1)))))
        elif bullet:
            flush()
            blocks.append(Block("bullet", inline_parts(_EMPHASIS.sub("", bullet.group(1)), numbers)))
        else:
            paragraph.append(line.strip())
    flush()
    return blocks


def build_document(repo: Repository, run_id: str) -> ReportDocument:
    """The run's report (or, without one, its finished answers) as a ReportDocument."""
    run = repo.get_run(run_id)
    sources = {s.id: s for s in repo.list_sources(run_id)}
    report = repo.latest_report(run_id)
    model = run.llm_info.get("model") or run.llm_info.get("kind") or "?"
    document = ReportDocument(title=one_line(report_title(run.title or run.question)), facts=[
        f"Question: {one_line(run.question)}",
        f"Method: {run.method} · Model: {one_line(str(model))} · Status: {run.status} · Run: {run.id}",
    ])
    numbering: dict[int, int] = {}  # source id -> n, one numbering across the body
    if report is not None:
        if report.data.get(PARTIAL_REPORT) and run.status != RunStatus.DONE:
            document.facts.append(f"Partial report: the run stopped before its end "
                                  f"({one_line(str(report.data[PARTIAL_REPORT]))}).")
        rendered = number_citations(report.markdown.strip(), sources.keys())
        numbering = {sid: n for n, sid in rendered.numbering.items()}
        document.blocks = body_blocks(rendered.text, set(rendered.numbering))
    else:
        document.facts.append(f"Partial results: the run is {run.status}.")
        for node in repo.list_nodes(run_id):
            if node.parent_id is None or node.status != NodeStatus.DONE or not node.content.strip():
                continue
            rendered = number_citations(node.content.strip(), sources.keys(), start=numbering)
            numbering = {sid: n for n, sid in rendered.numbering.items()}
            document.blocks.append(Block("heading", (one_line(node.label),), level=3))
            document.blocks += body_blocks(rendered.text, set(rendered.numbering))
    for source_id, number in sorted(numbering.items(), key=lambda kv: kv[1]):
        source = sources[source_id]
        url = one_line(source.url or "")
        link = url if url.lower().startswith(_WEB) else ""
        document.sources.append(SourceEntry(number, one_line(source.title) or "Untitled", link,
                                            one_line(source.url or source.ref), "web" if source.kind == "web" else "corpus"))
    return document
