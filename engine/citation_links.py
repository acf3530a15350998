"""`[n]` citations as links to their source entry (issue 12, finding 11), in the app and the exports.

Streamlit's Markdown (like GitHub's) gives an element an id only when it is a heading, made from the
heading's words: lower case, every run of other characters a hyphen ("Source 1" -> `source-1`). So a
source entry is a small heading of our own words ("Source 1"), and a citation `[1]` becomes the link
`[[1]](#source-1)`. No HTML is needed (unsafe_allow_html stays off), and untrusted text cannot make
such a heading (`safe_text.markdown_block` turns headings in it into text), so it cannot steal an
anchor. One page showing two numberings (a node's, the report's) gives each its own words.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

from engine.markdown_code import map_prose

# Our own numbers after `number_citations`: `[n]` not already a link's text or a reference label.
# Glued to a word ("Paris[2]") it is still a citation: `to_stored_markers` took it for one, and the
# DOCX/PDF exports link it too.
_CITATION = re.compile(r"(?<!\[)\[(\d{1,4})\](?![(:])")


def anchor(words: Sequence[str], number: int) -> str:
    """The id a heading `entry_heading(words, number)` gets: `("node", "5", "source"), 1` -> node-5-source-1."""
    return "-".join([*(w.lower() for w in words), str(number)])


def entry_heading(words: Sequence[str], number: int) -> str:
    """The heading text of a source entry, whose generated id is `anchor(words, number)`."""
    text = " ".join([*words, str(number)])
    return text[:1].upper() + text[1:]


def link_citations(markdown: str, numbers: Collection[int], words: Sequence[str] = ("source",)) -> str:
    """Each `[n]` (n among `numbers`, the entries that exist) as a link to its entry's anchor.
    Run on sanitised Markdown: the sanitiser leaves `[n]` as it is."""

    def link(match: re.Match[str]) -> str:
        number = int(match.group(1))
        return f"[[{number}]](#{anchor(words, number)})" if number in numbers else match.group(0)

    # Code keeps its brackets: `values[1]` in a code block is an index, and a link there shows raw.
    return map_prose(markdown, lambda prose: _CITATION.sub(link, prose))
