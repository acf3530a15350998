"""Small graph steps and node kinds shared by methods."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from engine.contract import NodeData, NodeKind
from engine.methods.base import P, RunContext
from storage.models import Node
from storage.statuses import NodeStatus


class DroppedHit(BaseModel):
    """A search hit left out as unrelated (below the relevance floor), as a node records it."""

    title: str
    ref: str
    score: float  # the share of the query's words it held
    similarity: float | None = None  # its cosine to the query, when the run's embedder judged it


class AskedQuestionData(NodeData):
    """The user's question as the root of a baseline's graph: nothing but its label."""


class RetrievalData(NodeData):
    query: str = Field(default="", description="What was searched for.")
    searcher: str = Field(default="", description="Where it was searched.")
    refs: list[str] = Field(default_factory=list, description="The references of the passages kept.")
    dropped_as_unrelated: list[DroppedHit] = Field(default_factory=list, description="Hits below the relevance floor.")


class AnswerData(NodeData):
    confidence: Literal["low", "medium", "high"] | None = None
    invalid_citations: list[int] = Field(default_factory=list, description="Citation numbers that named no source.")
    attributed_citations: int = Field(default=0, description="Citations added to sentences drawn from a passage.")
    last_output: str = Field(default="", description="The unusable model output of a failure.")
    not_covered: bool = Field(
        default=False,
        description="Answered 'the sources at hand do not cover this' "
        "(a model that answers only from sources), not by the model.",
    )


ASKED_QUESTION = NodeKind("question", AskedQuestionData, "Question", "#2F4B7C", "the question you asked")
RETRIEVAL = NodeKind("search", RetrievalData, "Retrieval", "#72B7B2", "retrieval step", shape="box")
ANSWER = NodeKind("answer", AnswerData, "Answer", "#9D755D", "the answer", answers=True)


def ensure_root(ctx: RunContext[P], *, kind: str = "question") -> Node:
    """The run's root node (the user's question), created once."""
    root = ctx.graph.root()
    if root is None:
        root = ctx.graph.add(kind=kind, label=ctx.question, content=ctx.question, status=NodeStatus.DONE, depth=0)
    return root


def child_of_kind(ctx: RunContext[P], parent: Node, kind: str) -> Node | None:
    for child in ctx.graph.children(parent):
        if child.kind == kind:
            return child
    return None
