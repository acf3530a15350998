"""The Executor (paper 3.4.2): runs a plan's tasks in dependency order, independent tasks
concurrently on the run's shared pool, logging start/success/failure; a failed task only stops the
tasks that need it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any, cast

from engine.llm.protocol import (
    LLMRequestError,
    LLMServerError,
    LLMTimeoutError,
    StructuredOutputError,
)
from engine.methods.base import RunContext
from engine.methods.deot.params import DeotParams
from engine.methods.deot.toolbox import (
    SEARCH_TOOLS,
    TOOLS,
    NodeSources,
    SearchTurns,
    TaskResult,
    ToolCall,
)
from engine.parallel import run_parallel_settled
from engine.search.protocol import SearchError
from storage.models import Node

log = logging.getLogger("thoughtmap.deot.executor")

# Failures that end one task. Anything else (stop, budget, unreachable endpoint, bugs) ends the run.
TASK_FAILURES = (SearchError, StructuredOutputError, LLMRequestError, LLMServerError, LLMTimeoutError, ValueError)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _run_task(
    ctx: RunContext[DeotParams],
    node: Node,
    sources: NodeSources,
    task: dict[str, Any],
    dependencies: list[TaskResult],
    turns: SearchTurns,
) -> TaskResult:
    try:
        ctx.checkpoint()
        return _use_tool(ctx, node, sources, task, dependencies, turns)
    finally:
        turns.finish(task["id"])  # a task that ended without numbering sources lets the next one go


def _use_tool(
    ctx: RunContext[DeotParams],
    node: Node,
    sources: NodeSources,
    task: dict[str, Any],
    dependencies: list[TaskResult],
    turns: SearchTurns,
) -> TaskResult:
    result = TaskResult(task_id=task["id"], tool=task["tool"], status="running", started_at=_now())
    log.info("node %s task %s (%s): start", node.id, task["id"], task["tool"])
    call = ToolCall(task=task, dependencies=dependencies, node=node, sources=sources, turns=turns)
    try:
        output, numbers = TOOLS[task["tool"]](ctx, call)
    except TASK_FAILURES as exc:
        result.status, result.error = "failure", str(exc)
        log.warning("node %s task %s: failure: %s", node.id, task["id"], exc)
    else:
        result.status, result.output, result.source_numbers = "success", output, numbers
        log.info("node %s task %s: success", node.id, task["id"])
    result.finished_at = _now()
    return result


def execute_plan(
    ctx: RunContext[DeotParams],
    node: Node,
    tasks: list[dict[str, Any]],
    sources: NodeSources,
    *,
    finished: dict[str, TaskResult] | None = None,
    on_finished: Callable[[TaskResult], TaskResult] | None = None,
) -> list[TaskResult]:
    """Results in plan order. Tasks run in waves: every task whose dependencies succeeded runs in
    the current wave, concurrently, on the process-wide pool (`ctx.parallel`; no pool of our own).

    `finished` holds results of an earlier, interrupted execution of the same plan: those tasks are
    not run again. `on_finished` sees each task that ran (success or failure) as it ends, in this
    thread (it stores the result), and returns the result later tasks are given. When the run ends
    mid-wave (a stop, the budget), the wave's other tasks still finish and are stored first, so
    resuming the node does not run them again."""
    results: dict[str, TaskResult] = dict(finished or {})
    pending = {t["id"]: t for t in tasks if t["id"] not in results}
    while pending:
        wave = []
        for task_id, task in list(pending.items()):
            deps = task.get("depends_on", [])
            failed = [d for d in deps if results.get(d) and results[d].status != "success"]
            if failed:
                results[task_id] = TaskResult(
                    task_id=task_id,
                    tool=task["tool"],
                    status="skipped",
                    error=f"skipped: it needs {', '.join(failed)}, which did not succeed",
                )
                del pending[task_id]
            elif all(d in results for d in deps):
                wave.append(task)
                del pending[task_id]
        if not wave:
            break
        turns = SearchTurns([task["id"] for task in wave if task["tool"] in SEARCH_TOOLS])
        outcomes = run_parallel_settled(
            ctx.executor,
            [
                partial(_run_task, ctx, node, sources, task, [results[d] for d in task.get("depends_on", [])], turns)
                for task in wave
            ],
        )
        ending = next((error for _, error in outcomes if error is not None), None)
        for task, (result, error) in zip(wave, outcomes):
            if error is None:
                # run_parallel_settled gives (result, None) for a call that returned: a TaskResult here.
                result = cast(TaskResult, result)
                results[task["id"]] = on_finished(result) if on_finished else result
        if ending is not None:
            raise ending
    for task_id, task in pending.items():  # only reachable with a dependency that never ran
        results[task_id] = TaskResult(
            task_id=task_id, tool=task["tool"], status="skipped", error="skipped: a task it depends on never ran"
        )
    return [results[t["id"]] for t in tasks]
