"""Every structured output DEoT asks the model for, field by field as in the paper's prompts."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, create_model

from engine.llm.schema_tools import at_most, capped

Priority = Literal["HIGH", "MEDIUM", "LOW"]
PRIORITY_WEIGHT: dict[str, float] = {"HIGH": 3.0, "MEDIUM": 2.0, "LOW": 1.0}


class OptimizedQuery(BaseModel):
    """Base Prompter output (appendix B, input optimisation)."""

    optimized_query: str = Field(description="The enhanced, self-contained version of the query.")
    original_query: str = Field(description="The query exactly as the user wrote it.")
    modifications: Annotated[list[str], at_most(8)] = Field(
        default=[], max_length=8, description="Each change made, briefly."
    )


class RepairedQuery(OptimizedQuery):
    """Base Prompter output on the error-handling path (appendix B, error handling)."""

    original_error: str = Field(description="The error the previous attempt ran into.")
    correction_explanation: str = Field(description="What was corrected this time.")
    previous_attempt_analysis: str = Field(description="Why the previous attempt failed.")


class PlannedTaskBase(BaseModel):
    id: str = Field(description="Unique task id, e.g. task1.")
    description: str = Field(description="What this task must find out or produce.")
    tool: str = Field(description="The toolbox agent that runs the task.")
    input: str = Field(description="The exact input for the tool: a search query, or the text/question to analyse.")
    max_results: int = Field(default=3, ge=1, le=5, description="For search tools: how many results (1-5).")
    reason: str = Field(description="Why this tool suits the task.")
    depends_on: Annotated[list[str], at_most(2)] = Field(
        default=[], max_length=2, description="Ids of earlier tasks whose results this task needs."
    )


class TaskPlanBase(BaseModel):
    """What the planner reads of any plan; `plan_model` narrows it to the enabled tools."""

    tasks: list[PlannedTaskBase]


def plan_model(tools: list[str]) -> type[TaskPlanBase]:
    """The plan schema for the enabled tools: the tool field only admits those names."""
    # Both types are built at runtime from the tool names, so they are no static type to check.
    tool_type: Any = Literal[tuple(tools)]
    task: Any = create_model(
        "PlannedTask",
        __base__=PlannedTaskBase,
        tool=(tool_type, Field(description="The toolbox agent that runs the task.")),
    )
    return create_model(
        "TaskPlan",
        __base__=TaskPlanBase,
        tasks=(list[task], Field(min_length=1, max_length=3, description="One to three essential tasks.")),
    )


class PlanReview(BaseModel):
    """Plan Validator output (appendix C, figure 16)."""

    verdict: Literal["approve", "revise"] = Field(description="approve if the plan is complete and non-redundant.")
    completeness_issues: Annotated[list[str], at_most(5)] = Field(default=[], max_length=5)
    redundancy_issues: Annotated[list[str], at_most(5)] = Field(default=[], max_length=5)
    feedback: str = Field(default="", description="What to change, task by task, when the verdict is revise.")


class NodeSummary(BaseModel):
    """The executor's structured summary (appendix C, figure 22)."""

    key_findings: str = Field(description="Two or three sentences of main findings, citing sources as [n].")
    evidence_and_data: Annotated[list[str], at_most(6)] = Field(
        min_length=1, max_length=6, description="Data points, each citing [n] where it comes from a source."
    )
    analysis: str = Field(description="Two or three paragraphs of analysis.")
    conflicting_information: Annotated[list[str], at_most(4)] = Field(
        default=[], max_length=4, description="Conflicts between results, if any."
    )
    conclusion: str = Field(description="One or two sentences answering the task's query.")


Verdict = Literal["VALID", "INVALID"]
Confidence = Literal["HIGH", "MEDIUM", "LOW"]


class CheckResult(BaseModel):
    status: Verdict = Field(description="INVALID only for verifiable factual errors.")
    confidence: Confidence
    issues: Annotated[list[str], at_most(5)] = Field(
        default=[], max_length=5, description="Specific factual errors with corrections."
    )
    evidence: Annotated[list[str], at_most(5)] = Field(
        default=[], max_length=5, description="Sources and facts used for the check."
    )


class TaskCheck(CheckResult):
    task_id: str


class FactCheck(BaseModel):
    """Result Validation output (appendix C, figure 23): per task and for the summary."""

    tasks: Annotated[list[TaskCheck], at_most(3)] = Field(default=[], max_length=3)
    summary: CheckResult


class ControllerDecision(BaseModel):
    """Engine Controller output (appendix D, figure 24), with STOP for 'objectives met'."""

    decision: Literal["BREADTH", "DEPTH", "STOP"]
    reasoning: str = Field(description="Why this direction, considering complexity, layer and unresolved points.")
    unresolved_points: Annotated[list[str], at_most(5)] = Field(
        default=[], max_length=5, description="Open questions worth investigating."
    )


class PaperControllerDecision(BaseModel):
    """The paper's Engine Controller output (appendix D, figure 24): BREADTH or DEPTH only."""

    decision: Literal["BREADTH", "DEPTH"]
    reasoning: str = Field(description="Why this direction, considering complexity, layer and unresolved points.")
    unresolved_points: Annotated[list[str], at_most(5)] = Field(
        default=[], max_length=5, description="Open questions worth investigating."
    )


class Aspect(BaseModel):
    aspect: str = Field(description="Name of the impact aspect.")
    category: str = Field(description="Economic, Social, Political, Technical, Environmental, Historical...")
    reasoning: str = Field(description="Why this aspect matters.")
    query: str = Field(description="A specific, investigable follow-up question for this aspect.")
    priority: Priority


class BreadthAnalysisBase(BaseModel):
    """What the Breadth Engine reads of any answer; `breadth_model` sets the cap."""

    aspects: list[Aspect]


def breadth_model(max_aspects: int) -> type[BreadthAnalysisBase]:
    """Breadth Engine output (appendix D, figure 25) with at most `max_aspects` aspects."""
    return create_model(
        "BreadthAnalysis",
        __base__=BreadthAnalysisBase,
        aspects=(
            capped(Aspect, max_aspects),
            Field(
                min_length=1,
                max_length=max_aspects,
                description=f"At most {max_aspects} distinct, non-overlapping aspects.",
            ),
        ),
    )


ThingKind = Literal["person", "work", "organisation", "place", "date", "event", "other"]


class NamedThing(BaseModel):
    name: str = Field(max_length=80, description="The thing's exact name as the text writes it: a few words.")
    kind: ThingKind = Field(description="What kind of thing it is.")


class NamedThingsBase(BaseModel):
    """What the retry reads of any answer; `named_things_model` sets the cap."""

    things: list[NamedThing]


def named_things_model(n: int) -> type[NamedThingsBase]:
    """The retry that asks differently when an engine's proposals only repeated asked questions."""
    return create_model(
        "NamedThings",
        __base__=NamedThingsBase,
        things=(
            capped(NamedThing, n),
            Field(min_length=1, max_length=n, description=f"At most {n} different things the text mentions."),
        ),
    )


class DepthQuestion(BaseModel):
    """Depth Engine output (appendix D, figure 26)."""

    question: str = Field(description="One specific follow-up question for deeper investigation.")
    reasoning: str = Field(description="Why this question matters.")
    priority: Priority
