"""Helpers for the pydantic models of LLM outputs."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator


def at_most(n: int) -> BeforeValidator:
    """Keep the first `n` items of a list answer. A model that gives more items than asked is cut,
    not re-asked (the JSON schema still tells it the limit): extra items are no reason to fail."""
    return BeforeValidator(lambda value: value[:n] if isinstance(value, list) else value)


def capped(item_type: Any, n: int) -> Any:
    """`list[item_type]` that keeps at most `n` items."""
    return Annotated[list[item_type], at_most(n)]
