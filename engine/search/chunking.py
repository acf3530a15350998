"""Split long text into overlapping chunks of about `target_words` words.

Chunks follow paragraph boundaries, then sentence boundaries, and only cut inside a sentence when
one sentence alone is far too long. Every word of the input ends up in at least one chunk.
`iter_chunks` gives the same chunks from a text read in blocks (a large file), holding only a
bounded part of it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator

TARGET_WORDS = 180
OVERLAP_WORDS = 30

# Streaming holds at most about this much of an unfinished paragraph (plus one block) before it
# gives out the paragraph's finished sentences, so memory does not grow with the file.
_PENDING_CHARS = 64 * 1024
# Streaming decides "short text, one chunk" only within this many characters.
_SHORT_TEXT_MAX_CHARS = 256 * 1024

Unit = tuple[str, bool]  # a sentence (or a window of a long one) and whether it starts a paragraph

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
# A sentence ends at . ! ? (optionally followed by a closing quote/bracket) before whitespace.
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"'”’)\]]))\s+")
# A word that more text follows: one that cannot continue in the next block.
_INNER_WORD = re.compile(r"\S+(?=\s+\S)")


def _words(text: str) -> int:
    return len(text.split())


def _sentence_units(sentence: str, limit: int) -> list[str]:
    """A sentence as units of at most `limit` words: a run-on "sentence" (tables, lists without
    punctuation) is cut into word windows."""
    words = sentence.split()
    return [" ".join(words[start : start + limit]) for start in range(0, len(words), limit)]


def _iter_units(blocks: Iterable[str], target: int) -> Iterator[Unit]:
    """Sentences (no longer than ~1.5x target) of the text the blocks make up, in order:
    (text, starts_paragraph).

    Only the paragraph being read is held, and of it only about _PENDING_CHARS: past that, its
    finished sentences (then the finished word windows of an endless sentence) are given out. A
    cut is made only where whitespace is followed by more text, so what comes in the next block
    cannot change it: the units are the same however the text is split into blocks.
    """
    limit = max(1, int(target * 1.5))
    pending = ""  # the unfinished paragraph, from its first part not yet given out
    starts_paragraph = True

    def units_of(sentences: Iterable[str]) -> Iterator[Unit]:
        nonlocal starts_paragraph
        for sentence in sentences:
            for unit in _sentence_units(sentence, limit):
                yield unit, starts_paragraph
                starts_paragraph = False

    for block in blocks:
        pending += block
        *paragraphs, pending = _PARAGRAPH_BREAK.split(pending)
        for paragraph in paragraphs:
            yield from units_of(_SENTENCE_END.split(paragraph.strip()))
            starts_paragraph = True
        if len(pending) > _PENDING_CHARS:
            cut = _last_inner_match(_SENTENCE_END, pending)
            if cut is not None:
                yield from units_of(_SENTENCE_END.split(pending[: cut.start()]))
                pending = pending[cut.end() :]
        if len(pending) > _PENDING_CHARS:
            words = list(_INNER_WORD.finditer(pending))
            whole_windows = len(words) // limit * limit
            if whole_windows:
                yield from units_of([pending[: words[whole_windows - 1].end()]])
                pending = pending[words[whole_windows - 1].end() :].lstrip()
    yield from units_of(_SENTENCE_END.split(pending.strip()))


def _last_inner_match(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """The last match of `pattern` in `text` that more text follows (not one at the very end)."""
    last = None
    for match in pattern.finditer(text):
        if match.end() < len(text):
            last = match
    return last


def _join(units: list[Unit]) -> str:
    out = ""
    for text, new_paragraph in units:
        if not out:
            out = text
        else:
            out += ("\n\n" if new_paragraph else " ") + text
    return out


def _assemble(units: Iterable[Unit], target_words: int, overlap_words: int) -> Iterator[str]:
    """Group units into chunks of about `target_words` with ~`overlap_words` overlap.

    The last finished chunk is held back until the next one is, so a tiny tail can still be folded
    into it at the end.
    """
    held: list[Unit] | None = None
    current: list[Unit] = []
    current_words = 0
    fresh = 0  # units in `current` that are not overlap carried from the previous chunk
    for unit in units:
        size = _words(unit[0])
        full = current_words + size > target_words
        # Prefer to end a chunk where a paragraph ends, once it is reasonably full.
        paragraph_break = unit[1] and current_words >= target_words * 0.7
        if fresh and (full or paragraph_break):
            if held is not None:
                yield _join(held)
            held = current
            # Carry the last sentences (up to overlap_words; at least one short sentence) so a
            # fact split across the boundary is still readable in one chunk.
            carry: list[Unit] = []
            carried = 0
            for prev in reversed(current):
                prev_size = _words(prev[0])
                if carried + prev_size > overlap_words and (carry or prev_size > 2 * overlap_words):
                    break
                carry.insert(0, prev)
                carried += prev_size
            current, current_words, fresh = carry, carried, 0
        current.append(unit)
        current_words += size
        fresh += 1
    if fresh:
        tail = current[len(current) - fresh :]
        # A tiny tail is folded into the previous chunk rather than left as a scrap.
        if held is not None and sum(_words(u[0]) for u in tail) < target_words * 0.25:
            held.extend(tail)
        else:
            if held is not None:
                yield _join(held)
            held = current
    if held is not None:
        yield _join(held)


def chunk_text(text: str, target_words: int = TARGET_WORDS, overlap_words: int = OVERLAP_WORDS) -> list[str]:
    """Split `text` into chunks of about `target_words` words with ~`overlap_words` overlap.

    Short texts (up to 1.25x target) come back as a single chunk; blank text gives [].
    """
    text = text.strip()
    if not text:
        return []
    if _words(text) <= target_words * 1.25:
        return [text]
    return list(_assemble(_iter_units([text], target_words), target_words, overlap_words))


def iter_chunks(
    blocks: Iterable[str], target_words: int = TARGET_WORDS, overlap_words: int = OVERLAP_WORDS
) -> Iterator[str]:
    """`chunk_text` of the text the blocks make up, holding only a bounded part of it.

    For a file too large to read whole. The chunks are those of `chunk_text` on the whole text,
    except for a text of more than _SHORT_TEXT_MAX_CHARS with at most 1.25x target words (a few
    giant "words"), which is cut into word windows instead of being kept as one chunk.
    """
    blocks = iter(blocks)
    head = ""
    for block in blocks:
        head += block
        if len(head) > _SHORT_TEXT_MAX_CHARS or _words(head) > target_words * 1.25:
            units = _iter_units(itertools.chain([head], blocks), target_words)
            yield from _assemble(units, target_words, overlap_words)
            return
    yield from chunk_text(head, target_words, overlap_words)
