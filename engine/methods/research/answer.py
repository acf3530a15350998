"""The final answer and its checks: written from every search's summary with the run-wide document
numbers (`markers.write_cited` asks again while a marker is malformed or points to no retrieved
document), then each cited sentence checked against the cited source's text by the claim-support
check (`engine/claim_support.py`, which the evaluation harness shares), on the run's own LLM and node."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from engine.citations import source_blocks
from engine.claim_support import JudgedRun, check_claims, citation_error_rate
from engine.llm.protocol import Message
from engine.methods.base import RunContext
from engine.methods.research import prompts
from engine.methods.research.markers import CitedText, write_cited
from engine.methods.research.params import ResearchParams
from engine.prompting import inert
from storage.models import Node, Source

T = TypeVar("T", bound=BaseModel)


def write_answer(
    ctx: RunContext[ResearchParams], node: Node, *, reasoning: Sequence[str], findings: str, documents: Sequence[Source]
) -> CitedText:
    params = ctx.params
    listed = inert(source_blocks(documents, max_chars=300)) if documents else "(no document was retrieved)"

    def write(feedback: str) -> str:
        messages = prompts.ANSWER.render(
            question=ctx.question,
            reasoning=inert("\n\n".join(reasoning)) or "(none)",
            findings=findings,
            documents=listed,
            feedback=feedback,
        )
        return ctx.llm.text(
            messages,
            purpose="writer",
            node_id=node.id,
            max_tokens=params.answer_max_tokens,
            temperature=params.temperature,
        )

    return write_cited(write, documents, params.citation_retries)


class _NodeJudge:
    """The run's LLM as the claim-support check asks it (`ask(..., purpose=)`), accounted to the node."""

    def __init__(self, ctx: RunContext[ResearchParams], node: Node) -> None:
        self._ctx, self._node = ctx, node

    def ask(self, messages: Sequence[Message], output_type: type[T], *, purpose: str = "judge_claims") -> T:
        return self._ctx.llm.ask(messages, output_type, purpose=purpose, node_id=self._node.id, max_tokens=1200)


def check_answer(
    ctx: RunContext[ResearchParams], node: Node, text: str, sources: dict[int, Source], removed: int
) -> dict[str, Any]:
    """Each cited sentence against its source: the checks, the counts and the two rates. The markers
    removed before storing (malformed or dangling after the last retry) count as dangling errors."""
    # One judge call per cited source, made together: none reads another's verdict.
    run = JudgedRun(run_id=ctx.run_id, question=ctx.question, report=text, sources=sources, model="")
    # check_claims calls nothing but `llm.ask(messages, output_type, purpose=)`, which a _NodeJudge has; its
    # parameter is annotated EvalLLM (engine/claim_support.py) where any such judge is meant.
    result = check_claims(_NodeJudge(ctx, node), run, parallel=ctx.parallel)  # type: ignore[arg-type]
    return rates(
        {
            "checks": [
                {"sentence": s.number, "text": s.text, "source_id": c.source_id, "status": c.status, "reason": c.reason}
                for s in result.sentences
                for c in s.citations
            ],
            "markers": result.markers,
            "supported": result.supported,
            "not_supported": result.not_supported,
            "contradicted": result.contradicted,
            "dangling": result.dangling,
            "invalid": result.invalid,
        },
        removed,
    )


def rates(counts: dict[str, Any], removed: int) -> dict[str, Any]:
    """support rate = supported / validly checked; citation error rate = (dangling + removed + not
    supported + contradicted) / (validly checked + dangling + removed), `metrics.citation_error_rate`;
    None when there is no citation to check."""
    checked = counts["supported"] + counts["not_supported"] + counts["contradicted"]
    markers = counts["markers"] - counts.pop("invalid", 0) + removed
    # An answer with no citation to check has no error rate: "0%" would read as checked and clean.
    error = (
        citation_error_rate(markers, counts["dangling"] + removed, counts["not_supported"] + counts["contradicted"])
        if markers
        else None
    )
    return {
        **counts,
        "checked": True,
        "support_rate": counts["supported"] / checked if checked else None,
        "citation_error_rate": error,
    }
