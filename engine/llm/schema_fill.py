"""Build a deterministic instance of a JSON schema (as pydantic v2 writes them).

Used by the fake LLM to answer structured requests offline. The filler handles the parts of JSON
Schema that pydantic emits: $ref/$defs, objects with required and optional properties, arrays
(items, prefixItems, minItems/maxItems, uniqueItems), enum/const, anyOf/oneOf/allOf, numbers and
integers with (exclusive) bounds and multipleOf, booleans, null, strings with min/maxLength and the
common formats. `pattern` is not honoured (no regex inversion). What a string says is delegated to
a `StringWriter`, so the caller decides how meaningful the text is.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

# Beyond this nesting depth optional properties are left out and nullable values are null, so
# recursive models (a node with children of the same type) terminate.
_MAX_DEPTH = 6
_DEFAULT_ITEMS_WHEN_BOUNDED = 3


@dataclass(frozen=True)
class StringSlot:
    """Where a string goes, so a writer can pick fitting text."""

    field: str  # nearest property name ("" at the root)
    path: tuple[str | int, ...]  # property names and array indexes from the root
    index: int | None  # the nearest array index, to vary the items of a list
    min_length: int = 0
    max_length: int | None = None
    description: str = ""  # the schema's title/description of the value or its property


StringWriter = Callable[[StringSlot], str]


def plain_writer(slot: StringSlot) -> str:
    """A neutral writer: the field name and index ("title 2")."""
    label = (slot.field or "value").replace("_", " ")
    return label if slot.index is None else f"{label} {slot.index + 1}"


@dataclass(frozen=True)
class _Place:
    """Where the filler is in the document."""

    path: tuple[str | int, ...] = ()
    field: str = ""
    index: int | None = None
    depth: int = 0
    description: str = ""
    refs: tuple[str, ...] = ()  # $refs being expanded on the way here
    # Minimal: inside a recursive $ref (or too deep) -> no optional properties, minItems, null.
    minimal: bool = False

    def child(self, key: str | int, *, field: str | None = None) -> _Place:
        return _Place(
            path=(*self.path, key),
            field=self.field if field is None else field,
            index=key if isinstance(key, int) else self.index,
            depth=self.depth + 1,
            refs=self.refs,
            minimal=self.minimal or self.depth + 1 >= _MAX_DEPTH,
        )


class SchemaFiller:
    """Fills one schema document; `fill()` returns a value that validates against it.

    Recursive models are expanded once: inside a $ref that is already being expanded only
    required properties, minItems items and null (where allowed) are produced.
    """

    def __init__(self, schema: dict[str, Any], writer: StringWriter = plain_writer) -> None:
        self._root = schema
        self._writer = writer

    def fill(self) -> Any:
        return self._value(self._root, _Place())

    # ------------------------------------------------------------------ dispatch

    def _value(self, schema: Any, place: _Place) -> Any:
        if schema is True or not isinstance(schema, dict) or not schema:
            return self._string({}, place)
        schema, refs = self._resolve(schema)
        place = replace(
            place,
            refs=place.refs + refs,
            minimal=place.minimal or any(ref in place.refs for ref in refs),
            description=schema.get("description") or place.description or schema.get("title", ""),
        )

        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return self._enum(schema)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self._value(self._pick_branch(schema[key], place), place)
        if "allOf" in schema:
            return self._value(self._merge_all_of(schema), place)

        kind = self._type_of(schema, place)
        if kind == "null":
            return None
        if kind == "boolean":
            default = schema.get("default")
            return default if isinstance(default, bool) else True
        if kind == "integer":
            return _integer(schema)
        if kind == "number":
            return _number(schema)
        if kind == "array":
            # A list whose author gave a default (usually []) is "normally that": an optional
            # list such as task dependencies stays empty instead of holding made-up references.
            if isinstance(schema.get("default"), list):
                return list(schema["default"])
            return self._array(schema, place)
        if kind == "object":
            return self._object(schema, place)
        return self._string(schema, place)

    def _resolve(self, schema: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
        """Follow $ref (local ones only); returns the target and the refs followed."""
        followed: list[str] = []
        while "$ref" in schema:
            ref = schema["$ref"]
            if ref in followed or not isinstance(ref, str) or not ref.startswith("#"):
                raise ValueError(f"cannot resolve $ref {ref!r}")
            followed.append(ref)
            target: Any = self._root
            for part in ref.lstrip("#").strip("/").split("/"):
                if part:
                    target = target[part.replace("~1", "/").replace("~0", "~")]
            # Sibling keywords next to $ref (description, default) still apply.
            siblings = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **siblings}
        return schema, tuple(followed)

    @staticmethod
    def _type_of(schema: dict[str, Any], place: _Place) -> str:
        kind: str | list[str] | None = schema.get("type")  # JSON Schema: a type name, or a list of them
        if isinstance(kind, list):
            non_null = [k for k in kind if k != "null"]
            if "null" in kind and (place.minimal or not non_null):
                return "null"
            kind = non_null[0]
        if kind:
            return kind
        if "properties" in schema or "additionalProperties" in schema:
            return "object"
        if "items" in schema or "prefixItems" in schema:
            return "array"
        return "string"

    def _pick_branch(self, branches: list[Any], place: _Place) -> Any:
        """Prefer the first non-null branch; in minimal mode prefer null."""
        is_null = [isinstance(b, dict) and self._resolve(b)[0].get("type") == "null" for b in branches]
        if place.minimal and any(is_null):
            return branches[is_null.index(True)]
        for branch, null in zip(branches, is_null):
            if not null:
                return branch
        return branches[0]

    def _merge_all_of(self, schema: dict[str, Any]) -> dict[str, Any]:
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            part = self._resolve(part)[0] if isinstance(part, dict) else {}
            for key, value in part.items():
                if key == "properties":
                    merged["properties"] = {**merged.get("properties", {}), **value}
                elif key == "required":
                    merged["required"] = [*merged.get("required", []), *value]
                else:
                    merged.setdefault(key, value)
        return merged

    # ------------------------------------------------------------------ kinds

    @staticmethod
    def _enum(schema: dict[str, Any]) -> Any:
        values = schema["enum"]
        default = schema.get("default")
        # The model's default is what its author considers the normal case.
        return default if default in values else values[0]

    def _object(self, schema: dict[str, Any], place: _Place) -> dict[str, Any]:
        required = set(schema.get("required", []))
        result: dict[str, Any] = {}
        for name, prop in schema.get("properties", {}).items():
            if name in required or not place.minimal:
                result[name] = self._value(prop, place.child(name, field=name))
        # dict[str, X] (additionalProperties schema, no properties) is left empty: always valid.
        return result

    def _array(self, schema: dict[str, Any], place: _Place) -> list[Any]:
        min_items = int(schema.get("minItems", 0))
        max_items = schema.get("maxItems")
        prefix = schema.get("prefixItems") or []
        if place.minimal:
            count = min_items
        elif max_items is None:
            count = max(min_items, 1)
        else:
            count = min(int(max_items), max(min_items, _DEFAULT_ITEMS_WHEN_BOUNDED))
        items_schema = schema.get("items", {})
        if prefix:
            # A tuple: exactly its positions unless extra items are allowed.
            count = len(prefix) if items_schema in (None, False, {}) else max(count, len(prefix))

        if schema.get("uniqueItems") and isinstance(items_schema, dict):
            enum_values = self._resolve(items_schema)[0].get("enum")
            if enum_values is not None:
                return list(enum_values[: max(min_items, min(count, len(enum_values)))])

        values = [self._value(prefix[i] if i < len(prefix) else items_schema, place.child(i)) for i in range(count)]
        if schema.get("uniqueItems"):
            values = _distinct(values, min_items)
        return values

    def _string(self, schema: dict[str, Any], place: _Place) -> str:
        min_length = int(schema.get("minLength", 0))
        max_length = schema.get("maxLength")
        formatted = _formatted_string(schema.get("format"), place.path)
        if formatted is not None:
            return formatted
        slot = StringSlot(
            field=place.field,
            path=place.path,
            index=place.index,
            min_length=min_length,
            max_length=int(max_length) if max_length is not None else None,
            description=place.description,
        )
        return fit_length(self._writer(slot), min_length, slot.max_length)


def fill_schema(schema: dict[str, Any], writer: StringWriter = plain_writer) -> Any:
    """A deterministic value that validates against `schema`."""
    return SchemaFiller(schema, writer).fill()


# ---------------------------------------------------------------------- helpers


def fit_length(text: str, min_length: int, max_length: int | None) -> str:
    """Cut at a word boundary when too long; pad with a neutral filler when too short."""
    if max_length is not None and len(text) > max_length:
        cut = text[:max_length]
        space = cut.rfind(" ")
        if space >= max(min_length, max_length // 2):
            cut = cut[:space]
        text = cut.rstrip() if len(cut.rstrip()) >= min_length else cut
    while len(text) < min_length:
        text = f"{text} (details)" if text else "details"
    if max_length is not None:
        text = text[:max_length]
    return text


def _distinct(values: list[Any], min_items: int) -> list[Any]:
    """Drop repeated items; numbers are spread out when that leaves too few."""
    seen: set[str] = set()
    unique = []
    for value in values:
        key = json.dumps(value, sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            unique.append(value)
    if len(unique) < min_items and unique and isinstance(unique[0], (int, float)):
        start = unique[0]
        unique = [start + i for i in range(min_items)]
    return unique


def _formatted_string(fmt: str | None, path: tuple[str | int, ...]) -> str | None:
    if not fmt:
        return None
    digest = hashlib.sha256(repr(path).encode()).hexdigest()
    day = 1 + int(digest[:4], 16) % 28
    if fmt == "date":
        return f"2024-01-{day:02d}"
    if fmt == "date-time":
        return f"2024-01-{day:02d}T12:00:00Z"
    if fmt == "time":
        return "12:00:00"
    if fmt in ("uri", "url", "uri-reference", "iri"):
        return f"https://example.org/source-{digest[:8]}"
    if fmt == "email":
        return f"author-{digest[:6]}@example.org"
    if fmt == "uuid":
        return str(uuid.UUID(digest[:32]))
    if fmt in ("ipv4",):
        return "192.0.2.1"
    if fmt in ("ipv6",):
        return "2001:db8::1"
    if fmt == "duration":
        return "P1D"
    return None


def _integer(schema: dict[str, Any]) -> int:
    low = _bound(schema, "minimum", "exclusiveMinimum", integer=True, upper=False)
    high = _bound(schema, "maximum", "exclusiveMaximum", integer=True, upper=True)
    low = math.ceil(low) if low is not None else None
    high = math.floor(high) if high is not None else None
    value = int(_pick_in(low, high, default=1, integer=True))
    step = schema.get("multipleOf")
    if isinstance(step, int) and step > 0:
        value = _snap_int(value, step, low, high)
    return value


def _snap_int(value: int, step: int, low: float | None, high: float | None) -> int:
    candidate = math.ceil(value / step) * step
    if high is not None and candidate > high:
        candidate = math.floor(value / step) * step
    if low is not None and candidate < low:
        candidate = math.ceil(low / step) * step
    return int(candidate)


def _number(schema: dict[str, Any]) -> float:
    low = _bound(schema, "minimum", "exclusiveMinimum", integer=False, upper=False)
    high = _bound(schema, "maximum", "exclusiveMaximum", integer=False, upper=True)
    value = float(_pick_in(low, high, default=0.5, integer=False))
    step = schema.get("multipleOf")
    if isinstance(step, (int, float)) and step > 0:
        snapped = round(value / step) * step
        if (low is None or snapped >= low) and (high is None or snapped <= high):
            value = float(snapped)
        elif low is not None:
            value = float(math.ceil(low / step) * step)
    return value


def _bound(schema: dict[str, Any], inclusive: str, exclusive: str, *, integer: bool, upper: bool) -> float | None:
    """The tightest inclusive bound, turning exclusive bounds into inclusive ones."""
    bounds: list[float] = []
    if isinstance(schema.get(inclusive), (int, float)):
        bounds.append(schema[inclusive])
    excl = schema.get(exclusive)
    if isinstance(excl, (int, float)) and not isinstance(excl, bool):
        if integer:
            bounds.append(math.ceil(excl) - 1 if upper else math.floor(excl) + 1)
        else:
            # Step inside an open interval by a small, readable amount.
            nudge = max(abs(excl) * 1e-3, 1e-3)
            bounds.append(excl - nudge if upper else excl + nudge)
    if not bounds:
        return None
    return min(bounds) if upper else max(bounds)


def _pick_in(low: float | None, high: float | None, *, default: float, integer: bool) -> float:
    """The middle of a closed range, else the default clamped to the one bound given."""
    if low is not None and high is not None:
        middle = (low + high) / 2
        return math.floor(middle) if integer else middle
    if low is not None:
        return max(low, default)
    if high is not None:
        return min(high, default)
    return default
