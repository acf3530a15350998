"""Free text that the output-token limit cut off (`ChatResponse.cut_off`), brought back to where the
model last finished something: a reader should never meet "It is caused by several factors,
including lack of" as the end of a section, nor a heading with nothing under it."""

from __future__ import annotations

import re

# The end of a sentence: its stop, then any closing quotes or brackets and citation markers
# ("... in 2020.[3]", "... rose.\" [[S12]]"), before a space or the end of the text.
_SENTENCE_END = re.compile(r"[.!?…](?:[\"'”’)\]]|\s?\[\[?S?\d+\]?\])*(?=\s|$)")
# A last line that promises what the cut took away: a heading, a bare list marker (perhaps with its
# bold label). An introduction ending in a colon loses only its clause after the last full stop.
_DANGLING_LINE = re.compile(r"^\s*(?:#{1,6}\s.*|(?:\d+[.)]|[-*+])\s*(?:\*\*[^*\n]*\*\*:?)?)\s*$")


def _to_boundary(text: str) -> str:
    """The longest start of `text` that ends at a sentence's end or a line's end."""
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    cut = max(ends[-1] if ends else 0, max(text.rfind("\n"), 0))
    return text[:cut].rstrip()


def complete_sentences(text: str) -> str:
    """`text` up to its last complete sentence or finished line, without a trailing heading, bare list
    marker or introduction ending in a colon. A text with nothing complete in it keeps what it has,
    ended with "…"."""
    body = text.rstrip()
    kept = _to_boundary(body)
    while kept:
        last = kept.rsplit("\n", 1)[-1]
        if not last.strip() or _DANGLING_LINE.match(last):
            kept = kept[: len(kept) - len(last)].rstrip()
        elif last.endswith(":"):
            kept = _to_boundary(kept[:-1])
        else:
            break
    if not kept:
        return body + "…" if body else body
    return kept
