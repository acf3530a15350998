"""Reports and exports of a stored run.

The Markdown report numbers citations `[n]` by first appearance and lists exactly those sources,
so every `[n]` resolves; each `[n]` links to its entry under Sources (`engine.citation_links`). Everything in it that came from outside (the question, model text, node
labels, source titles, URLs and refs, model names) goes through `engine.safe_text`, so the file is
inert in viewers that render HTML and in a terminal, and its structure (title, sections, headings,
notes) is ours: the model's text, and a page's or a document's in it, is prose (`prose_block`). The
JSON export holds the whole session: run, params, graph, sources, usage, commands and reports (raw,
as stored; its `report.markdown` is the safe rendering).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from engine.citation_links import entry_heading, link_citations
from engine.citations import Rendered, cited_source_ids, number_citations, without_reference_list
from engine.graph import OWN_HEADINGS, OWN_TEXT_FROM, PARTIAL_REPORT, report_outdated
from engine.methods.registry import get_method
from engine.node_numbers import node_numbers
from engine.reader_text import reader_error
from engine.safe_text import (
    code_span,
    cut_at_word,
    inline_text,
    markdown_block,
    one_line,
    prose_block,
    sectioned_prose,
    url_text,
)
from storage.models import Node, Report, Run, Source
from storage.repository import Repository
from storage.statuses import NodeStatus, RunStatus

EXPORT_FORMAT_VERSION = 1
# The words of a source entry's heading ("Source 1"), hence of its anchor (`#source-1`).
SOURCE_WORDS = ("source",)


def _source_line(number: int, source: Source) -> str:
    where = url_text(source.url or source.ref)
    kind = "web" if source.kind == "web" else "corpus"
    title = inline_text(source.title) or "Untitled"
    url = one_line(source.url or "")
    if url.lower().startswith(("http://", "https://")):
        # The title links to the page; parentheses encoded too, so the destination cannot end early.
        title = f"[{title}]({url_text(url).replace('(', '%28').replace(')', '%29')})"
    line = f"[{number}] {title} — {where} ({kind})"
    if source.url and source.kind != "web":
        line += f" · document {code_span(source.ref)}"
    return line


def heading_words(words: str, prefix: str) -> str:
    """The words of the run's title (the question, or the title given to it) for the report's heading,
    as plain text. Words whose heading would get a source entry's id ("Source 1" -> `#source-1`,
    where the citations jump) or read as a section the frame adds ("Sources") get `prefix`
    ("Report: Sources"). Asked of the sanitiser itself, so the title follows the rule a method's own
    headings do."""
    words = one_line(words)
    return words if markdown_block(f"# {words}", heading_floor=1).startswith("#") else f"{prefix}{words}"


def partial_heading(number: int) -> str:
    """The heading of a finished answer in partial results, in our words ("Node 3", numbered as the
    map shows it): its label is the model's (or a page's) words, so it is a line under it."""
    return f"Node {number}"


def partial_label(node: Node) -> str:
    """What a finished answer in partial results is about (plain text): its label, or its kind."""
    return one_line(node.label) or node.kind


def partial_nodes(nodes: list[Node]) -> list[tuple[Node, int]]:
    """The finished answers partial results show, in order, each with its number as the map shows it."""
    numbers = node_numbers(nodes)
    return [
        (node, numbers[node.id])
        for node in nodes
        if node.id is not None
        and node.parent_id is not None
        and node.status == NodeStatus.DONE
        and node.content.strip()
    ]


def _partial_body(nodes: list[Node], known_source_ids: Iterable[int]) -> Rendered:
    """What a run without a final report has to show: its finished answers, in order, with one
    citation numbering across them."""
    known = set(known_source_ids)
    parts: list[str] = []
    numbers: dict[int, int] = {}  # source id -> number, shared by the parts
    for node, node_number in partial_nodes(nodes):
        rendered = number_citations(without_reference_list(node.content.strip()), known, start=numbers)
        numbers = {source_id: number for number, source_id in rendered.numbering.items()}
        parts.append(
            f"### {partial_heading(node_number)}\n\n*{inline_text(partial_label(node))}*\n\n"
            f"{prose_block(rendered.text)}"
        )
    text = "\n\n".join(parts) or "_Nothing has been produced yet._"
    return Rendered(text=text, numbering={number: source_id for source_id, number in numbers.items()})


def _steered_since(repo: Repository, run: Run, report: Report) -> bool:
    try:
        growing = get_method(run.method).contract().growing_commands
    except LookupError:
        return False
    return report_outdated(repo, run.id, report, growing)


# An error or warning is stored whole (a server's response body can be long): the note gives its start.
NOTE_CHARS = 600


def _sentence(text: str) -> str:
    text = one_line(text)
    if len(text) > NOTE_CHARS:
        text = cut_at_word(text, NOTE_CHARS) + " …"
    return text if text.endswith((".", "!", "?", "…")) else text + "."


def status_note(repo: Repository, run: Run, report: Report | None) -> str:
    """What a reader of an export must know about how the run ended, one text for the Markdown, DOCX
    and PDF alike ("" when there is nothing to say): partial results or a partial report and why (the
    stop reason, a failed run's error in plain words), a report written before the last change to the
    run, the run's warning. Plain text, the stored error and warning included as they are: each
    format makes it safe its own way (`inline_text` in Markdown; text in DOCX and PDF). The error is
    said here, as what happened, and never becomes the report's content."""
    said: list[str] = []
    error = _sentence(reader_error(run.error).message) if run.status == RunStatus.FAILED and run.error.strip() else ""
    if report is None:
        if error:
            said.append(f"Partial results: the run failed: {error} These are the results it had.")
        else:
            reason = f" ({one_line(run.stop_reason)})" if run.stop_reason else ""
            said.append(f"Partial results: the run is {run.status}{reason}.")
    else:
        if report.data.get(PARTIAL_REPORT) and run.status != RunStatus.DONE:
            said.append(
                f"Partial report: the run stopped before its end ({one_line(str(report.data[PARTIAL_REPORT]))})."
                " This is what it had found; resume the run to finish it, and this report is written again."
            )
        elif run.status != RunStatus.DONE and _steered_since(repo, run, report):
            said.append(
                "This report was written before your last change to the run, which the run did not finish "
                f"(it is {run.status}). Resume the run to bring the report up to date."
            )
        if error:
            said.append(f"The run failed: {error}")
    if run.warning.strip():
        said.append(f"Warning: {_sentence(run.warning)}")
    return " ".join(said)


def report_parts(report: Report) -> tuple[str, str]:
    """A stored report as (the model's text, the method's own text after it: `RunGraph.save_report`'s
    `own`). A report that does not say where its own text starts is the model's text throughout."""
    own_from = report.data.get(OWN_TEXT_FROM)
    if not isinstance(own_from, int) or not 0 <= own_from <= len(report.markdown):
        return report.markdown, ""
    return report.markdown[:own_from], report.markdown[own_from:]


def written_block(report: Report, text: str) -> str:
    """The model's text of `report` (`report_citations`' first part) as Markdown that makes no
    structure but the section headings the method planned (`RunGraph.save_report`'s `headings`)."""
    titles = report.data.get(OWN_HEADINGS)
    if titles is None:
        # A report stored before `OWN_HEADINGS` names its planned sections only in its data's
        # `sections` (OmniThink's article): their titles, so an old article keeps its headings.
        sections = report.data.get("sections")
        titles = [s.get("title") for s in sections if isinstance(s, dict)] if isinstance(sections, list) else []
    if not isinstance(titles, list):
        return prose_block(text)
    return sectioned_prose(text, [title for title in titles if isinstance(title, str)])


def report_citations(report: Report, known_source_ids: Iterable[int]) -> tuple[Rendered, Rendered]:
    """The model's text and the method's own, each with its `[[S<id>]]` markers as `[n]`, one
    numbering across both (the second's `numbering` holds it all). Numbered before any sanitising,
    so a removed marker cannot join its neighbours into something the sanitiser did not see. A
    reference list the model appended would stand beside ours with made-up titles and addresses next
    to links to our sources: only ours is shown."""
    model_text, own = report_parts(report)
    known = set(known_source_ids)
    written = number_citations(without_reference_list(model_text.strip()), known)
    return written, number_citations(own.strip(), known, start={sid: n for n, sid in written.numbering.items()})


def _report_body(report: Report, known_source_ids: Iterable[int]) -> Rendered:
    written, own = report_citations(report, known_source_ids)
    # The model's text (a page's or a document's in it) makes no structure: no heading of it can
    # stand as one of the report's, but for the sections the method planned (`written_block`); the
    # method's own sections keep their headings, from level 2 down. The sanitisers leave `[n]`
    # alone, so every citation still resolves.
    parts = (written_block(report, written.text), markdown_block(own.text, heading_floor=2))
    return Rendered(text="\n\n".join(part for part in parts if part.strip()), numbering=own.numbering)


# A title is a line, not the question: a long question is given whole on the *Question:* line.
TITLE_CHARS = 120


def report_title(text: str) -> str:
    """A run's title or question as the report's title: one line, at most TITLE_CHARS (cut at a word)."""
    text = " ".join(text.split())
    if len(text) <= TITLE_CHARS:
        return text
    return cut_at_word(text, TITLE_CHARS) + " …"


def render_markdown(
    repo: Repository, run_id: str, source_words: tuple[str, ...] = SOURCE_WORDS, *, nodes: Sequence[Node] | None = None
) -> str:
    """The run's Markdown report. `source_words` name its source entries (hence their anchors): a page
    that shows several reports gives each its own, so a report's `[n]` never jumps into another's.
    `nodes`: the run's nodes as the caller last read them (else they are read here)."""
    run = repo.get_run(run_id)
    sources = {s.id: s for s in repo.list_sources(run_id) if s.id is not None}  # stored: all have ids
    report = repo.latest_report(run_id)
    nodes = list(nodes) if nodes is not None else repo.list_nodes(run_id)
    if report is not None:
        rendered = _report_body(report, sources.keys())
    else:
        rendered = _partial_body(nodes, sources.keys())
    status = status_note(repo, run, report)
    # One line of text (the stored error and warning in it are untrusted): a quote of our own.
    note = f"> {inline_text(status)}\n\n" if status else ""

    model = inline_text(run.llm_info.get("model") or run.llm_info.get("kind") or "?")
    lines = [
        f"# {inline_text(heading_words(report_title(run.title or run.question), 'Report: '))}",
        "",
        f"*Question:* {inline_text(run.question)}  ",
        f"*Method:* {inline_text(run.method)} · *Model:* {model} · *Search:* {inline_text(run.search_mode)}"
        f" · *Status:* {inline_text(run.status)}  ",
        f"*Run:* {code_span(run.id)} · *Nodes:* {_node_count(nodes)}"
        f" · *Tokens:* {run.prompt_tokens + run.completion_tokens}"
        f" · *Cost:* ${run.cost:.4f}",
        "",
        note + link_citations(rendered.text.strip(), rendered.numbering.keys(), source_words),
        "",
    ]
    if rendered.numbering:
        lines += ["## Sources", ""]
        for number, source_id in sorted(rendered.numbering.items()):
            # A small heading per entry: its generated id is where the body's `[n]` links go.
            lines += [f"###### {entry_heading(source_words, number)}", _source_line(number, sources[source_id]), ""]
    return "\n".join(lines)


def _node_count(nodes: list[Node]) -> str:
    """How many nodes the tree holds, saying how many of them the reader or the method pruned, so
    the count matches the map (where pruned nodes are drawn faded) and not only the kept ones."""
    pruned = sum(node.status == NodeStatus.PRUNED for node in nodes)
    return f"{len(nodes)} ({pruned} pruned)" if pruned else str(len(nodes))


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def export_json(repo: Repository, run_id: str) -> dict[str, Any]:
    run = repo.get_run(run_id)
    nodes = repo.list_nodes(run_id)
    sources = repo.list_sources(run_id)
    report = repo.latest_report(run_id)
    return {
        "format": "thoughtmap.run",
        "format_version": EXPORT_FORMAT_VERSION,
        "run": run.model_dump(mode="json", exclude={"owner", "heartbeat_at"}),
        "params": run.params,
        "usage": {
            "prompt_tokens": run.prompt_tokens,
            "completion_tokens": run.completion_tokens,
            "total_tokens": run.prompt_tokens + run.completion_tokens,
            "cost": run.cost,
            "llm_calls": run.llm_calls,
        },
        "nodes": [n.model_dump(mode="json") for n in nodes],
        "edges": [e.model_dump(mode="json") for e in repo.list_edges(run_id)],
        "sources": [s.model_dump(mode="json") for s in sources],
        "node_sources": [link.model_dump(mode="json") for link in repo.node_source_links(run_id)],
        "llm_calls": [c.model_dump(mode="json") for c in repo.list_llm_calls(run_id)],
        "commands": [c.model_dump(mode="json") for c in repo.list_commands(run_id)],
        # The method's run state (a concept pool, an outline...), every version.
        "run_states": [s.model_dump(mode="json") for s in repo.list_run_states(run_id)],
        "report": {
            "markdown": render_markdown(repo, run_id),
            "raw": report.markdown if report else None,
            "cited_source_ids": cited_source_ids(report.markdown) if report else [],
            "created_at": _iso(report.created_at) if report else None,
        },
    }
