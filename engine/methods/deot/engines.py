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
    named_things_model,
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


# A follow-up about each kind of thing the retry names: short, natural questions a node can solve.
FOLLOW_UP_BY_KIND = {
    "person": "Who is {name}?",
    "work": "What is {name} about?",
    "organisation": "What is {name} and what does it do?",
    "place": "What is known about {name}?",
    "date": "What happened in {name}?",
    "event": "What happened in {name}, and what came of it?",
    "other": "What is known about {name}?",
}
MAX_NAME_WORDS = 8
_QUESTION_WORDS = frozenset("who whom whose what which when where why how is are was were do does did can could".split())


def _is_question(text: str) -> bool:
    return text.endswith("?") or text.split()[0].lower() in _QUESTION_WORDS


def follow_ups_retry(ctx: RunContext, node: Node, n: int, engine: str) -> list[Proposal]:
    """Asked when `engine`'s proposals only repeated questions already asked: a different, easier
    task (name the specific things the findings mention), each thing becoming a follow-up about it.
    Small models that hand a question back can still pick names out of a text; the question about
    each is written here, so it cannot be a copy. The children keep the engine that was asked."""
    messages = prompts.FOLLOW_UPS_RETRY.render(query=node.label, content=_content(node), n=n)
    result = ctx.llm.ask(messages, named_things_model(n), purpose=engine, node_id=node.id,
                         max_tokens=60 + 40 * n)
    proposals: list[Proposal] = []
    for thing in result.things:
        name = " ".join(strip_markers(thing.name).split()).strip(" .,;:!\"'")
        if not name or len(name.split()) > MAX_NAME_WORDS or _is_question(name):
            continue  # a sentence or a question, not a name
        proposals.append(Proposal(
            engine=engine, query=FOLLOW_UP_BY_KIND[thing.kind].format(name=name), priority="MEDIUM",
            aspect=name, category=thing.kind,
            reasoning=f"the first proposals repeated questions already asked; the findings mention {name}"))
    return proposals[:n]
