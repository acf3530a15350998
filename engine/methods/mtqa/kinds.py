"""What MTQA declares: the matrix's node kinds (the question, the knowledge base of the question,
thought cells, column summaries), its edges (communication between cells, column links), its
commands with their payloads, its run states (the weight matrix, your knowledge choices), its grid
view and the steps of its prompts."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from engine.citations import cited_source_ids, strip_markers
from engine.contract import (
    CommandPayload,
    CommandRejected,
    CommandSpec,
    EdgeKind,
    FocusUnit,
    KnowledgeFocus,
    KnowledgeGraphRef,
    KnowledgeTab,
    Layout,
    NodeCommand,
    NodeData,
    NodeKind,
    RunStateModel,
    RunStateSpec,
    ViewSpec,
    regenerate_report_command,
)
from engine.graph import RunGraph
from engine.methods.common import DroppedHit
from engine.methods.mtqa import prompts
from engine.methods.mtqa.knowledge import Choices, UnitRecord
from engine.safe_text import inline_text
from storage.models import Node
from storage.statuses import NodeStatus

QUESTION, KNOWLEDGE, CELL, SUMMARY = "question", "knowledge", "cell", "summary"
WEIGHTS, CHOICES = "weights", "knowledge_choices"
COMMUNICATION, COLUMN_LINK, SUMMARISED = "communication", "column", "summarised"


def unit_line(unit: UnitRecord, triples: int, *, bold: bool = False, empty: str = "") -> str:
    """A unit's title (in bold if asked) and its first `triples` triples (`empty` if it has none) as
    inert one-line Markdown, with our citation of its source. The title (a page's) and the triples
    (the model's) are escaped, so neither can make a link, a citation `[n]`/`[[S<id>]]` or a line (a
    list entry numbered like a unit) of its own; our marker comes after them, the line's only citation."""
    title = inline_text(unit.title or unit.ref)
    cite = f" [[S{unit.source_id}]]" if unit.source_id is not None else ""
    listed = "; ".join(inline_text(t.line()) for t in unit.triples[:triples]) or empty
    return (f"**{title}**" if bold else title) + cite + (f": {listed}" if listed else "")


def units_listing(units: Sequence[UnitRecord]) -> list[str]:
    """Knowledge units as the node panel lists them: numbered as the pin and drop commands take
    them, each citing its source, with its first triples and what you chose for it."""
    lines = []
    for number, unit in enumerate(units, start=1):
        # What you chose first, where the eye starts (after four triples it was easy to miss).
        marks = ("**pinned** · " if unit.pinned else "") + ("**dropped** · " if unit.dropped else "")
        # "Unit n", not "n.": the panel lists these as bullets, and the number the pin and drop
        # commands take must not be mistaken for the source's citation number beside it.
        lines.append(f"Unit {number} · {marks}{unit_line(unit, 4, empty='no triples')}")
    return lines


def unit_entities(units: Sequence[UnitRecord]) -> list[str]:
    """The entities the units' triples name, in order, once each (the graph browser offers them)."""
    return list(dict.fromkeys(name for unit in units for t in unit.triples for name in (t.subject, t.object)))


GRAPH_KEY_HELP = "The stored knowledge graph the run read (its key), for the app's graph browser."


class QuestionData(NodeData):
    """The question the matrix answers (the root)."""


class KnowledgeData(NodeData):
    """The question's knowledge base: the documents retrieved for it, the graph built from them, the
    question's keywords, and the first column's knowledge units KU_1."""

    scope: str = ""
    searched: bool = Field(default=False, description="The question's documents were retrieved (kept as sources).")
    documents: list[str] = Field(default_factory=list, description="References of the documents added.")
    dropped_as_unrelated: list[DroppedHit] = Field(default_factory=list)
    search_error: str = ""
    chunks: int = 0
    chunks_done: int | None = Field(default=None, description="Chunks extracted into the graph when it was read.")
    entities: int = 0
    relations: int = 0
    failed_chunks: int = 0
    detailed_keywords: list[str] = Field(default_factory=list)
    general_keywords: list[str] = Field(default_factory=list)
    keywords_ready: bool = False
    units: list[UnitRecord] = Field(default_factory=list, description="KU_1: the units the first column thinks from.")
    graph_key: str = Field(default="", description=GRAPH_KEY_HELP)
    # Answered "the sources at hand do not cover this" (`RunContext.sources_only`), not by the model.
    not_covered: bool = False

    def caption(self) -> str:
        if self.scope == "collection":
            # A build stopped part-way (a --limit, the budget, Ctrl-C) leaves a graph of part of it.
            done = self.chunks if self.chunks_done is None else self.chunks_done
            partial = f" (incomplete: {done} of {self.chunks} passages extracted)" if done < self.chunks else ""
            return (
                f"collection graph of {done} passages{partial} · {self.entities} entities · {self.relations} "
                f"relations · {len(self.units)} knowledge units"
            )
        return (
            f"{len(self.documents)} documents · {self.entities} entities · {self.relations} relations · "
            f"{len(self.units)} knowledge units"
        )

    def reader_fields(self) -> dict[str, str | list[str]] | None:
        return {
            "Keywords": ", ".join(self.detailed_keywords + self.general_keywords),
            "Knowledge units (KU 1, what column 1 thinks from)": units_listing(self.units),
        }

    def knowledge_graph(self) -> KnowledgeGraphRef:
        return KnowledgeGraphRef(
            self.graph_key,
            tuple(dict.fromkeys([*unit_entities(self.units), *self.detailed_keywords, *self.general_keywords])),
        )


class CellData(NodeData):
    """A thought node Tn(row, column)."""

    row: int = 0
    column: int = 0
    alpha: float | None = Field(default=None, description="α from the cell above (None: a column's first thought).")
    passed_count: int = Field(
        default=0, description="Paragraphs of the cell above passed to this one: ⌈α × paragraphs⌉."
    )
    passed: list[str] = Field(default_factory=list, description="Those paragraphs: a strategy already taken.")
    paragraphs: list[str] = Field(default_factory=list, description="This thought's paragraphs, as stored.")
    invalid_citations: list[int] = Field(default_factory=list)
    # Answered "the sources at hand do not cover this" (`RunContext.sources_only`), not by the model.
    not_covered: bool = False

    def reader_fields(self) -> dict[str, str | list[str]] | None:
        return {"Thought": self.paragraphs, "Strategy passed from the thought above (to differ from)": self.passed}

    def caption(self) -> str:
        alpha = (
            "first thought of the column"
            if self.alpha is None
            else (f"α = {self.alpha:g}: {self.passed_count} paragraph(s) of the thought above passed")
        )
        return f"Row {self.row + 1}, column {self.column + 1} · {alpha}"


class Correction(BaseModel):
    """One thought's check against the knowledge units."""

    model_config = ConfigDict(extra="forbid")

    thought: int = 0
    verdict: str = ""
    correction: str = ""


class SummaryData(NodeData):
    """The summary node S_column: the column's thoughts checked against the knowledge units KU'
    retrieved with the question and those thoughts (the next column thinks from these units)."""

    column: int = 0
    grid_row: int = Field(default=0, description="Where the grid shows it: the row below the thoughts.")
    corrected: bool = Field(default=True, description="False under the no-correction ablation.")
    retrieval_keywords: list[str] = Field(default_factory=list)
    units: list[UnitRecord] = Field(default_factory=list, description="KU': the units the column was checked against.")
    units_ready: bool = False
    graph_key: str = Field(default="", description=GRAPH_KEY_HELP)
    checks: list[Correction] = Field(default_factory=list)
    paragraphs: list[str] = Field(default_factory=list, description="The refined answer, as stored.")
    short_answer: str = ""
    invalid_citations: list[int] = Field(default_factory=list)
    fallback: str = Field(
        default="",
        description="Set when the summary was written as plain text because the "
        "structured answer failed (a small model), and why.",
    )
    # Answered "the sources at hand do not cover this" (`RunContext.sources_only`), not by the model.
    not_covered: bool = False

    def caption(self) -> str:
        fixed = sum(c.verdict == "corrected" for c in self.checks)
        return (
            f"Summary of column {self.column + 1} · {len(self.units)} knowledge units · "
            f"{fixed} thought(s) corrected" + (f" · answer: {self.short_answer}" if self.short_answer else "")
        )

    def reader_fields(self) -> dict[str, str | list[str]] | None:
        # The short answer is one line by contract (the caption shows it too): escaped as one.
        return {
            "Short answer": inline_text(self.short_answer),
            "Answer": self.paragraphs,
            # Model prose that cites nothing of its own: a marker typed in it would cite a source.
            "Checks against the knowledge units": [
                f"Thought {c.thought}: {c.verdict}" + (f" — {strip_markers(c.correction)}" if c.correction else "")
                for c in self.checks
            ],
            "Knowledge units (KU′: checked against; the next column thinks from them)": units_listing(self.units),
        }

    def knowledge_graph(self) -> KnowledgeGraphRef:
        return KnowledgeGraphRef(
            self.graph_key, tuple(dict.fromkeys([*unit_entities(self.units), *self.retrieval_keywords]))
        )


def cell_data(node: Node) -> CellData:
    """A thought's data, typed."""
    return CellData.of(node)


def summary_data(node: Node) -> SummaryData:
    """A summary's data, typed."""
    return SummaryData.of(node)


def column_of(node: Node) -> int:
    """The column a thought or a summary belongs to."""
    return cell_data(node).column if node.kind == CELL else summary_data(node).column


def holder_data(holder: Node) -> KnowledgeData | SummaryData:
    """What a column thinks from, typed: the knowledge base (KU 1) or a summary (KU′)."""
    return KnowledgeData.of(holder) if holder.kind == KNOWLEDGE else summary_data(holder)


NODE_KINDS = (
    NodeKind(QUESTION, QuestionData, "Question", "#2F4B7C", "the question you asked", shape="star"),
    NodeKind(
        KNOWLEDGE,
        KnowledgeData,
        "Knowledge base",
        "#72B7B2",
        "the question's knowledge graph and KU 1",
        shape="hexagon",
        size_by_priority=False,
        browses_knowledge=True,
    ),
    NodeKind(CELL, CellData, "Thought", "#8E6CBF", "a thought node of the matrix", shape="box", size_by_priority=False),
    NodeKind(
        SUMMARY,
        SummaryData,
        "Summary",
        "#E8C547",
        "a column's summary, corrected against knowledge units",
        shape="diamond",
        answers=True,
        size_by_priority=False,
        browses_knowledge=True,
    ),
)

EDGE_KINDS = (
    EdgeKind(
        COMMUNICATION,
        "communication",
        "α of the thought above passed on (a strategy to differ from)",
        colour="#B39DDB",
        structural=False,
        waits=True,
    ),
    EdgeKind(
        COLUMN_LINK,
        "column link",
        "the next column builds on this summary and its knowledge units",
        dashes=True,
        colour="#F0C36D",
        structural=False,
    ),
    EdgeKind(
        SUMMARISED,
        "checked by",
        "the column's summary checks this thought",
        dashes=True,
        colour="#D5D5D5",
        structural=False,
        waits=True,
    ),
)


class WeightState(RunStateModel):
    """The communication weights α each cell was given (the matrix A mapped onto the cells)."""

    preset: str = ""
    matrix: list[list[float]] = Field(default_factory=list, description="A, (rows−1)×(columns−1).")
    cells: list[list[float | None]] = Field(default_factory=list, description="α per [row][column] as used.")

    def panel_caption(self) -> str:
        return f"Preset {self.preset}: α per thought, by row and column (a column's first thought has none)"

    def panel_markdown(self) -> str:
        if not self.cells:
            return "_no matrix yet_"
        columns = max(len(row) for row in self.cells)
        # "col n": the panel is a narrow column beside the map, and the paper's matrix has 4 columns.
        lines = ["| row | " + " | ".join(f"col {c + 1}" for c in range(columns)) + " |", "|---|" + "---|" * columns]
        for r, row in enumerate(self.cells):
            lines.append(f"| {r + 1} | " + " | ".join("—" if a is None else f"{a:g}" for a in row) + " |")
        return "\n".join(lines)


class ChoicesState(Choices, RunStateModel):
    """Your pins and drops, applied to every retrieval after them."""

    def panel_caption(self) -> str:
        return f"{len(self.pinned)} pinned · {len(self.dropped)} dropped"

    def panel_markdown(self) -> str:
        # Numbered as "Undo a pin or drop" takes them. Titles are pages': escaped, so a title cannot
        # add a line (a choice of its own) or a link. A dropped unit is named as it was listed when
        # dropped (a drop stored before titles were kept: by its id).
        lines = [f"- Choice {number} · {kind}: {inline_text(title)}" for number, kind, _, title in self.listed()]
        return "\n".join(lines) or "_none_"


RUN_STATES = (
    RunStateSpec(WEIGHTS, WeightState, "Communication weights"),
    RunStateSpec(
        CHOICES,
        ChoicesState,
        "Pinned and dropped knowledge units",
        empty="None yet: pin or drop a unit from the knowledge base or a summary (Node tab).",
    ),
)


class AddColumnPayload(CommandPayload):
    alpha: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        title="α of the new column",
        description=(
            "The communication weight of every thought of the new column (empty: continue the weight matrix: "
            "its last column's weights)."
        ),
        json_schema_extra={"placeholder": "the last column's weights"},
    )


class RerunColumnPayload(NodeCommand):
    alpha: float = Field(
        ge=0.0,
        le=1.0,
        title="New α",
        description=(
            "The communication weight for every thought below the first in this column; the column and every "
            "column after it are thought again."
        ),
    )


class ChoicePayload(CommandPayload):
    choice: int = Field(
        ge=1,
        title="Choice",
        description=(
            'The choice\'s number in the "Pinned and dropped knowledge units" panel above (Choice 1, Choice 2...); '
            "numbers are kept when another choice is undone."
        ),
    )


class UnitPayload(NodeCommand):
    unit: int = Field(
        ge=1,
        le=200,
        title="Knowledge unit",
        description=("The unit's number as listed in this node (Unit 1, Unit 2...), not its source's citation number."),
    )
    # The unit that number named when the command was sent: a node's retrieval made again before the
    # command is applied can list another unit under the same number.
    unit_id: str | None = Field(default=None, description="The chosen unit's id (filled in when it is sent).")
    resolved_fields: ClassVar[frozenset[str]] = frozenset({"unit_id"})


def listed_units(holder: Node, number: int) -> list[UnitRecord]:
    """The holder's units, once `number` is known to name one of them."""
    units = holder_data(holder).units
    if not 1 <= number <= len(units):
        raise CommandRejected(
            f"this node lists {len(units)} knowledge unit(s); choose a number from 1 to {len(units)}"
            if units
            else "this node has no knowledge unit"
        )
    return units


def unit_choice_check(*, pin: bool) -> Callable[[RunGraph, CommandPayload, Node | None], UnitPayload]:
    """Pin's or drop's precheck: the unit number against the node (before the command is queued, and
    again before it is applied)."""

    def check(graph: RunGraph, payload: CommandPayload, node: Node | None) -> UnitPayload:
        assert isinstance(payload, UnitPayload)  # the contract checks the payload against the command's model first
        assert node is not None
        unit = listed_units(node, payload.unit)[payload.unit - 1]
        if payload.unit_id is not None and unit.id != payload.unit_id:
            raise CommandRejected(
                f"this node's knowledge units were retrieved again since you chose unit "
                f"{payload.unit}, and that number names another unit now: look at the list "
                "and choose again"
            )
        if unit.dropped:
            raise CommandRejected(f"knowledge unit {payload.unit} is already dropped")
        if pin and unit.pinned:
            raise CommandRejected(f"knowledge unit {payload.unit} is already pinned")
        return payload.model_copy(update={"unit_id": unit.id})

    return check


def choice_exists(graph: RunGraph, payload: ChoicePayload, node: Node | None = None) -> tuple[int, str, str, str]:
    """The choice numbered `payload.choice` in the choices panel (CommandRejected if none is)."""
    choices = graph.state(CHOICES, ChoicesState) or ChoicesState()
    listed = {choice[0]: choice for choice in choices.listed()}
    if payload.choice not in listed:
        if not listed:
            raise CommandRejected("you have pinned or dropped no knowledge unit: there is nothing to undo")
        raise CommandRejected(
            f"there is no choice {payload.choice}; the panel lists " + ", ".join(f"Choice {n}" for n in sorted(listed))
        )
    return listed[payload.choice]


def undo_choice_check(graph: RunGraph, payload: CommandPayload, node: Node | None = None) -> None:
    """Undo's precheck: the choice is listed in the panel."""
    assert isinstance(payload, ChoicePayload)  # the contract checks the payload against the command's model first
    choice_exists(graph, payload)


_UNIT_HOLDERS = frozenset({KNOWLEDGE, SUMMARY})
_FINISHED = frozenset({NodeStatus.DONE, NodeStatus.FAILED})

# Steering that re-thinks columns pays for them again, and Start's estimate is long gone by then.
_RETHINK_COST = (
    "Each column thought again costs its cells and its summary once more (rows + 1 model "
    "calls), as much as when the run first thought it."
)

COMMANDS = (
    CommandSpec(
        "add_column",
        "Add a column",
        "Think one more column from the last summary; it becomes the answer.",
        AddColumnPayload,
        done="Adding a column",
    ),
    CommandSpec(
        "rerun_column",
        "Re-run column with another α",
        "Think this column again with another communication weight, then every column after it. " + _RETHINK_COST,
        RerunColumnPayload,
        kinds=frozenset({CELL, SUMMARY}),
        statuses=_FINISHED,
        done="Re-running the column",
    ),
    CommandSpec(
        "pin_unit",
        "Pin knowledge unit",
        "Keep this knowledge unit in every later retrieval; the columns after it are thought again. " + _RETHINK_COST,
        UnitPayload,
        kinds=_UNIT_HOLDERS,
        statuses=frozenset({NodeStatus.DONE}),
        done="Pinned",
        precheck=unit_choice_check(pin=True),
    ),
    CommandSpec(
        "drop_unit",
        "Drop knowledge unit",
        "Leave this knowledge unit out; the thoughts that read it are thought again. " + _RETHINK_COST,
        UnitPayload,
        kinds=_UNIT_HOLDERS,
        statuses=frozenset({NodeStatus.DONE}),
        done="Dropped",
        precheck=unit_choice_check(pin=False),
    ),
    CommandSpec(
        "undo_choice",
        "Undo a pin or drop",
        "Forget one of your pins or drops, as numbered in the panel above: retrievals take the unit as "
        "they find it again, and what the choice changed is thought again. " + _RETHINK_COST,
        ChoicePayload,
        done="Undone",
        precheck=undo_choice_check,
    ),
    regenerate_report_command(),
)


def position(node: Node) -> tuple[int, int] | None:
    """The grid: the knowledge base above the first column, thoughts in rows 1..m, each summary in
    its own row below them."""
    if node.kind == KNOWLEDGE:
        return 0, 0
    if node.kind == CELL:
        cell = cell_data(node)
        return cell.row + 1, cell.column
    if node.kind == SUMMARY:
        summary = summary_data(node)
        return max(summary.grid_row, 1), summary.column  # row 0 is the knowledge base's (an old row had no grid_row)
    return None


def _focus_units(holder: Node, cited: Collection[int] = ()) -> tuple[FocusUnit, ...]:
    """The holder's units still in use (a dropped one was not read), those whose source is `cited` marked."""
    units = holder_data(holder).units
    return tuple(
        FocusUnit(
            u.title or u.ref, tuple((t.subject, t.relation, t.object) for t in u.triples), cited=u.source_id in cited
        )
        for u in units
        if not u.dropped
    )


def _holder_words(holder: Node) -> str:
    if holder.kind == KNOWLEDGE:
        return "the knowledge base (KU 1)"
    return f"the summary of column {summary_data(holder).column + 1} (KU′)"


def knowledge_focus(nodes: Sequence[Node], selected: Node | None) -> KnowledgeFocus | None:
    """What the knowledge graph tab highlights: a thought's column's units (what it thought from, those
    its text cites marked), a summary's units (what it was checked against), the knowledge base's (KU 1,
    also for the question); None before the knowledge base exists."""
    by_id = {n.id: n for n in nodes}
    base = next((n for n in nodes if n.kind == KNOWLEDGE), None)
    if base is None:
        return None
    if selected is not None and selected.kind == CELL and selected.parent_id in by_id:
        holder = by_id[selected.parent_id]  # a column's thoughts hang under what they think from
        units = _focus_units(holder, set(cited_source_ids(selected.content or "")))
        cell = cell_data(selected)
        where = f"Row {cell.row + 1}, column {cell.column + 1}"
        says = (
            f"{where} thought from the {len(units)} knowledge units of {_holder_words(holder)}; its text cites "
            f"{sum(u.cited for u in units)} of them."
        )
    elif selected is not None and selected.kind == SUMMARY:
        holder, units = selected, _focus_units(selected)
        says = (
            f"The summary of column {summary_data(selected).column + 1} was checked against these "
            f"{len(units)} knowledge units (KU′); the next column thinks from them."
        )
    else:
        holder, units = base, _focus_units(base)
        says = f"The knowledge base's {len(units)} knowledge units (KU 1), what column 1 thinks from."
        if selected is None or selected.kind != KNOWLEDGE:
            says += " Pick a thought or a summary on the map to see the units it used."
    key = holder_data(holder).graph_key or holder_data(base).graph_key
    return KnowledgeFocus(key, units, says)


VIEW = ViewSpec(
    layout=Layout.GRID,
    panels=(WEIGHTS, CHOICES),
    position=position,
    side_tab="Matrix",
    knowledge_tab=KnowledgeTab("Knowledge graph", knowledge_focus),
)

STEPS = {
    prompts.THOUGHT.name: "thinking through a strategy from the knowledge units",
    prompts.SUMMARY.name: "checking the column's strategies against the knowledge units",
    prompts.MERGE.name: "merging the column's strategies",
    prompts.SUMMARY_TEXT.name: "checking the column's strategies against the knowledge units, as plain text",
    prompts.MERGE_TEXT.name: "merging the column's strategies, as plain text",
}
