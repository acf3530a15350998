"""Untrusted text (model output, corpus documents, web pages, titles, URLs) made inert where it goes.

Two destinations, one module, so the CLI, the exports and the web app apply the same rules:

* Markdown. Reports are opened in viewers that render HTML (GitHub, IDE previews, static site
  generators), so a report must not carry a live tag, a script link or a remote image, whichever
  Markdown dialect reads it (CommonMark, GFM, Python-Markdown). The rules are chosen so they do not
  depend on parsing Markdown the way a given renderer would:
  - every `<` becomes `&lt;`: no raw HTML block or inline tag and no `<autolink>` can start;
  - every `![` becomes `&#33;[`: images turn into plain links, so nothing loads by itself;
  - every `](` and every `]:` (inline link, reference definition) is followed to its destination,
    which is kept only when it starts with http://, https://, mailto: or # (an allowlist);
    otherwise the `(` or `:` becomes an entity and the construct is plain text. Looking at every
    `](` rather than matching `[label](...)` covers nested brackets, and checking the raw
    destination text covers entity (`&#106;avascript:`) and `<...>` forms: neither starts with
    an allowed scheme.
  - headings: an ATX `#` (also inside list items and block quotes) and a setext underline
    (`===`, `---`) become text, so a document cannot put a page-high heading inside our layout;
    a report's own sections (a method's, `markdown_block(heading_floor=)`) keep their ATX headings,
    pushed down to a floor level below ours, but not one named like a section we add ("Sources")
    nor one that would take a source anchor.
  - untrusted text itself (a model's answer, a page, a document: `prose_block`) makes no structure
    at all: the character that would open a block at a line's start (a heading, quote, list, rule,
    fence, indented code, table, definition...) becomes its reference, and each line stays a line.
  Entities are used instead of backslashes because inserting a backslash changes the meaning of a
  backslash already there (`\\![` would become an escaped backslash followed by a live image).
  The cost: inside code spans and blocks these characters show as their entities.
* Terminals. Escape sequences (CSI such as ESC[2J, OSC such as OSC-8 hyperlinks and window
  titles, DCS...), other C0/C1 controls, DEL and Unicode bidi overrides are removed; newlines and
  tabs are kept.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Iterable
from itertools import groupby

from engine.markdown_code import close_fence, fenced_lines

SAFE_LINK_PREFIXES = ("http://", "https://", "mailto:", "#")
_WEB_PREFIXES = ("http://", "https://")

# ---------------------------------------------------------------- terminals

_ESCAPE_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"  # CSI: colours, cursor moves, ESC[2J (clear screen)
    r"|\x1b\][^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"  # OSC: OSC-8 hyperlinks, window titles
    r"|\x1b[PX^_][^\x1b\x9c\n]*(?:\x1b\\|\x9c)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[ -/]*[0-~]?"  # every other escape (charset switches, RIS...), or a lone ESC
    r"|\x9b[0-?]*[ -/]*[@-~]?"  # the same as 8-bit C1 introducers
    r"|\x9d[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|[\x90\x98\x9e\x9f][^\x1b\x9c\n]*(?:\x1b\\|\x9c)?"
)
# C0 but \t and \n, DEL, C1, and the bidi embeddings/overrides/isolates that can make text read
# differently from what it is ("Trojan source").
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# A lone surrogate (possible in decoded model output) cannot be written as UTF-8 at all.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def terminal_text(text: str) -> str:
    """`text` without anything a terminal would execute; newlines and tabs are kept."""
    text = re.sub(r"\r\n?", "\n", str(text))  # a bare CR would let text overwrite its own line
    text = _ESCAPE_SEQUENCE.sub("", text)
    text = _CONTROL.sub("", text)
    return _LONE_SURROGATE.sub("\ufffd", text)


def cut_at_word(text: str, limit: int) -> str:
    """The first `limit` characters of `text`, ended at a word boundary when one is near (within
    the last half); a text of one long word is cut inside it rather than down to its first word."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    at_word = cut.rsplit(" ", 1)[0]
    return at_word if len(at_word) >= limit // 2 else cut


def one_line(text: str) -> str:
    """Terminal-safe text on one line: every run of whitespace (newlines too) becomes one space."""
    return " ".join(terminal_text(text).split())


def json_for_terminal(json_text: str) -> str:
    """JSON text (from json.dumps with ensure_ascii=False) with the characters a terminal would act
    on written as \\uXXXX escapes: the same JSON value, safe to print. json.dumps already escapes C0
    but leaves DEL, C1 and bidi controls raw; outside strings JSON text is plain ASCII, so
    replacing them anywhere is replacing them inside strings."""
    return re.sub(
        "[\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]", lambda m: f"\\u{ord(m.group(0)):04x}", json_text
    )


# ---------------------------------------------------------------- Markdown

_LINK_OPENER = re.compile(r"\][ \t]*\n?[ \t]*\(")  # `](`, also with the spaces some dialects allow
_DEFINITION_COLON = re.compile(r"\]:")  # `[label]: destination`, wherever it stands
_NUMERIC_LABEL = re.compile(r"\[\s*\d+\s*")
# CommonMark allows a link label of up to 999 characters, spaces and line breaks included.
_LABEL_REACH = 1000
# Python-Markdown's attr_list extension turns `{: key=value}` after an element into attributes,
# `onclick` included: every `{` with a `=` after it before the next `}` or line end becomes
# plain text. Done per stretch between `}`/newline, which keeps it linear (a lookahead per `{`
# would be quadratic on a line of braces).
_BRACE_STRETCH = re.compile(r"[^}\n]+")


_UNESCAPED_BRACE = re.compile(r"(?<!\\)((?:\\\\)*)\{")
_ATTRIBUTE_OPENER = re.compile(r"(?<!\\)((?:\\\\)*)\{(?=\s*[:#.])")


def _disarm_attribute_lists(text: str) -> str:
    def stretch(match: re.Match[str]) -> str:
        part = match.group(0)
        last_assignment = part.rfind("=")
        if last_assignment < 0 or "{" not in part:
            return part
        # A `{` already escaped (`inline_text`'s `\{`) opens no list: left as it is, or the viewer
        # would show the entity's letters after the backslash.
        return _UNESCAPED_BRACE.sub(r"\1&#123;", part[:last_assignment]) + part[last_assignment:]

    # `{#source-1}`, `{.x}`, `{: ...}` with no assignment: an id would take a source entry's anchor.
    return _ATTRIBUTE_OPENER.sub(r"\1&#123;", _BRACE_STRETCH.sub(stretch, text))


def is_safe_link(destination: str) -> bool:
    """Whether a link destination, as written in Markdown, may stay a live link."""
    return destination.lstrip().lower().startswith(SAFE_LINK_PREFIXES)


def _numeric_label_ends_at(text: str, end: int) -> bool:
    """Whether `text[:end]` ends with a link label of only a number (and spaces): a label cannot
    hold an unescaped `[`, so the last `[` before `end` opens it."""
    start = text.rfind("[", max(0, end - _LABEL_REACH), end)
    return start >= 0 and _NUMERIC_LABEL.fullmatch(text, start, end) is not None


def _disarm_destinations(text: str, opener: re.Pattern[str], entity: str, *, numeric_labels: bool = False) -> str:
    """Replace the last character of each `opener` match by `entity` unless an allowed destination follows."""
    parts: list[str] = []
    last = 0
    for match in opener.finditer(text):
        safe = is_safe_link(text[match.end() : match.end() + 64])
        if numeric_labels and _numeric_label_ends_at(text, match.start()):
            # `[3]: https://elsewhere` (or `[ 3 ]`, `[\n3\n]`: labels are matched without their
            # spaces) would turn our own citation [3] into a link to anywhere.
            safe = False
        if not safe:
            parts.append(text[last : match.end() - 1])
            parts.append(entity)
            last = match.end()
    parts.append(text[last:])
    return "".join(parts)


# A line's container prefix (block quotes, list markers, indentation) then an ATX heading's hashes.
# Lists and quotes nest, so the prefix repeats; a heading inside `- > 1. ` is still a heading.
_CONTAINER_PREFIX = r"(?:[ \t]*(?:>[ \t]?|(?:[-*+]|\d{1,9}[.)])[ \t]+))*[ \t]*"
_ATX_HEADING = re.compile(rf"^({_CONTAINER_PREFIX})(#{{1,6}})(?=[ \t]|$)", re.MULTILINE)
# A setext underline: a line of only `=` or only `-` (after any container prefix). Disarmed
# wherever it stands (the cost: a `---` rule shows as dashes), because whether it underlines
# depends on the line before it, which renderers judge differently.
_SETEXT_UNDERLINE = re.compile(rf"^({_CONTAINER_PREFIX})(=+|-+)([ \t]*)$", re.MULTILINE)
_HEADING_ENTITY = {"#": "&#35;", "=": "&#61;", "-": "&#45;"}


# The ids our source entries get (`citation_links.anchor`: "source-3", "node-5-source-3"): a
# document heading that would get one first would take the citations' jumps.
_SOURCE_ANCHOR = re.compile(r"(?:^|-)source-\d+$")
# The sections the report frame adds below a report body (`engine/report.py`: "## Sources"), as
# slugs: a body heading of that name would start a second, forged section that reads as ours (a
# list of "sources" above the real one), whichever writer put model or page text in the body.
REPORT_SECTIONS = frozenset({"sources"})


def _slug(words: str) -> str:
    # Folded to ASCII as Python-Markdown's `toc` does: "Sóurce 1" and a full-width "Ｓource １" get
    # its id `source-1` too.
    folded = unicodedata.normalize("NFKD", words).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^0-9a-z]+", "-", folded.lower()).strip("-")


def names_report_section(words: str) -> bool:
    """Whether a heading's words ("Sources", "**Sources:**") name a section the report frame adds."""
    return _slug(words) in REPORT_SECTIONS


def _heading_words(match: re.Match[str]) -> str:
    line_end = match.string.find("\n", match.end())
    return match.string[match.end() : None if line_end < 0 else line_end].strip().rstrip("#")


def _takes_source_anchor(match: re.Match[str]) -> bool:
    return _SOURCE_ANCHOR.search(_slug(_heading_words(match))) is not None


# Words that would open a block of their own once a heading's hashes are gone (`# # Sources`).
_OPENS_BLOCK = re.compile(r"\s*(?:[#>+*|=-]|\d)")


# A line that starts a block a paragraph cannot run through: a heading, a rule or underline, a fence.
_STARTS_BLOCK = re.compile(r"^[ \t]*(?:#|[-=*_][-=*_ \t]*$|```|~~~)")


def _disarm_headings(text: str, floor: int | None) -> str:
    def atx(match: re.Match[str]) -> str:
        prefix, hashes = match.group(1), match.group(2)
        document_heading = floor is not None and not prefix.strip()  # not inside a list or quote
        words = _heading_words(match)
        if document_heading and names_report_section(words):
            # Only our section is a "Sources" heading: its words stay as a line of text, unless
            # without the hashes they would open a block of their own (`# # Sources`).
            return prefix if not _OPENS_BLOCK.match(words) else prefix + _HEADING_ENTITY["#"] + hashes[1:]
        if document_heading and floor is not None and not _takes_source_anchor(match):
            # A heading of the document itself, below our own levels.
            return prefix + "#" * min(6, max(floor, len(hashes)))
        return prefix + _HEADING_ENTITY["#"] + hashes[1:]

    def setext(match: re.Match[str]) -> str:
        prefix, rule, tail = match.groups()
        return prefix + _HEADING_ENTITY[rule[0]] + rule[1:] + tail

    # In a fenced code block a `# comment` line or a `---` line is code, shown as written. Only what
    # a viewer that does not know fences would make a heading of ours stays disarmed there: one
    # taking a source entry's anchor or naming a section of the report frame.
    def atx_in_code(match: re.Match[str]) -> str:
        words = _heading_words(match)
        return atx_entity(match) if _takes_source_anchor(match) or names_report_section(words) else match.group(0)

    def setext_in_code(match: re.Match[str]) -> str:
        # A setext heading's words are every line of the paragraph above its underline: back to a
        # blank line or a line that starts a block of its own.
        paragraph: list[str] = []
        for line in reversed(match.string[: match.start()].rstrip("\n").split("\n")):
            if not line.strip() or _STARTS_BLOCK.match(line):
                break
            paragraph.insert(0, line)
        words = " ".join(" ".join(paragraph).split())
        ours = _SOURCE_ANCHOR.search(_slug(words)) is not None or names_report_section(words)
        return setext(match) if ours else match.group(0)

    def atx_entity(match: re.Match[str]) -> str:
        return match.group(1) + _HEADING_ENTITY["#"] + match.group(2)[1:]

    pieces = []
    # Only fences every viewer takes for code (Python-Markdown's too: at the margin, closed by the
    # same fence); a `#` line in any other is treated as prose.
    for in_code, lines in groupby(fenced_lines(text, strict=True), key=lambda line: line[1]):
        chunk = "".join(line for line, _code in lines)
        if in_code:
            pieces.append(_SETEXT_UNDERLINE.sub(setext_in_code, _ATX_HEADING.sub(atx_in_code, chunk)))
        else:
            pieces.append(_SETEXT_UNDERLINE.sub(setext, _ATX_HEADING.sub(atx, chunk)))
    return "".join(pieces)


def markdown_block(text: str, *, heading_floor: int | None = None) -> str:
    """Markdown whose structure is ours (a method's own sections and notes, a panel composed around
    untrusted pieces escaped where they were put in) as Markdown that renders inert everywhere.
    Untrusted text itself, whose lines must make no structure, goes through `prose_block`.

    Lists, emphasis, code, tables and http(s)/mailto/# links survive; raw HTML shows as text, images
    become links, other links become plain text, and headings become text. `heading_floor` (for a
    report's own sections, under our title) keeps the writer's top-level ATX headings instead, at
    that level or deeper, except those named like a section of the frame (`REPORT_SECTIONS`), which
    become text."""
    # A code block left open (an answer cut off by its output limit) would run to the end of the
    # page, and swallow what is rendered after it: the Sources list, the next node.
    text = _no_html_or_images(close_fence(terminal_text(text)))
    return _only_allowed_links(_disarm_headings(text, heading_floor))


def _no_html_or_images(text: str) -> str:
    text = text.replace("<", "&lt;")
    text = text.replace("![", "&#33;[")
    return _disarm_attribute_lists(text)


def _only_allowed_links(text: str) -> str:
    text = _disarm_destinations(text, _LINK_OPENER, "&#40;")
    return _disarm_destinations(text, _DEFINITION_COLON, "&#58;", numeric_labels=True)


# Backslash-escaped: Markdown punctuation that could make links, emphasis, code or attributes.
# Every backslash of the input is escaped too, so no inserted backslash pairs with an old one.
_INLINE_PUNCTUATION = re.compile(r"([\\`*_\[\]{}])")


# What opens a block at the start of a line (after its indentation) in CommonMark, GFM, Python-Markdown
# and the extensions static site generators turn on. Only the forms that open one (`#hashtag` does,
# in Python-Markdown): `-5 degrees`, `1.5 million`, `**bold**` and `` `code` `` at a line's start are left alone.
_BLOCK_OPENER = re.compile(
    r"[>|]"  # a quote; a table row
    r"|#"  # an ATX heading (Python-Markdown makes one of `#Title` too, with no space)
    r"|[-+*](?=[ \t]|$)"  # a list item (and `* * *`, `- - -` rules)
    r"|[-:][-:| \t]*$"  # a setext underline, a rule, a table's delimiter row (`---|:--`)
    r"|=(?=[= \t]|$)"  # a setext underline, a tab set (`=== "Tab"`)
    r"|[*_](?:[ \t]*[*_]){2,}[ \t]*$"  # a rule of `*` or `_`
    r"|`{3}|~{3}"  # a fence
    r"|\d{1,9}[.)](?=[ \t]|$)"  # an ordered list item
    r"|:(?=[ \t]|$)"  # a definition (Python-Markdown's def_list)
    r"|\*\[|!{3}|\?{3}|\${2}"  # an abbreviation (`*[HTML]: ...`), an admonition, a details block, display math
    r"|\[(?:[^\[\]\\]|\\.){0,999}\]:",  # a link reference definition or footnote (its label may run over lines)
    re.MULTILINE,
)


def _no_block_start(line: str, *, within: str = "", at: int = 0) -> str:
    """`line` (from its first character after the indentation) with that character written as its
    reference when a block would start there: no renderer reads a reference as block syntax, and
    every renderer shows it as the character. `within`: the whole text, the line's start at `at`
    (a link definition's label can run over lines)."""
    if not line or _BLOCK_OPENER.match(within or line, at if within else 0) is None:
        return line
    return f"&#{ord(line[0])};{line[1:]}"


def _literal(text: str) -> str:
    """`text` with the characters that could make HTML, links, emphasis or code escaped, so that
    within a line it shows as written."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _INLINE_PUNCTUATION.sub(r"\\\1", text)


def inline_text(text: str) -> str:
    """Untrusted single-line text (a title, a question, a label) as Markdown that shows exactly that
    text: on one line (so it cannot start a heading, list or block), HTML escaped, no link, image,
    code or emphasis of its own."""
    text = _literal(one_line(text))
    # At the start of a line (`- {title}`), `# x`, `+ x`, `1. x`, `---` or `~~~` would still make
    # a heading, list, rule or fence: its first character becomes a reference.
    text = _no_block_start(text)
    # `|` could make a GFM table row; `\|` is not an escape in plain Python-Markdown, the entity is.
    return text.replace("|", "&#124;")


def prose_block(text: str) -> str:
    """Untrusted text of any length (a model's answer or article, a page, a document) as Markdown that
    shows it as written and makes no structure of its own: its paragraphs and lines stay (each line
    break a hard break, its indentation no-break spaces), and so do emphasis, code spans, citations
    and http(s)/mailto/# links (`markdown_block`'s rules for HTML, images and links apply); but no
    line opens a block (heading, quote, list, rule, fence or indented code, table, HTML block, link
    definition): the character that would open one is written as its reference (`_BLOCK_OPENER`).
    The lines of what would be a code block are shown as written, their Markdown punctuation
    escaped (`_literal`), so no citation, emphasis or link is read in them."""
    pairs = fenced_lines(terminal_text(text))
    whole = "".join(line for line, _code in pairs)  # a link definition's label may run over lines
    lines: list[str] = []
    start = 0  # where the line starts in `whole`
    for line, in_code in pairs:
        body = line.rstrip("\n")
        content = body.lstrip(" \t")
        indent = "&#160;" * len(body[: len(body) - len(content)].expandtabs(4))
        if not content.strip():
            lines.append("")
        elif in_code:
            lines.append(indent + _no_block_start(_literal(content.rstrip())))
        else:
            lines.append(indent + _no_block_start(content.rstrip(), within=whole, at=start + len(body) - len(content)))
        start += len(line)
    # Two trailing spaces are a hard break in CommonMark, GFM and Python-Markdown alike (a backslash
    # is not one in Python-Markdown): a line of a list or of code stays a line.
    text = "\n".join(
        line + "  " if line and index + 1 < len(lines) and lines[index + 1] else line
        for index, line in enumerate(lines)
    )
    return _only_allowed_links(_no_html_or_images(text))


# A line that is an ATX heading: its hashes and its words (a closing run of hashes left off).
_HEADING_LINE = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")


def _title_key(title: str) -> str:
    return " ".join(title.replace("*", "").replace("_", "").split()).strip(" .:").casefold()


def sectioned_prose(text: str, titles: Iterable[str]) -> str:
    """`prose_block`, except that a heading line whose words are one of `titles` stays a heading:
    the sections the method itself planned (OmniThink's outline), which the model writes as
    `## Title`. Such a heading is ours: level 2 to 4, its words escaped (`inline_text`). Any other
    heading-like line is prose, so a document's `# Title` that the model quotes never becomes one."""
    wanted = {_title_key(title) for title in titles if title.strip()}
    if not wanted:
        return prose_block(text)
    blocks: list[str] = []
    chunk: list[str] = []
    for line in terminal_text(text).splitlines(keepends=True):
        heading = _HEADING_LINE.match(line.rstrip("\n"))
        if heading and _title_key(heading.group(2)) in wanted:
            blocks.append(prose_block("".join(chunk)))
            chunk = []
            level = min(max(len(heading.group(1)), 2), 4)
            blocks.append("#" * level + " " + inline_text(heading.group(2).strip()))
        else:
            chunk.append(line)
    blocks.append(prose_block("".join(chunk)))
    return "\n\n".join(block.strip("\n") for block in blocks if block.strip())


# What `inline_text` (and `markdown_block`) write around untrusted text: backslash escapes of the
# punctuation above, and the character references for &, <, > and numbered ones (`&#35;`).
_WRITTEN_ESCAPE = re.compile(r"\\([\\`*_\[\]{}])")
_WRITTEN_REFERENCE = re.compile(r"&(amp|lt|gt|quot|#\d{1,7});")
_REFERENCE_CHARS = {"amp": "&", "lt": "<", "gt": ">", "quot": '"'}


def shown_text(markdown: str) -> str:
    """The words a Markdown viewer shows for text that went through `inline_text`: its escapes and
    our character references give back their characters (for readers of plain text: the document
    exports, the evaluation's answer reader). Other references (`&copy`, `&nbsp;`) are left as
    they are."""

    def reference(match: re.Match[str]) -> str:
        name = match.group(1)
        if name.startswith("#"):
            code = int(name[1:])
            # Not a character on its own (NUL, a UTF-16 surrogate half): left as written.
            return chr(code) if 0 < code < 0x110000 and not 0xD800 <= code <= 0xDFFF else match.group(0)
        return _REFERENCE_CHARS[name]

    return _WRITTEN_REFERENCE.sub(reference, _WRITTEN_ESCAPE.sub(r"\1", markdown))


# In a bare URL: characters that would end it or start Markdown/HTML syntax, percent-encoded.
_URL_UNSAFE = re.compile(r"[\s<>\"'`\[\]{}|\\^*]")


def url_text(url: str) -> str:
    """A URL for a Markdown line: an http(s) URL as a bare URL (viewers that link bare URLs make it
    a link), anything else (javascript:, data:, file:...) as inert text."""
    url = one_line(url)
    if url.lower().startswith(_WEB_PREFIXES):
        return _URL_UNSAFE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group(0).encode("utf-8")), url)
    return inline_text(url)


def code_span(text: str) -> str:
    """Untrusted single-line text as an inline code span (shown verbatim, never interpreted): the
    fence is one backtick longer than the longest run of backticks inside."""
    text = one_line(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith(("`", " ")) or text.endswith(("`", " ")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def escape_html(text: str) -> str:
    """For places that take HTML (the mind map's hover titles go into innerHTML)."""
    return html.escape(str(text), quote=True)
