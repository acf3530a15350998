"""Several methods chosen at once, each with its parameter form, and one budget: the Evaluate page
and the Compare page ask for the same things, in the same words."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from components.cost_estimate import cost_estimate
from components.params_form import params_form
from engine.evaluate.estimate import NoEstimate, benchmark_estimate
from engine.methods.params import ParamError, build_params, profile_defaults
from engine.safe_text import inline_text
from engine.services import Services


@dataclass
class MethodChoice:
    methods: list[str]
    values: dict[str, dict[str, Any]]  # each method's raw form values
    max_cost: float | None
    max_tokens: int | None


def choose_methods(
    services: Services,
    *,
    key: str,
    profile: str,
    model: str,
    default: list[str],
    max_selections: int | None = None,
    help_text: str | None = None,
    items: int | None = None,
) -> MethodChoice:
    """A multiselect of the methods this process serves, a parameter form per chosen method (the
    profile's defaults) with its cost estimate, and the budget (empty: no limit). With `items` (a
    benchmark), the estimate of the whole benchmark is shown too."""
    methods = services.methods
    chosen = st.multiselect(
        "Methods",
        list(methods),
        default=[m for m in default if m in methods],
        format_func=lambda n: methods[n].title,
        key=f"{key}-methods",
        max_selections=max_selections,
        help=help_text,
    )
    values: dict[str, dict[str, Any]] = {}
    for method in chosen:
        params_type = methods[method].Params
        quick = profile == "quick" and bool(params_type.quick_profile)
        with st.expander(f"Parameters of {methods[method].title}" + (" (quick profile)" if quick else "")):
            st.caption(methods[method].summary)
            # Separate widget keys per profile, as on Explore: another LLM shows that profile's defaults.
            values[method] = params_form(
                params_type, key=f"{key}-params-{method}-{profile}", defaults=profile_defaults(params_type, profile)
            )
            cost_estimate(methods[method], values[method], model=model, prices=services.prices)
    if items and chosen:
        _benchmark_estimate(services, values, items=items, model=model)
    cols = st.columns(2)
    max_cost = cols[0].number_input(
        "Max cost ($)",
        value=None,
        step=0.01,
        format="%.4f",
        key=f"{key}-max-cost",
        placeholder="no limit",
        help="Stop starting work once this much was spent. Empty: no limit.",
    )
    max_tokens = cols[1].number_input(
        "Max tokens",
        value=None,
        step=1000,
        key=f"{key}-max-tokens",
        placeholder="no limit",
        help="Prompt and completion tokens. Empty: no limit.",
    )
    # No bounds in the widgets (Streamlit would keep the last valid value of a bad entry): the
    # pages refuse a bad budget with the reason (engine.evaluate.compare.budget_problem).
    return MethodChoice(
        chosen, values, None if max_cost is None else float(max_cost), None if max_tokens is None else int(max_tokens)
    )


def _benchmark_estimate(services: Services, values: dict[str, dict[str, Any]], *, items: int, model: str) -> None:
    """The whole benchmark's expected calls, tokens and cost, before Start."""
    try:
        params = {m: build_params(services.methods[m].Params, raw, method=m) for m, raw in values.items()}
        estimate = benchmark_estimate(services.methods, params, items)
    except ParamError:
        st.caption("No cost estimate: a parameter value is not valid (said under its field).")
        return
    except NoEstimate as exc:
        st.caption(inline_text(f"No cost estimate: {exc}."))
        return
    st.caption(inline_text("Estimate: " + estimate.line(prices=services.prices, model=model)))
