"""Split long text into overlapping chunks of about `target_words` words.

Chunks follow paragraph boundaries, then sentence boundaries, and only cut inside a sentence when
one sentence alone is far too long. Every word of the input ends up in at least one chunk.
"""

from __future__ import annotations

import re

TARGET_WORDS = 180
OVERLAP_WORDS = 30

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
# A sentence ends at . ! ? (optionally followed by a closing quote/bracket) before whitespace.
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"'”’)\]]))\s+")


def _words(text: str) -> int:
    return len(text.split())


def _units(text: str, target: int) -> list[tuple[str, bool]]:
    """Sentences (no longer than ~1.5x target): (text, starts_paragraph)."""
    limit = max(1, int(target * 1.5))
    units: list[tuple[str, bool]] = []
    for paragraph in _PARAGRAPH_BREAK.split(text):
        first = True
        for sentence in _SENTENCE_END.split(paragraph.strip()):
            words = sentence.split()
            # A run-on "sentence" (tables, lists without punctuation) is cut into word windows.
            for start in range(0, len(words), limit):
                units.append((" ".join(words[start : start + limit]), first))
                first = False
    return units


def _join(units: list[tuple[str, bool]]) -> str:
    out = ""
    for text, new_paragraph in units:
        if not out:
            out = text
        else:
            out += ("\n\n" if new_paragraph else " ") + text
    return out


def chunk_text(
    text: str, target_words: int = TARGET_WORDS, overlap_words: int = OVERLAP_WORDS
) -> list[str]:
    """Split `text` into chunks of about `target_words` words with ~`overlap_words` overlap.

    Short texts (up to 1.25x target) come back as a single chunk; blank text gives [].
    """
    text = text.strip()
    if not text:
        return []
    if _words(text) <= target_words * 1.25:
        return [text]

    units = _units(text, target_words)
    chunks: list[list[tuple[str, bool]]] = []
    current: list[tuple[str, bool]] = []
    current_words = 0
    fresh = 0  # units in `current` that are not overlap carried from the previous chunk
    for unit in units:
        size = _words(unit[0])
        full = current_words + size > target_words
        # Prefer to end a chunk where a paragraph ends, once it is reasonably full.
        paragraph_break = unit[1] and current_words >= target_words * 0.7
        if fresh and (full or paragraph_break):
            chunks.append(current)
            # Carry the last sentences (up to overlap_words; at least one short sentence) so a
            # fact split across the boundary is still readable in one chunk.
            carry: list[tuple[str, bool]] = []
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
        tail_words = sum(_words(u[0]) for u in current[len(current) - fresh :])
        # A tiny tail is folded into the previous chunk rather than left as a scrap.
        if chunks and tail_words < target_words * 0.25:
            chunks[-1].extend(current[len(current) - fresh :])
        else:
            chunks.append(current)
    return [_join(chunk) for chunk in chunks]
