"""Where untrusted Markdown holds code: fenced blocks and inline code spans.

Citations, heading rules and tidying apply to prose only: `values = [1, 2]` in a code block is a
list, not three citations, and `# compute the total` in a Python block is a comment, not a heading.
Fenced blocks are found by CommonMark's own parser (markdown-it-py), so containers (a fence in a
list item ends with the item), line endings (only \\n, \\r\\n, \\r) and closing fences agree with
the viewers (Streamlit, GitHub, VS Code) by construction. Inline spans are found here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from markdown_it import MarkdownIt

# Blocks only: where code is does not depend on inline syntax, and inline parsing of long
# adversarial text (a hundred thousand brackets) is slow.
_PARSER = MarkdownIt("commonmark").disable("inline")
# A code span: a run of backticks closed by a run of the same length, within one paragraph.
_BACKTICKS = re.compile(r"`+")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_END_CHECK = "thoughtmap end check"


@dataclass(frozen=True)
class Segment:
    text: str
    code: bool


def _lines(text: str) -> list[str]:
    """`text` as CommonMark's lines, each with its line end (U+2028 is no line end there)."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


@dataclass(frozen=True)
class Fence:
    first: int  # line index of the opening fence
    end: int  # line index after the block (its closing fence included, when it has one)
    markup: str  # the opening fence ("```", "~~~~")
    strict: bool  # at the margin and closed by the same fence: a fence for every viewer (below)
    content: str = ""  # the code as a viewer shows it: container and fence indentation removed


def fences(text: str) -> list[Fence]:
    """The fenced code blocks of `text` as a CommonMark viewer sees them."""
    if "```" not in text and "~~~" not in text:
        return []
    lines = _lines(text)
    found = []
    for token in _PARSER.parse(text):
        if token.type != "fence" or token.map is None:
            continue
        first, end = token.map
        closing = lines[end - 1].rstrip("\n") if end - 1 > first else ""
        # Python-Markdown's fenced_code (the exports' other viewers) takes a fence only at the
        # margin, closed by the very same fence: only there is a `#` line code for them too.
        strict = lines[first].startswith(token.markup) and closing == token.markup
        found.append(Fence(first, end, token.markup, strict, token.content))
    return found


def fenced_lines(text: str, *, strict: bool = False) -> list[tuple[str, bool]]:
    """Each line of `text` (with its line end) and whether it is inside a fenced code block (the
    fences themselves count as inside); `strict`: only blocks every viewer takes for code. Line
    ends come back as \\n (a lone \\r is one for CommonMark, and would shift the parser's lines)."""
    text = re.sub(r"\r\n?", "\n", text)
    lines = _lines(text)
    inside = [False] * len(lines)
    for fence in fences(text):
        if fence.strict or not strict:
            for index in range(fence.first, min(fence.end, len(lines))):
                inside[index] = True
    return list(zip(lines, inside))


def ends_open(text: str) -> bool:
    """Whether `text` leaves a block open that would swallow what is rendered after it: a heading
    written after it is not a heading of the document."""
    tokens = _PARSER.parse(text + f"\n\n# {_END_CHECK}\n")
    return not any(t.type == "inline" and t.content == _END_CHECK and t.level == 1 for t in tokens)


def close_fence(text: str) -> str:
    """`text` with a code fence it leaves open closed at its end: a text cut off by an output limit
    inside a code block would otherwise swallow everything rendered after it (the Sources list).
    The closing fence is the opener's, at the opener's indentation (under a list item too), and
    only added when the parser says it closes the block."""
    if ("```" not in text and "~~~" not in text) or not ends_open(text):
        return text
    text = re.sub(r"\r\n?", "\n", text)  # the parser's line ends, so that its line numbers are ours
    found = fences(text)
    if not found:
        return text
    last = found[-1]  # the block left open is the last one the parser found
    opener = _lines(text)[last.first]
    indent = " " * len(opener[: opener.index(last.markup)].expandtabs(4))  # a list item's marker counts
    base = text if text.endswith("\n") else text + "\n"
    for margin in dict.fromkeys((indent, indent[:3], "")):
        closed = base + margin + last.markup
        if not ends_open(closed):
            return closed
    return text


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
            segments.append(Segment(prose[start : opener.start()], False))
        segments.append(Segment(prose[opener.start() : closer.end()], True))
        position = start = closer.end()
    if start < len(prose):
        segments.append(Segment(prose[start:], False))
    return segments


def split_code(text: str) -> list[Segment]:
    """`text` as consecutive prose and code segments (joined, they give `text` back, its line ends
    as \\n)."""
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


def map_prose(text: str, change: Callable[[str], str]) -> str:
    """`text` with `change` applied to its prose segments only; code stays as it was."""
    return "".join(segment.text if segment.code else change(segment.text) for segment in split_code(text))


def prose_only(text: str) -> str:
    """`text` with its code left out (each piece of code as one space)."""
    return "".join(" " if segment.code else segment.text for segment in split_code(text))
