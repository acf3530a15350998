"""A comparison: one question, several methods, the same budget, LLM and search for each.

A comparison is nothing but its runs: each is an ordinary stored run, and the comparison is the list
of their ids (the app keeps it in its URL, `?runs=a,b,c`), so it can be reopened later without a
table of its own. Everything is checked before the first run is stored: a bad question, method or
parameter stores nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from engine.methods.params import ParamError, build_params_with_profile
from engine.methods.registry import UnknownMethod
from engine.questions import QuestionError, clean_question

MIN_COMPARED = 2
MAX_COMPARED = 3  # side by side, each map must stay readable at 1400 px
_RUN_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class ComparisonError(ValueError):
    """Bad comparison input: says what to change. Nothing was stored."""


def parse_run_ids(text: str | None) -> list[str]:
    """The run ids of a `runs` query parameter ("a,b,c"), in order, each once; anything that cannot be
    a run id is left out (the URL is typed by people and shared)."""
    seen: dict[str, None] = {}
    for part in (text or "").split(","):
        part = part.strip()
        if _RUN_ID.match(part):
            seen.setdefault(part, None)
    return list(seen)[:MAX_COMPARED]


def budget_problem(max_cost: float | None, max_tokens: int | None) -> str | None:
    """What is wrong with a budget typed in the app (None: nothing). Empty means no limit."""
    for name, value in (("Max cost", max_cost), ("Max tokens", max_tokens)):
        if value is not None and not (math.isfinite(value) and value > 0):
            return f"{name} must be more than 0 (got {value}); leave it empty for no limit"
    return None


def start_comparison(services, *, question: str, methods: list[str], values: Mapping[str, Mapping[str, Any]],
                     llm_kind: str, profile: str, search_mode: str, max_cost: float | None = None,
                     max_tokens: int | None = None) -> list[str]:
    """Create one run per method on the same question with the same budget, LLM and search, then
    start them all; returns the run ids in the order of `methods`. `values` holds each method's raw
    parameter values (a form's), validated over the profile's defaults."""
    if not MIN_COMPARED <= len(methods) <= MAX_COMPARED:
        raise ComparisonError(f"choose {MIN_COMPARED} or {MAX_COMPARED} methods to compare (got {len(methods)})")
    if len(set(methods)) != len(methods):
        raise ComparisonError("a method is chosen twice: choose different methods")
    problem = budget_problem(max_cost, max_tokens)
    if problem:
        raise ComparisonError(problem)
    try:
        question = clean_question(question)
        params = {m: build_params_with_profile(services.method(m).Params, values.get(m, {}), method=m,
                                               profile=profile) for m in methods}
    except (QuestionError, ParamError, UnknownMethod) as exc:
        raise ComparisonError(str(exc)) from exc
    llm_info = services.llm_info(llm_kind)
    runs = [services.runner.create_run(question=question, method=m, params=params[m], llm_info=llm_info,
                                       search_mode=search_mode, max_cost=max_cost, max_tokens=max_tokens)
            for m in methods]
    # Started together, after all are stored: none gets a head start on the shared LLM limit.
    for run in runs:
        services.runner.start(run.id)
    return [run.id for run in runs]


__all__ = ["MAX_COMPARED", "MIN_COMPARED", "ComparisonError", "budget_problem", "parse_run_ids", "start_comparison"]
