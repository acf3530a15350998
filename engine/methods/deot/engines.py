"""The Dual-Engine System (paper 3.5): the Engine Controller chooses BREADTH, DEPTH or STOP for a
node; the Breadth Engine proposes up to `max_aspects` aspects; the Depth Engine one follow-up; and,
when an engine only handed back questions already asked, a retry that asks differently.

Each call has an output cap sized to its schema: a small model that loops inside a JSON list would
otherwise write until the endpoint's default cap (minutes on a CPU) before the answer is refused."""

from __future__ import annotations

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
    follow_ups_model,
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


# Output caps in tokens: room for the schema's fields at the prompts' lengths, short of a runaway.
CONTROLLER_MAX_TOKENS = 400
ASPECT_MAX_TOKENS = 160  # per aspect or follow-up
DEPTH_MAX_TOKENS = 300


def decide(ctx: RunContext, node: Node, nodes_used: int) -> ControllerDecision:
    params: DeotParams = ctx.params  # type: ignore[assignment]
    messages = prompts.CONTROLLER.render(
        question=ctx.question, query=node.label, layer=node.depth, max_layers=params.max_layers,
        nodes_used=nodes_used, max_nodes=params.max_nodes, content=_content(node),
    )
    return ctx.llm.ask(messages, ControllerDecision, purpose="controller", node_id=node.id,
                       max_tokens=CONTROLLER_MAX_TOKENS)


def breadth(ctx: RunContext, node: Node, explored: list[str], max_aspects: int) -> list[Proposal]:
    """The Breadth Engine's aspects."""
    messages = prompts.BREADTH.render(
        question=ctx.question, query=node.label, explored="; ".join(explored) or "(nothing yet)",
        content=_content(node), max_aspects=max_aspects,
    )
    result = ctx.llm.ask(messages, breadth_model(max_aspects), purpose="breadth", node_id=node.id,
                         max_tokens=100 + ASPECT_MAX_TOKENS * max_aspects)
    return [Proposal(engine="breadth", query=a.query, reasoning=a.reasoning, priority=a.priority,
                     aspect=a.aspect, category=a.category) for a in result.aspects[:max_aspects]]


def depth(ctx: RunContext, node: Node, explored: list[str], unresolved: list[str]) -> Proposal:
    messages = prompts.DEPTH.render(
        question=ctx.question, query=node.label, explored="; ".join(explored) or "(nothing yet)",
        unresolved="; ".join(unresolved) or "(none noted)", content=_content(node),
    )
    result = ctx.llm.ask(messages, DepthQuestion, purpose="depth", node_id=node.id, max_tokens=DEPTH_MAX_TOKENS)
    return Proposal(engine="depth", query=result.question, reasoning=result.reasoning, priority=result.priority)


def follow_ups_retry(ctx: RunContext, node: Node, explored: list[str], repeats: list[str], n: int,
                     engine: str) -> list[Proposal]:
    """Asked when `engine`'s proposals only repeated questions already asked: a different task (name
    specific things the findings mention, ask about each), so the retry is not the same question
    again. The children keep the engine that was asked for them."""
    messages = prompts.FOLLOW_UPS_RETRY.render(
        query=node.label, explored="; ".join(explored) or "(nothing else)", repeats="; ".join(repeats),
        content=_content(node), n=n,
    )
    result = ctx.llm.ask(messages, follow_ups_model(n), purpose=engine, node_id=node.id,
                         max_tokens=60 + ASPECT_MAX_TOKENS * n)
    return [Proposal(engine=engine, query=f.question, priority="MEDIUM", aspect=f.about,
                     reasoning="asked again differently: the first proposals repeated questions already asked")
            for f in result.follow_ups[:n]]
