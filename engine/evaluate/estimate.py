"""A cost estimate in money and in words, for one run (Explore, before Start) and for a benchmark
(items × methods, the Evaluate page before Start). Pure: the methods' formulas give the calls and
tokens (`Method.estimate`, `engine/methods/estimate.py`), the price table the dollars."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.llm.pricing import PriceTable
from engine.methods.base import Method, MethodParams
from engine.methods.estimate import CostEstimate
from engine.safe_text import one_line


def price(estimate: CostEstimate, prices: PriceTable, model: str) -> float | None:
    """Dollars for the estimated tokens on `model`; None when the table has no price for it (a
    local model, or a hosted one nobody listed: its runs are recorded at $0)."""
    if prices.price_for(model) is None:
        return None
    return prices.cost(model, estimate.prompt_tokens, estimate.completion_tokens)


def total(estimates: Iterable[CostEstimate], how: str = "") -> CostEstimate:
    """Several runs' estimates added up (their call groups are not kept)."""
    chosen = list(estimates)
    return CostEstimate(
        calls=sum(e.calls for e in chosen),
        low=sum(e.low for e in chosen),
        high=sum(e.high for e in chosen),
        prompt_tokens=sum(e.prompt_tokens for e in chosen),
        completion_tokens=sum(e.completion_tokens for e in chosen),
        how=how,
    )


def tokens_text(tokens: int) -> str:
    """12,345 -> "12k"; 1,234,567 -> "1.2M"."""
    if tokens >= 1_000_000:
        return f"{tokens / 1_000_000:.1f}M"
    if tokens >= 10_000:
        return f"{tokens / 1000:.0f}k"
    if tokens >= 1000:
        return f"{tokens / 1000:.1f}k"
    return str(tokens)


def money_text(dollars: float) -> str:
    return "<$0.01" if 0 < dollars < 0.01 else f"${dollars:,.2f}"


def calls_text(calls: int) -> str:
    return f"{calls:,} LLM call{'' if calls == 1 else 's'}"


def estimate_line(estimate: CostEstimate, *, prices: PriceTable, model: str) -> str:
    """ "About 92 LLM calls (7-185), ~125k tokens (≈$0.03 on gpt-4o-mini)": one line, plain text
    (the model name is the user's setting, so it is made one safe line)."""
    calls = f"About {calls_text(estimate.calls)}"
    if estimate.low != estimate.high:
        calls += f" ({estimate.low:,}-{estimate.high:,})"
    name = one_line(model)[:80]
    dollars = price(estimate, prices, model)
    money = f"≈{money_text(dollars)} on {name}" if dollars is not None else f"no price listed for {name}"
    return f"{calls}, ~{tokens_text(estimate.tokens)} tokens ({money})"


@dataclass(frozen=True)
class BenchmarkEstimate:
    """What a benchmark of `items` questions × the chosen methods is expected to cost."""

    items: int
    per_item: Mapping[str, CostEstimate]  # method name -> one run's estimate

    @property
    def total(self) -> CostEstimate:
        return total(
            (e.times(self.items) for e in self.per_item.values()),
            how=f"{self.items} items × {len(self.per_item)} methods",
        )

    def line(self, *, prices: PriceTable, model: str) -> str:
        """The Evaluate page's line before Start: the whole benchmark, then each method per item."""
        whole = estimate_line(self.total, prices=prices, model=model)
        each = "; ".join(f"{name}: ~{calls_text(e.calls)} per item" for name, e in self.per_item.items())
        return f"{self.items} items × {len(self.per_item)} methods: {whole[0].lower()}{whole[1:]}. {each}"


class NoEstimate(ValueError):
    """A chosen method declares no cost formula; the message names it."""


def benchmark_estimate(
    methods: Mapping[str, type[Method[Any]]], params: Mapping[str, MethodParams], items: int
) -> BenchmarkEstimate:
    """The estimate of running each method in `params` (name -> its validated parameters) on
    `items` questions. Raises NoEstimate naming a method without a formula."""
    per_item: dict[str, CostEstimate] = {}
    for name, chosen in params.items():
        estimate = methods[name].estimate(chosen)
        if estimate is None:
            raise NoEstimate(
                f"the method '{name}' declares no cost formula (Method.estimate), so the "
                "benchmark's cost cannot be estimated; its runs are still counted as they go"
            )
        per_item[name] = estimate
    return BenchmarkEstimate(items=items, per_item=per_item)
