"""DEoT, Dual Engines of Thoughts (arXiv 2504.07872): the scheduler that grows the tree.

Each question node is a query/answer pair solved by the Solver Agent (plan → validate → execute →
summarise → fact-check). After a layer is solved, the Engine Controller picks BREADTH, DEPTH or
STOP per node and the engines propose children; higher-priority children are kept first when the
node budget is short. All nodes of a layer are solved concurrently. Every step is stored, and the
next step is always decided from the stored graph, so a resumed run continues where it stopped; a
node interrupted mid-solve reuses what its solve had stored (`checkpoint.py`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, cast

from engine.citations import (
    attribute_uncited,
    cited_source_ids,
    source_blocks,
    to_stored_markers,
)
from engine.contract import CommandPayload, CommandRejected, CommandSpec, UnsupportedCommand
from engine.graph import NewNode
from engine.llm.protocol import StructuredOutputError
from engine.llm.structured import repeats_instructions
from engine.methods.base import REPORT, Method, RunContext
from engine.methods.deot import estimate as cost
from engine.methods.deot import prompts
from engine.methods.deot import report as final_report
from engine.methods.deot.checkpoint import SolveCheckpoint
from engine.methods.deot.engines import Proposal, breadth, decide, depth, follow_ups_retry, layer_of
from engine.methods.deot.executor import execute_plan
from engine.methods.deot.kinds import (
    COMMANDS,
    EDGES,
    QUESTION,
    QUESTION_KIND,
    STEPS,
    AskPayload,
    ExpandPayload,
    QuestionData,
    QuestionGrowth,
)
from engine.methods.deot.params import DeotParams
from engine.methods.deot.planner import make_plan
from engine.methods.deot.schemas import (
    PRIORITY_WEIGHT,
    ControllerDecision,
    FactCheck,
    NodeSummary,
    OptimizedQuery,
    RepairedQuery,
)
from engine.methods.estimate import CostEstimate
from engine.reader_text import first_readable, readable_sections
from engine.search.relevance import not_covered, ungrounded_note
from storage.models import Node, Source, stored_id
from storage.statuses import NodeStatus

EMPTY_SUMMARY = (
    "the model's summary held no content (only field names, schema words or error messages); "
    "press Retry to solve the node again"
)


def summary_max_tokens(params: DeotParams) -> int:
    """The summarizer's output cap: its word limit plus the JSON fields around it, short of a runaway."""
    return 300 + 2 * params.summary_words


def render_summary(summary: dict[str, Any]) -> str:
    """The node's content: each summary field under its heading, with what is not content (a field's
    name, "Field required.", a paragraph already said) left out, so neither the panel nor the report
    writer is given it."""
    parts = []
    for section in readable_sections(summary):
        body = "\n".join(f"- {p}" for p in section.paragraphs) if section.as_list else "\n\n".join(section.paragraphs)
        parts.append(f"**{section.heading}**\n\n{body}")
    return "\n\n".join(parts)


def fact_check_issues(check: FactCheck) -> list[str]:
    """What a fact check found wrong: the summary's issues, then those of its invalid tasks."""
    issues = [i.strip() for i in check.summary.issues if i.strip()]
    issues += [f"{t.task_id}: {i.strip()}" for t in check.tasks if t.status == "INVALID" for i in t.issues if i.strip()]
    return issues or ["the fact check marked the summary INVALID without naming the error"]


def flagged_note(issues: list[str], attempts: int) -> str:
    """The note a flagged node's content ends with: the reader (and the report writer) see which
    claims the fact check still disputes."""
    written = "summary" if attempts == 1 else f"{attempts} summaries"
    lines = "\n".join(f"- {issue}" for issue in issues)
    return f"\n\n**Fact check: disputed.** After {written}, the fact check still found these factual errors:\n\n{lines}"


class DeotMethod(Method[DeotParams]):
    name = "deot"
    title = "DEoT: Dual Engines of Thoughts"
    summary = (
        "A breadth engine and a depth engine grow a tree of sub-questions, each solved by a "
        "planner/executor agent with tools and fact-checking, then synthesised into a report."
    )
    good_for = "broad, open-ended questions explored as a tree of sub-questions a person can steer; a cited report"
    paper = "Dual Engines of Thoughts: A Depth-Breadth Integration Framework for Open-Ended Analysis (arXiv 2504.07872)"
    Params = DeotParams
    node_kinds = (QUESTION_KIND,)
    edge_kinds = EDGES
    commands = COMMANDS
    steps = STEPS

    @classmethod
    def estimate(cls, params: DeotParams) -> CostEstimate:
        return cost.estimate(params)

    # ------------------------------------------------------------------ the growth loop

    def start(self, ctx: RunContext[DeotParams]) -> None:
        self._root(ctx)

    def step(self, ctx: RunContext[DeotParams]) -> bool:
        """Solve the shallowest pending layer; else let the engines grow the solved one."""
        return self._solve_next_layer(ctx) or self._expand_next_layer(ctx)

    def write_outputs(self, ctx: RunContext[DeotParams], rewrite: set[str]) -> None:
        final_report.write(ctx, self._questions(ctx), method=self.name, force=REPORT in rewrite)

    def write_report(self, ctx: RunContext[DeotParams]) -> None:
        final_report.write(ctx, self._questions(ctx), method=self.name, force=True)

    def reset_failed(self, ctx: RunContext[DeotParams]) -> int:
        failed = [n for n in self._questions(ctx) if n.status == NodeStatus.FAILED]
        for node in failed:
            self._reset_for_retry(ctx, node)
        return len(failed)

    def _reset_for_retry(self, ctx: RunContext[DeotParams], node: Node) -> None:
        # Drop what the failed attempt left, so the node's detail describes only the new attempt.
        ctx.graph.update(
            node,
            status=NodeStatus.PENDING,
            error="",
            started_at=None,
            finished_at=None,
            replace_data=QuestionData.model_validate(node.data).identity(),
        )

    # ------------------------------------------------------------------ graph helpers

    def _root(self, ctx: RunContext[DeotParams]) -> Node:
        root = ctx.graph.root()
        if root is None:
            root = ctx.graph.add(
                kind=QUESTION,
                label=ctx.question,
                depth=0,
                priority=PRIORITY_WEIGHT["HIGH"],
                data={"engine": "root", "auto_expand": True},
            )
        return root

    def _questions(self, ctx: RunContext[DeotParams]) -> list[Node]:
        return ctx.graph.nodes(kind=QUESTION)

    @staticmethod
    def _ancestry(questions: list[Node], node: Node) -> list[Node]:
        """The node's ancestors, root first (ancestors are finished before a child is solved or
        expanded, so a list read at the start of the step has them)."""
        by_id = {n.id: n for n in questions}
        chain, current = [], node
        while current.parent_id is not None and current.parent_id in by_id:
            current = by_id[current.parent_id]
            chain.append(current)
        return list(reversed(chain))

    def _add_child(
        self, ctx: RunContext[DeotParams], parent: Node, proposal: Proposal, *, auto_expand: bool, steered: bool
    ) -> Node:
        for child in ctx.graph.children(parent):  # idempotent if a crash hit mid-creation
            if child.label == proposal.query and QuestionGrowth.of(child).engine == proposal.engine:
                return child
        return ctx.graph.add(**self._child_fields(parent, proposal, auto_expand=auto_expand, steered=steered))

    @staticmethod
    def _child_fields(parent: Node, proposal: Proposal, *, auto_expand: bool, steered: bool) -> dict[str, Any]:
        return dict(
            kind=QUESTION,
            label=proposal.query,
            parent=parent,
            priority=proposal.weight,
            edge_kind=proposal.engine,
            data={
                "engine": proposal.engine,
                "aspect": proposal.aspect,
                "category": proposal.category,
                "reasoning": proposal.reasoning,
                "priority_label": proposal.priority,
                "auto_expand": auto_expand,
                "steered": steered,
            },
        )

    # ------------------------------------------------------------------ solving

    def _solve_next_layer(self, ctx: RunContext[DeotParams]) -> bool:
        questions = self._questions(ctx)
        pending = [n for n in questions if n.status == NodeStatus.PENDING]
        if not pending:
            return False
        layer = min(n.depth for n in pending)
        batch = sorted((n for n in pending if n.depth == layer), key=lambda n: (-n.priority, n.id))
        ctx.parallel([partial(self._solve, ctx, node, questions) for node in batch])
        return True

    def _optimize_query(self, ctx: RunContext[DeotParams], root: Node, checkpoint: SolveCheckpoint) -> str:
        """Base Prompter, with the error-handling path when the first output is unusable."""
        record: dict[str, Any] = {}
        try:
            result: OptimizedQuery = ctx.llm.ask(
                prompts.OPTIMIZE_QUERY.render(question=ctx.question, today=ctx.today.isoformat()),
                OptimizedQuery,
                purpose="prompter",
                node_id=root.id,
            )
            if len(result.optimized_query.strip()) < 3:
                raise StructuredOutputError("the optimized query was empty", last_output=result.model_dump_json())
            record = {"path": "optimize", **result.model_dump()}
        except StructuredOutputError as first:
            try:
                repaired: RepairedQuery = ctx.llm.ask(
                    prompts.REPAIR_QUERY.render(
                        question=ctx.question,
                        today=ctx.today.isoformat(),
                        error=str(first),
                        failed_output=first.last_output[:1500] or "(none)",
                    ),
                    RepairedQuery,
                    purpose="prompter",
                    node_id=root.id,
                )
                if len(repaired.optimized_query.strip()) < 3:
                    raise StructuredOutputError("the repaired query was empty", last_output=repaired.model_dump_json())
                record = {"path": "error_handling", **repaired.model_dump()}
            except StructuredOutputError as second:
                record = {
                    "path": "fallback",
                    "optimized_query": ctx.question,
                    "original_query": ctx.question,
                    "modifications": [],
                    "error": str(second),
                }
        checkpoint.save_query_optimization(record)
        # Every path above stores a str: OptimizedQuery's field, RepairedQuery's, or the question.
        return cast(str, record["optimized_query"]).strip()

    def _solve(self, ctx: RunContext[DeotParams], node: Node, questions: list[Node]) -> None:
        params = ctx.params
        ctx.checkpoint()
        node = ctx.graph.start(node)
        # What an interrupted earlier solve of this node stored is reused; the rest is done now.
        checkpoint = SolveCheckpoint(ctx, node)
        detail: dict[str, Any] = checkpoint.closed()
        try:
            query = node.label
            if QuestionGrowth.of(node).engine == "root" and params.optimize_query:
                query = checkpoint.stored_optimized_query() or self._optimize_query(ctx, node, checkpoint)
            detail["effective_query"] = query
            chain = self._ancestry(questions, node)
            context = " → ".join(n.label for n in chain) or "(this is the user's own question)"

            plan = checkpoint.stored_plan(query)
            if plan is None:
                plan = make_plan(
                    ctx,
                    node.id,
                    query,
                    context,
                    earlier=checkpoint.stored_plan_attempts(query),
                    on_attempt=lambda attempts: checkpoint.save_plan_attempts(query, attempts),
                )
                checkpoint.save_plan(query, plan)
            detail.update(plan=plan.tasks, plan_accepted=plan.accepted, plan_attempts=plan.attempts)
            sources, finished = checkpoint.resume_tasks()
            results = execute_plan(
                ctx,
                node,
                plan.tasks,
                sources,
                finished=finished,
                on_finished=lambda result: checkpoint.save_task(result, sources),
            )
            numbered = sources.all
            detail["tasks"] = checkpoint.records(results, sources)
            # Hits left out as unrelated (this solve's searches; a resumed solve reuses earlier ones).
            detail["dropped_as_unrelated"] = sources.dropped
            detail["no_relevant_source"] = bool(sources.unanswered_queries) and not numbered
            if not any(r.status == "success" for r in results):
                ctx.graph.fail(
                    node, "every task of the plan failed: " + "; ".join(r.error for r in results), data=detail
                )
                return
            if detail["no_relevant_source"] and ctx.sources_only:
                # Nothing found is about it, and the model answers only from sources: said, not invented.
                detail["not_covered"] = True
                detail["uncovered_queries"] = list(sources.unanswered_queries)
                ctx.graph.finish(node, content=not_covered(query, ctx.searcher.description), data=detail)
                return

            # The task outputs as stored, numbered back: the same text whether or not this solve
            # was resumed.
            source_text = source_blocks(numbered, max_chars=1000) if numbered else "(no sources)"
            results_text = "\n\n".join(r.as_prompt_text() for r in results)
            summary, flagged = self._summarize_and_validate(ctx, node, query, source_text, results_text, detail)
            if flagged and params.invalid_summary == "drop":
                # The authors' code: a node whose summary stays invalid is left out of the analysis.
                attempts = len(detail["validation_attempts"])
                ctx.graph.fail(
                    node,
                    f"the fact check found factual errors in every summary ({attempts} "
                    "written): " + "; ".join(flagged)[:1500],
                    data=detail,
                )
                return

            stored, invalid, attributed = self._store_citations(
                summary.model_dump(), numbered, attribute=params.attribute_citations
            )
            detail["summary"] = stored
            detail["invalid_citations"] = invalid
            if attributed:
                detail["attributed_citations"] = attributed
            content = render_summary(stored)
            if not content:
                # Every field was a field name, a schema word or an error message: not an answer.
                ctx.graph.fail(node, EMPTY_SUMMARY, data={**detail, "last_output": summary.model_dump_json()[:2000]})
                return
            if flagged:
                # Shown beside the summary and given to the report writer with it (`invalid_summary` flag).
                detail["validation_flagged"] = [to_stored_markers(issue, numbered)[0] for issue in flagged]
                content += flagged_note(detail["validation_flagged"], len(detail["validation_attempts"]))
            if detail["no_relevant_source"]:
                # Said to the reader, not left to the model: nothing in this answer is grounded.
                content += ungrounded_note(ctx.searcher.description)
            # What it cites beyond the sources its own searches linked (those are linked already).
            extra = sorted(set(cited_source_ids(content)) - {s.id for s in numbered})
            if extra:
                ctx.graph.link_sources(node, extra)
            ctx.graph.finish(node, content=content, data=detail)
        except StructuredOutputError as exc:
            ctx.graph.fail(node, str(exc), data={**detail, "last_output": exc.last_output[:2000]})

    @staticmethod
    def _summarize_and_validate(
        ctx: RunContext[DeotParams], node: Node, query: str, source_text: str, results_text: str, detail: dict[str, Any]
    ) -> tuple[NodeSummary, list[str]]:
        """The Executor's summary and Result Validation (paper 3.4.2): the summary is fact-checked,
        and one found INVALID is written again with the check's issues as feedback, up to
        `max_summary_attempts` summaries in all. Returns the last summary and, when the fact check
        still finds it INVALID, its issues (empty when it passed or validation is off). Every check
        is kept in `detail` (`validation_attempts`; the last one is `validation`)."""
        params = ctx.params
        common = dict(query=query, sources=source_text, results=results_text, words=params.summary_words)
        try:
            summary: NodeSummary = ctx.llm.ask(
                prompts.SUMMARIZE_RESULTS.render(**common),
                NodeSummary,
                purpose="summarizer",
                node_id=node.id,
                max_tokens=summary_max_tokens(params),
            )
        except StructuredOutputError as exc:
            if not (exc.cut_off or exc.copied):
                raise
            summary = DeotMethod._plain_summary(ctx, node, common, exc, detail)
        if not params.validate_results:
            return summary, []
        attempts: list[dict[str, Any]] = []
        while True:
            try:
                check: FactCheck = ctx.llm.ask(
                    prompts.FACT_CHECK.render(
                        today=ctx.today.isoformat(),
                        query=query,
                        sources=source_text,
                        results=results_text,
                        summary=render_summary(summary.model_dump()),
                    ),
                    FactCheck,
                    purpose="validator",
                    node_id=node.id,
                )
            except StructuredOutputError as exc:
                # The check could not be read: the summary stands, unchecked (said in the node's data),
                # rather than the node failing with an answer in hand.
                detail["validation_error"] = f"the fact check's answer could not be read: {exc}"[:1000]
                return summary, []
            attempts.append(check.model_dump())
            detail["validation"], detail["validation_attempts"] = check.model_dump(), attempts
            if check.summary.status == "VALID":
                return summary, []
            issues = fact_check_issues(check)
            if len(attempts) >= params.max_summary_attempts:
                return summary, issues
            ctx.graph.narrate(
                f"the fact check found {len(issues)} factual error(s) in the summary; writing it "
                f"again with them as feedback ({len(attempts) + 1} of {params.max_summary_attempts})",
                node_id=node.id,
                issues=issues,
            )
            try:
                summary = ctx.llm.ask(
                    prompts.REVISE_SUMMARY.render(
                        **common,
                        previous=render_summary(summary.model_dump()),
                        issues="\n".join(f"- {i}" for i in issues),
                    ),
                    NodeSummary,
                    purpose="summarizer",
                    node_id=node.id,
                    max_tokens=summary_max_tokens(params),
                )
            except StructuredOutputError as exc:
                # No revision could be read: the last summary stands, with the issues the check found.
                detail["validation_error"] = f"the revised summary could not be read: {exc}"[:1000]
                return summary, issues

    @staticmethod
    def _plain_summary(
        ctx: RunContext[DeotParams],
        node: Node,
        common: dict[str, Any],
        failure: StructuredOutputError,
        detail: dict[str, Any],
    ) -> NodeSummary:
        """The node's summary as plain prose (its conclusion), when the structured summary was cut off
        by the output limit at every attempt (on the built-in model under a busy machine's lowered cap,
        even the compact form can be), or its last answer filled the form with the instructions (the
        built-in model does, now and then): a node with its sources in hand is answered rather than
        failed. (An answer that never fit the form otherwise still fails the node: that model cannot
        answer this step.) Raises `failure` when the prose is unreadable or repeats its instructions too."""
        params = ctx.params
        ctx.graph.narrate(
            "the structured summary failed; writing it as plain text", node_id=node.id, error=str(failure)[:2000]
        )
        plain = prompts.SUMMARIZE_PLAIN.render(**common)
        instructions = "\n".join(m.content for m in plain if m.role == "system")
        text = first_readable(
            lambda: ctx.llm.text(plain, purpose="summarizer", node_id=node.id, max_tokens=summary_max_tokens(params))
        )
        if text is None or repeats_instructions(text, instructions):
            raise failure
        detail["summary_fallback"] = f"written as plain text: the structured summary failed ({failure})"[:1000]
        return NodeSummary.model_construct(
            key_findings="", evidence_and_data=[], analysis="", conflicting_information=[], conclusion=text.strip()
        )

    @staticmethod
    def _store_citations(
        summary: dict[str, Any], numbered: list[Source], *, attribute: bool = False
    ) -> tuple[dict[str, Any], list[int], int]:
        invalid: list[int] = []
        attributed = 0

        def convert(text: str) -> str:
            nonlocal attributed
            if attribute:
                text, added = attribute_uncited(text, numbered)
                attributed += added
            converted, dropped = to_stored_markers(text, numbered)
            invalid.extend(dropped)
            return converted

        stored = {
            key: [convert(v) for v in value] if isinstance(value, list) else convert(value)
            for key, value in summary.items()
        }
        return stored, invalid, attributed

    # ------------------------------------------------------------------ expansion

    def _expand_next_layer(self, ctx: RunContext[DeotParams]) -> bool:
        params = ctx.params
        questions = self._questions(ctx)
        growth = {n.id: QuestionGrowth.of(n) for n in questions}
        unmaterialized = [n for n in questions if growth[n.id].awaits_children and n.status == NodeStatus.DONE]
        waiting = [
            n
            for n in questions
            if n.status == NodeStatus.DONE and growth[n.id].auto_expand and growth[n.id].expansion is None
        ]
        if not waiting and not unmaterialized:
            return False
        if waiting:
            layer = min(n.depth for n in waiting)
            batch = sorted((n for n in waiting if n.depth == layer), key=lambda n: (-n.priority, n.id))
            explored = [n.label for n in questions if n.status != NodeStatus.PRUNED]
            nodes_used = len(explored)
            jobs: list[Callable[[], None]] = []
            room = params.max_nodes - nodes_used
            for node in batch:
                if layer_of(node) >= params.max_layers:
                    # The paper counts the user's question as layer 1: max_layers 3 is the root and two levels.
                    self._record_expansion(ctx, node, "STOP", "rule", "the maximum layer is reached", [])
                elif growth[node.id].not_covered:
                    # The sources covered nothing of it, and the model answers only from them: its
                    # sub-questions drift off it. On the built-in model the root's aspect "What is
                    # Rust about?" found the Tin Woodman (rust) for a question on Rust's borrow
                    # checker, and 50 minutes of a busy machine went into answering that.
                    self._record_expansion(ctx, node, "STOP", "rule", "the sources at hand do not cover it", [])
                elif room <= 0:
                    # Resource utilisation: each expanding node adds at least one child, so only the
                    # best-priority nodes that can still get one are worth asking the engines about.
                    reason = (
                        "the maximum number of nodes is reached"
                        if nodes_used >= params.max_nodes
                        else "the remaining node budget goes to higher-priority nodes of this layer"
                    )
                    self._record_expansion(ctx, node, "STOP", "rule", reason, [])
                else:
                    room -= 1
                    jobs.append(partial(self._propose, ctx, node, nodes_used, explored, questions))
            ctx.parallel(jobs)
        self._materialize(ctx)
        return True

    def _record_expansion(
        self,
        ctx: RunContext[DeotParams],
        node: Node,
        decision: str,
        by: str,
        reasoning: str,
        proposals: list[Proposal],
        unresolved: list[str] | None = None,
        *,
        dropped_repeats: list[str] | None = None,
        asked_differently: bool = False,
    ) -> None:
        ctx.graph.update(
            node,
            merge_data={
                "expansion": {
                    "decision": decision,
                    "by": by,
                    "reasoning": reasoning,
                    "unresolved_points": unresolved or [],
                    "proposals": [p.as_dict() for p in proposals],
                    "materialized": not proposals,
                    "created": [],
                    "dropped_repeats": dropped_repeats or [],
                    "asked_differently": asked_differently,
                }
            },
        )

    def _propose(
        self, ctx: RunContext[DeotParams], node: Node, nodes_used: int, explored: list[str], questions: list[Node]
    ) -> None:
        params = ctx.params
        ctx.checkpoint()
        lineage = [n.label for n in self._ancestry(questions, node)] + [node.label]
        try:
            if node.depth == 0 and params.root_breadth:
                verdict, by = (
                    ControllerDecision(
                        decision="BREADTH",
                        reasoning="your question always opens with the breadth engine (the root_breadth parameter)",
                    ),
                    "rule",
                )
            else:
                verdict, by = decide(ctx, node, nodes_used)
            if verdict.decision == "BREADTH":
                proposals = breadth(ctx, node, explored, params.max_aspects)
            elif verdict.decision == "DEPTH":
                proposals = [depth(ctx, node, explored, verdict.unresolved_points)]
            else:
                proposals = []
            wanted = params.max_aspects if verdict.decision == "BREADTH" else 1
            proposals, repeats, asked_differently = self._novel_or_ask_differently(
                ctx, node, proposals, lineage, explored, wanted, verdict.decision.lower()
            )
        except StructuredOutputError as exc:
            self._record_expansion(ctx, node, "STOP", "error", f"the engines gave no usable answer ({exc})", [])
            return
        reasoning = verdict.reasoning
        if repeats:
            reasoning += (
                f" (dropped {len(repeats)} proposed question(s) that repeated one already asked"
                + ("; asked again differently" if asked_differently else "")
                + ")"
            )
            self._narrate_repeats(ctx, node, repeats, asked_differently, kept=len(proposals))
        self._record_expansion(
            ctx,
            node,
            verdict.decision,
            by,
            reasoning,
            proposals,
            verdict.unresolved_points,
            dropped_repeats=repeats,
            asked_differently=asked_differently,
        )

    @staticmethod
    def _narrate_repeats(
        ctx: RunContext[DeotParams], node: Node, repeats: list[str], asked_differently: bool, *, kept: int
    ) -> None:
        """The step log says what was dropped and why, and what came of asking again."""
        dropped = "1 proposed question" if len(repeats) == 1 else f"{len(repeats)} proposed questions"
        text = f"dropped {dropped} that repeated a question already asked (“{repeats[0][:100]}”)"
        if asked_differently:
            text += (
                f"; asked again differently: {kept} new question(s)"
                if kept
                else "; asked again differently, and nothing new came: this branch stops here"
            )
        ctx.graph.narrate(text, node_id=node.id, kind="dropped", repeats=repeats)

    def _novel_or_ask_differently(
        self,
        ctx: RunContext[DeotParams],
        node: Node,
        proposals: list[Proposal],
        lineage: list[str],
        explored: list[str],
        wanted: int,
        engine: str,
    ) -> tuple[list[Proposal], list[str], bool]:
        """The proposals that ask something new, the repeats dropped, and whether the model was asked
        again differently. Small models often hand a node's own question back (or an ancestor's);
        such a child would only redo work and spend the budget. When every proposal is a repeat, one
        retry asks a different task (`engines.follow_ups_retry`) rather than the same one again."""
        kept, repeats = novel_proposals(proposals, lineage, explored)
        if kept or not repeats:
            return kept, repeats, False
        try:
            again = follow_ups_retry(ctx, node, wanted, engine)
        except StructuredOutputError:
            return [], repeats, True
        kept, more = novel_proposals(again, lineage, explored)
        return kept, repeats + more, True

    def _materialize(self, ctx: RunContext[DeotParams]) -> None:
        """Create the proposed children, best priority first, within the node budget (in one write)."""
        params = ctx.params
        questions = self._questions(ctx)
        # By parent id, in the order of `questions`: the expansions whose proposals are not children yet.
        expansions = {
            stored_id(n): e
            for n in questions
            if (e := QuestionGrowth.of(n).expansion) is not None and not e.materialized and n.status == NodeStatus.DONE
        }
        parents = {parent_id: n for n in questions if (parent_id := stored_id(n)) in expansions}
        if not parents:
            return
        ranked = sorted(
            (
                (parent_id, parent, index, Proposal(**p))
                for parent_id, parent in parents.items()
                for index, p in enumerate(expansions[parent_id].proposals)
            ),
            key=lambda item: (-item[3].weight, item[0], item[2]),
        )
        room = params.max_nodes - sum(1 for n in questions if n.status != NodeStatus.PRUNED)
        # Children a crash left between creating them and marking the parent: reused, not doubled.
        existing: dict[tuple[int | None, str, str], Node] = {
            (n.parent_id, n.label, QuestionGrowth.of(n).engine): n for n in questions if n.parent_id is not None
        }
        chosen: list[tuple[int, Node, Proposal]] = []
        dropped: dict[int, list[int]] = {parent_id: [] for parent_id in parents}
        for parent_id, parent, index, proposal in ranked:
            if room > 0:
                chosen.append((parent_id, parent, proposal))
                room -= 1
            else:
                dropped[parent_id].append(index)
        new = [
            NewNode(**self._child_fields(parent, proposal, auto_expand=True, steered=False))
            for parent_id, parent, proposal in chosen
            if (parent_id, proposal.query, proposal.engine) not in existing
        ]
        for node in ctx.graph.add_many(new):
            existing[(node.parent_id, node.label, QuestionGrowth.of(node).engine)] = node
        created: dict[int, list[int]] = {parent_id: [] for parent_id in parents}
        for parent_id, _, proposal in chosen:
            created[parent_id].append(stored_id(existing[(parent_id, proposal.query, proposal.engine)]))
        for parent_id, parent in parents.items():
            stored = expansions[parent_id].model_dump(mode="json", exclude_unset=True)  # the keys it had
            expansion = {
                **stored,
                "materialized": True,
                "created": created[parent_id],
                "dropped_for_budget": dropped[parent_id],
            }
            ctx.graph.update(parent, merge_data={"expansion": expansion})

    # ------------------------------------------------------------------ steering

    def apply(
        self, ctx: RunContext[DeotParams], command: CommandSpec, payload: CommandPayload, node: Node | None
    ) -> set[str]:
        """Apply a steering command (its target already checked against `kinds.COMMANDS`)."""
        if command.name == "regenerate_report":
            return {REPORT}
        assert node is not None
        if command.name in ("expand", "deepen"):
            engine = "breadth" if command.name == "expand" else "depth"
            explored = self._explored(ctx)
            try:
                if engine == "breadth":
                    assert isinstance(payload, ExpandPayload)
                    wanted, proposals = payload.n, breadth(ctx, node, explored, payload.n)
                else:
                    expansion = QuestionData.model_validate(node.data).expansion
                    unresolved = expansion.unresolved_points if expansion else []
                    wanted, proposals = 1, [depth(ctx, node, explored, unresolved)]
                lineage = [n.label for n in self._ancestry(self._questions(ctx), node)] + [node.label]
                proposals, repeats, asked_differently = self._novel_or_ask_differently(
                    ctx, node, proposals, lineage, explored, wanted, engine
                )
            except StructuredOutputError as exc:  # fails the command, not the run
                raise CommandRejected(
                    f"the {engine} engine gave no usable answer ({exc}); try again, or ask your own follow-up"
                ) from exc
            if repeats:
                self._narrate_repeats(ctx, node, repeats, asked_differently, kept=len(proposals))
            if not proposals:
                raise CommandRejected(
                    f"the {engine} engine only proposed questions already in the tree ({len(repeats)} dropped, "
                    "also after asking differently); try again, or ask your own follow-up"
                )
            self._add_steered_children(ctx, node, proposals, engine)
            self._count_steered_analysis(ctx, node, engine.upper())
            return set()
        if command.name == "ask":
            assert isinstance(payload, AskPayload)
            question = payload.question.strip()
            if not question:
                raise CommandRejected("the follow-up question is empty; type the question to ask")
            proposal = Proposal(engine="user", query=question, reasoning="asked by the user", priority="HIGH")
            self._add_child(ctx, node, proposal, auto_expand=False, steered=True)
            return set()
        if command.name == "prune":
            ctx.graph.prune(node, kinds={QUESTION})
            return {REPORT}
        if command.name == "restore":
            ctx.graph.restore(node)
            return {REPORT}
        if command.name == "retry":
            self._reset_for_retry(ctx, node)
            return set()
        raise UnsupportedCommand(f"the deot method does not support '{command.name}'")

    def _explored(self, ctx: RunContext[DeotParams]) -> list[str]:
        return [q.label for q in self._questions(ctx) if q.status != NodeStatus.PRUNED]

    def _add_steered_children(
        self, ctx: RunContext[DeotParams], node: Node, proposals: list[Proposal], engine: str
    ) -> None:
        existing = {child.id for child in ctx.graph.children(node)}
        created = [self._add_child(ctx, node, p, auto_expand=False, steered=True) for p in proposals]
        if not any(child.id not in existing for child in created):
            raise CommandRejected(
                f"the {engine} engine only proposed questions this node already has; "
                "try again, or ask your own follow-up"
            )

    def _count_steered_analysis(self, ctx: RunContext[DeotParams], node: Node, decision: str) -> None:
        # Any string: the graph checks the merged data against `QuestionData` when it writes it.
        steered: list[str] = list(QuestionData.model_validate(node.data).steered_analyses)
        steered.append(decision)
        ctx.graph.update(node, merge_data={"steered_analyses": steered})


def _question_key(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


# Words that do not tell two questions apart.
_FILLER = frozenset(
    "a an the of in on at to for and or is are was were be been what which who whom whose "
    "when where why how did does do its it this that these those by with from as about".split()
)


def _content_words(key: str) -> frozenset[str]:
    # Word stems, roughly: "animated" and "animation" are the same word to a reader of the map.
    return frozenset(word[:5] for word in key.split() if word not in _FILLER)


def is_repeat(question: str, asked: str) -> bool:
    """Whether `question` asks what `asked` already asks: the same words (case, punctuation and
    spacing ignored), or the same content words but at most one (a small model's copy with a word
    changed or added). A question that names two new things, or a new number or date, is new."""
    a, b = _question_key(question), _question_key(asked)
    if a == b:
        return True
    words_a, words_b = _content_words(a), _content_words(b)
    if len(words_a) < 3 or len(words_b) < 3:
        return False
    new_words = words_a - words_b
    if len(new_words) > 1 or any(char.isdigit() for word in new_words for char in word):
        return False
    return len(words_a & words_b) >= 0.8 * len(words_b)


def novel_proposals(
    proposals: list[Proposal], lineage: list[str], elsewhere: Sequence[str] = ()
) -> tuple[list[Proposal], list[str]]:
    """The proposals that ask something new, and the repeated questions that were dropped: a repeat
    of the node's own question or an ancestor's (or of another proposal) by `is_repeat`, a repeat of
    a question elsewhere in the tree word for word (case, punctuation and spacing ignored)."""
    seen = list(lineage)
    verbatim = {_question_key(q) for q in elsewhere}
    kept, repeats = [], []
    for proposal in proposals:
        if _question_key(proposal.query) in verbatim or any(is_repeat(proposal.query, earlier) for earlier in seen):
            repeats.append(proposal.query)
        else:
            seen.append(proposal.query)
            kept.append(proposal)
    return kept, repeats
