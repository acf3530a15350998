"""The Dual-Engine System (paper 3.5): the Engine Controller chooses BREADTH, DEPTH or STOP for a
node; the Breadth Engine proposes up to `max_aspects` aspects; the Depth Engine one follow-up."""

from __future__ import annotations

from string import Template

from dataclasses import dataclass
from typing import Any

from engine.citations import strip_markers
from engine.methods.base import RunContext
from engine.methods.deot import prompts
from engine.methods.deot.params import DeotParams
from engine.methods.deot.schemas import (
    PRIORITY_WEIGHT,
    ControllerDecision,
    DepthQuestion,
    breadth_model,
)
from storage.models import Node


@dataclass
class Proposal:
    """A child question an engine proposes (stored in the parent's data before it is created)."""

    engine: str  # breadth | depth
    query: str
    reasoning: str
    priority: str
    aspect: str = ""
    category: str = ""

    @property
    def weight(self) -> float:
        return PRIORITY_WEIGHT.get(self.priority, 1.0)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _content(node: Node) -> str:
    return strip_markers(node.content)[:4000] or "(no content)"


def decide(ctx: RunContext, node: Node, nodes_used: int) -> ControllerDecision:
    params: DeotParams = ctx.params  # type: ignore[assignment]
    messages = prompts.CONTROLLER.render(
        question=ctx.question, query=node.label, layer=node.depth, max_layers=params.max_layers,
        nodes_used=nodes_used, max_nodes=params.max_nodes, content=_content(node),
    )
    return ctx.llm.ask(messages, ControllerDecision, purpose="controller", node_id=node.id)


def breadth(ctx: RunContext, node: Node, explored: list[str], max_aspects: int,
            repeated: list[str] | None = None) -> list[Proposal]:
    """The Breadth Engine's aspects; `repeated` (the repeats of a first answer) asks again for new ones."""
    retry_note = Template(prompts.REPEATED_NOTE).substitute(repeats="; ".join(repeated)) if repeated else ""
    messages = prompts.BREADTH.render(
        question=ctx.question, query=node.label, explored="; ".join(explored) or "(nothing yet)",
        content=_content(node), max_aspects=max_aspects, retry_note=retry_note,
    )
    result = ctx.llm.ask(messages, breadth_model(max_aspects), purpose="breadth", node_id=node.id)
    return [Proposal(engine="breadth", query=a.query, reasoning=a.reasoning, priority=a.priority,
                     aspect=a.aspect, category=a.category) for a in result.aspects[:max_aspects]]


def depth(ctx: RunContext, node: Node, explored: list[str], unresolved: list[str]) -> Proposal:
    messages = prompts.DEPTH.render(
        question=ctx.question, query=node.label, explored="; ".join(explored) or "(nothing yet)",
        unresolved="; ".join(unresolved) or "(none noted)", content=_content(node),
    )
    result = ctx.llm.ask(messages, DepthQuestion, purpose="depth", node_id=node.id)
    return Proposal(engine="depth", query=result.question, reasoning=result.reasoning, priority=result.priority)
