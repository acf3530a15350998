"""Citations that always resolve.

Prompts number the sources they show the model (`[1] Title` blocks). The model's `[n]` markers are
turned at once into run-wide markers `[[S<source id>]]` for storage, dropping any number that was
not shown, so stored text can only cite stored sources. Rendering turns the markers back into
`[n]`, numbered by first appearance, with a matching source list.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from engine.markdown_code import fenced_lines, map_prose

# One number or a short range ("3", "1-3", "1–3"), and lists of them ("1, 2", "1; 3-4").
_CITED = r"\d+(?:\s*[-–]\s*\d+)?(?:\s*[,;]\s*\d+(?:\s*[-–]\s*\d+)?)*"
# With the spaces before it and whether punctuation follows: a marker that is dropped takes its
# spaces with it before punctuation ("true [9]." is "true."), and nothing else of the text moves.
_MODEL_CITATION = re.compile(rf"([ \t]*)\[({_CITED})\](?=([.,;:!?])?)")
# A citation made a link (or an image): `[1](https://...)`, `[1](#source-3)`, `[1](/path)`,
# `[1](<url>)`, `![1](url)`, and `[[1]](#source-3)` (shows "[1]", opens another entry). A
# destination has no space, so "[1](note: an estimate)" is text.
_CITATION_LINK = re.compile(
    rf"!?(?:\[(\[{_CITED}\])\]|(\[{_CITED}\]))"
    r"\(\s*(?:<[^<>\n]*>|(?:[a-z][a-z0-9+.-]*:|www\.|#|/)(?:[^()\s]|\([^()\s]*\))*)\s*\)",
    re.I,
)
_RANGE = re.compile(r"(\d+)\s*[-–]\s*(\d+)")
MAX_RANGE = 20  # "[1-3]" cites three sources; "[1990-2024]" is a span of years, not 35 citations
# A page's own reference markers (Wikipedia's "[12]", reference-list lines) would collide with our
# numbering in a prompt and link to another source in a node, so neither shows them. With the spaces
# before a run of them, and whether punctuation or a space follows ("won [41]." is "won.", "won [41]
# in" is "won in": the spaces before it are kept only when a word follows at once).
# Only as a page writes them: after a word or a stop, never inside one ("x[3]y" is an index), and of
# up to three digits ("[1990-2024]" is a span of years).
_PAGE_NUMBERED = r"\[\d{1,3}(?:\s*[,;–-]\s*\d{1,3})*\]"
_PAGE_MARKER = rf"{_PAGE_NUMBERED}(?!\w)|\[(?:citation needed|a|b|c|note \d+)\]"
_PAGE_MARKERS_SPACED = re.compile(rf"([ \t]*)(?:{_PAGE_MARKER})+(?=([.,;:!?\s])?)", re.I)
_STORED_MARKER = re.compile(r"\[\[S(\d+)\]\]")
_STORED_MARKERS_SPACED = re.compile(r"([ \t]*)(?:\[\[S\d+\]\])+(?=([.,;:!?\s])?)")
_TYPED_MARKER = re.compile(r"([ \t]*)\[\[S(\d+)\]\](?=([.,;:!?\s])?)")
# A page's marker glued to the next sentence by an extractor ("in 1892.[3]The club"): a marker, not
# an index, since a stop comes before it. A space stays in its place.
_GLUED_PAGE_MARKERS = re.compile(rf"(?<=[.!?,;:])(?:{_PAGE_NUMBERED})+(?=\w)")


def _left_of_marker(match: re.Match[str], follows: int) -> str:
    """What stays where a marker is removed: a line's indentation always; otherwise nothing before
    punctuation or a space, else the spaces before it ("won [41]." is "won.", "won [41] in" is "won
    in", "A [[S1]]B" is "A B")."""
    if match.start() == 0 or match.string[match.start() - 1] == "\n":
        return match.group(1)
    return "" if match.group(follows) else match.group(1)


class CitableSource(Protocol):
    id: int | None
    title: str
    text: str
    snippet: str


def source_blocks(
    sources: Sequence[CitableSource], *, max_chars: int = 1500, numbers: Sequence[int] | None = None
) -> str:
    """The numbered source list for a prompt: a `[n] Title` line, its text, a blank line.

    `numbers` gives each source its number when they are not simply 1..N (a subset of a list)."""
    blocks = []
    for number, source in zip(numbers or range(1, len(sources) + 1), sources):
        body = without_page_markers(source.text or source.snippet or "").strip().replace("\n\n", "\n")
        if len(body) > max_chars:
            body = body[:max_chars].rsplit(" ", 1)[0] + " ..."
        blocks.append(f"[{number}] {source.title.strip() or 'Untitled'}\n{body}")
    return "\n\n".join(blocks)


# A reference list the model wrote itself at the end of its text: a line naming it ("## References",
# "**Sources:**", "Bibliography"), then nothing but entries ("[1] Title — url", "1. ...", "- ...",
# a bare address). The report frame lists the real sources under their own numbers; a second list of
# titles and addresses the model made up, beside links to ours, would contradict it.
_REFERENCE_HEADING = re.compile(
    r"[ \t]*(?:#{1,6}[ \t]+)?[*_]{0,2}[ \t]*(?:sources?|references?|bibliography|works cited|citations?)"
    r"[ \t]*:?[ \t]*[*_]{0,2}[ \t]*:?[ \t]*",
    re.I,
)
# An entry of such a list starts with its number or a citation ("[1] Title", "1. [[S11]] Title",
# "- [2] ...") or is an address; a bullet with words before its citation is content, and stays.
_REFERENCE_ENTRY = re.compile(
    r"^[ \t]*(?:(?:\d+[.)]|[-*+])[ \t]+)?(?:\[\^?\d+\]|\[\[S\d+\]\])|^[ \t]*(?:(?:\d+[.)]|[-*+])[ \t]+)?<?https?://",
    re.I,
)


def without_reference_list(text: str) -> str:
    """A report body (model-written, stored or not) without the reference lists the model appended
    to it (see `_REFERENCE_HEADING`): the report frame lists the sources. Never inside code, never
    the whole body; one pass from the end (a looping model's thousand headings stay linear)."""
    code = {index for index, (_line, inside) in enumerate(fenced_lines(text)) if inside}
    lines = re.sub(r"\r\n?", "\n", text).split("\n")
    end = len(lines)  # lines[end:] are cut
    for index in range(len(lines) - 1, -1, -1):
        if index in code or not _REFERENCE_HEADING.fullmatch(lines[index]):
            continue
        entries = [line for line in lines[index + 1 : end] if line.strip()]
        if not all(_REFERENCE_ENTRY.match(line) for line in entries):
            break
        end = index
    kept = "\n".join(lines[:end]).rstrip()
    return kept if end < len(lines) and kept.strip() else text


def _cited_numbers(listed: str) -> list[int] | None:
    """The numbers a marker's inside cites, ranges expanded; None when a range is no citation (too
    wide, reversed, or of numbers no prompt shows, like years)."""
    numbers: list[int] = []
    for part in re.split(r"\s*[,;]\s*", listed):
        if span := _RANGE.fullmatch(part):
            first, last = int(span.group(1)), int(span.group(2))
            if not (1 <= first < last < 1000 and last - first < MAX_RANGE):
                return None
            numbers.extend(range(first, last + 1))
        else:
            numbers.append(int(part))
    return numbers


def to_stored_markers(text: str, sources: Sequence[CitableSource]) -> tuple[str, list[int]]:
    """Replace the model's `[n]` (and `[1, 2]`, `[1-3]`) with `[[S<id>]]`; drop numbers it was not
    shown. Code (fenced blocks, inline spans) is left as it is: `values[1]` there is an index.

    A storage marker `[[S<id>]]` the model typed itself is dropped too (its id listed with the
    dropped numbers), in code as well: it could cite any source of the run, one the model was never
    shown ("cite [[S12]]" in a page it read), so only the markers written here cite.

    Returns the new text and the dropped numbers (each one a citation error of the model).
    """
    dropped: list[int] = []

    def typed(match: re.Match[str]) -> str:
        dropped.append(int(match.group(2)))
        return _left_of_marker(match, 3)

    # Until none is left: removing `[[S1]]` from `[[S[[S1]]2]]` would leave a marker behind.
    while _STORED_MARKER.search(text):
        text = _TYPED_MARKER.sub(typed, text)

    def replace(match: re.Match[str]) -> str:
        numbers = _cited_numbers(match.group(2))
        # A range past the sources shown is no citation ("a scale of [1-5]" with three sources).
        if numbers is None or ("-" in match.group(2) or "–" in match.group(2)) and max(numbers) > len(sources):
            return match.group(0)
        markers = []
        for number in numbers:
            if 1 <= number <= len(sources) and sources[number - 1].id is not None:
                markers.append(f"[[S{sources[number - 1].id}]]")
            else:
                dropped.append(number)
        if markers:
            return match.group(1) + "".join(markers)
        return "" if match.group(3) else match.group(1)

    def convert(prose: str) -> str:
        # `[1](https://...)` renders as a link labelled 1 that goes elsewhere than source 1 (a page
        # can ask for it): the destination goes, the citation stays.
        prose = _CITATION_LINK.sub(lambda match: match.group(1) or match.group(2), prose)
        return _MODEL_CITATION.sub(replace, prose)

    return map_prose(text, convert), dropped


def cited_source_ids(text: str) -> list[int]:
    """Source ids cited in stored text, in order of first appearance."""
    seen: dict[int, None] = {}
    for match in _STORED_MARKER.finditer(text):
        seen.setdefault(int(match.group(1)), None)
    return list(seen)


@dataclass(frozen=True)
class Rendered:
    text: str
    # Report number -> source id, in citation order.
    numbering: dict[int, int]


def number_citations(text: str, known_ids: Iterable[int], start: Mapping[int, int] | None = None) -> Rendered:
    """Render `[[S<id>]]` as `[n]`; markers of unknown sources are removed.

    `start` maps source id -> number already assigned (to share numbering across texts).
    """
    known = set(known_ids)
    numbers: dict[int, int] = dict(start or {})

    def replace(match: re.Match[str]) -> str:
        source_id = int(match.group(1))
        if source_id not in known:
            return ""
        if source_id not in numbers:
            numbers[source_id] = len(numbers) + 1
        return f"[{numbers[source_id]}]"

    rendered = _STORED_MARKER.sub(replace, text)
    return Rendered(text=rendered, numbering={n: sid for sid, n in numbers.items()})


# A prompt numbers a few dozen sources at most, from 1: `[1844]` in a concept is a year and `a[0]` an
# index, not citations. Lists ("[2, 3]") and ranges ("[1-3]") are.
_MODEL_CITATION_SPACED = re.compile(r"\s*\[(?!0\])\d{1,3}(?:\s*[,;–-]\s*\d{1,3})*\](?=(\w)?)")


def without_model_citations(text: str) -> str:
    """`text` without the `[n]` a model copied from its prompt's numbered sources. Those numbers mean
    nothing once the text leaves that prompt: kept in OmniThink's pool of concepts, `[1]` named a
    different source in every concept, and none a reader could look up."""
    # A word right after the marker keeps a space before it ("USA [1]and" is "USA and"); code keeps
    # its brackets (`values[1]` is an index).
    return map_prose(text, lambda prose: _MODEL_CITATION_SPACED.sub(lambda m: " " if m.group(1) else "", prose)).strip()


def without_page_markers(text: str) -> str:
    """A page's text without storage markers and its own reference markers ("[41]", "[citation
    needed]"): shown in a node, they would link to our source of that number, another page."""

    def drop(match: re.Match[str]) -> str:
        return _left_of_marker(match, 2)

    # Until none is left, as strip_markers does, keeping the text's spacing.
    while _STORED_MARKER.search(text):
        text = _STORED_MARKERS_SPACED.sub(drop, text)
    return _GLUED_PAGE_MARKERS.sub(" ", _PAGE_MARKERS_SPACED.sub(drop, text))


def strip_markers(text: str) -> str:
    # Until none is left: removing `[[S1]]` from `[[S[[S1]]2]]` would leave a marker behind.
    while _STORED_MARKER.search(text):
        text = _STORED_MARKER.sub("", text)
    return text


# ---------------------------------------------------------------- attribution for models that forget to cite

_WORD = re.compile(r"[a-z0-9][a-z0-9'-]{2,}")
_STOPWORDS = frozenset(
    "the and for are was were with that this from has have had its not but which who whom what when where "
    "how why into onto than then also been being their there these those they them his her him she our "
    "you your all any can could would should may might will shall about over under after before between "
    "during while such each other more most some only very one two".split()
)
# The period of an initial or a title ends no sentence: "Edgar A. Poe", "J.H. Ingraham", "Dr. Hale".
# A sentence that ends in a lone capital ("World War I.") is then taken with the next: that costs
# at most an attribution, where a name cut in two cost the text a citation in its middle.
_TITLES = ("Mr", "Mrs", "Ms", "Dr", "Prof", "St", "vs", "e.g", "i.e")
_BEFORE_ABBREVIATION_DOT = "|".join([r"(?<=\b[A-Z])", *(rf"(?<=\b{re.escape(title)})" for title in _TITLES)])
# Placed right after a sentence mark: true unless the mark is an initial's or a title's period.
NOT_AN_ABBREVIATION = "".join([r"(?<!\b[A-Z]\.)", *(rf"(?<!\b{re.escape(title)}\.)" for title in _TITLES)])
# A sentence, a list item or a line: the units a citation is attached to. A unit runs on over a
# mark not followed by a space ("3.5", "J.H.") and over an abbreviation's period; it ends at a
# mark followed by a space, at a line's end or at the text's. Each character can be taken one way
# only, and a unit can always end where it stops: linear on any text.
_UNIT = re.compile(rf"(?:[^\n.!?]|[.!?](?!\s|$)|(?:{_BEFORE_ABBREVIATION_DOT})\.(?=[ \t]))+(?:[.!?]+(?=\s|$)|(?=\n)|$)")


def _content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS}


def attribute_uncited(
    text: str, sources: Sequence[CitableSource], *, min_words: int = 4, min_share: float = 0.6
) -> tuple[str, int]:
    """Add `[n]` to sentences that cite nothing but are clearly drawn from source n.

    Small models often write from their sources without citing them, or name a source by its
    title. A sentence with no `[n]` gets the number of the source that contains the largest share
    of its content words, when that share is at least `min_share` of at least `min_words` words;
    a line that is exactly a source's title cites that source. Sentences that already cite are
    never touched. Returns the text and the number of citations added (stored with the output, so
    added citations can be told apart from the model's own)."""
    if not sources:
        return text, 0
    vocabularies = [_content_words(f"{s.title} {s.text or s.snippet or ''}") for s in sources]
    titles = {(s.title or "").strip().lower(): n for n, s in enumerate(sources, start=1) if (s.title or "").strip()}
    added = 0

    def cite(match: re.Match[str]) -> str:
        nonlocal added
        unit = match.group(0)
        if (
            _MODEL_CITATION.search(unit)
            or not unit.strip()
            or unit.rstrip().endswith("?")
            or unit.lstrip().startswith("#")
        ):
            return unit  # already cited, empty, a question (which asserts nothing) or a heading
        bare = unit.strip().strip("-*• ").rstrip(".!?").strip().lower()
        number = titles.get(bare)
        if number is None:
            words = _content_words(unit)
            if len(words) < min_words:
                return unit
            shares = [len(words & vocabulary) / len(words) for vocabulary in vocabularies]
            best = max(range(len(shares)), key=shares.__getitem__)
            if shares[best] < min_share:
                return unit
            number = best + 1
        added += 1
        body = unit.rstrip()
        trail = unit[len(body) :]
        stripped = body.rstrip(".!?")
        return f"{stripped} [{number}]{body[len(stripped) :]}{trail}"

    return _UNIT.sub(cite, text), added
