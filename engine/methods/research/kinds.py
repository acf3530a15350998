"""What the research agent declares: the chain of the run (the question, each search followed by
its rerank step and its summary step, each reasoning turn, the answer with its citation check), the
sources you dropped as run state, the steering commands and the steps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.citations import strip_markers
from engine.claim_support import CLAIM_SUPPORT
from engine.contract import (
    CommandPayload,
    CommandSpec,
    Layout,
    NodeData,
    NodeKind,
    RunStateModel,
    RunStateSpec,
    Variant,
    ViewSpec,
    regenerate_report_command,
)
from engine.methods.common import DroppedHit
from engine.methods.research import prompts
from engine.methods.research.steps import RERANK, SUMMARY, RerankData, SummaryData
from engine.safe_text import inline_text
from engine.search.rerankers import JUDGE
from storage.models import Node

QUESTION, SEARCH, REASONING, ANSWER = "question", "search", "reasoning", "answer"
DROPPED_SOURCES = "dropped_sources"

CheckStatus = Literal["supported", "not_supported", "contradicted", "dangling", "invalid"]


class QuestionData(NodeData):
    """The question at the root."""


class RankedDoc(BaseModel):
    """One of the top-N documents after reranking, as the summarizer was given it."""

    model_config = ConfigDict(extra="forbid")

    rank: int
    source_id: int
    title: str
    ref: str
    score: float


class SearchData(NodeData):
    """One call of the search tool: query → top K → reranker → top N → summary with markers."""

    query: str = ""
    round: int = Field(default=0, description="1 for the first search (the question itself), then 2, 3...")
    by: Literal["question", "agent", "you"] = "agent"
    searcher: str = ""
    found: int | None = Field(default=None, description="Documents the search returned (None before it ran).")
    reranker: str = ""
    rerank_error: str = ""
    rerank_scores: dict[str, float] = Field(
        default_factory=dict,
        description=("The LLM reranker's judgments so far (ref -> score), kept as they arrive for a resumed search."),
    )
    ranked: list[RankedDoc] | None = Field(default=None, description="The top N after reranking, best first.")
    dropped_as_unrelated: list[DroppedHit] = Field(default_factory=list)
    search_error: str = ""
    pages_read: int = Field(default=0, description="Web pages fetched and read in place of their snippet.")
    page_failures: list[str] = Field(default_factory=list, description="Pages that kept their snippet, and why.")
    summary_attempts: int = 0
    removed_markers: list[str] = Field(default_factory=list, description="Bad markers removed from the summary.")
    uncited: bool = Field(default=False, description="The summary cites no document, even when asked again.")
    stepped: bool = Field(
        default=False,
        description=(
            "Its rerank and summary are steps of their own under it (`steps.py`); False on runs stored before, "
            "whose search node holds the ranking and the summary itself."
        ),
    )

    # Per node: a stepped search's content is a line of ours, not the summary. NodeData's default is a
    # ClassVar that nothing assigns, so a read-only property can stand in for it (mypy cannot know that).
    @property
    def content_heading(self) -> str:  # type: ignore[override]
        """Its content's heading in the node panel: the summary's on a search stored before the steps
        were drawn; none on a stepped one, whose fields say what the search found."""
        return "" if self.stepped else "Summary"

    def caption(self) -> str:
        parts = [f"search {self.round}: {self.query}"]
        if self.found is not None:
            parts.append(f"{self.found} found, {len(self.ranked or [])} kept after reranking")
        if self.pages_read:
            parts.append(f"{self.pages_read} pages read")
        if self.removed_markers:
            parts.append(f"{len(self.removed_markers)} bad markers removed")
        return " · ".join(parts)

    def reader_fields(self) -> dict[str, str | list[str]] | None:
        if self.stepped:
            # The ranking and the summary are the next two steps' (their own nodes).
            found = f"{self.found} documents (the first stage's top K), reranked in the next step"
            fields: dict[str, str | list[str]] = {
                "Query": inline_text(self.query),
                "Searched": inline_text(self.searcher),
                "Found": found,
                "Pages that kept their snippet": self.page_failures,
            }
            return {k: v for k, v in fields.items() if v}
        # Titles are pages': escaped, so a title cannot make a link, a citation [n] or a line of its own.
        # Each with its source's marker: the panel numbers it as the summary's citations are numbered.
        docs = [f"{d.rank}. {inline_text(d.title)} [[S{d.source_id}]] (score {d.score:.3f})" for d in self.ranked or []]
        fields = {
            "Query": inline_text(self.query),
            "Reranked documents": docs,
            "Reranker": self.reranker,
            "Search error": self.search_error,
            "Rerank error": self.rerank_error,
            "Pages that kept their snippet": self.page_failures,
        }
        return {k: v for k, v in fields.items() if v}


class ReasoningData(NodeData):
    """One turn of the agent: its reasoning and what it decided."""

    turn: int = 0
    reasoning: str = ""
    decision: Literal["search", "answer"] | None = None
    next_query: str = ""
    focus: str = Field(default="", description="The point you asked the agent to dig into.")
    why_stopped: str = Field(default="", description="When a limit or a repeated query ended the searching.")

    def caption(self) -> str:
        what = {"search": f"search again: {self.next_query}", "answer": "write the answer"}.get(self.decision or "", "")
        return " · ".join(
            p
            for p in (f"turn {self.turn}", f"dig into: {self.focus}" if self.focus else "", what, self.why_stopped)
            if p
        )

    def reader_fields(self) -> dict[str, str | list[str]] | None:
        # Prose that cites nothing of its own: a marker typed in it would cite a source of the run.
        fields = {
            "Dig into": strip_markers(self.focus),
            "Reasoning": strip_markers(self.reasoning),
            "Next query": inline_text(self.next_query),
            "Stopped": self.why_stopped,
        }
        return {k: v for k, v in fields.items() if v}


class CitationCheck(BaseModel):
    """One (sentence, cited source) pair of the answer and the verdict on it."""

    model_config = ConfigDict(extra="forbid")

    sentence: int
    text: str
    source_id: int
    status: CheckStatus
    reason: str = ""


class AnswerData(NodeData):
    """The long-form answer, its citation validation and its per-sentence citation check."""

    attempts: int = 0
    removed_markers: list[str] = Field(default_factory=list)
    uncited: bool = Field(default=False, description="The answer cites no document, even when asked again.")
    write_error: str = ""
    # Answered "the sources at hand do not cover this" (`RunContext.sources_only`), not by the model.
    not_covered: bool = False
    checked: bool = False
    checks: list[CitationCheck] = Field(default_factory=list)
    markers: int = 0
    supported: int = 0
    not_supported: int = 0
    contradicted: int = 0
    dangling: int = 0
    support_rate: float | None = None
    citation_error_rate: float | None = None
    search_count: int = 0

    def caption(self) -> str:
        if not self.checked:
            return "answer" + (f" · {len(self.removed_markers)} bad markers removed" if self.removed_markers else "")
        rate = "–" if self.support_rate is None else f"{self.support_rate:.0%}"
        error = "–" if self.citation_error_rate is None else f"{self.citation_error_rate:.0%}"
        uncited = " · cites no document" if self.uncited else ""
        return f"support rate {rate} · unsupported citations {error} · {self.search_count} searches{uncited}"


NODE_KINDS = (
    NodeKind(
        QUESTION, QuestionData, "Question", "#2F4B7C", "the question you asked", shape="star", size_by_priority=False
    ),
    NodeKind(
        SEARCH,
        SearchData,
        "Search",
        "#4C9BE8",
        "a search: query, reranked documents and their summary",
        shape="box",
        size_by_priority=False,
        colour_field="by",
        variants=(
            Variant("question", "#4C9BE8", "the first search: the question itself"),
            Variant("agent", "#9ECAE9", "a search the agent decided on"),
            Variant("you", "#F2CF5B", "a search you added"),
        ),
    ),
    NodeKind(
        RERANK,
        RerankData,
        "Rerank",
        "#7FB3D5",
        "a search's rerank step: every document found, its score, kept or dropped",
        shape="triangle",
        size_by_priority=False,
    ),
    NodeKind(
        SUMMARY,
        SummaryData,
        "Summary",
        "#F7DC6F",
        "a search's summary step: what its kept documents say, a marker per document",
        shape="square",
        size_by_priority=False,
    ),
    NodeKind(
        REASONING,
        ReasoningData,
        "Reasoning",
        "#C5B0D5",
        "a reasoning turn of the agent",
        shape="dot",
        size_by_priority=False,
    ),
    NodeKind(
        ANSWER,
        AnswerData,
        "Answer",
        "#16A085",
        "the final answer, each citation checked",
        shape="diamond",
        answers=True,
        size_by_priority=False,
    ),
)


# --------------------------------------------------------------------------- sources you dropped


class DroppedSource(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source_id: int
    title: str = ""


class DroppedSources(RunStateModel):
    """The sources you dropped: never shown to the agent again nor cited."""

    sources: list[DroppedSource] = Field(default_factory=list)
    change: str = ""

    def ids(self) -> set[int]:
        return {s.source_id for s in self.sources}

    def panel_caption(self) -> str:
        n = len(self.sources)
        return f"{n} {'source' if n == 1 else 'sources'} you dropped: not cited, not shown to the agent"

    def panel_markdown(self) -> str:
        # Page titles, and changes that quote them: plain text, one line each.
        return "\n".join(f"- {inline_text(s.title)}" for s in self.sources) or "_None dropped._"

    @classmethod
    def history_markdown(cls, versions: Sequence[RunStateModel]) -> str:
        return "\n".join(f"- {inline_text(v.change)}" for v in versions if isinstance(v, DroppedSources) and v.change)


RUN_STATES = (RunStateSpec(DROPPED_SOURCES, DroppedSources, "Dropped sources", expanded=False),)


# --------------------------------------------------------------------------- commands


class AddQueryPayload(CommandPayload):
    query: str = Field(
        min_length=1,
        max_length=300,
        title="Query",
        description="A search to run now; its findings join the answer, which is written again.",
    )


class DropSourcePayload(CommandPayload):
    number: int = Field(
        ge=1,
        le=500,
        title="Source number",
        description="The source's number [n] in the current report; it is dropped and the answer "
        "is written again without it.",
    )


class DigIntoPayload(CommandPayload):
    point: str = Field(
        min_length=1,
        max_length=300,
        title="Point",
        description="A point of the answer the agent should research further; it searches for it "
        "and writes the answer again.",
    )


COMMANDS = (
    CommandSpec(
        "add_query",
        "Add a query",
        "Run a search of your own; the answer is written again with it.",
        AddQueryPayload,
        done="Search added",
    ),
    CommandSpec(
        "drop_source",
        "Drop a source",
        "Drop a cited source; the answer is written again without it.",
        DropSourcePayload,
        done="Source dropped",
    ),
    CommandSpec(
        "dig_into",
        "Dig into a point",
        "Ask the agent to research one point further and answer again.",
        DigIntoPayload,
        done="Digging into it",
    ),
    regenerate_report_command(),
)

VIEW = ViewSpec(layout=Layout.TREE, panels=(DROPPED_SOURCES,))

STEPS = {
    prompts.SUMMARIZE_FIRST.name: "summarising what the first search found, with a marker per document",
    prompts.SUMMARIZE.name: "summarising what this search found for the reasoning so far",
    prompts.AGENT.name: "reasoning about what is known and whether to search again",
    prompts.ANSWER.name: "writing the long-form answer with citations",
    JUDGE.name: "judging whether a document is relevant to the query",
    CLAIM_SUPPORT.name: "checking each cited sentence against its source",
}


def search_of(node: Node) -> SearchData:
    """A search node's data, typed."""
    return SearchData.model_validate(node.data)


def turn_of(node: Node) -> ReasoningData:
    """A reasoning turn's data, typed."""
    return ReasoningData.model_validate(node.data)


def answer_of(node: Node) -> AnswerData:
    """The answer node's data, typed."""
    return AnswerData.model_validate(node.data)
