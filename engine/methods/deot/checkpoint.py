"""What solving a question node leaves in the node's data, and how a resumed solve continues from it.

Solving a node (optimise the query, plan, run the tasks, summarise, fact-check) stores each result
in the node's `data` as soon as it exists. A node that was `running` when its process died (or its
run stopped) is `pending` again on resume, and its next solve redoes only what had not finished: a
stored plan is not asked for again (no planner or validator call), planning goes on from its last
stored attempt, and a finished task is not run again (no tool call, no search).

The keys of a question node's `data`, all of them:

- What the node is, set when it is created and kept by `retry` (`kinds.QuestionData.IDENTITY`):
  `engine`, `aspect`, `category`, `reasoning`, `priority_label`, `auto_expand`, `steered`,
  `steered_analyses`.
- Solving, each key written as soon as it is produced:
  - `query_optimization` (the root only): the Base Prompter's record (`path`, `optimized_query`, ...).
  - `effective_query`: the query the node is planned and answered for.
  - `plan_attempts`: every planning attempt, stored after each planner and validator answer: the
    drafted `tasks`, their `format_problems`, then the `review` and the `verdict`.
  - `plan`, `plan_accepted`: the plan the node runs (approved, or repaired when no attempt was).
  - `tasks`: one record per task: the plan's task fields, then `status`, `output` (with run-wide
    `[[S<id>]]` markers), `error`, `started_at`, `finished_at` and `source_ids` (the sources its
    output draws on). While solving, only the finished tasks; at the end, every task in plan order.
  - `solving`: the checkpoint, present while the node is being solved and `null` once it is done
    or failed: `version`, `plan_key` (what `tasks` were run for: the effective query and the plan)
    and `source_ids` (the node's sources in the order they are numbered 1..N in its prompts).
    Nothing is reused without it, or with another `version`.
- The answer, written when the node finishes or fails: `summary`, `invalid_citations`,
  `attributed_citations`, `validation`, `last_output` (the unusable model output of a failure).
- Growth and steering: `expansion`, `status_before_prune`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pydantic import ConfigDict, StrictBool, StrictInt, StrictStr

from engine.citations import cited_source_ids
from engine.contract import Lenient, NodeData
from engine.methods.base import RunContext
from engine.methods.deot.params import DeotParams
from engine.methods.deot.planner import PlanOutcome, resumable_attempts
from engine.methods.deot.toolbox import NodeSources, TaskResult
from storage.models import Node, Source

SOLVING = "solving"
# Bump when the shape of what is stored changes: a checkpoint of another version is not trusted.
VERSION = 1
# Only these outcomes are stored; a skipped task is decided again from its dependencies.
_FINISHED = ("success", "failure")


def plan_key(query: str, tasks: list[dict[str, Any]]) -> str:
    """A fingerprint of what a task result depends on: the query and the whole plan."""
    text = json.dumps({"query": query, "tasks": tasks}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class _Lenient(Lenient):
    """A read of what a killed solve may have left half-written: a field of the wrong shape reads as
    absent (its default, None), and nothing is coerced ("1" is not 1)."""

    model_config = ConfigDict(extra="ignore", strict=True)


class SolvingState(_Lenient):
    """The checkpoint proper (`data["solving"]`): which code wrote it and what the tasks ran for."""

    version: StrictInt | None = None
    plan_key: StrictStr | None = None
    source_ids: list[StrictInt] | None = None


class StoredQueryOptimization(_Lenient):
    optimized_query: StrictStr | None = None


class StoredSolve(_Lenient, NodeData):
    """What an earlier solve left in a question's data, read for reuse (`StoredSolve.of(node)`).
    Unlike `kinds.QuestionData`, each field is read alone: a spoiled one is ignored, not an error.
    The records inside `plan_attempts` and `tasks` are judged one by one where they are reused."""

    model_config = ConfigDict(extra="ignore", strict=True)

    solving: SolvingState | None = None
    query_optimization: StoredQueryOptimization | None = None
    effective_query: StrictStr | None = None
    plan: list[dict[str, Any]] | None = None
    plan_accepted: StrictBool | None = None
    plan_attempts: list[Any] | None = None
    tasks: list[Any] | None = None

    @property
    def trusted(self) -> bool:
        """Written by this very code during a solve that did not end."""
        return self.solving is not None and self.solving.version == VERSION


class SolveCheckpoint:
    """One solve of one node: what an interrupted earlier solve left that may be reused, and the
    writes that record this solve's results as they come (`DeotMethod._solve` drives it)."""

    def __init__(self, ctx: RunContext[DeotParams], node: Node) -> None:
        self._ctx = ctx
        self._node = node
        stored = StoredSolve.of(node)
        # Nothing is trusted unless this very code wrote it during a solve that did not end.
        self._stored = stored if stored.trusted else StoredSolve()
        self._state: dict[str, Any] = {"version": VERSION, "plan_key": "", "source_ids": []}
        self._tasks: list[dict[str, Any]] = []
        self._plan_reused = False
        self._records: dict[str, dict[str, Any]] = {}

    # ---------------------------------------------------------------- what an earlier solve left

    def stored_optimized_query(self) -> str | None:
        record = self._stored.query_optimization
        if record is not None and record.optimized_query is not None:
            return record.optimized_query.strip() or None
        return None

    def stored_plan(self, query: str) -> PlanOutcome | None:
        """The stored plan, if it was made for `query` and is stored whole (then this solve runs it)."""
        stored = self._stored
        tasks, accepted, attempts = stored.plan, stored.plan_accepted, stored.plan_attempts
        if (
            stored.effective_query != query
            or not tasks
            or not all(isinstance(t.get("id"), str) and isinstance(t.get("tool"), str) for t in tasks)
            or accepted is None
            or attempts is None
            or stored.solving is None
            or stored.solving.plan_key != plan_key(query, tasks)
        ):
            return None
        plan = PlanOutcome(tasks=tasks, accepted=accepted, attempts=attempts)
        self._run(query, plan)
        self._plan_reused = True
        return plan

    def stored_plan_attempts(self, query: str) -> list[dict[str, Any]]:
        """The attempts of a planning of `query` that was interrupted, if they are whole."""
        if self._stored.effective_query != query:
            return []
        return resumable_attempts(self._stored.plan_attempts)

    def resume_tasks(self) -> tuple[NodeSources, dict[str, TaskResult]]:
        """The node's sources, numbered as when the stored task outputs were written, and the stored
        results of this plan's tasks as the executor gives them. A task is reused only with the same
        plan, its record whole, and the results of all its dependencies reused too (its output was
        built on theirs); with the numbering lost, no task is reused."""
        restored = self._stored_sources() if self._plan_reused else None
        sources = NodeSources(self._ctx, self._node, initial=restored or [])
        stored = self._stored.tasks
        if restored is None or stored is None:
            return sources, {}
        plan_tasks = {t["id"]: t for t in self._tasks}
        whole = {r["id"]: r for r in stored if self._whole(r, plan_tasks, sources)}
        reused: dict[str, TaskResult] = {}
        grown = True
        while grown:  # take every record whose dependencies are all taken, until none is left
            grown = False
            for task_id, record in whole.items():
                if task_id not in reused and all(d in reused for d in plan_tasks[task_id].get("depends_on", [])):
                    reused[task_id] = self._result(record, sources)
                    grown = True
        self._records = {task_id: whole[task_id] for task_id in reused}
        self._state = {**self._state, "source_ids": [source.id for source in sources.all]}
        return sources, reused

    def _stored_sources(self) -> list[Source] | None:
        ids = self._stored.solving.source_ids if self._stored.solving is not None else None
        if ids is None:
            return None
        linked = {source.id: source for source in self._ctx.graph.sources(self._node)}
        if not all(i in linked for i in ids) or len(set(ids)) != len(ids):
            return None
        return [linked[i] for i in ids]

    @staticmethod
    def _whole(record: Any, plan_tasks: dict[str, dict[str, Any]], sources: NodeSources) -> bool:
        if not isinstance(record, dict) or record.get("id") not in plan_tasks:
            return False
        task = plan_tasks[record["id"]]
        return (
            all(key in record and record[key] == value for key, value in task.items())
            and record.get("status") in _FINISHED
            and isinstance(record.get("output"), str)
            and isinstance(record.get("error"), str)
            and isinstance(record.get("source_ids"), list)
            and sources.numbers_of(record["source_ids"]) is not None
            and sources.numbers_of(cited_source_ids(record["output"])) is not None
        )

    @staticmethod
    def _result(record: dict[str, Any], sources: NodeSources) -> TaskResult:
        return TaskResult(
            task_id=record["id"],
            tool=record["tool"],
            status=record["status"],
            output=sources.to_prompt(record["output"]),
            error=record["error"],
            source_numbers=sources.numbers_of(record["source_ids"]) or [],
            started_at=record.get("started_at"),
            finished_at=record.get("finished_at"),
        )

    # ---------------------------------------------------------------- recording this solve

    def save_query_optimization(self, record: dict[str, Any]) -> None:
        self._write({"query_optimization": record, SOLVING: self._state})

    def save_plan_attempts(self, query: str, attempts: list[dict[str, Any]]) -> None:
        self._write({"effective_query": query, "plan_attempts": attempts, SOLVING: self._state})

    def save_plan(self, query: str, plan: PlanOutcome) -> None:
        """Store the plan this solve runs, with no task results yet."""
        self._run(query, plan)
        self._write(
            {
                "effective_query": query,
                "plan": plan.tasks,
                "plan_accepted": plan.accepted,
                "plan_attempts": plan.attempts,
                "tasks": [],
                SOLVING: self._state,
            }
        )

    def _run(self, query: str, plan: PlanOutcome) -> None:
        self._tasks = plan.tasks
        self._state = {**self._state, "plan_key": plan_key(query, plan.tasks)}

    def save_task(self, result: TaskResult, sources: NodeSources) -> TaskResult:
        """Store a finished task's result; return it as every later prompt sees it, numbered back
        from the stored markers, so a resumed solve shows the model exactly the same text."""
        output, _ = sources.to_stored(result.output)
        self._records[result.task_id] = self._record(result, output, sources)
        self._state = {**self._state, "source_ids": [source.id for source in sources.all]}
        self._write({"tasks": self.records(), SOLVING: self._state})
        return replace(result, output=sources.to_prompt(output))

    def _record(self, result: TaskResult, output: str, sources: NodeSources) -> dict[str, Any]:
        task = next(t for t in self._tasks if t["id"] == result.task_id)
        return {
            **task,
            "status": result.status,
            "output": output,
            "error": result.error,
            "started_at": result.started_at,
            "finished_at": result.finished_at,
            "source_ids": sources.ids_of(result.source_numbers),
        }

    def records(self, results: Sequence[TaskResult] = (), sources: NodeSources | None = None) -> list[dict[str, Any]]:
        """The task records in plan order: the stored ones, and one for each other result given
        (the skipped tasks, which are decided again from their dependencies and never stored alone)."""
        records = dict(self._records)
        for result in results:
            if result.task_id not in records and sources is not None:
                records[result.task_id] = self._record(result, sources.to_stored(result.output)[0], sources)
        return [records[t["id"]] for t in self._tasks if t["id"] in records]

    @staticmethod
    def closed() -> dict[str, Any]:
        """Written with the node's final state: a finished or failed node never resumes from its
        checkpoint (a retried node starts over)."""
        return {SOLVING: None}

    def _write(self, data: dict[str, Any]) -> None:
        self._ctx.graph.update(self._node, merge_data=data)
