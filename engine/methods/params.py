"""Turning `key=value` strings (CLI flags, form fields) into a validated method Params model."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from annotated_types import Ge, Gt, Le, Lt
from pydantic import ValidationError
from pydantic.fields import FieldInfo

from engine.methods.base import MethodParams


class ParamError(ValueError):
    """A parameter is unknown or has a bad value; the message says which and what is allowed.
    `errors` are pydantic's own, for a form that names its fields by their labels."""

    def __init__(self, message: str, *, errors: Iterable[Mapping[str, Any]] = ()) -> None:
        super().__init__(message)
        self.errors = list(errors)


def _coerce(raw: str) -> Any:
    # JSON-looking values (lists, objects, numbers, booleans) are parsed; everything else stays a
    # string and pydantic converts it in lax mode ("5" -> 5, "yes" -> True).
    stripped = raw.strip()
    if stripped[:1] in "[{":
        try:
            return json.loads(stripped)
        except json.JSONDecodeError:
            return raw
    return raw


def parse_assignments(pairs: Iterable[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise ParamError(f"'{pair}' is not key=value; write it like --param top_k=5")
        values[key.strip()] = _coerce(raw)
    return values


def allowed_range(info: FieldInfo) -> str | None:
    """A number field's declared bounds in words ("0 to 8", "at least 1"), or None without bounds."""
    low = high = None
    for meta in info.metadata:
        if isinstance(meta, (Ge, Gt)):
            low = meta.ge if isinstance(meta, Ge) else meta.gt
        elif isinstance(meta, (Le, Lt)):
            high = meta.le if isinstance(meta, Le) else meta.lt
    if low is None and high is None:
        return None
    if low is not None and high is not None:
        return f"{low:g} to {high:g}"
    return f"at least {low:g}" if low is not None else f"at most {high:g}"


def _problem(err: Mapping[str, Any], fields: Mapping[str, FieldInfo]) -> str:
    loc = err.get("loc", ())
    name = ".".join(str(p) for p in loc) or "(params)"
    text = f"{name}={err.get('input')!r}: {err.get('msg')}"
    # Pydantic names only the bound that was crossed; a reader fixing the value wants both.
    info = fields.get(loc[0]) if len(loc) == 1 else None
    allowed = allowed_range(info) if info is not None else None
    return f"{text} (allowed: {allowed})" if allowed and err.get("type", "").startswith(("greater", "less")) else text


def build_params(params_type: type[MethodParams], values: Mapping[str, Any], *, method: str) -> MethodParams:
    known = params_type.model_fields
    unknown = [key for key in values if key not in known]
    if unknown:
        listing = ", ".join(sorted(known)) or "(none)"
        raise ParamError(
            f"unknown parameter{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
            f"for method '{method}'. Its parameters are: {listing}"
        )
    try:
        return params_type.model_validate(dict(values))
    except ValidationError as exc:
        problems = [_problem(err, known) for err in exc.errors()]
        raise ParamError(
            f"bad parameter value for method '{method}': " + "; ".join(problems), errors=exc.errors()
        ) from exc


def errors_by_field(
    params_type: type[MethodParams], values: Mapping[str, Any]
) -> dict[str | None, list[dict[str, Any]]]:
    """Pydantic's errors for these values, by the field each is about, so a form can say each under
    its own field as soon as it is entered: a field's own error under its name; a check across
    fields (a model validator: no `loc`) under the last field its message names, in the model's
    order, where the reader has seen every field it is about; under None when it names none.
    Empty when the values are valid."""
    try:
        params_type.model_validate(dict(values))
    except ValidationError as exc:
        errors = exc.errors()
    else:
        return {}
    fields = list(params_type.model_fields)
    by_field: dict[str | None, list[dict[str, Any]]] = {}
    for error in errors:
        loc = error.get("loc") or ()
        if loc:
            name = str(loc[0]) if str(loc[0]) in params_type.model_fields else None
        else:
            named = [f for f in fields if re.search(rf"\b{re.escape(f)}\b", str(error.get("msg", "")))]
            name = named[-1] if named else None
        by_field.setdefault(name, []).append(dict(error))
    return by_field


PROFILES = ("quick", "paper")


def profile_for_llm(kind: str) -> str:
    """The default profile: quick on the built-in CPU model, the paper's values elsewhere."""
    return "quick" if kind == "local" else "paper"


def _profile_overrides(params_type: type[MethodParams], profile: str) -> dict[str, Any]:
    if profile not in PROFILES:
        raise ParamError(f"unknown profile '{profile}'; choose one of: {', '.join(PROFILES)}")
    return dict(params_type.quick_profile) if profile == "quick" else {}


def profile_defaults(params_type: type[MethodParams], profile: str) -> dict[str, Any]:
    """Every parameter's default under a profile (the paper's values, or the quick profile's)."""
    defaults = {name: info.default for name, info in params_type.model_fields.items()}
    return {**defaults, **_profile_overrides(params_type, profile)}


def build_params_with_profile(
    params_type: type[MethodParams], values: Mapping[str, Any], *, method: str, profile: str
) -> MethodParams:
    """The user's values over the profile's defaults (values the user gives always win)."""
    return build_params(params_type, {**_profile_overrides(params_type, profile), **values}, method=method)
