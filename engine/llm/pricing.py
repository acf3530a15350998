"""What LLM calls cost: dollars per million input/output tokens, per model.

A small built-in table covers common OpenAI models; `THOUGHTMAP_PRICES` may point at a JSON file
`{"model": {"input": 0.15, "output": 0.60}}` whose entries are merged over it (to fix a price or
add a hosted model). Models that are not listed (local models) cost 0.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType


@dataclass(frozen=True)
class ModelPrice:
    """Dollars per one million tokens."""

    input: float
    output: float


# Read-only on purpose: a table is built from it, never changed in place.
DEFAULT_PRICES: Mapping[str, ModelPrice] = MappingProxyType(
    {
        "gpt-4o-mini": ModelPrice(0.15, 0.60),
        "gpt-4o": ModelPrice(2.50, 10.00),
        "gpt-4.1": ModelPrice(2.00, 8.00),
        "gpt-4.1-mini": ModelPrice(0.40, 1.60),
        "gpt-4.1-nano": ModelPrice(0.10, 0.40),
        "o3-mini": ModelPrice(1.10, 4.40),
        "o4-mini": ModelPrice(1.10, 4.40),
    }
)

_TOKENS_PER_UNIT = 1_000_000


class PriceFileError(ValueError):
    """The prices file is missing, not JSON, or not shaped like {"model": {"input", "output"}}."""


class PriceTable:
    """Looks up a model's price and computes the cost of a call.

    Matching is case-insensitive and tolerates suffixes: "gpt-4o-mini-2024-07-18" is priced as
    "gpt-4o-mini" (the longest listed name that prefixes it, at a '-', ':' or '@' boundary) and a
    provider prefix such as "openai/gpt-4o" is ignored when the full name is not listed.
    """

    def __init__(self, prices: Mapping[str, ModelPrice] | None = None) -> None:
        source = DEFAULT_PRICES if prices is None else prices
        self._prices = {name.strip().lower(): price for name, price in source.items()}

    @classmethod
    def default(cls) -> PriceTable:
        return cls()

    @classmethod
    def from_file(cls, path: str | Path) -> PriceTable:
        """The defaults with the file's entries merged over them."""
        path = Path(path)
        try:
            raw = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise PriceFileError(f"cannot read the prices file {path}: {exc.strerror or exc}") from exc
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise PriceFileError(
                f"the prices file {path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
            ) from exc
        merged = dict(DEFAULT_PRICES)
        merged.update(_parse_prices(data, path))
        return cls(merged)

    @property
    def models(self) -> list[str]:
        return sorted(self._prices)

    def price_for(self, model: str) -> ModelPrice | None:
        name = model.strip().lower()
        price = self._match(name)
        if price is None and "/" in name:
            price = self._match(name.rsplit("/", 1)[1])
        return price

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float:
        """Dollars for one call; 0.0 for models that are not in the table."""
        price = self.price_for(model)
        if price is None:
            return 0.0
        return (prompt_tokens * price.input + completion_tokens * price.output) / _TOKENS_PER_UNIT

    def _match(self, name: str) -> ModelPrice | None:
        if name in self._prices:
            return self._prices[name]
        best: str | None = None
        for listed in self._prices:
            if name.startswith(listed) and name[len(listed)] in "-:@" and (best is None or len(listed) > len(best)):
                best = listed
        return self._prices[best] if best is not None else None


def _parse_prices(data: object, path: Path) -> dict[str, ModelPrice]:
    if not isinstance(data, dict):
        raise PriceFileError(f'the prices file {path} must hold a JSON object {{"model": {{"input": x, "output": y}}}}')
    prices: dict[str, ModelPrice] = {}
    for model, entry in data.items():
        if not isinstance(entry, dict) or not {"input", "output"} <= entry.keys():
            raise PriceFileError(
                f'the prices file {path}: "{model}" needs {{"input": x, "output": y}} (dollars per 1M tokens)'
            )
        values = []
        for key in ("input", "output"):
            value = entry[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise PriceFileError(f'the prices file {path}: "{model}".{key} must be a number')
            if value < 0 or not math.isfinite(value):
                raise PriceFileError(f'the prices file {path}: "{model}".{key} must be a finite number >= 0')
            values.append(float(value))
        prices[str(model)] = ModelPrice(*values)
    return prices
