"""`direct`: one answer call with no retrieval, the papers' "Standard" prompting baseline."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from engine.llm.protocol import StructuredOutputError
from engine.methods import baseline_prompts as prompts
from engine.methods.base import Method, MethodParams, RunContext, yes_no_field
from engine.methods.common import ANSWER, ASKED_QUESTION, child_of_kind, ensure_root
from engine.methods.estimate import CostEstimate, capped_tokens, single_call
from engine.reader_text import ReadableText
from storage.statuses import NodeStatus


class DirectAnswer(BaseModel):
    answer: ReadableText = Field(description="The answer, in Markdown.")
    confidence: Literal["low", "medium", "high"] = Field(description="How sure the answer is.")


class DirectParams(MethodParams):
    quick_profile = {"max_answer_tokens": 400}

    max_answer_tokens: int = Field(
        default=800,
        ge=32,
        le=16000,
        description="Upper bound on the length of the answer, in tokens.",
    )
    yes_no: bool = yes_no_field()


class DirectMethod(Method[DirectParams]):
    name = "direct"
    title = "Direct answer (baseline)"
    summary = "One LLM call, no retrieval: the 'Standard' prompting baseline of the papers."
    good_for = "a baseline: the model's own answer, no sources"
    Params = DirectParams
    node_kinds = (ASKED_QUESTION, ANSWER)
    steps = {prompts.DIRECT_ANSWER.name: "answering from what the model knows"}

    # The answer prompt's tokens, measured on the scripted fake (`benchmarks/bench_estimate.py`).
    PROMPT_TOKENS = 165

    @classmethod
    def estimate(cls, params: DirectParams) -> CostEstimate:
        cap = params.max_answer_tokens
        return single_call(
            "answer the question",
            prompt=cls.PROMPT_TOKENS,
            completion=capped_tokens(cap),
            structured=True,
            how="one answer call",
        )

    def run(self, ctx: RunContext[DirectParams]) -> None:
        params = ctx.params
        root = ensure_root(ctx)
        answer = child_of_kind(ctx, root, "answer") or ctx.graph.add(kind="answer", label="Answer", parent=root)
        if answer.status != NodeStatus.DONE:
            ctx.checkpoint()
            ctx.graph.start(answer)
            try:
                result = ctx.llm.ask(
                    prompts.DIRECT_ANSWER.render(
                        question=ctx.question,
                        today=ctx.today.isoformat(),
                        answer_form=prompts.answer_form(params.yes_no),
                    ),
                    DirectAnswer,
                    node_id=answer.id,
                    max_tokens=params.max_answer_tokens,
                )
            except StructuredOutputError as exc:
                ctx.graph.fail(answer, str(exc), data={"last_output": exc.last_output[:2000]})
            else:
                ctx.graph.finish(answer, content=result.answer, data={"confidence": result.confidence})
        if not ctx.graph.has_report():
            self.write_report(ctx)

    def write_report(self, ctx: RunContext[DirectParams]) -> None:
        root = ensure_root(ctx)
        answer = child_of_kind(ctx, root, "answer")
        if answer is not None and answer.status == NodeStatus.DONE:
            body = answer.content
        else:
            # The technical reason stays on the node and the run; the reader gets what to do.
            body = "_No answer was produced: the answer step failed. Resume the run to try it again._"
        ctx.graph.save_report(body, data={"method": self.name})
