"""Several methods chosen at once, each with its parameter form, and one budget: the Evaluate page
and the Compare page ask for the same things, in the same words."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from components.params_form import params_form
from engine.methods.params import profile_defaults
from engine.services import Services

# Where the per-method cost estimate goes once it lands (issue 13: "Cost before you start"):
# until then the pages say so rather than show a number nobody computed.
ESTIMATE_PENDING = ("Cost estimate before Start: not available yet (the per-method estimate is still being "
                    "built). The budget below is what stops the work.")


@dataclass
class MethodChoice:
    methods: list[str]
    values: dict[str, dict[str, Any]]  # each method's raw form values
    max_cost: float | None
    max_tokens: int | None


def choose_methods(services: Services, *, key: str, profile: str, default: list[str],
                   max_selections: int | None = None, help_text: str | None = None) -> MethodChoice:
    """A multiselect of the methods this process serves, a parameter form per chosen method (the
    profile's defaults), and the budget (empty: no limit)."""
    methods = services.methods
    chosen = st.multiselect("Methods", list(methods), default=[m for m in default if m in methods],
                            format_func=lambda n: methods[n].title, key=f"{key}-methods",
                            max_selections=max_selections, help=help_text)
    values: dict[str, dict[str, Any]] = {}
    for method in chosen:
        params_type = methods[method].Params
        quick = profile == "quick" and bool(params_type.quick_profile)
        with st.expander(f"Parameters of {methods[method].title}" + (" (quick profile)" if quick else "")):
            st.caption(methods[method].summary)
            # Separate widget keys per profile, as on Explore: another LLM shows that profile's defaults.
            values[method] = params_form(params_type, key=f"{key}-params-{method}-{profile}",
                                         defaults=profile_defaults(params_type, profile))
    cols = st.columns(2)
    max_cost = cols[0].number_input("Max cost ($)", value=None, step=0.01, format="%.4f",
                                    key=f"{key}-max-cost", placeholder="no limit",
                                    help="Stop starting work once this much was spent. Empty: no limit.")
    max_tokens = cols[1].number_input("Max tokens", value=None, step=1000, key=f"{key}-max-tokens",
                                      placeholder="no limit", help="Prompt and completion tokens. Empty: no limit.")
    # No bounds in the widgets (Streamlit would keep the last valid value of a bad entry): the
    # pages refuse a bad budget with the reason (engine.evaluate.compare.budget_problem).
    st.caption(ESTIMATE_PENDING)
    return MethodChoice(chosen, values, None if max_cost is None else float(max_cost),
                        None if max_tokens is None else int(max_tokens))
