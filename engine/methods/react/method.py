"""ReAct (Yao et al., 2022) as FGDIP's paper (seed 001) runs it for comparison: one trajectory of
Thought / Action / Observation steps. At each step the model reasons over the observations so far
and either searches (the observation is the passages found) or finishes with the answer. There is no
branching, no evaluator and no backtracking: exactly what FGDIP adds is absent.

Where we differ from ReAct's paper: its actions over Wikipedia are Search[entity] (a page's first
sentences), Lookup[keyword] (the next sentence holding it in that page) and Finish[answer]; ours are
search (the passages our searcher finds, the bundled corpus or the web) and finish, since our
searchers return passages rather than whole pages to look inside. Its few-shot trajectories are not
used: the step's JSON schema carries the format. The paper gives up after 7 steps (HotpotQA); our last
allowed step may only finish, so a run always answers. The answer is then written up by one more
call (ours, as FGDIP's answer writer is): the short answer and an explanation citing the observed
passages, so the report's claims resolve to sources; the report adds the trajectory that led to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.citations import cited_source_ids, source_blocks, to_stored_markers
from engine.llm.protocol import StructuredOutputError
from engine.methods.base import Method, RunContext
from engine.methods.common import ensure_root
from engine.methods.coverage import save_uncovered_report
from engine.methods.estimate import CostEstimate
from engine.methods.react import estimate as cost
from engine.methods.react import prompts
from engine.methods.react.kinds import KINDS, answer_of, step_of
from engine.methods.react.params import ReactParams
from engine.methods.react.schemas import FinishStep, ReactStep, WrittenAnswer
from engine.prompting import inert
from engine.safe_text import inline_text
from engine.search.protocol import SearchError
from engine.search.relevance import (
    not_covered,
    nothing_found,
    relevant_hits,
    ungrounded_note,
)
from storage.models import Node, Source
from storage.statuses import NodeStatus


@dataclass
class Trajectory:
    """The steps so far, as the next prompt shows them, and every passage they observed, numbered
    across the whole trajectory (a passage found twice keeps its first number)."""

    steps: list[Node]
    sources: list[Source] = field(default_factory=list)
    text: str = ""


class ReactMethod(Method[ReactParams]):
    name = "react"
    title = "ReAct (baseline)"
    summary = (
        "Thought, action, observation: one chain of searches until the model answers. The agent "
        "baseline FGDIP is compared with, without its tree, evaluators and backtracking."
    )
    good_for = "a quick agent baseline: one chain of searches to a short answer"
    paper = "Yao et al., 2022, ReAct: Synergizing Reasoning and Acting in Language Models (FGDIP's baseline)"
    Params = ReactParams
    node_kinds = KINDS
    steps = {
        prompts.STEP.name: "thinking about what to do next",
        prompts.ANSWER.name: "writing up the answer with its citations",
    }
    report_without_model = True

    @classmethod
    def estimate(cls, params: ReactParams) -> CostEstimate:
        return cost.estimate(params)

    # ------------------------------------------------------------------ the loop

    def run(self, ctx: RunContext[ReactParams]) -> None:
        root = ensure_root(ctx)
        chain = self._chain(ctx, root)
        while not self._ended(chain) and len(chain) <= ctx.params.max_steps:
            ctx.checkpoint()
            pending = chain[-1] if chain and chain[-1].status != NodeStatus.DONE else None
            step = self._step(ctx, root, [n for n in chain if n is not pending], pending)
            chain = [n for n in chain if n is not pending] + [step]
        self._answer(ctx, chain)
        if not ctx.graph.has_report():
            self.write_report(ctx)

    @staticmethod
    def _ended(chain: list[Node]) -> bool:
        """A step finished with the answer, or failed (the run then fails; a resume tries it again)."""
        last = chain[-1] if chain else None
        return last is not None and (
            last.status == NodeStatus.FAILED or (last.status == NodeStatus.DONE and step_of(last).action == "finish")
        )

    def _chain(self, ctx: RunContext[ReactParams], root: Node) -> list[Node]:
        chain: list[Node] = []
        parent = root
        while (child := next((c for c in ctx.graph.children(parent) if c.kind == "step"), None)) is not None:
            chain.append(child)
            parent = child
        return chain

    def _step(self, ctx: RunContext[ReactParams], root: Node, done: list[Node], node: Node | None) -> Node:
        params = ctx.params
        number = len(done) + 1
        forced = number >= params.max_steps
        if node is None:
            node = ctx.graph.add(
                kind="step",
                label=f"Step {number}",
                parent=done[-1] if done else root,
                data={"step": number, "forced": forced},
            )
        ctx.graph.start(node)
        trajectory = self.trajectory(ctx, done)
        instruction = (prompts.LAST if forced else prompts.NEXT).format(step=number, steps=params.max_steps)
        messages = prompts.STEP.render(
            question=ctx.question,
            today=ctx.today.isoformat(),
            trajectory=trajectory.text or "(no steps yet)",
            instruction=instruction,
            answer_form=prompts.answer_form(params.yes_no),
        )
        try:
            chosen = ctx.llm.ask(messages, FinishStep if forced else ReactStep, node_id=node.id)
        except StructuredOutputError as exc:
            return ctx.graph.fail(node, str(exc), data={"last_output": exc.last_output[:2000]})
        data = {"thought": chosen.thought, "action": chosen.action, "argument": chosen.argument}
        if chosen.action == "finish":
            return ctx.graph.finish(
                node, content=inert(chosen.thought), label=f"Finish: {chosen.argument[:80]}", data=data
            )
        return self._search(ctx, node, chosen, done, data)

    def _search(
        self, ctx: RunContext[ReactParams], node: Node, chosen: ReactStep, done: list[Node], data: dict[str, Any]
    ) -> Node:
        params = ctx.params
        query = " ".join(chosen.argument.split())
        label = f"Search: {query[:80]}"
        searched = {" ".join(step_of(n).argument.split()).lower() for n in done if step_of(n).action == "search"}
        if query.lower() in searched:  # ReAct's known loop: the observation says so instead of searching again
            return ctx.graph.finish(
                node,
                label=label,
                data={**data, "repeated": True},
                content=inert(chosen.thought) + "\n\n_This query was already searched._",
            )
        try:
            hits = ctx.search(query, k=params.top_k, node=node)
        except SearchError as exc:
            return ctx.graph.fail(node, exc.user_message, data=data)
        relevant = relevant_hits(query, hits, floor=params.relevance_floor, embedder=ctx.embedder)
        ctx.note_unrelated(query, relevant, node)
        kept = ctx.read_pages(
            query, relevant.kept, limit=params.read_pages, max_chars=params.observation_chars, node=node
        ).hits
        sources = ctx.graph.add_sources(kept, node=node) if kept else []
        found = "\n".join(f"- {inline_text(s.title)} [[S{s.id}]]" for s in sources)
        content = inert(chosen.thought) + "\n\n" + (found or "_" + nothing_found(ctx.searcher.description) + "_")
        return ctx.graph.finish(
            node,
            label=label,
            content=content,
            data={
                **data,
                "found": len(sources),
                "searcher": ctx.searcher.description,
                "dropped_as_unrelated": relevant.dropped_summary(),
            },
        )

    def trajectory(self, ctx: RunContext[ReactParams], steps: list[Node]) -> Trajectory:
        """The finished steps as the prompt shows them: each thought, action and observation."""
        out = Trajectory(steps)
        numbers: dict[int | None, int] = {}
        parts = []
        for index, step in enumerate(steps, 1):
            data = step_of(step)
            parts.append(
                f"Thought {index}: <<<{inert(data.thought)}>>>\n"
                f"Action {index}: {data.action} <<<{inert(data.argument)}>>>"
            )
            if data.action != "search":
                continue
            if data.repeated:
                observation = "you searched this already; search other words, or finish."
            else:
                found = ctx.graph.sources(step)
                for source in found:
                    if source.id not in numbers:
                        out.sources.append(source)
                        numbers[source.id] = len(out.sources)
                blocks = source_blocks(
                    found, max_chars=ctx.params.observation_chars, numbers=[numbers[s.id] for s in found]
                )
                observation = f"<<<\n{inert(blocks)}\n>>>" if found else "nothing relevant was found."
            parts.append(f"Observation {index}: {observation}")
        out.text = "\n\n".join(parts)
        return out

    # ------------------------------------------------------------------ the answer and the report

    def _answer(self, ctx: RunContext[ReactParams], chain: list[Node]) -> None:
        last = chain[-1] if chain else None
        if last is None or last.status != NodeStatus.DONE or step_of(last).action != "finish":
            return  # a failed step: nothing was answered (the report says so; a resume tries again)
        answer = next((c for c in ctx.graph.children(last) if c.kind == "answer"), None)
        if answer is not None and answer.status == NodeStatus.DONE:
            return
        answer = answer or ctx.graph.add(kind="answer", label="Answer", parent=last)
        ctx.checkpoint()
        ctx.graph.start(answer)
        sources = self.trajectory(ctx, chain[:-1]).sources
        if not sources and ctx.sources_only:
            ctx.graph.finish(
                answer, content=not_covered(ctx.question, ctx.searcher.description), data={"not_covered": True}
            )
            return
        messages = prompts.ANSWER.render(
            question=ctx.question,
            today=ctx.today.isoformat(),
            answer_form=prompts.answer_form(ctx.params.yes_no),
            passages=source_blocks(sources, max_chars=ctx.params.observation_chars) if sources else "(none)",
            answer=inert(step_of(last).argument),
            reason=inert(step_of(last).thought),
        )
        try:
            written = ctx.llm.ask(messages, WrittenAnswer, node_id=answer.id)
        except StructuredOutputError as exc:
            ctx.graph.fail(answer, str(exc), data={"last_output": exc.last_output[:2000]})
            return
        explanation, dropped = to_stored_markers(written.explanation, sources)
        ctx.graph.link_sources(answer, cited_source_ids(explanation))
        ctx.graph.finish(
            answer,
            content=f"**{inline_text(written.short_answer)}**\n\n{explanation}".strip(),
            label=f"Answer: {written.short_answer[:80]}",
            data={"short_answer": written.short_answer, "invalid_citations": dropped},
        )

    def write_report(self, ctx: RunContext[ReactParams]) -> None:
        root = ensure_root(ctx)
        chain = self._chain(ctx, root)
        last = chain[-1] if chain else None
        answer = next((c for c in ctx.graph.children(last) if c.kind == "answer"), None) if last else None
        if answer is None or answer.status != NodeStatus.DONE:
            body = (
                "_No answer was produced: a step failed before the answer was written. Resume the run to try it again._"
            )
            ctx.graph.save_report(body, data={"method": self.name, "steps": len(chain)})
            return
        if answer_of(answer).not_covered:  # nothing any search found was about the question
            steps = [step_of(n) for n in chain]
            searched = [step.argument for step in steps if step.action == "search"]
            nearest = [hit.title for step in steps for hit in step.dropped_as_unrelated]
            save_uncovered_report(
                ctx, searched, nearest, {"method": self.name, "steps": len(chain), "short_answer": None}
            )
            return
        lines = ["", "", "### How it was found", ""]
        for number, step in enumerate(chain, 1):
            data = step_of(step)
            argument = inline_text(data.argument)
            if data.action == "finish":
                lines.append(f"{number}. Finished with the answer {argument}.")
            elif data.repeated:
                lines.append(f"{number}. Searched {argument} again: nothing new.")
            else:
                cited = " ".join(f"[[S{s.id}]]" for s in ctx.graph.sources(step))
                found = data.found
                passages = "1 passage" if found == 1 else f"{found} passages"
                lines.append(f"{number}. Searched {argument}: {passages} {cited}".rstrip() + ".")
        own = "\n".join(lines)
        if not cited_source_ids(answer.content):
            own = ungrounded_note(ctx.searcher.description) + own
        ctx.graph.save_report(
            answer.content,
            own=own,
            data={"method": self.name, "steps": len(chain), "short_answer": answer_of(answer).short_answer},
        )
