"""A comparison: one question, several methods, the same budget, LLM and search for each.

A comparison is nothing but its runs: each is an ordinary stored run, and the comparison is the list
of their ids (the app keeps it in its URL, `?runs=a,b,c`), so it can be reopened later without a
table of its own. Everything is checked before the first run is stored: a bad question, method or
parameter stores nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engine.evaluate.judges import PairwiseResult, get_protocol, judge_and_store
from engine.evaluate.run_report import JudgeInputError, load_judged_run
from engine.llm.counted import EvalLLM, EvalUsage
from engine.methods.params import ParamError, build_params_with_profile
from engine.methods.registry import UnknownMethod
from engine.questions import QuestionError, clean_question
from storage.models import Run
from storage.statuses import RunStatus

if TYPE_CHECKING:  # only for annotations: engine.services loads the whole engine
    from engine.services import Services

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


def comparable_runs(runs: Sequence[Run]) -> dict[str, list[Run]]:
    """Stored runs that can be put side by side: grouped by their question (as stored, so asked the
    same way), only questions two runs or more answered; the group of the newest run first, each
    group newest first (as `runs` come from `Repository.list_runs`)."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.question, []).append(run)
    return {question: group for question, group in groups.items() if len(group) >= MIN_COMPARED}


def default_pick(runs: Sequence[Run]) -> list[str]:
    """The runs to preselect among one question's (newest first): a comparison is about methods, so
    the newest done run of each method (else its newest), up to MAX_COMPARED; topped up to
    MIN_COMPARED with the newest others when fewer methods answered it (one method run twice)."""
    ordered = sorted(runs, key=lambda r: r.status != RunStatus.DONE)  # stable: newest first within
    picked: dict[str, str] = {}
    for run in ordered:
        picked.setdefault(run.method, run.id)
    chosen = list(picked.values())[:MAX_COMPARED]
    for run in ordered:
        if len(chosen) >= MIN_COMPARED:
            break
        if run.id not in chosen:
            chosen.append(run.id)
    return chosen


def setup_differences(runs: Sequence[Run]) -> list[str]:
    """What differs among runs put side by side besides their method: the model, the search, the
    budget (each as a reader's phrase); empty when they ran alike."""
    differences = []
    for name, value in (
        ("question", lambda r: r.question),
        ("model", lambda r: (r.llm_info or {}).get("model") or (r.llm_info or {}).get("kind")),
        ("search", lambda r: r.search_mode),
        ("budget", lambda r: (r.max_tokens, r.max_cost)),
    ):
        if len({repr(value(run)) for run in runs}) > 1:
            differences.append(name)
    return differences


def budget_problem(max_cost: float | None, max_tokens: int | None) -> str | None:
    """What is wrong with a budget typed in the app (None: nothing). Empty means no limit."""
    for name, value in (("Max cost", max_cost), ("Max tokens", max_tokens)):
        if value is not None and not (math.isfinite(value) and value > 0):
            return f"{name} must be more than 0 (got {value}); leave it empty for no limit"
    return None


def start_comparison(
    services: Services,
    *,
    question: str,
    methods: list[str],
    values: Mapping[str, Mapping[str, Any]],
    llm_kind: str,
    profile: str,
    search_mode: str,
    max_cost: float | None = None,
    user_id: int | None = None,
    llm_info: Mapping[str, Any] | None = None,
    max_tokens: int | None = None,
) -> list[str]:
    """Create one run per method on the same question with the same budget, LLM and search, then
    start them all; returns the run ids in the order of `methods`. `values` holds each method's raw
    parameter values (a form's), validated over the profile's defaults. `llm_info`: what the runs
    record as their model when it is not the process's LLM of `llm_kind` (a person's own endpoint)."""
    if not MIN_COMPARED <= len(methods) <= MAX_COMPARED:
        raise ComparisonError(f"choose {MIN_COMPARED} or {MAX_COMPARED} methods to compare (got {len(methods)})")
    if len(set(methods)) != len(methods):
        raise ComparisonError("a method is chosen twice: choose different methods")
    problem = budget_problem(max_cost, max_tokens)
    if problem:
        raise ComparisonError(problem)
    try:
        question = clean_question(question)
        params = {
            m: build_params_with_profile(services.method(m).Params, values.get(m, {}), method=m, profile=profile)
            for m in methods
        }
    except (QuestionError, ParamError, UnknownMethod) as exc:
        raise ComparisonError(str(exc)) from exc
    llm_info = dict(llm_info) if llm_info is not None else services.llm_info(llm_kind)
    runs = [
        services.runner.create_run(
            question=question,
            method=m,
            params=params[m],
            llm_info=llm_info,
            search_mode=search_mode,
            max_cost=max_cost,
            max_tokens=max_tokens,
            user_id=user_id,
        )
        for m in methods
    ]
    # The person's limit on active runs, counted with these stored (LimitReached deletes them).
    services.access.admit_new_runs(user_id, [run.id for run in runs])
    # Started together, after all are stored: none gets a head start on the shared LLM limit.
    for run in runs:
        services.runner.start(run.id)
    return [run.id for run in runs]


def judge_compared(services: Services, run_a: str, run_b: str, *, protocol: str, llm_kind: str) -> PairwiseResult:
    """The pairwise judge (both orders) on two compared runs, stored as a judgment. A run without a
    final report raises JudgeInputError saying what to do; an LLM failure propagates (LLMError)."""
    judged = [load_judged_run(services.repo, run_a), load_judged_run(services.repo, run_b)]
    store = services.benchmarks.store
    llm = EvalLLM(services.llm(llm_kind), services.prices, EvalUsage())
    return judge_and_store(store, llm, get_protocol(protocol), judged[0].question, *judged)


def latest_verdict(
    services: Services, run_a: str, run_b: str, *, protocol: str
) -> tuple[PairwiseResult, object] | None:
    """The pair's latest stored pairwise verdict of `protocol` (in either order, given as A = run_a)
    with its judgment row (model, usage), or None."""
    wanted = get_protocol(protocol).judgment_protocol
    for row in reversed(services.benchmarks.store.list_judgments(run_id=run_a, protocol=wanted)):
        if {row.run_a, row.run_b} == {run_a, run_b}:
            result = PairwiseResult.model_validate(row.verdict)
            return (result if row.run_a == run_a else swapped(result)), row
    return None


def swapped(result: PairwiseResult) -> PairwiseResult:
    """The same verdict with A and B exchanged (so the page's A is always the pair's first run)."""
    flip = {"a": "b", "b": "a"}
    data = result.model_dump(exclude={"valid"})
    data["run_a"], data["run_b"] = result.run_b, result.run_a
    for round_ in data["rounds"]:
        round_["order"] = "ba" if round_["order"] == "ab" else "ab"
        for verdict in round_["criteria"].values():
            verdict["winner"] = flip.get(verdict["winner"], verdict["winner"])
    for combined in data["criteria"].values():
        combined["winner"] = flip.get(combined["winner"], combined["winner"])
        combined["a_points"], combined["b_points"] = combined["b_points"], combined["a_points"]
    return PairwiseResult.model_validate(data)


__all__ = [
    "JudgeInputError",
    "judge_compared",
    "latest_verdict",
    "swapped",
    "MAX_COMPARED",
    "MIN_COMPARED",
    "ComparisonError",
    "budget_problem",
    "parse_run_ids",
    "start_comparison",
]
