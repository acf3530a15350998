"""Guards for small local models: answers cut by a loop are closed, repeated sentences removed.

A 0.5B model easily falls into a loop, writing the same sentences until its token limit, which
cuts the JSON in half. (A `maxLength` per string in the grammar would stop it, but llama-cpp-python
expands `maxLength: n` into n nested rules, which is slow to parse for useful n.) So the cut JSON is
closed where it stopped, and the sentences the loop repeated are removed. Neither changes what
our pydantic models accept: a closed answer that misses required fields is re-asked as usual.
"""

from __future__ import annotations

import json
import re
from typing import Any

_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*\s*|\n+")


def close_truncated_json(text: str) -> str | None:
    """The JSON a looping model was writing when its token limit cut it, closed: the open string
    ended, a dangling key or comma dropped, open arrays and objects closed. None if that does not
    give valid JSON (the caller then re-asks as for any invalid answer)."""
    stack: list[str] = []
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
        elif char in "}]" and stack:
            stack.pop()
    if not stack:
        return None
    closed = text[:-1] if escaped else text
    closed = closed + '"' if in_string else closed
    closed = re.sub(r',\s*"[^"]*"\s*:?\s*$', "", closed) if not in_string else closed
    closed = re.sub(r"[,:]\s*$", "", closed.rstrip())
    candidate = closed + "".join(reversed(stack))
    try:
        json.loads(candidate)
    except ValueError:
        return None
    return candidate


def collapse_repeats(text: str) -> str:
    """Remove sentences that already appeared earlier in the same text (a looping model)."""
    seen: set[str] = set()
    kept = []
    for match in _SENTENCE.finditer(text):
        piece = match.group(0)
        key = " ".join(piece.lower().split())
        if len(key) > 20 and key in seen:
            continue
        seen.add(key)
        kept.append(piece)
    return "".join(kept).rstrip() if len(kept) < len(list(_SENTENCE.finditer(text))) else text


def collapse_repeats_in_json(text: str) -> str:
    """`collapse_repeats` on every string of a JSON answer, closed first if it was cut off; text
    that is not JSON is returned as it is."""
    try:
        value = json.loads(text)
    except ValueError:
        closed = close_truncated_json(text)
        if closed is None:
            return text
        value = json.loads(closed)

    def walk(node: Any) -> Any:
        if isinstance(node, str):
            return collapse_repeats(node)
        if isinstance(node, list):
            return [walk(item) for item in node]
        if isinstance(node, dict):
            return {key: walk(item) for key, item in node.items()}
        return node

    return json.dumps(walk(value), ensure_ascii=False)
