"""ReAct's node kinds: the question, one node per step (a chain: each step is the child of the one
before), and the answer the finish step gave."""

from __future__ import annotations

from pydantic import Field

from engine.contract import NodeData, NodeKind, Variant
from engine.methods.common import ASKED_QUESTION, AnswerData, DroppedHit
from storage.models import Node


class StepData(NodeData):
    thought: str = Field(default="", description="The model's reasoning at this step.")
    action: str = Field(default="", description="search or finish.")
    argument: str = Field(default="", description="The query searched, or the answer given.")
    step: int = Field(default=0, description="Its number in the trajectory, from 1.")
    forced: bool = Field(default=False, description="The last step the limit allowed: it could only finish.")
    found: int = Field(default=0, description="Passages the search kept as its observation.")
    searcher: str = Field(default="", description="Where it was searched.")
    dropped_as_unrelated: list[DroppedHit] = Field(default_factory=list, description="Hits below the relevance floor.")
    repeated: bool = Field(default=False, description="The query had been searched before: nothing new was searched.")
    last_output: str = Field(default="", description="The unusable model output of a failure.")


STEP = NodeKind(
    "step",
    StepData,
    "Step",
    "#4C78A8",
    "a thought and its action (search, then its observation)",
    shape="box",
    colour_field="action",
    size_by_priority=False,
    variants=(Variant("finish", "#9467BD", "a step that gave the answer"),),
)


class ReactAnswerData(AnswerData):
    short_answer: str = Field(default="", description="The answer itself, as the answer writer gave it.")


ANSWER = NodeKind(
    "answer",
    ReactAnswerData,
    "Answer",
    "#9D755D",
    "the answer, written up with its citations",
    answers=True,
    size_by_priority=False,
)

KINDS = (ASKED_QUESTION, STEP, ANSWER)


def step_of(node: Node) -> StepData:
    """A step node's data, typed."""
    return StepData.model_validate(node.data)


def answer_of(node: Node) -> ReactAnswerData:
    """An answer node's data, typed."""
    return ReactAnswerData.model_validate(node.data)
