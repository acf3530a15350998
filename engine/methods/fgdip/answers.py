"""A candidate answer written from its branch: the short answer and an explanation citing the
branch's sources as [n] (converted at once to run-wide markers, `engine/citations.py`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.citations import cited_source_ids, source_blocks, to_stored_markers
from engine.llm.protocol import StructuredOutputError
from engine.methods.base import RunContext
from engine.methods.fgdip import prompts
from engine.methods.fgdip.generator import answer_rule
from engine.methods.fgdip.params import FgdipParams
from engine.methods.fgdip.schemas import WrittenAnswer, WrittenYesNoAnswer
from engine.methods.fgdip.trajectory import render_path
from engine.prompting import inert
from storage.models import Node, Source, stored_id


@dataclass
class Written:
    short_answer: str
    explanation: str  # with [[S<id>]] markers
    invalid_citations: list[int] = field(default_factory=list)
    cited: list[int] = field(default_factory=list)
    error: str = ""
    disagreed: str = ""  # the writer's short answer when it was not the path's (which stands)


def path_sources(ctx: RunContext[FgdipParams], path: Sequence[Node]) -> list[Source]:
    """The sources the branch retrieved, each once, in the order it met them."""
    seen: dict[int, Source] = {}
    for node in path:
        for source in ctx.graph.sources(node):
            seen.setdefault(stored_id(source), source)
    return list(seen.values())


def write_answer(ctx: RunContext[FgdipParams], answer: Node, proposed: str, path: Sequence[Node]) -> Written:
    params = ctx.params
    sources = path_sources(ctx, path)
    messages = prompts.WRITE_ANSWER.render(
        question=ctx.question,
        answer=inert(proposed),
        answer_rule=answer_rule(params),
        trajectory=render_path(path, observation_chars=params.observation_chars // 2),
        sources=source_blocks(sources, max_chars=700) if sources else "(no sources were found on this path)",
    )
    try:
        written = ctx.llm.ask(
            messages,
            WrittenYesNoAnswer if params.yes_no else WrittenAnswer,
            purpose="write_answer",
            node_id=answer.id,
            max_tokens=400,
        )
    except StructuredOutputError as exc:
        # The path's own answer stands; only its explanation is missing.
        return Written(
            yes_or_no(proposed) if params.yes_no else proposed, "", error=f"the explanation could not be written: {exc}"
        )
    explanation, dropped = to_stored_markers(written.explanation.strip(), sources)
    short = agreed_short_answer(proposed, " ".join(written.short_answer.split()), yes_no=params.yes_no)
    return Written(
        short,
        explanation,
        dropped,
        cited_source_ids(explanation),
        disagreed="" if short == " ".join(written.short_answer.split()) else written.short_answer[:200],
    )


_ARTICLES = {"a", "an", "the"}


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"\w+", text.casefold()) if w not in _ARTICLES}


def agreed_short_answer(proposed: str, written: str, *, yes_no: bool) -> str:
    """The answer the search reached, in the explanation writer's shorter words when they say the
    same: the writer (not a step of the paper's search) may shorten the finish step's answer ("It was
    Arthur's Magazine, in 1844" -> "Arthur's Magazine") but never change it ("1844" -> "First for
    Women"), or the Answer Evaluator and the error memory would judge words no node produced. In
    yes/no mode the writer may read a hedge ("Probably not") as yes or no, never flip one."""
    if not _words(proposed):
        return written  # the finish step said nothing usable: the writer's words are all there is to judge
    if yes_no:
        said = yes_or_no(proposed)
        return said if said in ("yes", "no") else written
    # A heuristic: no word the path did not say. It cannot tell which of the path's names is meant
    # ("1844" out of "Arthur's Magazine, in 1844"); the Answer Evaluator judges what it keeps.
    words = _words(written)
    return written if words and words <= _words(proposed) else proposed


def yes_or_no(answer: str) -> str:
    """A yes/no question's answer read from a finish step's words ("Yes, because..." -> "yes"); what
    says neither is kept as it is, for the Answer Evaluator to reject."""
    first = answer.strip().split(maxsplit=1)[0].strip(".,;:!").lower() if answer.strip() else ""
    return first if first in ("yes", "no") else answer
