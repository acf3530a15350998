"""What DEoT declares: its one node kind (a query/answer pair, `question`), the edges its engines
draw, and its steering commands. The key-by-key account of what solving stores is in
`checkpoint.py`; here each key has its type."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from engine.contract import (
    CommandSpec,
    EdgeKind,
    NodeCommand,
    NodeData,
    NodeKind,
    Variant,
    regenerate_report_command,
    restore_command,
)
from engine.methods.common import DroppedHit
from engine.methods.deot import prompts
from engine.questions import MAX_QUESTION_CHARS, clean_question
from storage.statuses import NodeStatus

QUESTION = "question"
Engine = Literal["root", "breadth", "depth", "user"]


class Expansion(BaseModel):
    """The Engine Controller's decision for a node and the children it proposed. Stored on the
    parent before the children are created, so a crash between the two is repaired on resume."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["BREADTH", "DEPTH", "STOP"]
    by: Literal["controller", "rule", "error", "default"]
    reasoning: str = ""
    unresolved_points: list[str] = Field(default_factory=list)
    proposals: list[dict[str, Any]] = Field(default_factory=list, description="engines.Proposal fields.")
    materialized: bool = True
    created: list[int] = Field(default_factory=list)
    dropped_for_budget: list[int] = Field(default_factory=list, description="Proposal indexes left out.")
    dropped_repeats: list[str] = Field(
        default_factory=list, description="Proposed questions dropped because they repeated one already asked."
    )
    asked_differently: bool = Field(
        default=False, description="Every first proposal was a repeat, so the model was asked again differently."
    )


class PlanTask(BaseModel):
    """One task of a plan, as the planner wrote it (schemas.PlannedTaskBase's fields)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    tool: str
    description: str = ""
    input: str = ""
    max_results: int = 3
    reason: str = ""
    depends_on: list[str] = Field(default_factory=list)


class PlanAttempt(BaseModel):
    """One planning attempt: the draft, its format problems, then the review and the verdict."""

    model_config = ConfigDict(extra="forbid")

    tasks: list[PlanTask]
    format_problems: list[str] = Field(default_factory=list)
    review: dict[str, Any] | None = Field(default=None, description="schemas.PlanReview's fields.")
    verdict: Literal["approve", "revise"] | None = None


class TaskRecord(PlanTask):
    """A task that ran: the plan's task, then what came of it (output with run-wide markers)."""

    status: Literal["success", "failure", "skipped"]
    output: str = ""
    error: str = ""
    started_at: str | None = None
    finished_at: str | None = None
    source_ids: list[int] = Field(default_factory=list)


class QueryOptimization(BaseModel):
    """The Base Prompter's record for the root (schemas.OptimizedQuery/RepairedQuery's fields)."""

    model_config = ConfigDict(extra="allow")  # the two output models' fields, whichever path ran

    path: Literal["optimize", "error_handling", "fallback"]
    optimized_query: str


class StoredSummary(BaseModel):
    """A node's summary as stored: the summarizer's fields with run-wide citation markers."""

    model_config = ConfigDict(extra="forbid")

    key_findings: str = ""
    evidence_and_data: list[str] = Field(default_factory=list)
    analysis: str = ""
    conflicting_information: list[str] = Field(default_factory=list)
    conclusion: str = ""


class QuestionGrowth(NodeData):
    """What growth reads of a question (`QuestionGrowth.of(node)`): what it is and how it was
    expanded, read alone. A view, never written: unlike `QuestionData` it ignores the other fields,
    so a spoiled solving checkpoint (a partial plan that a resume must not reuse, and that would fail
    the whole model) never stops the tree from growing."""

    model_config = ConfigDict(extra="ignore")

    engine: str = "root"
    auto_expand: bool = True
    not_covered: bool = False
    expansion: Expansion | None = None

    @property
    def awaits_children(self) -> bool:
        """Expanded, with its proposals not yet created (a crash between the two, or the budget)."""
        return self.expansion is not None and not self.expansion.materialized


class QuestionData(NodeData):
    """`Node.data` of a DEoT question node."""

    # What the node is: set when it is created and kept by a retry.
    engine: Engine = "root"
    aspect: str = ""
    category: str = ""
    reasoning: str = ""
    priority_label: str = ""
    auto_expand: bool = True
    steered: bool = False
    steered_analyses: list[Literal["BREADTH", "DEPTH"]] = Field(default_factory=list)
    IDENTITY: ClassVar[frozenset[str]] = frozenset(
        {"engine", "aspect", "category", "reasoning", "priority_label", "auto_expand", "steered", "steered_analyses"}
    )

    # Solving, each written as soon as it exists (checkpoint.py).
    query_optimization: QueryOptimization | None = None
    effective_query: str = ""
    plan_attempts: list[PlanAttempt] = Field(default_factory=list)
    plan: list[PlanTask] = Field(default_factory=list)
    plan_accepted: bool | None = None
    tasks: list[TaskRecord] = Field(default_factory=list)
    solving: dict[str, Any] | None = None
    dropped_as_unrelated: list[DroppedHit] = Field(default_factory=list)
    no_relevant_source: bool = False
    # Answered "the sources at hand do not cover this" (`RunContext.sources_only`), not by the model.
    not_covered: bool = False
    uncovered_queries: list[str] = Field(default_factory=list)  # what it searched, in vain

    # The answer.
    summary: StoredSummary | None = None
    summary_fallback: str = Field(
        default="",
        description="Set when the summary was written as plain text "
        "because its structured form failed (a small model on a slow machine), and why.",
    )
    validation_error: str = Field(
        default="",
        description="Why the fact check (or the revision it asked for) "
        "could not be read; the summary stands unchecked.",
    )
    invalid_citations: list[int] = Field(default_factory=list)
    attributed_citations: int = 0
    validation: dict[str, Any] | None = None
    # Result Validation: every fact check of this solve, in order (the last is `validation`), and the
    # issues of a summary still found INVALID after the last attempt (`invalid_summary` "flag").
    validation_attempts: list[dict[str, Any]] = Field(default_factory=list)
    validation_flagged: list[str] = Field(default_factory=list)
    last_output: str = ""

    # Growth.
    expansion: Expansion | None = None

    def identity(self) -> dict[str, Any]:
        """What the node is, without what an attempt to solve it left."""
        return self.model_dump(mode="json", include=set(self.IDENTITY), exclude_unset=True)

    def reader_fields(self) -> dict[str, str | list[str]] | None:
        return self.summary.model_dump() if self.summary is not None else None

    def caption(self) -> str:
        who = {"root": "your question", "breadth": "breadth engine", "depth": "depth engine", "user": "your follow-up"}[
            self.engine
        ]
        return f"Engine: {who}" + (f" · aspect: {self.aspect}" if self.aspect else "")


QUESTION_KIND = NodeKind(
    QUESTION,
    QuestionData,
    "Question",
    "#4C78A8",
    "a sub-question, solved by the planner and its tools",
    colour_field="engine",
    variants=(
        Variant("root", "#2F4B7C", "the question you asked"),
        Variant("breadth", "#4C78A8", "breadth engine: a new aspect"),
        Variant("depth", "#9467BD", "depth engine: a deeper follow-up"),
        Variant("user", "#CE6DBD", "your own follow-up"),
    ),
    answers=True,
)

EDGES = (
    EdgeKind("breadth", "new aspect", "breadth engine"),
    EdgeKind("depth", "deeper follow-up", "depth engine (dashed)", dashes=True, colour="#9467BD"),
    EdgeKind("user", "your follow-up", "your follow-up", colour="#CE6DBD"),
)


class ExpandPayload(NodeCommand):
    n: int = Field(
        default=2, ge=1, le=8, title="New branches", description="How many new aspects the breadth engine proposes."
    )


class AskPayload(NodeCommand):
    question: str = Field(
        title="Your follow-up",
        description=f"Your own follow-up question under this node (up to {MAX_QUESTION_CHARS:,} characters).",
    )

    @field_validator("question")
    @classmethod
    def _research_question(cls, value: str) -> str:
        # The same rules and message as the run's own question (Start, CLI): a follow-up is researched
        # with every prompt of its node, so a pasted document costs as much here.
        return clean_question(value)


_LIVE = frozenset({NodeStatus.PENDING, NodeStatus.RUNNING, NodeStatus.DONE, NodeStatus.FAILED})
_ON = frozenset({QUESTION})

COMMANDS = (
    CommandSpec(
        "expand",
        "Expand",
        "Ask the breadth engine for new aspects under this node.",
        ExpandPayload,
        kinds=_ON,
        statuses=frozenset({NodeStatus.DONE}),
        done="Expanding",
    ),
    CommandSpec(
        "deepen",
        "Go deeper",
        "Ask the depth engine for one follow-up question under this node.",
        NodeCommand,
        kinds=_ON,
        statuses=frozenset({NodeStatus.DONE}),
        done="Going deeper",
    ),
    CommandSpec(
        "ask",
        "Ask",
        "Add your own follow-up question under this node; it is solved like the others.",
        AskPayload,
        kinds=_ON,
        statuses=_LIVE,
        done="Question added",
    ),
    CommandSpec(
        "retry",
        "Retry",
        "Solve this failed node again.",
        NodeCommand,
        kinds=_ON,
        statuses=frozenset({NodeStatus.FAILED}),
        done="Retrying",
    ),
    CommandSpec(
        "prune",
        "Prune",
        "Stop this branch and leave it out of the report.",
        NodeCommand,
        kinds=_ON,
        statuses=_LIVE,
        on_root=False,
        done="Pruned",
    ),
    restore_command(_ON),
    regenerate_report_command(),
)

# What the model is doing for each prompt, in a reader's words (the step log and "Now:").
STEPS = {
    prompts.OPTIMIZE_QUERY.name: "sharpening the question",
    prompts.REPAIR_QUERY.name: "sharpening the question again",
    prompts.PLAN_TASKS.name: "planning the tasks",
    prompts.REVISE_PLAN.name: "revising the plan",
    prompts.VALIDATE_PLAN.name: "checking the plan",
    prompts.INFO_SEARCH.name: "reading the search results",
    # The news tool searches the run's searcher too: on the local corpus there is no news source.
    prompts.NEWS_SEARCH.name: "reading the search results on recent events",
    prompts.EVENT_EXTRACTOR.name: "extracting the key events",
    prompts.HISTORY_ANALYZER.name: "comparing with past events",
    prompts.DIRECT_REASONING.name: "reasoning it through",
    prompts.SUMMARIZE_RESULTS.name: "summarising what the sources say",
    prompts.FACT_CHECK.name: "checking the facts",
    prompts.REVISE_SUMMARY.name: "correcting the summary after the fact check",
    prompts.CONTROLLER.name: "deciding whether to go wider or deeper",
    prompts.CONTROLLER_PAPER.name: "deciding whether to go wider or deeper",
    prompts.BREADTH.name: "proposing new aspects",
    prompts.SUMMARIZE_PLAIN.name: "summarising what the sources say, as plain text",
    prompts.DEPTH.name: "proposing a deeper question",
    prompts.FOLLOW_UPS_RETRY.name: "asking again differently: its proposals repeated questions already asked",
    prompts.FINAL_REPORT.name: "writing the report",
}
