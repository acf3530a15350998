"""What of a model's text is fit for a reader (issue 12, finding 2), as pure functions.

A small model that failed a structured output often "answers" with the machinery: the validation
message it was re-asked with ("Field required."), a field's own name ("analysis"), a schema word
("string"), or the same paragraph in every field. None of that is content. These helpers decide what
is, so the node panel, the report writers and the run's outcome apply one rule:

* `is_placeholder`: the text says nothing but schema or error words;
* `readable_sections`: a summary's fields under human headings, placeholders dropped, each
  paragraph once (across and within fields), empty sections left out;
* `reader_error`: an error message in words a reader can act on, and the technical detail apart.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator

# Words that, alone, are a schema's or a validator's rather than an answer's.
_SCHEMA_WORDS = frozenset(
    {
        "field required",
        "required",
        "missing",
        "string",
        "str",
        "text",
        "null",
        "none",
        "nil",
        "n a",
        "na",
        "list",
        "array",
        "object",
        "dict",
        "json",
        "value",
        "example",
        "description",
        "todo",
        "tbd",
        "not applicable",
        "no data",
        "empty",
        "undefined",
        "string value",
        "list of strings",
        "your answer here",
        "input should be a valid string",
        "input should be a valid list",
    }
)
# Phrases of pydantic's and our structured-output errors, wherever they appear in a short text.
_ERROR_PHRASES = re.compile(
    r"field required|input should be|validation errors? for|did not match \w+ after \d+ attempts"
    r"|value error,|json_invalid|extra inputs are not permitted",
    re.IGNORECASE,
)
# Short enough that an error phrase in it is the whole message, not a quotation in a real answer.
_SHORT = 200
_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> str:
    """Lower-case words only: punctuation, Markdown, bullets and underscores do not count."""
    return " ".join(_WORD.findall(text.lower().replace("_", " ")))


def is_placeholder(text: str, field_names: Iterable[str] = ()) -> bool:
    """Whether `text` holds no content for a reader: empty, only a field's name, only schema words,
    or a short validation/structured-output error message."""
    words = _words(text)
    if not words:
        return True
    if words in _SCHEMA_WORDS or words in {_words(name) for name in field_names}:
        return True
    return len(text) <= _SHORT and bool(_ERROR_PHRASES.search(text))


def heading_for(field_name: str) -> str:
    """A field name as a heading a person reads: `conflicting_information` -> "Conflicting information"."""
    words = field_name.replace("_", " ").strip()
    return words[:1].upper() + words[1:]


@dataclass(frozen=True)
class TextSection:
    """One part of a node's text under its own heading. `as_list` when its field is a list (shown as
    bullet points); paragraphs are untrusted Markdown, to be sanitised where they are shown."""

    heading: str
    paragraphs: tuple[str, ...]
    as_list: bool = False


def _paragraphs(value: str | Sequence[str]) -> tuple[list[str], bool]:
    if isinstance(value, str):
        return [p.strip() for p in re.split(r"\n\s*\n", value) if p.strip()], False
    return [str(item).strip() for item in value if str(item).strip()], True


def readable_sections(
    fields: Mapping[str, str | Sequence[str]], headings: Mapping[str, str] | None = None
) -> list[TextSection]:
    """A summary's fields (in order) as sections a reader can read: each under its heading (given,
    or made from the field's name); paragraphs that are placeholders dropped; a paragraph already
    shown (in this field or an earlier one) not repeated; sections left empty omitted."""
    headings = headings or {}
    names = list(fields)
    seen: set[str] = set()
    sections = []
    for name, value in fields.items():
        paragraphs, as_list = _paragraphs(value)
        kept = []
        for paragraph in paragraphs:
            key = _words(paragraph)
            if is_placeholder(paragraph, names) or key in seen:
                continue
            seen.add(key)
            kept.append(paragraph)
        if kept:
            sections.append(TextSection(headings.get(name) or heading_for(name), tuple(kept), as_list))
    return sections


@dataclass(frozen=True)
class ReaderError:
    """An error as a reader sees it: what happened and what to do, and the technical detail (for a
    collapsed "technical details" view; empty when the message is already plain)."""

    message: str
    technical: str = ""


STRUCTURED_FAILURE = (
    "The model could not give its answer in the form this step needs, so nothing of it is "
    "shown. Press Retry (or resume the run) to try again; a larger model fails less often."
)


RUN_FAILED_ADVICE = "Fix the cause (see Settings), then press Resume: it also retries the failed nodes."


def run_failure(error: str) -> ReaderError:
    """A failed run's stored error as the run's page says it: what failed, then one thing to do. A
    structured-output failure's plain message brings its own advice (Retry), which the general
    advice would contradict; each sentence ends with one period, whatever the stored error ends with."""
    shown = reader_error(error)
    message = shown.message.strip().rstrip(".").rstrip()
    advice = "" if shown.message.endswith(STRUCTURED_FAILURE) else f" {RUN_FAILED_ADVICE}"
    return ReaderError(f"The run failed: {message}.{advice}", shown.technical)


def reader_error(error: str) -> ReaderError:
    """`error` as stored, in plain words when it is a structured-output or validation failure."""
    match = _ERROR_PHRASES.search(error)
    if match is None:
        return ReaderError(error)
    # What comes before a parenthesis that opens the technical part is plain ("nothing was answered:
    # no question node succeeded (the first failure: ... did not match ...)"): kept.
    head = error[: match.start()]
    plain = head[: head.rfind("(")].strip(" :;,.") if "(" in head else ""
    message = f"{plain[:1].upper()}{plain[1:]}. {STRUCTURED_FAILURE}" if plain else STRUCTURED_FAILURE
    return ReaderError(message, technical=error)


# ---------------------------------------------------------------- text the model was asked to write

# What stands in a report where the model wrote nothing readable, twice: said, not hidden.
REPORT_NOT_WRITTEN = (
    "_The model could not write the report (twice it answered with no content). Press "
    "Rewrite report to try again; the answers of the tree are kept._"
)
SECTION_NOT_WRITTEN = "_The model could not write this section. Press Rewrite to try again._"
# Set in a report's data when its text is a note instead of the model's writing, so the run's
# outcome tells the truth and the next write does not skip it as up to date.
UNWRITTEN = "unwritten"


def first_readable(write: Callable[[], str], *, attempts: int = 2) -> str | None:
    """The first of up to `attempts` texts from `write` that is not a placeholder ("Field required.",
    a schema word, nothing); None when none was."""
    for _ in range(attempts):
        text = write()
        if not is_placeholder(text):
            return text
    return None


def _readable(text: str) -> str:
    if is_placeholder(text):
        raise ValueError("write the answer itself in this field, not a field name, a schema word or an error message")
    return text


# A structured output's text field that must hold content: a placeholder fails validation, so the
# model is re-asked with that reason (bounded), and a last failure is a StructuredOutputError.
ReadableText = Annotated[str, AfterValidator(_readable)]


def as_sentence(message: str) -> str:
    """A message written to follow "error: " in a terminal, as a sentence on its own: capitalised and
    ended with a full stop."""
    message = message.strip()
    if not message:
        return message
    message = message[0].upper() + message[1:]
    return message if message.endswith((".", "!", "?")) else message + "."
