"""The Dual-Engine System (paper 3.5): the Engine Controller chooses BREADTH, DEPTH or STOP for a
node; the Breadth Engine proposes up to `max_aspects` aspects; the Depth Engine one follow-up; and,
when an engine only handed back questions already asked, a retry that asks differently.

Each call has an output cap sized to its schema: a small model that loops inside a JSON list would
otherwise write until the endpoint's default cap (minutes on a CPU) before the answer is refused."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from engine.citations import strip_markers
from engine.llm.protocol import StructuredOutputError
from engine.methods.base import RunContext
from engine.methods.deot import prompts
from engine.methods.deot.params import DeotParams
from engine.methods.deot.schemas import (
    PRIORITY_WEIGHT,
    ControllerDecision,
    DepthQuestion,
    PaperControllerDecision,
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


def layer_of(node: Node) -> int:
    """The node's layer as the paper counts it: the user's question is layer 1."""
    return node.depth + 1


def decide(ctx: RunContext[DeotParams], node: Node, nodes_used: int) -> tuple[ControllerDecision, str]:
    """The Engine Controller's decision, and who made it ("controller", or "default" when the paper's
    controller gave no usable answer). Ours may answer STOP, and an unusable answer raises (the
    caller stops the branch); with `paper_engines` the choice is BREADTH or DEPTH only, and an unusable
    answer is BREADTH, as the authors' controller defaults."""
    params = ctx.params
    prompt, model = (
        (prompts.CONTROLLER_PAPER, PaperControllerDecision)
        if params.paper_engines
        else (prompts.CONTROLLER, ControllerDecision)
    )
    messages = prompt.render(
        question=ctx.question,
        query=node.label,
        layer=layer_of(node),
        max_layers=params.max_layers,
        nodes_used=nodes_used,
        max_nodes=params.max_nodes,
        content=_content(node),
    )
    try:
        result = ctx.llm.ask(messages, model, purpose="controller", node_id=node.id, max_tokens=CONTROLLER_MAX_TOKENS)
    except StructuredOutputError as exc:
        if not params.paper_engines:
            raise
        return ControllerDecision(
            decision="BREADTH",
            reasoning=f"the controller gave no usable answer ({exc}); "
            "BREADTH by default, as in the paper (paper_engines)",
        ), "default"
    return ControllerDecision.model_validate(result.model_dump()), "controller"


def breadth(ctx: RunContext[DeotParams], node: Node, explored: list[str], max_aspects: int) -> list[Proposal]:
    """The Breadth Engine's aspects: at most `max_aspects` (ours), or exactly that many asked for
    (`paper_engines`; a model that gives fewer is taken at its word)."""
    params = ctx.params
    how_many = (
        f"Give exactly {max_aspects} aspects." if params.paper_engines else f"Give at most {max_aspects} aspects."
    )
    messages = prompts.BREADTH.render(
        question=ctx.question,
        query=node.label,
        explored="; ".join(explored) or "(nothing yet)",
        content=_content(node),
        how_many=how_many,
    )
    result = ctx.llm.ask(
        messages,
        breadth_model(max_aspects),
        purpose="breadth",
        node_id=node.id,
        max_tokens=100 + ASPECT_MAX_TOKENS * max_aspects,
    )
    return [
        Proposal(
            engine="breadth",
            query=a.query,
            reasoning=a.reasoning,
            priority=a.priority,
            aspect=a.aspect,
            category=a.category,
        )
        for a in result.aspects[:max_aspects]
    ]


def depth(ctx: RunContext[DeotParams], node: Node, explored: list[str], unresolved: list[str]) -> Proposal:
    messages = prompts.DEPTH.render(
        question=ctx.question,
        query=node.label,
        explored="; ".join(explored) or "(nothing yet)",
        unresolved="; ".join(unresolved) or "(none noted)",
        content=_content(node),
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
_QUESTION_WORDS = frozenset(
    "who whom whose what which when where why how is are was were do does did can could".split()
)


def _is_question(text: str) -> bool:
    return text.endswith("?") or text.split()[0].lower() in _QUESTION_WORDS


def follow_ups_retry(ctx: RunContext[DeotParams], node: Node, n: int, engine: str) -> list[Proposal]:
    """Asked when `engine`'s proposals only repeated questions already asked: a different, easier
    task (copy the proper names the findings mention), each name becoming a follow-up about it.
    Small models that hand a question back can still copy names out of a text; the question about
    each is written here, so it cannot be a copy. A name must be in the findings as written (the
    0.5B model otherwise returns the prompt's own words, "people", "organisations"); when the model
    gives none, the capitalised names of the findings are taken in order. The children keep the
    engine that was asked for them."""
    content = _content(node)
    messages = prompts.FOLLOW_UPS_RETRY.render(query=node.label, content=content, n=n)
    result = ctx.llm.ask(messages, named_things_model(n), purpose=engine, node_id=node.id, max_tokens=60 + 40 * n)
    things = [(thing.name, thing.kind) for thing in result.things]
    names = [
        (name, kind)
        for name, kind in ((_clean_name(name), kind) for name, kind in things)
        if _usable_name(name, content)
    ]
    how = "the model named"
    if not names:
        names, how = [(name, "other") for name in names_in(content, exclude=node.label)], "the findings name"
    proposals: list[Proposal] = []
    for name, kind in names:
        proposals.append(
            Proposal(
                engine=engine,
                query=FOLLOW_UP_BY_KIND[kind].format(name=name),
                priority="MEDIUM",
                aspect=name,
                category=kind,
                reasoning=f"the first proposals repeated questions already asked; {how} {name}",
            )
        )
    return proposals[:n]


def _clean_name(name: str) -> str:
    return " ".join(strip_markers(name).split()).strip(" .,;:!\"'")


def _usable_name(name: str, content: str) -> bool:
    """A proper name copied from the findings: a few words, capitalised, as the findings write it."""
    return (
        bool(name)
        and len(name.split()) <= MAX_NAME_WORDS
        and not _is_question(name)
        and (name[0].isupper() or name[0].isdigit())
        and name in content
    )


# Runs of capitalised words (with "of", "and", "the", "de"... inside), e.g. "Nick Park", "Bank of England".
_NAME_RUN = re.compile(r"\b[A-Z][\w'’-]*(?:\s+(?:(?:of|and|the|de|von|van|du|la|le)\s+)?[A-Z][\w'’-]*)*")
# "American", "British", "Japanese", "Korean": adjectives of nationality, not things to look up.
_ADJECTIVE_ENDINGS = ("ian", "ish", "ese", "can", "ean")
_NOT_NAMES = frozenset(
    "Key Evidence Analysis Conclusion Conflicting Findings The This That These Those It In On "
    "At For And But Or A An As By From With Which What Who When Where Why How".split()
)


def names_in(text: str, *, exclude: str = "") -> list[str]:
    """The capitalised names a text mentions: names of several words first, then the most mentioned,
    each once (a name inside another is the same thing); sentence and heading openers are left out,
    and so are names the question holds."""
    counts: dict[str, int] = {}
    for match in _NAME_RUN.finditer(strip_markers(text)):
        name = re.sub(r"^(?:The|A|An)\s+", "", match.group(0).strip())
        words = name.split()
        if len(words) == 1 and (name in _NOT_NAMES or len(name) < 3 or name.endswith(_ADJECTIVE_ENDINGS)):
            continue
        if len(words) > MAX_NAME_WORDS or name.lower() in exclude.lower():
            continue
        counts[name] = counts.get(name, 0) + 1
    # Names of several words first (a single capitalised word is often an adjective: "British").
    ranked = sorted(counts, key=lambda name: (len(name.split()) == 1, -counts[name]))
    chosen: list[str] = []
    for name in ranked:
        if not any(name in other or other in name for other in chosen):
            chosen.append(name)
    return chosen
