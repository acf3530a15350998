"""The Node Generator (section 3.2): node j of branch i drawn from
p(z_ij | x, e_1..i-1, z'_ij, z_i1..i(j-1)): the question, the error memory, the sibling nodes already
generated at this layer (real-time feedback) and the branch's own trajectory."""

from __future__ import annotations

from collections.abc import Sequence

from engine.methods.base import RunContext
from engine.methods.fgdip import prompts
from engine.methods.fgdip.kinds import ErrorMemory
from engine.methods.fgdip.params import FgdipParams
from engine.methods.fgdip.schemas import FinishStep, GeneratedStep
from engine.methods.fgdip.trajectory import render_path, render_siblings
from storage.models import Node


def answer_rule(params: FgdipParams) -> str:
    return prompts.YES_NO_ANSWER_RULE if params.yes_no else prompts.SHORT_ANSWER_RULE


def generate_step(
    ctx: RunContext[FgdipParams],
    parent: Node,
    path: Sequence[Node],
    siblings: Sequence[Node],
    memory: ErrorMemory,
    *,
    must_finish: bool,
) -> GeneratedStep:
    """One new node under `parent` (raises StructuredOutputError when the model's answer is unusable).
    The call is recorded against the parent: the node does not exist until it is generated."""
    params = ctx.params
    messages = prompts.GENERATE.render(
        question=ctx.question,
        errors=memory.as_prompt(),
        siblings=render_siblings(siblings),
        trajectory=render_path(path, observation_chars=params.observation_chars),
        steps=len(path),
        finish_rule=prompts.FINISH_REQUIRED if must_finish else prompts.FINISH_ALLOWED,
        answer_rule=answer_rule(params),
    )
    step = ctx.llm.ask(
        messages,
        FinishStep if must_finish else GeneratedStep,
        purpose="generate",
        node_id=parent.id,
        max_tokens=300,
        temperature=params.temperature,
    )
    return GeneratedStep(thought=step.thought, action=step.action, argument=" ".join(step.argument.split()))
