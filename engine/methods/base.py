"""The Method contract. Every reasoning method (baselines and the five papers' methods) is a class
with a pydantic `Params` model and a resumable `run(ctx)`; steering goes through `steer`."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from datetime import date
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from engine.graph import RunGraph
from engine.llm.accounting import RunLLM
from engine.search.protocol import Searcher
from engine.search.relevance import DEFAULT_FLOOR
from storage.models import Command, NodeStatus


class MethodParams(BaseModel):
    """Base of every method's parameters: unknown keys are errors, every field has a description
    (shown as help text in the UI and the CLI) and the paper's default."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # The quick profile: values that make a run finish in minutes on a small model on a CPU (the
    # built-in model). Only these fields change; the user may still raise any of them.
    quick_profile: ClassVar[dict[str, Any]] = {}


@dataclass(frozen=True)
class RunOutcome:
    """What a finished run achieved, so its status tells the truth: a run that answered nothing is
    `failed` (with the reason), one with some failed nodes is `done` with a warning."""

    answered: int  # answer-bearing nodes that succeeded
    failed: int  # nodes of any kind that failed (not pruned)
    reason: str = ""  # why nothing was answered, when answered == 0

    @property
    def ok(self) -> bool:
        return self.answered > 0

    @property
    def warning(self) -> str:
        if not self.ok or not self.failed:
            return ""
        nodes = "node" if self.failed == 1 else "nodes"
        return f"{self.failed} {nodes} failed; resume the run to retry them"


def relevance_floor_field() -> Any:
    """The `relevance_floor` parameter, the same for every method that searches."""
    return Field(
        default=DEFAULT_FLOOR, ge=0.0, le=1.0,
        description="Relevance floor: a search hit must contain at least this share of the query's distinctive "
        "words to be used and cited (0 keeps every hit). Keeps unrelated nearest matches out of the evidence; "
        "when nothing passes, the node says no relevant source was found.",
    )


class UnsupportedCommand(ValueError):
    """The method does not support this steering command (or not on this node)."""


@dataclass
class RunContext:
    """Everything a method may use during a run; all dependencies are injected."""

    run_id: str
    question: str
    params: MethodParams
    llm: RunLLM
    searcher: Searcher
    graph: RunGraph
    # Blocks while paused, raises RunStopped when stopped; call it between steps.
    checkpoint: Callable[[], None]
    # Claims queued steering commands (not pause/resume/stop) for the method's scheduler.
    take_steering: Callable[[], list[Command]]
    executor: Executor
    # Marks a steering command the method took as applied (or failed, with the reason).
    complete_command: Callable[..., None] = lambda command_id, ok=True, error="": None
    today: date = field(default_factory=date.today)
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("thoughtmap.run"))


class Method(ABC):
    name: ClassVar[str]
    title: ClassVar[str]
    summary: ClassVar[str]
    paper: ClassVar[str] = ""
    Params: ClassVar[type[MethodParams]]
    # Steering command kinds this method accepts (besides pause/resume/stop).
    steering: ClassVar[frozenset[str]] = frozenset({"regenerate_report"})
    # Node kinds that node-level steering (expand, prune, ...) applies to.
    steerable_kinds: ClassVar[frozenset[str]] = frozenset()
    # Node kinds whose success means the run answered something (a DEoT question node, a baseline's
    # answer). A finished run with none of them done is `failed`, not `done`.
    answer_kinds: ClassVar[frozenset[str]] = frozenset({"answer"})

    @abstractmethod
    def run(self, ctx: RunContext) -> None:
        """Grow the run's graph to completion. Must decide its next step from the stored graph,
        so that a resumed run skips every finished node."""

    def steer(self, ctx: RunContext, command: Command) -> None:
        """Apply one steering command (on a running or a finished run)."""
        if command.kind == "regenerate_report":
            self.write_report(ctx)
            return
        raise UnsupportedCommand(f"the {self.name} method does not support '{command.kind}'")

    @abstractmethod
    def write_report(self, ctx: RunContext) -> None:
        """(Re)write the run's final report from the stored graph."""

    def assess(self, ctx: RunContext) -> RunOutcome:
        """What the finished run achieved, read from the stored graph."""
        nodes = ctx.graph.nodes()
        answers = [n for n in nodes if n.kind in self.answer_kinds and n.status != NodeStatus.PRUNED]
        answered = sum(n.status == NodeStatus.DONE for n in answers)
        failed = [n for n in nodes if n.status == NodeStatus.FAILED]
        reason = ""
        if not answered:
            first_error = next((n.error for n in answers if n.status == NodeStatus.FAILED and n.error), "")
            what = " or ".join(sorted(self.answer_kinds))
            reason = f"nothing was answered: no {what} node succeeded" + (
                f" (the first failure: {first_error})" if first_error else "")
        return RunOutcome(answered=answered, failed=len(failed), reason=reason)

    def reset_failed(self, ctx: RunContext) -> int:
        """Put the failed nodes back to pending so the next `run` tries them again (resume of a
        finished or failed run). Returns how many were reset."""
        failed = ctx.graph.nodes(status=NodeStatus.FAILED)
        for node in failed:
            ctx.graph.update(node, status=NodeStatus.PENDING, error="", started_at=None, finished_at=None)
        return len(failed)

    @classmethod
    def describe_params(cls) -> list[dict[str, Any]]:
        """Name, type, default and help of every parameter (for the CLI and UI forms)."""
        rows = []
        for name, info in cls.Params.model_fields.items():
            rows.append({
                "name": name,
                "type": getattr(info.annotation, "__name__", str(info.annotation)),
                "default": info.default,
                "help": info.description or "",
            })
        return rows
