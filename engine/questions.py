"""What a research question may be: text, without NUL, short enough to be a question.

One validation for every way a question enters (the app's Start, `thoughtmap run`, the runner, a
follow-up "Ask" on a node); the repository repeats the storability and length parts as a last guard. Control characters are removed by the
terminal rules of engine/safe_text.py (which imports nothing else), so storage may use this module.
"""

from __future__ import annotations

import re

from engine.safe_text import terminal_text

# A research question is a sentence or a paragraph, not a document: every method puts the question
# in most of its prompts, so a 100 KB question costs its size again on every call (246k tokens for
# two DEoT nodes was measured). 2,000 characters leave room for a question with its context.
MAX_QUESTION_CHARS = 2_000

# Whitespace controls separate words: they become spaces before the other controls are removed.
_SPACE_LIKE = re.compile(r"[\t\v\f]")


class QuestionError(ValueError):
    """The question cannot be researched as given; the message says what is wrong and what to do."""


def check_storable(question: object) -> str:
    """The part every stored question must pass: text, no NUL, encodable as UTF-8."""
    if not isinstance(question, str):
        is_bytes = isinstance(question, (bytes, bytearray))
        hint = "decode it to text first" if is_bytes else "pass the question as a string"
        raise QuestionError(f"the question must be text, not {type(question).__name__}; {hint}")
    if "\x00" in question:
        raise QuestionError(
            "the question contains a NUL character (\\x00), which usually means binary data was "
            "pasted; type or paste the question as plain text"
        )
    try:
        question.encode("utf-8")
    except UnicodeEncodeError:
        raise QuestionError(
            "the question contains bytes that are not valid UTF-8 (a lone surrogate); "
            "retype it or save it as UTF-8 text"
        ) from None
    return question


def clean_question(question: object) -> str:
    """The question as it will be researched: checked, control characters removed, trimmed, and
    within MAX_QUESTION_CHARS. Raises QuestionError with what to do otherwise."""
    if question is None:
        question = ""
    text = check_storable(question)
    # Escape sequences, controls and bidi overrides pasted with a question are invisible in the app
    # and act in a terminal: removed whole (no "[31m" residue), line breaks kept.
    text = terminal_text(_SPACE_LIKE.sub(" ", text)).strip()
    if not text:
        raise QuestionError("the question is empty; type the question you want researched")
    return check_length(text)


def check_length(text: str) -> str:
    """`text` if it is at most MAX_QUESTION_CHARS long; else QuestionError saying what to do. Also
    the repository's guard, so a caller that skips the runner cannot store a document as a question."""
    if len(text) > MAX_QUESTION_CHARS:
        raise QuestionError(
            f"the question is {len(text):,} characters long; the limit is {MAX_QUESTION_CHARS:,}. "
            "Ask a research question of a sentence or a paragraph; documents belong in the corpus: "
            "upload them in Settings (Local corpus) or add them with `thoughtmap ingest FILE`, "
            "then ask about them"
        )
    return text
