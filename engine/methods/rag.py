"""`rag`: retrieve the top-k passages, answer with inline citations (the "vanilla RAG" baseline)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from engine.citations import attribute_uncited, cited_source_ids, source_blocks, to_stored_markers
from engine.llm.protocol import StructuredOutputError
from engine.methods import baseline_prompts as prompts
from engine.methods.base import Method, MethodParams, RunContext, read_pages_field, relevance_floor_field, yes_no_field
from engine.methods.common import ANSWER, ASKED_QUESTION, RETRIEVAL, AnswerData, child_of_kind, ensure_root
from engine.methods.estimate import CostEstimate, capped_tokens, single_call
from engine.reader_text import ReadableText
from engine.search.protocol import SearchError
from engine.search.relevance import not_covered, nothing_found, relevant_hits, ungrounded_note
from storage.models import Node
from storage.statuses import NodeStatus


class CitedAnswer(BaseModel):
    answer: ReadableText = Field(description="The answer in Markdown, citing sources inline as [n].")
    confidence: Literal["low", "medium", "high"] = Field(description="How well the sources support it.")


class RagParams(MethodParams):
    quick_profile = {"top_k": 4, "max_answer_tokens": 500, "attribute_citations": True}

    top_k: int = Field(default=5, ge=1, le=50, description="How many passages to retrieve for the question.")
    relevance_floor: float = relevance_floor_field()
    read_pages: int = read_pages_field(5)
    max_answer_tokens: int = Field(
        default=800, ge=32, le=16000, description="Upper bound on the length of the answer, in tokens."
    )
    attribute_citations: bool = Field(
        default=False,
        description="Add a citation [n] to sentences that cite nothing but are clearly drawn from passage n "
        "(most of their words are in it). For small models that forget to cite.",
    )
    yes_no: bool = yes_no_field()


class RagMethod(Method[RagParams]):
    name = "rag"
    title = "Retrieve and answer (baseline)"
    summary = "Retrieve the top-k passages for the question, then answer citing them: vanilla RAG."
    good_for = "a fast baseline: a short cited answer from one search"
    Params = RagParams
    node_kinds = (ASKED_QUESTION, RETRIEVAL, ANSWER)
    steps = {prompts.RAG_ANSWER.name: "answering from the sources found"}

    # The answer prompt's tokens: its instructions plus each retrieved passage, measured on the
    # scripted fake over the bundled corpus (`benchmarks/bench_estimate.py`); web pages are longer.
    PROMPT_BASE_TOKENS, TOKENS_PER_PASSAGE = 360, 78

    @classmethod
    def estimate(cls, params: RagParams) -> CostEstimate:
        p = params
        return single_call(
            "answer from the passages",
            prompt=cls.PROMPT_BASE_TOKENS + cls.TOKENS_PER_PASSAGE * p.top_k,
            completion=capped_tokens(p.max_answer_tokens),
            structured=True,
            how=f"one search (no LLM call), one answer call over {p.top_k} passages",
        )

    def run(self, ctx: RunContext[RagParams]) -> None:
        params = ctx.params
        root = ensure_root(ctx)

        retrieval = child_of_kind(ctx, root, "search") or ctx.graph.add(
            kind="search",
            label=f"Retrieve top {params.top_k} passages",
            parent=root,
            data={"query": ctx.question},
        )
        if retrieval.status != NodeStatus.DONE:
            ctx.checkpoint()
            ctx.graph.start(retrieval)
            try:
                hits = ctx.search(ctx.question, k=params.top_k, node=retrieval)
            except SearchError as exc:
                # The answer step still runs; it will say that it has no sources.
                retrieval = ctx.graph.fail(retrieval, exc.user_message)
            else:
                relevant = relevant_hits(ctx.question, hits, floor=params.relevance_floor, embedder=ctx.embedder)
                ctx.note_unrelated(ctx.question, relevant, retrieval)
                # Web results: the page's passage about the question (the answer quotes 1,500 characters).
                kept = ctx.read_pages(
                    ctx.question, relevant.kept, limit=params.read_pages, max_chars=1500, node=retrieval
                ).hits
                sources = ctx.graph.add_sources(kept, node=retrieval) if kept else []
                content = (
                    f"{len(sources)} relevant passages retrieved"
                    if sources
                    else nothing_found(ctx.searcher.description)
                )
                retrieval = ctx.graph.finish(
                    retrieval,
                    content=content,
                    data={
                        "searcher": ctx.searcher.description,
                        "refs": [s.ref for s in sources],
                        "dropped_as_unrelated": relevant.dropped_summary(),
                    },
                )

        answer = child_of_kind(ctx, retrieval, "answer") or ctx.graph.add(
            kind="answer", label="Answer", parent=retrieval
        )
        if answer.status != NodeStatus.DONE:
            self._answer(ctx, retrieval, answer)
        if not ctx.graph.has_report():
            self.write_report(ctx)

    def _answer(self, ctx: RunContext[RagParams], retrieval: Node, answer: Node) -> None:
        """The answer step: the model over the kept passages, or, when none was kept and the model
        answers only from sources, "the sources at hand do not cover this"."""
        params = ctx.params
        ctx.checkpoint()
        ctx.graph.start(answer)
        sources = ctx.graph.sources(retrieval)
        if not sources and ctx.sources_only and retrieval.status == NodeStatus.DONE:
            # Nothing found is about the question, and the model answers only from sources.
            ctx.graph.finish(
                answer, content=not_covered(ctx.question, ctx.searcher.description), data={"not_covered": True}
            )
            return
        messages = prompts.RAG_ANSWER.render(
            question=ctx.question,
            today=ctx.today.isoformat(),
            sources=source_blocks(sources) if sources else "(no relevant sources were found)",
            answer_form=prompts.answer_form(params.yes_no),
        )
        try:
            result = ctx.llm.ask(messages, CitedAnswer, node_id=answer.id, max_tokens=params.max_answer_tokens)
        except StructuredOutputError as exc:
            ctx.graph.fail(answer, str(exc), data={"last_output": exc.last_output[:2000]})
        else:
            text, attributed = (
                attribute_uncited(result.answer, sources) if params.attribute_citations else (result.answer, 0)
            )
            content, dropped = to_stored_markers(text, sources)
            ctx.graph.link_sources(answer, cited_source_ids(content))
            ctx.graph.finish(
                answer,
                content=content,
                data={
                    "confidence": result.confidence,
                    "invalid_citations": dropped,
                    "attributed_citations": attributed,
                },
            )

    def write_report(self, ctx: RunContext[RagParams]) -> None:
        root = ensure_root(ctx)
        retrieval = child_of_kind(ctx, root, "search")
        answer = child_of_kind(ctx, retrieval, "answer") if retrieval else None
        own = ""
        if answer is not None and answer.status == NodeStatus.DONE:
            body = answer.content
            if not ctx.graph.sources(retrieval) and not AnswerData.model_validate(answer.data).not_covered:
                # Said to the reader, not left to the model: nothing here is grounded in a source.
                own = ungrounded_note(ctx.searcher.description)
        else:
            # The technical reason stays on the node and the run; the reader gets what to do.
            body = "_No answer was produced: the answer step failed. Resume the run to try it again._"
        ctx.graph.save_report(body, data={"method": self.name}, own=own)
