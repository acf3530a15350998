"""What FGDIP declares: the search tree's node kinds (the question, an entity branch, a step, an
answer candidate) with their typed data, verdicts as colours, the backtrack edge drawn over the
tree, the error memory as run state shown beside the map, the steering commands and the steps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from engine.citations import strip_markers
from engine.contract import (
    CommandPayload,
    CommandRejected,
    CommandSpec,
    EdgeKind,
    Layout,
    NodeCommand,
    NodeData,
    NodeKind,
    RunStateModel,
    RunStateSpec,
    Variant,
    ViewSpec,
    regenerate_report_command,
)
from engine.methods.common import DroppedHit
from engine.methods.fgdip import prompts
from engine.prompting import inert
from engine.safe_text import inline_text
from storage.models import Node
from storage.statuses import NodeStatus

QUESTION, ENTITY, STEP, ANSWER = "question", "entity", "step", "answer"
BACKTRACK = "backtrack"
ERROR_MEMORY = "error_memory"
SEARCH_KINDS = frozenset({ENTITY, STEP})  # the nodes the search explores (each holds one action)

Verdict = Literal["sure", "maybe", "impossible"]
# unchecked: no Answer Evaluator (switched off); unjudged: its reply could not be read, so the
# answer is not verified and does not end the search (a resume asks it again).
AnswerVerdict = Literal["accepted", "rejected", "unchecked", "unjudged"]


def action_text(action: str, argument: str) -> str:
    """A step's action as the paper writes it: search[X], lookup[k], finish[answer]."""
    return f"{action}[{argument}]"


def action_markdown(action: str, argument: str) -> str:
    """The action as a reader sees it (node panel, content, report path): the model's argument as
    text (`inline_text`), so it shows verbatim and cannot make a link, a citation or a line of its
    own; not a code span, whose characters a later `markdown_block` would show as entities; without
    storage markers, which would count as citations wherever the text is numbered."""
    return inline_text(strip_markers(action_text(action, argument)))


class QuestionData(NodeData):
    """The question at the root: what the extractor made of it."""

    entities: list[str] | None = Field(default=None, description="The key entities (None before extraction).")
    extractor_error: str = Field(default="", description="Why the extractor's answer could not be used.")
    explored_order: int | None = Field(
        default=None, description="When the search expanded the question (the extractor switched off)."
    )
    expanded: bool = False
    planned_children: int = 0
    children_must_finish: bool = False
    generate_error: str = ""

    def caption(self) -> str:
        if self.entities:
            return "Key entities: " + "; ".join(self.entities)
        return ""


class StepData(NodeData):
    """A node of the search: its thought, action and observation (ReAct), the Step Evaluator's
    verdict, and where it stands in the exploration."""

    thought: str = ""
    action: Literal["search", "lookup", "finish"] = "search"
    argument: str = ""
    observation: str | None = Field(default=None, description="What the action returned (None before it ran).")
    page_source: int | None = Field(default=None, description="The source a later Lookup reads.")
    search_error: str = ""
    dropped_as_unrelated: list[DroppedHit] = Field(default_factory=list)
    verdict: Verdict | None = Field(default=None, description="The Step Evaluator's verdict (None: not judged).")
    justification: str = ""
    judged_by: Literal["evaluator", "you", "error"] | None = None
    # Exploration: the order it was chosen in, and what came of it.
    explored_order: int | None = None
    backtrack_from: int | None = Field(default=None, description="The node the search left to come here.")
    planned_children: int = 0
    children_must_finish: bool = Field(default=False, description="Its children are the last layer: they answer.")
    expanded: bool = Field(default=False, description="All its children were generated.")
    dead_end: str = Field(default="", description="Why it was not expanded (a limit).")
    forced: bool = Field(default=False, description="You asked for it to be explored next.")
    branch_ended: str = Field(default="", description="On an entity: why its branch was left.")
    generate_error: str = ""

    def caption(self) -> str:
        parts = [f"{self.action}[{self.argument}]"]
        if self.verdict:
            parts.append(f"verdict: {self.verdict}" + (" (yours)" if self.judged_by == "you" else ""))
        if self.explored_order is not None:
            parts.append(f"explored {ordinal(self.explored_order)}")
        if self.branch_ended:
            parts.append(f"branch left: {self.branch_ended}")
        return " · ".join(parts)

    def reader_fields(self) -> dict[str, str | list[str]] | None:
        # The thought, the observation (a page's text) and the judge's reasons cite nothing of their
        # own: a marker typed in them would cite a source of the run.
        fields = {
            "Thought": strip_markers(self.thought),
            "Action": action_markdown(self.action, self.argument),
            "Observation": strip_markers(self.observation or ""),
            "Verdict": self.verdict or "",
            "Why": strip_markers(self.justification),
        }
        return {k: v for k, v in fields.items() if v}


class EntityData(StepData):
    entity: str = ""
    user: bool = Field(default=False, description="Added by you.")


UNJUDGED_NOTE = "The Answer Evaluator's reply could not be read, so this answer is not verified."


class AnswerData(NodeData):
    """A candidate answer and the Answer Evaluator's verdict."""

    short_answer: str = ""
    explanation: str = Field(default="", description="With run-wide citation markers.")
    invalid_citations: list[int] = Field(default_factory=list)
    write_error: str = ""
    writer_answer: str = Field(
        default="",
        description=("The explanation writer's short answer when it changed the path's answer (the path's stands)."),
    )
    verdict: AnswerVerdict | None = None
    solves: bool | None = None
    on_topic: bool | None = None
    reasons: str = ""
    error_analysis: str = ""
    evaluate_error: str = Field(default="", description="Why the Answer Evaluator's reply could not be read.")
    not_covered: bool = Field(
        default=False,
        description=(
            "Answered 'the sources at hand do not cover this' (a model that answers only from sources, and no "
            "search of the run found a passage about the question), not by the model."
        ),
    )
    reported: bool = Field(default=False, description="The answer the report gives (starred on the map).")
    superseded: bool = Field(default=False, description="Another answer is the report's now.")

    def caption(self) -> str:
        return (
            f"Answer: {self.short_answer}"
            + (f" · {self.verdict}" if self.verdict else "")
            + (" · the report's answer" if self.reported else "")
            + (
                " · not the report's answer: a later one is"
                if self.superseded and self.verdict in ("accepted", "unchecked")
                else ""
            )
        )

    def reader_fields(self) -> dict[str, str | list[str]] | None:
        evaluator = UNJUDGED_NOTE if self.verdict == "unjudged" else strip_markers(self.reasons)
        fields = {
            "Answer": inline_text(self.short_answer),
            "Explanation": self.explanation,
            "Evaluator": evaluator,
            "Error analysis": strip_markers(self.error_analysis),
        }
        return {k: v for k, v in fields.items() if v}


def answer_label(answer: AnswerData) -> str:
    """A judged answer's label on the map: its verdict in words as well as in its fill (a rejected
    answer, where a backtrack starts, reads as one without telling two diamonds apart by colour),
    starred when it is the report's answer."""
    star = "★ " if answer.reported else ""
    # An answer accepted before steering led the search to the one the report now gives: two
    # "accepted answer" diamonds read as a tie.
    if answer.not_covered:
        return f"{star}not covered by the sources"
    earlier = "earlier " if answer.superseded and answer.verdict in ("accepted", "unchecked") else ""
    return f"{star}{earlier}{answer.verdict} answer: {answer.short_answer}"[:80]


def plural(n: int, one: str, many: str = "", *, a: bool = False) -> str:
    """ "1 lesson", "3 lessons"; with `a`, just the noun ("a rejected answer" for one, "rejected
    answers" otherwise)."""
    many = many or one + "s"
    if a:
        return f"a {one}" if n == 1 else many
    return f"{n} {one if n == 1 else many}"


def ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


_VERDICTS = (
    # A strong blue: the unjudged light blue made certain, and far from the green "done" border.
    Variant("sure", "#4C78A8", "verdict sure: explored first"),
    Variant("maybe", "#F2CF5B", "verdict maybe"),
    Variant("impossible", "#DDDDDD", "verdict impossible: pruned, no children"),
)

NODE_KINDS = (
    NodeKind(
        QUESTION, QuestionData, "Question", "#2F4B7C", "the question you asked", shape="star", size_by_priority=False
    ),
    NodeKind(
        ENTITY,
        EntityData,
        "Entity",
        "#9ECAE9",
        "a key entity: one branch of the search (not judged yet)",
        shape="box",
        colour_field="verdict",
        variants=_VERDICTS,
        size_by_priority=False,
    ),
    NodeKind(
        STEP,
        StepData,
        "Step",
        "#9ECAE9",
        "a step: thought, action, observation (not judged yet)",
        shape="dot",
        colour_field="verdict",
        variants=_VERDICTS,
        size_by_priority=False,
    ),
    NodeKind(
        ANSWER,
        AnswerData,
        "Answer",
        "#C5B0D5",
        "a candidate answer (not checked)",
        shape="diamond",
        colour_field="verdict",
        answers=True,
        size_by_priority=False,
        variants=(
            Variant("accepted", "#9467BD", "answer accepted by the Answer Evaluator"),
            Variant("rejected", "#9D755D", "answer rejected: its error analysis is remembered"),
            Variant("unjudged", "#DBDB8D", "answer not verified: the Answer Evaluator's reply could not be read"),
        ),
    ),
)

EDGES = (
    # The search is depth-first: the node it backtracks to is generated after the path it left
    # (and from that path's error analysis).
    EdgeKind(
        BACKTRACK,
        "backtrack",
        "the search left a path for this node: a dead end, a rejected answer, or a node you told it to explore next",
        dashes=True,
        colour="#E45756",
        structural=False,
        waits=True,
    ),
)


# --------------------------------------------------------------------------- the error memory


class ErrorEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    analysis: str
    answer: str = ""
    branch: str = Field(default="", description="The branch (entity) whose answer was rejected.")
    node_id: int | None = Field(default=None, description="The rejected answer's node.")
    by_user: bool = False


class ErrorMemory(RunStateModel):
    """e_1..i-1: the analyses of rejected answers, given to every later node generation."""

    entries: list[ErrorEntry] = Field(default_factory=list)
    change: str = Field(default="", description="What this version changed.")

    def panel_caption(self) -> str:
        return f"{self.lessons()}, given to every new step"

    def lessons(self) -> str:
        """How many lessons, and whose: "1 lesson from a rejected answer", "2 lessons (1 from a
        rejected answer, 1 of yours)"."""
        n, yours = len(self.entries), sum(e.by_user for e in self.entries)
        if not n:
            return "no lesson"
        learned = plural(n - yours, "rejected answer", "rejected answers", a=True)
        if not yours:
            return f"{plural(n, 'lesson')} from {learned}"
        if yours == n:
            return f"{plural(n, 'lesson')} of yours"
        return f"{plural(n, 'lesson')} ({n - yours} from {learned}, {yours} of yours)"

    def panel_markdown(self) -> str:
        # One numbered line per lesson, as Edit error memory numbers them: the analysis, answer and
        # branch (the model's) are escaped, so they cannot add a lesson line or a "**yours**" mark,
        # which is the only Markdown of ours here.
        lines = []
        for number, entry in enumerate(self.entries, start=1):
            where = f" (answer '{inline_text(entry.answer)}' on {inline_text(entry.branch)})" if entry.answer else ""
            lines.append(f"{number}. {'**yours** · ' if entry.by_user else ''}{inline_text(entry.analysis)}{where}")
        return "\n".join(lines) or "_No answer has been rejected yet._"

    @classmethod
    def history_markdown(cls, versions: Sequence[RunStateModel]) -> str:
        # A change names a rejected answer and its branch: plain text, one line each.
        return "\n".join(f"- {inline_text(v.change)}" for v in versions if isinstance(v, ErrorMemory) and v.change)

    def as_prompt(self) -> str:
        return (
            "\n".join(
                f"- Answer: <<<{inert(e.answer) or '(none)'}>>> Analysis: <<<{inert(e.analysis)}>>>"
                for e in self.entries
            )
            or "(none yet)"
        )


RUN_STATES = (
    RunStateSpec(
        ERROR_MEMORY,
        ErrorMemory,
        "Error memory",
        empty=(
            "No lessons yet: each answer the Answer Evaluator rejects adds its analysis here, and every later step is "
            "given it. You can add one of your own below."
        ),
    ),
)


# --------------------------------------------------------------------------- commands


class AddEntityPayload(CommandPayload):
    entity: str = Field(
        min_length=1,
        max_length=200,
        title="Entity",
        description="A name to search from: it becomes a new first-layer branch, explored next.",
    )


class EditErrorMemoryPayload(CommandPayload):
    number: int = Field(
        default=0,
        ge=0,
        le=100,
        title="Lesson number (0 adds one)",
        description="Which lesson to change or remove, as numbered in the Error memory above "
        "(1 = the first); 0 adds a new one.",
    )
    analysis: str = Field(
        default="", max_length=1000, title="Lesson", description="The new text; empty removes the entry."
    )

    @model_validator(mode="after")
    def _a_new_lesson_has_text(self) -> EditErrorMemoryPayload:
        # A form always sends the lesson: refused before it is sent. (An empty payload still parses,
        # as the method contract wants of a command with no required field; the method refuses it
        # when it applies it.)
        if self.number == 0 and "analysis" in self.model_fields_set and not self.analysis.strip():
            raise ValueError("a new lesson (entry 0) needs its text: write it under Lesson")
        return self


def lesson_exists(graph: Any, payload: CommandPayload, node: Node | None = None) -> None:
    """Entry n names a lesson the memory holds (0 adds one): the command's precheck."""
    assert isinstance(payload, EditErrorMemoryPayload)  # the precheck of edit_error_memory alone
    memory = graph.state(ERROR_MEMORY, ErrorMemory) or ErrorMemory()
    if payload.number > len(memory.entries):
        held = len(memory.entries)
        raise CommandRejected(
            f"there is no lesson {payload.number}: the memory holds {held}"
            + ("; use entry 0 to add one" if held == 0 else f" (entries 1 to {held}), and 0 adds one")
        )


_SEARCHED = frozenset({ENTITY, STEP})


def marked_impossible_by_you(data: Mapping[str, Any]) -> bool:
    return data.get("verdict") == "impossible" and data.get("judged_by") == "you"


COMMANDS = (
    CommandSpec(
        "force_explore",
        "Explore next",
        "Explore this node next, whatever its verdict and the limits on nodes and backtracks.",
        NodeCommand,
        kinds=_SEARCHED,
        statuses=frozenset({NodeStatus.DONE}),
        on_root=False,
        done="Exploring it next",
    ),
    CommandSpec(
        "mark_impossible",
        "Mark impossible",
        "Judge this node impossible: it gets no (more) children "
        "and its unexplored children are pruned; an accepted answer reached through it is "
        "rejected, and the search goes on to the next branch.",
        NodeCommand,
        kinds=_SEARCHED,
        statuses=frozenset({NodeStatus.DONE}),
        on_root=False,
        done="Marked impossible",
        offered_when=lambda data: not marked_impossible_by_you(data),
    ),
    CommandSpec(
        "add_entity",
        "Add entity",
        "Add a key entity of your own: a new branch, explored next.",
        AddEntityPayload,
        done="Entity added",
    ),
    CommandSpec(
        "edit_error_memory",
        "Edit error memory",
        "Add, change or remove a lesson the node generator "
        "is given. It applies to the steps generated from now on: Explore next or Add entity searches "
        "again with it.",
        EditErrorMemoryPayload,
        done="Error memory changed",
        precheck=lesson_exists,
    ),
    regenerate_report_command(),
)

VIEW = ViewSpec(layout=Layout.SEARCH_TREE, panels=(ERROR_MEMORY,), side_tab="Error memory")

# What the model is doing for each prompt, in a reader's words (the step log and "Now:").
STEPS = {
    prompts.EXTRACT.name: "picking out the question's key entities",
    prompts.GENERATE.name: "proposing the next step of this branch",
    prompts.EVALUATE_STEP.name: "judging whether this path can reach the answer",
    prompts.WRITE_ANSWER.name: "writing the answer from its sources",
    prompts.EVALUATE_ANSWER.name: "checking the answer fits the question",
}


def step_of(node: Node) -> StepData:
    """A search node's data, typed (an entity's is an `EntityData`); a node of another kind reads as an
    empty step, so a question asked of any node of a path gets the answer an absent field gives."""
    if node.kind == ENTITY:
        return EntityData.model_validate(node.data)
    return StepData.model_validate(node.data if node.kind == STEP else {})


def entity_of(node: Node) -> str:
    """The entity a first-layer branch searches ("" for a step)."""
    return EntityData.model_validate(node.data).entity if node.kind == ENTITY else ""


def answer_of(node: Node) -> AnswerData:
    """A candidate answer's data, typed."""
    return AnswerData.model_validate(node.data)


def explored_order(node: Node) -> int | None:
    """When the search expanded `node` (the question is 1), None when it has not: a question or a step."""
    if node.kind == QUESTION:
        return QuestionData.model_validate(node.data).explored_order
    return step_of(node).explored_order if node.kind in SEARCH_KINDS else None
