"""A form generated from a method's pydantic `Params`: one widget per field, the paper's default,
the field's description as help, validation through the model."""

from __future__ import annotations

import typing
from typing import Any

import streamlit as st
from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel


def _bounds(info) -> tuple[float | None, float | None]:
    low = high = None
    for meta in info.metadata:
        if isinstance(meta, Ge):
            low = meta.ge
        elif isinstance(meta, Gt):
            low = meta.gt
        elif isinstance(meta, Le):
            high = meta.le
        elif isinstance(meta, Lt):
            high = meta.lt
    return low, high


def params_form(params_type: type[BaseModel], *, key: str, defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """Widgets for every field, starting at `defaults` (a profile's) or the paper's defaults;
    returns the raw values (validate with the Params model)."""
    values: dict[str, Any] = {}
    defaults = defaults or {}
    for name, info in params_type.model_fields.items():
        label = name.replace("_", " ").capitalize()
        help_text = info.description or None
        widget_key = f"{key}.{name}"
        annotation = info.annotation
        default = defaults.get(name, info.default)
        if annotation is bool:
            values[name] = st.checkbox(label, value=bool(default), help=help_text, key=widget_key)
        elif annotation is int:
            low, high = _bounds(info)
            values[name] = st.number_input(label, value=int(default), min_value=None if low is None else int(low),
                                           max_value=None if high is None else int(high), step=1,
                                           help=help_text, key=widget_key)
        elif annotation is float:
            low, high = _bounds(info)
            values[name] = st.number_input(label, value=float(default), min_value=low, max_value=high,
                                           help=help_text, key=widget_key)
        elif typing.get_origin(annotation) is typing.Literal:
            options = list(typing.get_args(annotation))
            values[name] = st.selectbox(label, options, index=options.index(default), help=help_text, key=widget_key)
        else:
            values[name] = st.text_input(label, value="" if default is None else str(default), help=help_text,
                                         key=widget_key)
    return values
