"""The smaller form of a structured answer, asked for once the full form was cut off by the length limit.

A small model on a slow machine writes a structured answer as long as the full schema allows, and the
output cap cuts it before its last field (DEoT's node summary lost its `conclusion` three times
running on the built-in model, and the node failed). Being told "shorter" helps a capable model, not
a 0.5B one. The compact form makes short answers a matter of the schema instead:

- optional properties are left out (their defaults apply);
- every list holds at most `COMPACT_ITEMS` items (or its own minimum, when that is more);
- every free-text string gets a `maxLength`, the cap's characters shared among the strings the
  answer can hold, so the whole answer fits the cap.

Where the server samples under a grammar made from the schema (llama.cpp, which serves the built-in
model, turns `maxLength` and `maxItems` into grammar rules), the answer cannot run long; elsewhere
the prompt shows the same limits. Every constraint only narrows the original one, so an answer in
the compact form validates as the original type.
"""

from __future__ import annotations

import copy
from typing import Any

COMPACT_ITEMS = 2
# Characters of free text per output token the cap allows, conservatively (English prose is about 4
# characters a token; JSON's keys, quotes and escapes take their share of the cap).
CHARS_PER_TOKEN = 2.0
# When the request has no cap: the free text the compact form allows in all.
DEFAULT_TEXT_CHARS = 1_200
MIN_STRING_CHARS = 40
MAX_STRING_CHARS = 400
_MAX_DEPTH = 12  # a recursive schema ($ref to itself) is walked this deep, no deeper
# Strings whose form is fixed already: a length limit would fight the value's own rule.
_FIXED_FORM = ("enum", "const", "pattern", "format")


def compact_schema(schema: dict[str, Any], max_tokens: int | None) -> dict[str, Any]:
    """A copy of `schema` (a pydantic model's JSON schema, `$defs` included) in its compact form,
    for an answer cut to at most `max_tokens` output tokens (None: no cap)."""
    compact = copy.deepcopy(schema)
    defs = compact.get("$defs", {})
    strings: dict[int, tuple[dict[str, Any], float]] = {}
    _walk(compact, defs, strings, weight=1.0, depth=0)
    if not strings:
        return compact
    budget = DEFAULT_TEXT_CHARS if max_tokens is None else max_tokens * CHARS_PER_TOKEN
    slots = sum(weight for _node, weight in strings.values())
    each = int(max(MIN_STRING_CHARS, min(MAX_STRING_CHARS, budget / slots)))
    for node, _weight in strings.values():
        limit = min(each, node.get("maxLength", each))
        node["maxLength"] = max(limit, node.get("minLength", 0))
    return compact


def _walk(
    node: Any, defs: dict[str, Any], strings: dict[int, tuple[dict[str, Any], float]], *, weight: float, depth: int
) -> None:
    """Narrow `node` in place; note each free-text string schema with how many of it an answer can
    hold (`weight`: the product of the list lengths above it)."""
    if not isinstance(node, dict) or depth > _MAX_DEPTH:
        return
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        _walk(defs.get(ref.removeprefix("#/$defs/")), defs, strings, weight=weight, depth=depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        for branch in node.get(key, ()):
            _walk(branch, defs, strings, weight=weight, depth=depth + 1)
    kind = node.get("type")
    if kind == "object" or "properties" in node:
        required = set(node.get("required", ()))
        properties = node.get("properties", {})
        for name in [n for n in properties if n not in required]:
            del properties[name]
        for child in properties.values():
            _walk(child, defs, strings, weight=weight, depth=depth + 1)
    elif kind == "array":
        least = node.get("minItems", 0)
        most = max(least, min(node.get("maxItems", COMPACT_ITEMS), COMPACT_ITEMS))
        node["maxItems"] = most
        _walk(node.get("items"), defs, strings, weight=weight * max(most, 1), depth=depth + 1)
    elif kind == "string" and not any(key in node for key in _FIXED_FORM):
        seen = strings.get(id(node))
        strings[id(node)] = (node, weight + (seen[1] if seen else 0.0))
