"""The evaluators (section 3.3): the Step Evaluator's sure / maybe / impossible on a trajectory, and
the Answer Evaluator's check that a candidate solves the question and is on topic, with the error
analysis a rejected answer leaves for later node generation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.llm.protocol import StructuredOutputError
from engine.methods.base import RunContext
from engine.methods.fgdip import prompts
from engine.methods.fgdip.params import FgdipParams
from engine.methods.fgdip.schemas import AnswerJudgement, StepJudgement
from engine.methods.fgdip.trajectory import render_path
from engine.prompting import inert
from storage.models import Node


@dataclass(frozen=True)
class StepVerdict:
    verdict: str
    justification: str
    judged_by: str  # "evaluator", or "error" when its answer could not be read


def judge_step(ctx: RunContext[FgdipParams], node: Node, path: Sequence[Node]) -> StepVerdict:
    """`path` ends with `node`. An unreadable answer counts as maybe: the node is neither favoured
    nor pruned on the strength of nothing."""
    params = ctx.params
    messages = prompts.EVALUATE_STEP.render(
        question=ctx.question, trajectory=render_path(path, observation_chars=params.observation_chars)
    )
    try:
        judgement = ctx.llm.ask(messages, StepJudgement, purpose="evaluate_step", node_id=node.id, max_tokens=300)
    except StructuredOutputError as exc:
        # Plain words for the reader; the parse error goes to the step log's event data.
        ctx.graph.narrate(
            "the Step Evaluator's reply could not be read; the step counts as maybe",
            node_id=node.id,
            error=str(exc)[:2000],
        )
        return StepVerdict(
            "maybe", "The Step Evaluator's reply could not be read, so this step counts as maybe.", "error"
        )
    return StepVerdict(judgement.verdict, judgement.judgement.strip(), "evaluator")


@dataclass(frozen=True)
class AnswerVerdict:
    verdict: str  # accepted, rejected, unjudged (kinds.AnswerVerdict)
    solves: bool | None
    on_topic: bool | None
    reasons: str
    error_analysis: str
    error: str = ""  # why the evaluator's reply could not be read


def judge_answer(ctx: RunContext[FgdipParams], answer: Node, short_answer: str, path: Sequence[Node]) -> AnswerVerdict:
    params = ctx.params
    messages = prompts.EVALUATE_ANSWER.render(
        question=ctx.question,
        answer=inert(short_answer),
        trajectory=render_path(path, observation_chars=params.observation_chars // 2),
    )
    try:
        judgement = ctx.llm.ask(messages, AnswerJudgement, purpose="evaluate_answer", node_id=answer.id, max_tokens=400)
    except StructuredOutputError as exc:
        # No verdict is neither a pass nor a rejection: the answer is not verified, the search goes
        # on, and a resume asks again. The parse error stays out of what a reader is shown.
        return AnswerVerdict("unjudged", None, None, "", "", error=str(exc)[:2000])
    accepted = judgement.solves and judgement.on_topic
    analysis = (
        ""
        if accepted
        else (
            judgement.error_analysis.strip() or judgement.thought.strip() or "The answer was judged wrong or off topic."
        )
    )
    return AnswerVerdict(
        "accepted" if accepted else "rejected",
        judgement.solves,
        judgement.on_topic,
        judgement.thought.strip(),
        analysis,
    )
