"""Citation markers the agent may write, and what happens to the others.

The model cites the documents it was shown as `[n]` (`[2][5]` or `[2, 5]` for several). Anything
else that looks like a citation is **malformed**: the paper's own `(#ab12)` page ids, `[#3]`, our
storage markers `[[S12]]` typed by the model, `[source 3]`, `[]`, `【3】`, `[3†L4]`, a range `[3-5]`.
A number that was not shown is **dangling** (a document that was never retrieved). A text with
either is written again with what was wrong (`citation_retries` times); after that the bad markers
are removed and listed with the node (`removed_markers`), so stored text can only cite documents
retrieved in this run (`engine/citations.py` turns the good ones into `[[S<source id>]]`).
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from engine.citations import CitableSource, to_stored_markers
from engine.claim_support import split_sentences
from engine.markdown_code import map_prose, prose_only
from engine.methods.research.prompts import FEEDBACK, UNCITED_FEEDBACK

_GOOD = re.compile(r"\[(\d+(?:\s*[,;]\s*\d+)*)\]")
_MALFORMED = re.compile(
    r"\(#[^()\n]{0,80}\)"  # the paper's (#ab12) / (#ab12,#cd34)
    r"|\[\[?\s*S\s*\d+\s*\]?\]"  # our storage marker typed by the model
    r"|\[#[^\[\]\n]{0,40}\]"  # [#3]
    r"|\[\s*(?:source|sources|ref|reference|doc|document|webpage|web page|page|id|citation)\b[^\[\]\n]{0,40}\]"
    r"|\[\s*\]"  # empty brackets
    r"|【[^】\n]{0,40}】"  # full-width brackets, often with a dagger
    r"|\[\d+\s*(?:[-–†:]|\s+)[^\[\]\n]{0,40}\]",  # [3-5], [3†L4], [3: p. 2]
    re.IGNORECASE,
)
# A malformed marker with the spaces before it, and whether punctuation follows: removed, it takes
# its spaces with it before punctuation ("true (#ab12)." is "true."), and nothing else moves.
_MALFORMED_SPACED = re.compile(r"([ \t]*)(?:" + _MALFORMED.pattern + r")(?=([.,;:!?])?)", re.IGNORECASE)


def _without_malformed(prose: str) -> str:
    return _MALFORMED_SPACED.sub(lambda m: "" if m.group(2) else m.group(1), prose)


_FINAL_INFORMATION = re.compile(r"^\s*\**\s*final information\s*\**\s*:?\s*", re.IGNORECASE)
_STORED = re.compile(r"\[\[S(\d+)\]\]")


@dataclass(frozen=True)
class MarkerProblems:
    malformed: tuple[str, ...] = ()
    dangling: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.malformed or self.dangling)

    def words(self) -> str:
        shown = [*self.malformed, *(f"[{n}]" for n in self.dangling)]
        return ", ".join(dict.fromkeys(shown))


def problems(text: str, documents: int) -> MarkerProblems:
    """The malformed markers of `text`, and the numbers it cites outside 1..documents; code is not
    read (`values[5]` there is an index, and storing it leaves it as it is)."""
    text = prose_only(text)
    malformed = tuple(m.group(0) for m in _MALFORMED.finditer(text))
    dangling = []
    for match in _GOOD.finditer(_MALFORMED.sub(" ", text)):
        for part in re.split(r"\s*[,;]\s*", match.group(1)):
            if not 1 <= int(part) <= documents:
                dangling.append(int(part))
    return MarkerProblems(malformed, tuple(dangling))


def uncited(text: str, documents: int) -> bool:
    """Text of some length (a dozen words or more) that cites none of the `documents` it was
    written from: the summarizer and the answer must say where each statement comes from."""
    return documents > 0 and not _GOOD.search(prose_only(text)) and len(text.split()) >= 12


@dataclass
class CitedText:
    text: str  # with [[S<source id>]] markers only
    attempts: int
    removed: list[str] = field(default_factory=list)  # the bad markers left after the last attempt
    uncited: bool = False  # it still cited nothing after the last attempt


def clean(text: str) -> str:
    """The model's text without the paper's "Final Information" opener."""
    return _FINAL_INFORMATION.sub("", text.strip(), count=1).strip()


def write_cited(write: Callable[[str], str], documents: Sequence[CitableSource], retries: int) -> CitedText:
    """Ask `write(feedback)` until its markers are all good and it cites something (at most
    `retries` more times), then store it: malformed markers removed, dangling numbers dropped, each
    listed in `removed`; `uncited` when it still cites nothing."""
    feedback = ""
    allowed = f"1 to {len(documents)}" if documents else "none: cite nothing"
    attempts = 0
    while True:
        attempts += 1
        text = clean(write(feedback))
        found = problems(text, len(documents))
        missing = uncited(text, len(documents))
        if not (found or missing) or attempts > retries:
            break
        template = FEEDBACK if found else UNCITED_FEEDBACK
        feedback = string.Template(template).substitute(bad=found.words(), allowed=allowed)
    removed = [*found.malformed, *(f"[{n}]" for n in found.dangling)]
    stored, _dropped = to_stored_markers(map_prose(text, _without_malformed), documents)
    return CitedText(stored, attempts, removed, uncited=missing)


def numbered(text: str, numbers: Mapping[int, int]) -> str:
    """Stored text as the model reads it: `[[S<id>]]` → `[n]` by `numbers` (source id → n); a
    sentence whose every marker points to a source not numbered (one you dropped) is left out, and
    such markers are removed from the others."""
    kept = []
    for sentence in split_sentences(text):
        ids = [int(i) for i in _STORED.findall(sentence)]
        if ids and not any(i in numbers for i in ids):
            continue
        kept.append(
            _STORED.sub(lambda m: f"[{numbers[int(m.group(1))]}]" if int(m.group(1)) in numbers else "", sentence)
        )
    return " ".join(kept)


__all__ = ["CitedText", "MarkerProblems", "clean", "numbered", "problems", "write_cited"]
