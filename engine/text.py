"""Text from outside the program made storable: what a model answers, a web page, a file's text.

Such text may hold lone surrogates (a JSON escape like "\\ud800" in a chat completion or a JSONL
line decodes to one) and NUL characters. Neither can be written everywhere: a lone surrogate
cannot be encoded as UTF-8 (SQLite, PostgreSQL, files and terminals all refuse it) and
PostgreSQL's text type refuses NUL. Cleaning at the boundary where the text enters keeps one bad
character from failing a whole run or a whole ingest. Nothing here imports the rest of the engine.
"""

from __future__ import annotations

from typing import Any

REPLACEMENT = "\ufffd"


def storable_text(text: str) -> str:
    """`text` without NUL and with every lone surrogate replaced by U+FFFD.

    A high and a low surrogate that arrive as a pair are joined into the character they encode.
    """
    if "\x00" in text:
        text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # UTF-16 with surrogatepass joins valid pairs; decoding with "replace" marks lone halves.
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def storable_json(value: Any) -> Any:
    """A decoded JSON value with `storable_text` applied to every string, keys included.

    A model's JSON may spell a lone surrogate or NUL as an escape ("\\ud800", "\\u0000") that only
    becomes a character when the JSON is decoded, after the reply text itself was cleaned.
    """
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, list):
        return [storable_json(item) for item in value]
    if isinstance(value, dict):
        return {storable_text(key): storable_json(item) for key, item in value.items()}
    return value
