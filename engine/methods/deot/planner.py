"""The Planner: task decomposition (1-3 tasks) and Plan Validation (completeness, non-redundancy,
format), regenerating the plan with the feedback, a bounded number of times (paper 3.4.1)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from engine.methods.base import RunContext
from engine.methods.deot import prompts
from engine.methods.deot.params import DeotParams
from engine.methods.deot.schemas import PlanReview, plan_model
from engine.methods.deot.toolbox import SEARCH_TOOLS

# Up to three tasks of a few fields each; a cap, so a small model looping in a list stops early.
PLAN_MAX_TOKENS = 600


@dataclass
class PlanOutcome:
    tasks: list[dict[str, Any]]
    accepted: bool
    attempts: list[dict[str, Any]] = field(default_factory=list)


def format_problems(tasks: list[dict[str, Any]], enabled_tools: list[str]) -> list[str]:
    """The format-correctness check, done in code: ids, tools, inputs, dependencies, cycles."""
    problems: list[str] = []
    ids = [str(t.get("id", "")).strip() for t in tasks]
    if not 1 <= len(tasks) <= 3:
        problems.append(f"the plan has {len(tasks)} tasks; it must have 1 to 3")
    for task_id in {i for i in ids if ids.count(i) > 1}:
        problems.append(f"task id '{task_id}' is used more than once; ids must be unique")
    for task, task_id in zip(tasks, ids, strict=True):
        if not task_id:
            problems.append("a task has an empty id")
        if task.get("tool") not in enabled_tools:
            problems.append(f"task {task_id} uses '{task.get('tool')}', which is not an available agent")
        if not str(task.get("input", "")).strip():
            problems.append(f"task {task_id} has an empty input")
        earlier = next((t for t in tasks[: tasks.index(task)] if _task_key(t) == _task_key(task)), None)
        if earlier is not None:
            problems.append(f"task {task_id} repeats task {earlier.get('id')} (same agent and input)")
        for dep in task.get("depends_on", []):
            if dep == task_id:
                problems.append(f"task {task_id} depends on itself")
            elif dep not in ids:
                problems.append(f"task {task_id} depends on '{dep}', which is not a task of this plan")
    if not problems and _has_cycle(tasks):
        problems.append("the dependencies form a cycle; a task cannot (indirectly) depend on itself")
    return problems


def _has_cycle(tasks: list[dict[str, Any]]) -> bool:
    deps = {t["id"]: list(t.get("depends_on", [])) for t in tasks}
    state: dict[str, int] = {}

    def visit(task_id: str) -> bool:
        if state.get(task_id) == 1:
            return True
        if state.get(task_id) == 2:
            return False
        state[task_id] = 1
        if any(visit(dep) for dep in deps.get(task_id, []) if dep in deps):
            return True
        state[task_id] = 2
        return False

    return any(visit(task_id) for task_id in deps)


def _task_key(task: dict[str, Any]) -> tuple[str, str]:
    return str(task.get("tool", "")), " ".join(str(task.get("input", "")).lower().split())


def repair(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Last resort after the attempts are used up: drop tasks that repeat an earlier one (same tool
    and input: small models do this) and dependencies that cannot be honoured, so the node still
    runs rather than failing on a formality (recorded as not accepted)."""
    ids: list[str] = []
    repaired = []
    seen: set[tuple[str, str]] = set()
    for index, task in enumerate(tasks[:3], start=1):
        task = dict(task)
        if _task_key(task) in seen:
            continue
        seen.add(_task_key(task))
        if not str(task.get("id", "")).strip() or task["id"] in ids:
            task["id"] = f"task{index}"
        # Only dependencies on earlier tasks survive: that cannot form a cycle.
        task["depends_on"] = [d for d in task.get("depends_on", []) if d in ids]
        ids.append(task["id"])
        repaired.append(task)
    return repaired


def _render_plan(tasks: list[dict[str, Any]]) -> str:
    lines = []
    for t in tasks:
        deps = ", ".join(t.get("depends_on", [])) or "none"
        lines.append(f"- {t['id']} [{t['tool']}] {t['description']} | input: {t['input']} | depends on: {deps}")
    return "\n".join(lines)


def _feedback(record: dict[str, Any]) -> str:
    """What a rejected attempt is told to fix: its format problems, else the validator's points."""
    if record["format_problems"]:
        return "Format problems:\n" + "\n".join(f"- {p}" for p in record["format_problems"])
    review = record["review"]
    issues = review["completeness_issues"] + review["redundancy_issues"]
    return "\n".join(f"- {i}" for i in issues) + (f"\n{review['feedback']}" if review["feedback"] else "")


def search_task(query: str, tools: list[str], max_results: int) -> dict[str, Any]:
    """The plan without the planner (`llm_planner` off): one search of the node's question, with the
    first search tool on (Information Search when it is), the plan a small model nearly always writes."""
    tool = next((t for t in ("info_search", "news_search") if t in tools), tools[0])
    return {
        "id": "task1",
        "tool": tool,
        "description": "Find what the sources say about the question.",
        "input": query,
        "max_results": max_results,
        "reason": "one search of the question itself (the planner is off: llm_planner)",
        "depends_on": [],
    }


def make_plan(
    ctx: RunContext[DeotParams],
    node_id: int | None,
    query: str,
    context: str,
    *,
    earlier: list[dict[str, Any]] | None = None,
    on_attempt: Callable[[list[dict[str, Any]]], None] | None = None,
) -> PlanOutcome:
    """Plan, check the format, have the plan validated; revise with the feedback until a plan is
    approved or the attempts are used up.

    `earlier` are the attempts an interrupted planning of this query stored (see `on_attempt`,
    called with all attempts after each planner and validator answer): planning goes on from the
    last of them, so no answer already given is asked for again."""
    params = ctx.params
    tools = params.enabled_tools()
    if not params.llm_planner:
        return PlanOutcome(tasks=[search_task(query, tools, params.search_results)], accepted=True)
    TaskPlan = plan_model(tools)
    common = {
        "today": ctx.today.isoformat(),
        "tool_descriptions": "\n".join(f"- {prompts.TOOL_DESCRIPTIONS[t]}" for t in tools),
        "max_results": params.search_results,
        "query": query,
        "context": context,
    }
    attempts = [dict(record) for record in earlier or []]
    while True:
        last = attempts[-1] if attempts else None
        if last is not None and "verdict" not in last:
            # Drafted with a correct format, not reviewed yet.
            if params.validate_plans:
                # The plan's searches are embedded while the model reviews it (`embed_ahead`).
                searches = [task["input"] for task in last["tasks"] if task["tool"] in SEARCH_TOOLS]
                ask = partial(
                    ctx.llm.ask,
                    prompts.VALIDATE_PLAN.render(query=query, plan=_render_plan(last["tasks"])),
                    PlanReview,
                    purpose="validator",
                    node_id=node_id,
                )
                review: PlanReview = ctx.parallel([ask, partial(ctx.embed_ahead, searches)])[0] if searches else ask()
                last["review"] = review.model_dump()
                last["verdict"] = review.verdict
            else:
                # Plan Validation switched off (quick profile): the format check in code is the gate.
                last["verdict"] = "approve"
            # An approved plan is stored with its attempts by the caller at once (no LLM call in
            # between): only a rejected one needs its own write.
            if on_attempt and last["verdict"] != "approve":
                on_attempt(attempts)
        if last is not None and last["verdict"] == "approve":
            return PlanOutcome(tasks=last["tasks"], accepted=True, attempts=attempts)
        if last is not None and len(attempts) >= params.max_plan_attempts:
            return PlanOutcome(tasks=repair(last["tasks"]), accepted=False, attempts=attempts)
        if last is None:
            messages = prompts.PLAN_TASKS.render(**common)
        else:
            messages = prompts.REVISE_PLAN.render(
                **common, previous_plan=_render_plan(last["tasks"]), feedback=_feedback(last)
            )
        plan = ctx.llm.ask(messages, TaskPlan, purpose="planner", node_id=node_id, max_tokens=PLAN_MAX_TOKENS)
        tasks = [t.model_dump() for t in plan.tasks]
        for task in tasks:
            task["max_results"] = min(task.get("max_results", 3), params.search_results)
        problems = format_problems(tasks, tools)
        record: dict[str, Any] = {"tasks": tasks, "format_problems": problems}
        if problems:
            record["verdict"] = "revise"
        attempts.append(record)
        if on_attempt and (problems or params.validate_plans):  # otherwise approved at once, below
            on_attempt(attempts)


def resumable_attempts(stored: Any) -> list[dict[str, Any]]:
    """Stored planning attempts that planning can go on from, or none if they are not whole: every
    attempt but the last rejected, the last one rejected, approved or waiting for its review."""
    if not isinstance(stored, list):
        return []
    for index, record in enumerate(stored):
        last = index == len(stored) - 1
        if (
            not isinstance(record, dict)
            or not isinstance(record.get("tasks"), list)
            or not all(
                isinstance(t, dict)
                and isinstance(t.get("id"), str)
                and isinstance(t.get("tool"), str)
                and isinstance(t.get("input"), str)
                for t in record["tasks"]
            )
            or not isinstance(record.get("format_problems"), list)
        ):
            return []
        verdict = record.get("verdict")
        if verdict is None and not (last and not record["format_problems"]):
            return []
        if verdict is not None and verdict not in (("revise", "approve") if last else ("revise",)):
            return []
        if verdict == "revise" and not record["format_problems"] and not _whole_review(record.get("review")):
            return []
    return list(stored)


def _whole_review(review: Any) -> bool:
    return (
        isinstance(review, dict)
        and isinstance(review.get("feedback"), str)
        and all(
            isinstance(review.get(k), list) and all(isinstance(i, str) for i in review[k])
            for k in ("completeness_issues", "redundancy_issues")
        )
    )
