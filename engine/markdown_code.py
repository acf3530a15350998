"""Where untrusted Markdown holds code: fenced blocks and inline code spans.

Citations, heading rules and tidying apply to prose only: `values = [1, 2]` in a code block is a
list, not three citations, and `# compute the total` in a Python block is a comment, not a heading.
The rules follow CommonMark closely enough to agree with the viewers (Streamlit, GitHub, VS Code)
on top-level blocks; a fence nested in a list or quote is not seen here, and is treated as prose,
which is the safe side (prose gets every rule).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# An opening fence: up to 3 spaces, then 3+ backticks (an info string without backticks) or 3+ tildes.
_FENCE_OPEN = re.compile(r"^ {0,3}(?P<fence>`{3,}(?=[^`]*$)|~{3,})")
# A code span: a run of backticks closed by a run of the same length, within one paragraph.
_BACKTICKS = re.compile(r"`+")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")


@dataclass(frozen=True)
class Segment:
    text: str
    code: bool


def _closes(line: str, fence: str) -> bool:
    stripped = line.rstrip("\n")
    indent = len(stripped) - len(stripped.lstrip(" "))
    body = stripped.strip()
    return indent <= 3 and len(body) >= len(fence) and set(body) == {fence[0]}


def fenced_lines(text: str) -> list[tuple[str, bool]]:
    """Each line of `text` (with its line end) and whether it is inside a fenced code block (the
    fences themselves count as inside)."""
    lines = []
    fence = ""
    for line in text.splitlines(keepends=True):
        if fence:
            lines.append((line, True))
            if _closes(line, fence):
                fence = ""
            continue
        opened = _FENCE_OPEN.match(line.rstrip("\n"))
        if opened:
            fence = opened.group("fence")
        lines.append((line, bool(opened)))
    return lines


def open_fence(text: str) -> str:
    """The fence `text` leaves open at its end ("" when none): a text cut off by an output limit
    inside a code block would otherwise swallow everything rendered after it."""
    fence = ""
    for line in text.splitlines():
        if fence:
            if _closes(line, fence):
                fence = ""
        elif opened := _FENCE_OPEN.match(line):
            fence = opened.group("fence")
    return fence


def close_fence(text: str) -> str:
    """`text` with a fence it leaves open closed at its end."""
    fence = open_fence(text)
    if not fence:
        return text
    return text + ("" if text.endswith("\n") else "\n") + fence


def _span_segments(prose: str) -> list[Segment]:
    """Prose split at its inline code spans (an unmatched run of backticks is text)."""
    segments: list[Segment] = []
    position = start = 0
    while (opener := _BACKTICKS.search(prose, position)) is not None:
        run = opener.group(0)
        paragraph_end = _PARAGRAPH_BREAK.search(prose, opener.end())
        limit = paragraph_end.start() if paragraph_end else len(prose)
        closer = next((m for m in _BACKTICKS.finditer(prose, opener.end(), limit) if m.group(0) == run), None)
        if closer is None:
            position = opener.end()
            continue
        if opener.start() > start:
            segments.append(Segment(prose[start:opener.start()], False))
        segments.append(Segment(prose[opener.start():closer.end()], True))
        position = start = closer.end()
    if start < len(prose):
        segments.append(Segment(prose[start:], False))
    return segments


def split_code(text: str) -> list[Segment]:
    """`text` as consecutive prose and code segments (joined, they give `text` back)."""
    segments: list[Segment] = []
    prose: list[str] = []
    code: list[str] = []

    def flush_prose() -> None:
        if prose:
            segments.extend(_span_segments("".join(prose)))
            prose.clear()

    for line, in_fence in fenced_lines(text):
        if in_fence:
            flush_prose()
            code.append(line)
        else:
            if code:
                segments.append(Segment("".join(code), True))
                code.clear()
            prose.append(line)
    flush_prose()
    if code:
        segments.append(Segment("".join(code), True))
    return segments


def map_prose(text: str, change) -> str:
    """`text` with `change` applied to its prose segments only; code stays as it was."""
    return "".join(segment.text if segment.code else change(segment.text) for segment in split_code(text))
