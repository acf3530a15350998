"""A node's answer as a reader sees it (issue 12, findings 2 and 11): its fields as prose under
headings of our own ("Analysis", "Conflicting information"), with what is not content dropped
and each paragraph once (`engine.reader_text`); its `[n]` citations linked to the cited-sources
entries below it (`engine.citation_links`); a failure in plain words, the technical detail collapsed.

The headings are ours; every piece of model or source text is prose (`safe_text.prose_block`), so
it cannot make a heading, a list, a quote, an image or HTML of its own."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from engine.citation_links import entry_heading, link_citations
from engine.citations import number_citations
from engine.contract import NodeData
from engine.reader_text import ReaderError, TextSection, readable_sections, reader_error
from engine.reads import Node, Source
from engine.safe_text import inline_text, one_line, prose_block, url_text


def source_words(node: Node, number: int | None = None) -> tuple[str, ...]:
    """The words of this node's source entries, so its anchors differ from the report's on one page:
    with the node's number as the map shows it (#3), else its stored id."""
    return ("node", str(number if number else node.id), "source")


def _section_markdown(
    section: TextSection, known: Sequence[int], numbers: dict[int, int]
) -> tuple[str, dict[int, int]]:
    """The section's body, citations numbered on from `numbers` (source id -> n), as prose: the
    model's words make no structure; a list section's items are ours, one line each."""
    paragraphs = []
    for paragraph in section.paragraphs:
        rendered = number_citations(paragraph, known, start=numbers)
        numbers = {source_id: n for n, source_id in rendered.numbering.items()}
        paragraphs.append(rendered.text)
    if section.as_list:
        return "\n".join(f"- {prose_block(one_line(p))}" for p in paragraphs), numbers
    return prose_block("\n\n".join(paragraphs)), numbers


def answer_markdown(node: Node, data: NodeData | None, known_source_ids: Sequence[int]) -> tuple[str, dict[int, int]]:
    """The node's answer as safe Markdown with its own headings, and its numbering (n -> source id).
    Built from the kind's declared fields when it has them, else from the node's content."""
    fields = data.reader_fields() if data is not None else None
    if fields is not None and data is not None and data.content_heading and node.content.strip():
        fields = {data.content_heading: node.content, **fields}
    if fields is None:
        rendered = number_citations(node.content, known_source_ids)
        return prose_block(rendered.text), dict(rendered.numbering)
    parts: list[str] = []
    numbers: dict[int, int] = {}
    for section in readable_sections(fields):
        body, numbers = _section_markdown(section, known_source_ids, numbers)
        parts.append(f"##### {inline_text(section.heading)}\n\n{body}")
    return "\n\n".join(parts), {n: source_id for source_id, n in numbers.items()}


def node_answer(node: Node, data: NodeData | None, all_sources: Sequence[Source], number: int | None = None) -> None:
    """The answer with linked citations, then the cited sources, each under its anchor heading
    ("Node 3 source 1": `number` is the node's number on the map)."""
    markdown, numbering = answer_markdown(node, data, [s.id for s in all_sources])
    words = source_words(node, number)
    if not markdown.strip():
        st.info(
            "This node has no answer to show: the model gave only field names or error messages. "
            "Retry the node (or resume the run) to solve it again."
        )
        return
    st.markdown(link_citations(markdown, numbering.keys(), words))
    if numbering:
        by_id = {s.id: s for s in all_sources}
        st.markdown("**Cited sources**")
        entries = []
        for number, source_id in sorted(numbering.items()):
            source = by_id[source_id]
            entries.append(
                f"###### {entry_heading(words, number)}\n"
                f"[{number}] {inline_text(source.title) or 'Untitled'} — {url_text(source.url or source.ref)}"
            )
        st.markdown("\n\n".join(entries))


def error_with_details(error: str, *, lead: str = "", then: str = "") -> None:
    """An error (a node's, a run's) in words a reader can act on, the technical detail collapsed
    under "Technical details" when there is one; `lead` and `then` frame the message."""
    shown = reader_error(error)
    show_error(ReaderError(f"{lead}{shown.message}{then}", shown.technical))


def show_error(shown: ReaderError) -> None:
    """A reader's error, the technical detail collapsed under "Technical details" when there is one."""
    st.error(inline_text(shown.message))
    if shown.technical:
        with st.expander("Technical details"):
            st.text(shown.technical)


def node_error(error: str) -> None:
    error_with_details(error)
