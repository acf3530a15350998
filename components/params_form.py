"""Forms generated from pydantic models: a method's `Params` (the Explore page's parameter form) and a
steering command's payload (the node panel's and the run panels' command forms). One widget per
field, the field's default, its description and allowed range as help; validation stays with the
model: a method's parameters are checked as they are entered, each problem said under its field
(`errors_by_field`), and again at Start (`build_params`); a command's payload when it is sent
(`CommandSpec.parse`)."""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import streamlit as st
from annotated_types import MaxLen
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from engine.methods.base import MethodParams
from engine.methods.params import allowed_range, errors_by_field
from engine.reader_text import as_sentence

# A form's check: the raw values -> pydantic's errors by the field each is about (None: no field).
Checker = Callable[[dict[str, Any]], Mapping[str | None, Sequence[Mapping[str, Any]]]]


def _with_range(help_text: str | None, info: FieldInfo) -> str | None:
    allowed = allowed_range(info)
    if allowed is None:
        return help_text
    return f"{help_text} Allowed: {allowed}." if help_text else f"Allowed: {allowed}."


def _max_chars(info: FieldInfo) -> int | None:
    return next((meta.max_length for meta in info.metadata if isinstance(meta, MaxLen)), None)


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    """`X | None` -> (X, True); anything else -> (annotation, False)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(annotation)) == 2:
            return args[0], True
    return annotation, False


def _is_str_list(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (list, tuple, set, frozenset) and typing.get_args(annotation)[:1] == (str,)


def split_list(text: str) -> list[str]:
    """A comma-separated text input as a list (empty items dropped)."""
    return [item.strip() for item in (text or "").split(",") if item.strip()]


# Abbreviations kept in capitals in a label made from a field's name ("llm_planner" -> "LLM planner").
_ACRONYMS = {"Llm": "LLM", "llm": "LLM", "Kg": "KG", "kg": "KG", "Url": "URL", "url": "URL"}


def field_label(name: str, info: FieldInfo | None = None) -> str:
    """The field's declared title (`Field(title=...)`), else its name as words."""
    if info is not None and info.title:
        return info.title
    words = name.split("_")
    return " ".join(_ACRONYMS.get(w, w) for w in [words[0].capitalize(), *words[1:]])


def readable_problems(fields: Mapping[str, FieldInfo], errors: Sequence[Mapping[str, Any]]) -> str | None:
    """Validation errors in the form's words: "New branches is 500; allowed: 1 to 8." (a model's own
    message names fields by their code names). None when an error is not about one of `fields`."""
    problems = []
    for error in errors:
        if not error.get("loc"):  # the model's own check across fields: its message, fields named as on the form
            message = str(error["msg"]).removeprefix("Value error, ")
            for name, info in fields.items():
                message = re.sub(rf"\b{re.escape(name)}\b", field_label(name, info), message)
            problems.append(as_sentence(message).rstrip("."))
            continue
        name = str(error["loc"][0])
        if name not in fields:
            return None
        info = fields[name]
        allowed = allowed_range(info)
        if allowed and error.get("type", "").startswith(("greater", "less")):
            problems.append(f"{field_label(name, info)} is {error.get('input')!r}; allowed: {allowed}")
        elif error.get("type") == "string_too_long":
            given = len(error["input"]) if isinstance(error.get("input"), str) else None
            problems.append(
                f"{field_label(name, info)} is too long"
                + (f" ({given:,} characters)" if given else "")
                + f"; at most {error.get('ctx', {}).get('max_length', 0):,}: shorten it"
            )
        else:
            problems.append(f"{field_label(name, info)}: {error['msg']}")
    return "; ".join(dict.fromkeys(problems)) + "." if problems else None  # each problem once


def field_widget(name: str, info: FieldInfo, *, key: str, default: Any) -> Any:
    """One widget for one model field; returns its raw value (a list for list[str] fields)."""
    label = field_label(name, info)
    help_text = info.description or None
    annotation, optional = _unwrap_optional(info.annotation)
    if default is None and not optional and annotation in (int, float, bool):
        optional = True  # a required number or flag without a default starts empty
    if annotation is bool:
        return st.checkbox(label, value=bool(default), help=help_text, key=key)
    # Numbers have no bounds in the widget: Streamlit would keep the last valid value of an
    # out-of-range entry and only colour it red, so a run would start with values nobody chose.
    # The model refuses the value instead, with the reason (`build_params`, `CommandSpec.parse`).
    # An optional number left empty takes a value the field names (`json_schema_extra`'s
    # "placeholder"): said in the empty box, which otherwise looks like a value is missing.
    extra = info.json_schema_extra
    placeholder = extra.get("placeholder") if isinstance(extra, dict) else None
    if annotation is int:
        return st.number_input(
            label,
            value=None if default is None else int(default),
            step=1,
            help=_with_range(help_text, info),
            key=key,
            placeholder=placeholder,
        )
    if annotation is float:
        return st.number_input(
            label,
            value=None if default is None else float(default),
            help=_with_range(help_text, info),
            key=key,
            placeholder=placeholder,
        )
    if typing.get_origin(annotation) is typing.Literal:
        options = list(typing.get_args(annotation))
        index = options.index(default) if default in options else (None if optional else 0)
        return st.selectbox(label, options, index=index, help=help_text, key=key)
    if _is_str_list(annotation):
        help_text = f"{help_text} (comma-separated)" if help_text else "Comma-separated."
        text = st.text_input(label, value=", ".join(default or ()), help=help_text, key=key)
        return split_list(text)
    # No max_chars in the widget: Streamlit drops a paste that would pass it, whole and silently.
    # The model refuses a text too long instead, with its length and the limit (readable_problems).
    most = _max_chars(info) if annotation is str else None
    if most:
        help_text = f"{help_text} At most {most:,} characters." if help_text else f"At most {most:,} characters."
    return st.text_input(label, value="" if default is None else str(default), help=help_text, key=key)


def model_form(
    model: type[BaseModel],
    *,
    key: str,
    defaults: dict[str, Any] | None = None,
    fields: Iterable[str] | None = None,
    check: Checker | None = None,
) -> dict[str, Any]:
    """Widgets for the model's fields (or only `fields`), keyed `<key>.<field>`, starting at
    `defaults` or the model's defaults (a required field starts empty); the raw values. `check`
    (values -> errors by field, `errors_by_field`) says each problem under its field, in the form's
    words, as soon as the value is in: the model refused it only at Start before, naming no field."""
    values: dict[str, Any] = {}
    slots: dict[str | None, Any] = {}
    defaults = defaults or {}
    wanted = None if fields is None else set(fields)
    for name, info in model.model_fields.items():
        if wanted is not None and name not in wanted:
            continue
        default = defaults.get(name, None if info.is_required() else info.get_default(call_default_factory=True))
        values[name] = field_widget(name, info, key=f"{key}.{name}", default=default)
        if check is not None:
            slots[name] = st.empty()  # filled once every value is known: a check may span fields
    if check is not None:
        slots[None] = st.empty()  # a problem that names no field: under the form
        for name, errors in check(values).items():
            slot = slots.get(name, slots[None])
            slot.error(
                readable_problems(model.model_fields, errors)
                or as_sentence("; ".join(str(e.get("msg", "")) for e in errors)),
                icon=":material/error:",
            )
    return values


def params_form(params_type: type[MethodParams], *, key: str, defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """Widgets for every field of a method's Params, starting at `defaults` (a profile's) or the
    paper's defaults, each checked as it is entered (its problem said under it); returns the raw
    values (Start validates them again with the Params model)."""
    return model_form(
        params_type, key=key, defaults=defaults, check=lambda values: errors_by_field(params_type, values)
    )
