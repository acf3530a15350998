"""The cost estimate before Start: one caption under a method's parameter form, "About N LLM calls
(low-high), ~T tokens (≈$C on MODEL)", counted by the method's own formula (`Method.estimate`) from
the values on the form, so it follows every change. The words are `engine/evaluate/estimate.py`'s;
the how (nodes, layers, sections) is its help."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st

from engine.evaluate.estimate import estimate_line
from engine.llm.pricing import PriceTable
from engine.methods.base import Method
from engine.methods.params import ParamError, build_params
from engine.safe_text import inline_text


def cost_estimate(method: type[Method], raw: Mapping[str, Any], *, model: str, prices: PriceTable) -> None:
    """Show the estimate for the form's values; a value the parameters refuse gets no estimate (Start
    says what is wrong with it)."""
    try:
        params = build_params(method.Params, raw, method=method.name)
    except ParamError:
        st.caption("No cost estimate: a parameter value is not valid (said under its field).")
        return
    estimate = method.estimate(params)
    if estimate is None:
        st.caption("No cost estimate: this method declares no formula for its calls.")
        return
    # Markdown-safe: the model name is the user's setting.
    st.caption(
        inline_text(estimate_line(estimate, prices=prices, model=model)),
        help=f"Counted from the parameters: {estimate.how}. Tokens are per-call averages; "
        "a run's own totals are shown while it runs.",
    )
