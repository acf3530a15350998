"""FGDIP (Yan, Wu and Zhou, "Mission Impossible: Feedback-Guided Dynamic Interactive Planning"):
key entities become the first layer of a search tree; a depth-first search grows each branch with
nodes generated from the question, the error memory, the layer's siblings and the branch's
trajectory; the Step Evaluator orders and prunes them; the Answer Evaluator checks each candidate
answer, and a rejected one leaves an error analysis behind and sends the search to the next branch.

Stored graph: `question` (root) → `entity` (one per branch) → `step` nodes → `answer` candidates;
`backtrack` edges from where the search left a path to where it went on. The error memory is run
state. Every step below decides from what is stored, so a resumed run recomputes no finished node:
a node is generated (stored), then its action runs (observation stored), then it is judged (done);
an expansion records how many children it plans and resumes with the missing ones; an answer stores
its explanation and its verdict before it is done.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

from engine.citations import strip_markers, without_model_citations, without_page_markers
from engine.contract import ANSWER_NODE, CommandPayload, CommandRejected, CommandSpec, UnsupportedCommand
from engine.graph import NewNode
from engine.llm.protocol import StructuredOutputError
from engine.methods.base import REPORT, Method, RunContext, RunOutcome
from engine.methods.coverage import save_uncovered_report
from engine.methods.estimate import CostEstimate
from engine.methods.fgdip import estimate as cost
from engine.methods.fgdip import tools
from engine.methods.fgdip.answers import write_answer
from engine.methods.fgdip.evaluators import judge_answer, judge_step
from engine.methods.fgdip.explore import (
    Tree,
    backtrack_source,
    distinct,
    final_answer,
    forced_waiting,
    next_node,
    settled_answer,
)
from engine.methods.fgdip.extractor import extract_entities
from engine.methods.fgdip.generator import generate_step
from engine.methods.fgdip.kinds import (
    ANSWER,
    BACKTRACK,
    COMMANDS,
    EDGES,
    ENTITY,
    ERROR_MEMORY,
    NODE_KINDS,
    QUESTION,
    RUN_STATES,
    SEARCH_KINDS,
    STEP,
    STEPS,
    VIEW,
    AddEntityPayload,
    EditErrorMemoryPayload,
    ErrorEntry,
    ErrorMemory,
    QuestionData,
    StepData,
    action_markdown,
    answer_label,
    answer_of,
    entity_of,
    explored_order,
    marked_impossible_by_you,
    plural,
    step_of,
)
from engine.methods.fgdip.params import FgdipParams
from engine.methods.fgdip.report import report
from engine.methods.fgdip.trajectory import label_for
from engine.safe_text import inline_text
from engine.search.relevance import not_covered, ungrounded_note
from storage.models import Node, stored_id
from storage.statuses import NodeStatus

UNFINISHED = (NodeStatus.PENDING, NodeStatus.RUNNING)


def closed_as_impossible(step: StepData) -> bool:
    """Judged impossible (by the Step Evaluator or by you) and not forced since: it gets no children."""
    return step.verdict == "impossible" and not step.forced


def _expanding(node: Node) -> bool:
    """The question or a step the search took whose children are not all generated yet, and may be."""
    if node.kind == QUESTION:
        question = QuestionData.model_validate(node.data)
        return question.explored_order is not None and not question.expanded
    if node.kind not in SEARCH_KINDS:
        return False
    step = step_of(node)
    return (
        step.explored_order is not None
        and step.action != "finish"
        and not step.expanded
        and not step.dead_end
        and not (step.verdict == "impossible" and not step.forced)
    )  # closed_as_impossible


class FgdipMethod(Method[FgdipParams]):
    name = "fgdip"
    title = "FGDIP: entity-first search with step and answer evaluators"
    summary = (
        "Starts one branch per key entity of the question, searches depth-first with generated "
        "thought/action/observation steps judged sure, maybe or impossible, checks each answer and "
        "learns from rejected ones before backtracking. Gives a short answer with a cited explanation."
    )
    good_for = "multi-hop factual questions about named entities that need a short, checked answer"
    paper = (
        "Mission Impossible: Feedback-Guided Dynamic Interactive Planning for Improving Reasoning on LLMs "
        "(Yan, Wu, Zhou)"
    )
    Params = FgdipParams
    node_kinds = NODE_KINDS
    edge_kinds = EDGES
    commands = COMMANDS
    run_states = RUN_STATES
    view = VIEW
    steps = STEPS
    report_without_model = True  # composed from the stored graph: a stopped run gets a partial one

    @classmethod
    def estimate(cls, params: FgdipParams) -> CostEstimate:
        return cost.estimate(params)

    # ------------------------------------------------------------------ the growth loop

    def start(self, ctx: RunContext[FgdipParams]) -> None:
        if ctx.graph.root() is None:
            ctx.graph.add(kind=QUESTION, label=ctx.question, content=ctx.question, depth=0)

    def step(self, ctx: RunContext[FgdipParams]) -> bool:
        """One unit of the search, in this order: open the question; give a chosen finishing node
        its answer if a kill came in between; run and judge the nodes that are waiting; finish an
        expansion or an answer that was begun; choose the next node."""
        tree = Tree.of(ctx.graph.nodes())
        return (
            self._open_question(ctx, tree)
            or self._answer_missing(ctx, tree)
            or self._settle_nodes(ctx, tree)
            or self._continue_expansion(ctx, tree)
            or self._continue_answer(ctx, tree)
            or self._explore_next(ctx, tree)
        )

    def assess(self, ctx: RunContext[FgdipParams]) -> RunOutcome:
        """A run whose answer no check passed is done (it has an answer) with a warning saying so."""
        outcome = super().assess(ctx)
        answer, verified = final_answer(Tree.of(ctx.graph.nodes()))
        if not outcome.ok or answer is None or verified:
            return outcome
        caveat = (
            "the answer is not verified: the Answer Evaluator's reply could not be read"
            if answer_of(answer).verdict == "unjudged"
            else "no candidate answer passed the Answer Evaluator: the report gives the last one it rejected"
        )
        return replace(outcome, caveat=caveat)

    def write_report(self, ctx: RunContext[FgdipParams]) -> None:
        tree = Tree.of(ctx.graph.nodes())
        answer, _ = final_answer(tree)
        if answer is not None and answer_of(answer).not_covered:
            self._uncovered_report(ctx, tree)
            self._mark_reported(ctx, answer.id)
            return
        markdown, data = report(tree, self._memory(ctx), self.name)
        # Every search failed or found nothing: said to the reader, not left to the model.
        own = ungrounded_note(ctx.searcher.description) if data.get("short_answer") and not ctx.graph.sources() else ""
        ctx.graph.save_report(markdown, data=data, own=own)
        self._mark_reported(ctx, data.get(ANSWER_NODE))

    def _uncovered_report(self, ctx: RunContext[FgdipParams], tree: Tree) -> None:
        """The report when no search found a passage about the question (`coverage.uncovered_report`)."""
        steps = [step_of(n) for n in tree.search_nodes()]
        searched = [step.argument for step in steps if step.action == "search" and step.argument]
        nearest = [hit.title for step in steps for hit in step.dropped_as_unrelated]
        save_uncovered_report(
            ctx, searched, nearest, {"method": self.name, "nodes": len(steps), "short_answer": "", "verified": False}
        )

    def _mark_reported(self, ctx: RunContext[FgdipParams], answer_id: int | None) -> None:
        """Star the answer the report gives, on the map and in its panel: after steering, several
        answers can stand accepted, and the report gives the latest. One it no longer gives loses
        its star."""
        for node in ctx.graph.nodes():
            if node.kind != ANSWER:
                continue
            info = answer_of(node)
            reported = node.id == answer_id
            superseded = answer_id is not None and not reported
            # A finished answer's label says its verdict (and the star, or that a later one replaced
            # it); an unfinished one keeps its own.
            label = (
                answer_label(info.model_copy(update={"reported": reported, "superseded": superseded}))
                if node.status == NodeStatus.DONE
                else node.label
            )
            if info.reported != reported or label != node.label:
                ctx.graph.update(node, merge_data={"reported": reported, "superseded": superseded}, label=label)

    def reset_failed(self, ctx: RunContext[FgdipParams]) -> int:
        """Also give back, on a resume, the expansions whose node generator could not be read: they
        were closed so this run's search went on, and a resume (perhaps with another model) tries
        them again, generating only the children still missing."""
        reset = super().reset_failed(ctx)
        for node in ctx.graph.nodes():
            if node.kind in SEARCH_KINDS:
                generate_error, closed = step_of(node).generate_error, closed_as_impossible(step_of(node))
            elif node.kind == QUESTION:
                generate_error, closed = QuestionData.of(node).generate_error, False
            else:
                generate_error, closed = "", False
            if generate_error and not closed:
                # A node judged impossible (by the evaluator or by you) keeps its expansion closed.
                ctx.graph.update(node, merge_data={"generate_error": "", "expanded": False})
                reset += 1
            elif node.kind == ANSWER and answer_of(node).verdict == "unjudged":
                # The Answer Evaluator is asked again; the explanation written before is kept.
                ctx.graph.update(node, merge_data={"verdict": None, "evaluate_error": ""}, status=NodeStatus.PENDING)
                reset += 1
        return reset

    def _params(self, ctx: RunContext[FgdipParams]) -> FgdipParams:
        return ctx.params

    def _memory(self, ctx: RunContext[FgdipParams]) -> ErrorMemory:
        return ctx.graph.state(ERROR_MEMORY, ErrorMemory) or ErrorMemory()

    # ------------------------------------------------------------------ the question

    def _open_question(self, ctx: RunContext[FgdipParams], tree: Tree) -> bool:
        root = ctx.graph.root()
        if root is None or root.status == NodeStatus.DONE:
            return False
        params = self._params(ctx)
        if not params.extractor:
            # The paper's ablation: no entities; the node generator opens the question like any node.
            planned = min(params.siblings, params.max_nodes)
            ctx.graph.finish(
                root,
                data={
                    "explored_order": 1,
                    "planned_children": planned,
                    "children_must_finish": (params.max_depth <= 1 or params.max_nodes - planned < params.siblings),
                },
            )
            return True
        ctx.checkpoint()
        entities = QuestionData.model_validate(root.data).entities
        if entities is None:
            ctx.graph.start(root)
            entities, error = extract_entities(ctx, root)
            root = ctx.graph.update(root, merge_data={"entities": entities, "extractor_error": error})
        existing = {entity_of(n).casefold() for n in tree.children(root, frozenset({ENTITY}))}
        # Room for a step under them: a first layer that fills the tree could answer nothing.
        entities = entities[: max(1, params.max_nodes - 1)]
        ctx.graph.add_many(
            [
                NewNode(
                    ENTITY,
                    entity,
                    parent=root,
                    data={
                        "entity": entity,
                        "thought": f"I need to search {entity} and find what the question asks about it.",
                        "action": "search",
                        "argument": entity,
                    },
                )
                for entity in entities
                if entity.casefold() not in existing
            ]
        )
        ctx.graph.finish(root, content=ctx.question)
        return True

    # ------------------------------------------------------------------ running and judging nodes

    def _settle_nodes(self, ctx: RunContext[FgdipParams], tree: Tree) -> bool:
        """Run the action of every waiting node, then judge them: concurrently, the siblings of a layer
        being independent once generated (each one's generation already saw the ones before it)."""
        waiting = [n for n in tree.search_nodes() if n.status in UNFINISHED]
        if not waiting:
            return False
        ctx.checkpoint()
        unrun = [n for n in waiting if step_of(n).observation is None]
        if unrun:
            ctx.parallel([partial(self._run_action, ctx, node, tree) for node in unrun])
            tree = Tree.of(ctx.graph.nodes())
            waiting = [tree.nodes[stored_id(n)] for n in waiting]
        ctx.parallel([partial(self._judge, ctx, node, tree) for node in waiting])
        return True

    def _run_action(self, ctx: RunContext[FgdipParams], node: Node, tree: Tree) -> Node:
        ctx.checkpoint()
        path = tree.path(node)[:-1]
        observation = tools.run_action(ctx, node, path)
        if observation.sources:
            ctx.graph.link_sources(node, observation.sources)
        return ctx.graph.update(node, merge_data={"observation": observation.text, **observation.data})

    def _judge(self, ctx: RunContext[FgdipParams], node: Node, tree: Tree) -> None:
        ctx.checkpoint()
        node = ctx.graph.start(node)
        content = self._content(step_of(node))
        if not self._params(ctx).step_evaluator:
            ctx.graph.finish(node, content=content)
            return
        verdict = judge_step(ctx, node, tree.path(node))
        ctx.graph.finish(
            node,
            content=content,
            data={"verdict": verdict.verdict, "justification": verdict.justification, "judged_by": verdict.judged_by},
        )

    @staticmethod
    def _content(step: StepData) -> str:
        marker = f" [[S{step.page_source}]]" if step.page_source is not None else ""
        # The thought and the observation cite nothing of their own: only our page marker cites (a
        # page's "[41]" or a thought's "[1]" would link to our source of that number).
        thought = without_model_citations(strip_markers(step.thought))
        return (
            f"**Thought:** {thought}\n\n**Action:** {action_markdown(step.action, step.argument)}"
            f"\n\n**Observation:** {without_page_markers(step.observation or '')}{marker}"
        )

    # ------------------------------------------------------------------ expansion (node generation)

    def _continue_expansion(self, ctx: RunContext[FgdipParams], tree: Tree) -> bool:
        begun = [n for n in tree.nodes.values() if n.status == NodeStatus.DONE and _expanding(n)]
        if not begun:
            return False
        self._expand(ctx, tree, min(begun, key=lambda n: explored_order(n) or 0))
        return True

    def _expand(self, ctx: RunContext[FgdipParams], tree: Tree, parent: Node) -> None:
        """Generate the parent's missing children one by one: each sees the siblings generated before
        it, with their observations (real-time feedback), so each action runs as soon as it exists."""
        params = self._params(ctx)
        grown = QuestionData.of(parent) if parent.kind == QUESTION else step_of(parent)
        path = tree.path(parent)
        must_finish = grown.children_must_finish
        siblings = tree.children(parent)
        memory = self._memory(ctx)
        # A parent expanded before the plan was stored gets the run's number of siblings.
        planned = grown.planned_children if "planned_children" in grown.model_fields_set else params.siblings
        for _ in range(len(siblings), planned):
            ctx.checkpoint()
            try:
                step = generate_step(ctx, parent, path, siblings, memory, must_finish=must_finish)
            except StructuredOutputError as exc:
                ctx.graph.update(parent, merge_data={"generate_error": str(exc)[:2000]})
                break
            child = ctx.graph.add(
                kind=STEP,
                label=label_for(step.action, step.argument),
                parent=parent,
                data={"thought": step.thought.strip(), "action": step.action, "argument": step.argument},
            )
            siblings = [*siblings, self._run_action(ctx, child, Tree.of([*tree.nodes.values(), child]))]
        ctx.graph.update(parent, merge_data={"expanded": True})

    # ------------------------------------------------------------------ answers

    def _continue_answer(self, ctx: RunContext[FgdipParams], tree: Tree) -> bool:
        waiting = [a for a in tree.answers() if a.status in UNFINISHED]
        if not waiting:
            return False
        for answer in waiting:
            self._settle_answer(ctx, tree, answer)
        return True

    def _settle_answer(self, ctx: RunContext[FgdipParams], tree: Tree, answer: Node) -> None:
        """Write the answer's explanation, judge it, remember a rejection: each stored before the next,
        so a resumed run does only what is missing."""
        ctx.checkpoint()
        params = self._params(ctx)
        answer = ctx.graph.start(answer)
        data = answer_of(answer)
        if ctx.sources_only and data.verdict is None and not ctx.graph.sources():
            # No search found a passage about the question, and the model answers only from sources:
            # its answer would be its own invention, so the search ends saying so, unjudged.
            data = answer_of(
                ctx.graph.update(answer, merge_data={"not_covered": True, "short_answer": "", "verdict": "unchecked"})
            )
            ctx.graph.finish(
                answer, content=not_covered(ctx.question, ctx.searcher.description), label=answer_label(data)
            )
            return
        path = tree.path(tree.parent(answer))
        if not data.explanation and not data.write_error:
            written = write_answer(ctx, answer, data.short_answer, path)
            if written.cited:
                ctx.graph.link_sources(answer, written.cited)
            answer = ctx.graph.update(
                answer,
                merge_data={
                    "short_answer": written.short_answer or data.short_answer,
                    "explanation": written.explanation,
                    "invalid_citations": written.invalid_citations,
                    "write_error": written.error,
                    "writer_answer": written.disagreed,
                },
            )
            data = answer_of(answer)
        if data.verdict is None and params.yes_no and data.short_answer not in ("yes", "no"):
            # Not an answer to a yes/no question, whatever an evaluator would say: rejected without a
            # call, with the lesson the next branches need.
            said = data.short_answer
            answer = ctx.graph.update(
                answer,
                merge_data={
                    "verdict": "rejected",
                    "solves": False,
                    "on_topic": None,
                    "reasons": f"The question is answered yes or no, and this answer is neither: {said}"[:1000],
                    "error_analysis": "The answer must be the single word yes or no; finish with finish[yes] or "
                    "finish[no].",
                },
            )
            data = answer_of(answer)
        if data.verdict is None:
            if params.answer_evaluator:
                verdict = judge_answer(ctx, answer, data.short_answer, path)
                answer = ctx.graph.update(
                    answer,
                    merge_data={
                        "verdict": verdict.verdict,
                        "solves": verdict.solves,
                        "on_topic": verdict.on_topic,
                        "reasons": verdict.reasons,
                        "error_analysis": verdict.error_analysis,
                        "evaluate_error": verdict.error,
                    },
                )
            else:
                answer = ctx.graph.update(answer, merge_data={"verdict": "unchecked"})
            data = answer_of(answer)
        if data.verdict == "rejected":
            self._remember(ctx, tree, answer)
        # The short answer escaped (one line): the content is what a stopped run's export shows.
        content = f"**{inline_text(data.short_answer)}**" + (f"\n\n{data.explanation}" if data.explanation else "")
        # The verdict in the label as well as the fill: a rejected answer (where a backtrack starts)
        # reads as one on the map without telling two small diamonds apart by colour.
        ctx.graph.finish(answer, content=content, label=answer_label(data))

    def _remember(self, ctx: RunContext[FgdipParams], tree: Tree, answer: Node) -> None:
        """A rejected answer's error analysis joins the memory once, and its branch is left."""
        memory = self._memory(ctx)
        data = answer_of(answer)
        branch = tree.branch(tree.parent(answer))
        branch_data = step_of(branch)
        name = entity_of(branch) or label_for(branch_data.action, branch_data.argument)
        if not any(e.node_id == answer.id for e in memory.entries):
            entry = ErrorEntry(analysis=data.error_analysis, answer=data.short_answer, branch=name, node_id=answer.id)
            ctx.graph.save_state(
                ERROR_MEMORY,
                ErrorMemory(entries=[*memory.entries, entry], change=f"answer '{entry.answer}' rejected on {name}"),
            )
        if not branch_data.branch_ended and branch.kind in SEARCH_KINDS:
            ctx.graph.update(branch, merge_data={"branch_ended": f"answer '{data.short_answer}' rejected"})

    # ------------------------------------------------------------------ choosing the next node

    def _explore_next(self, ctx: RunContext[FgdipParams], tree: Tree) -> bool:
        params = self._params(ctx)
        room = params.max_nodes - len(tree.search_nodes())

        def can_take(candidate: Node) -> bool:
            # A node that could not grow (the tree is full, or it is as deep as allowed) is not worth
            # a step, nor a backtrack: a finishing node waiting elsewhere still is.
            step = step_of(candidate)
            return step.action == "finish" or step.forced or (room > 0 and candidate.depth < params.max_depth)

        if settled_answer(tree) is not None and not forced_waiting(tree, can_take):
            return False
        node = next_node(tree, can_take)
        if node is None:
            return False
        step = step_of(node)
        forced = step.forced
        source = backtrack_source(tree, node)
        if source is not None and tree.backtracks() >= params.max_backtracks and not forced:
            ctx.graph.narrate(
                f"The search stops: it has backtracked {plural(tree.backtracks(), 'time')}, the limit "
                "(max_backtracks).",
                kind="step",
            )
            return False
        order = tree.next_order()
        update: dict[str, Any] = {"explored_order": order, "backtrack_from": source.id if source is not None else None}
        if step.action == "finish":
            pass
        elif node.depth >= params.max_depth:
            update["dead_end"] = "it is at the deepest step allowed (max_depth)"
        elif room <= 0 and not forced:
            update["dead_end"] = "the search tree is full (max_nodes)"
        else:
            planned = params.siblings if forced else min(params.siblings, room)
            update["planned_children"] = planned
            # Forced too: on a full tree the children of a node you chose must answer, or no node
            # under it could grow and your command would have paid for a layer that ends nowhere.
            update["children_must_finish"] = node.depth + 1 >= params.max_depth or room - planned < params.siblings
        # The edge first (idempotent: a run killed after it chooses the same node again from the
        # same stored tree), then the choice, then a finishing node's answer: a run killed before
        # the answer gets it from `_answer_missing` (settling answers comes before choosing).
        if source is not None:
            ctx.graph.link(source, node, BACKTRACK, data={"order": order})
            ctx.graph.narrate(f"backtracking: leaving {source.label} for {node.label}", node_id=node.id)
        entity = entity_of(node)
        label = f"({order}) {entity}" if entity else label_for(step.action, step.argument, order)
        node = ctx.graph.update(node, merge_data=update, label=label)
        self._add_answer(ctx, tree, node)
        return True

    def _add_answer(self, ctx: RunContext[FgdipParams], tree: Tree, node: Node) -> bool:
        """The answer of a chosen node whose action is finish, once."""
        step = step_of(node)
        if step.action != "finish" or any(a.parent_id == node.id for a in tree.answers()):
            return False
        ctx.graph.add(
            kind=ANSWER, label=f"answer: {step.argument}"[:80], parent=node, data={"short_answer": step.argument}
        )
        return True

    def _answer_missing(self, ctx: RunContext[FgdipParams], tree: Tree) -> bool:
        """A finishing node chosen by a run killed before its answer was added: added now."""
        chosen = [
            n
            for n in tree.nodes.values()
            if n.kind in SEARCH_KINDS
            and explored_order(n) is not None
            and step_of(n).action == "finish"
            and n.status != NodeStatus.PRUNED
        ]
        return any([self._add_answer(ctx, tree, n) for n in chosen])

    # ------------------------------------------------------------------ steering

    def apply(
        self, ctx: RunContext[FgdipParams], command: CommandSpec, payload: CommandPayload, node: Node | None
    ) -> set[str]:
        if command.name == "regenerate_report":
            return {REPORT}
        if command.name == "force_explore":
            assert node is not None
            if explored_order(node) is not None:
                raise CommandRejected("this node was already explored; choose a node the search has not taken yet")
            ctx.graph.update(node, merge_data={"forced": True})
            return {REPORT}
        if command.name == "mark_impossible":
            assert node is not None
            return self._mark_impossible(ctx, node)
        if command.name == "add_entity":
            assert isinstance(payload, AddEntityPayload)
            return self._add_entity(ctx, payload)
        if command.name == "edit_error_memory":
            assert isinstance(payload, EditErrorMemoryPayload)
            self._edit_memory(ctx, payload)
            return set()
        raise UnsupportedCommand(f"the {self.name} method does not support '{command.name}'")

    def _mark_impossible(self, ctx: RunContext[FgdipParams], node: Node) -> set[str]:
        step = step_of(node)
        if marked_impossible_by_you(step.model_dump()):
            raise CommandRejected("this node is already marked impossible")
        tree = Tree.of(ctx.graph.nodes())
        ctx.graph.update(
            node,
            merge_data={
                "verdict": "impossible",
                "judged_by": "you",
                "justification": "Marked impossible by you.",
                "forced": False,
                **({"expanded": True} if step.explored_order is not None else {}),
            },
        )
        for child in tree.children(node):
            if explored_order(child) is None and child.status != NodeStatus.PRUNED:
                ctx.graph.prune(child)
        # An answer reached through the node stands on what you ruled out: it is rejected, with that
        # as its error analysis, and the search goes on to the next branch. Answers not settled yet
        # too (a run stopped between choosing a finishing node and judging it), or they would be
        # judged and accepted later.
        analysis = f"You marked the step '{node.label}' on this answer's path impossible."
        for answer in tree.answers():
            info = answer_of(answer)
            parent = tree.nodes.get(answer.parent_id) if answer.parent_id is not None else None
            if (
                parent is None
                or answer.status == NodeStatus.PRUNED
                or info.verdict == "rejected"
                or node.id not in {n.id for n in tree.path(parent)}
            ):
                continue
            ruled_out = {"verdict": "rejected", "error_analysis": analysis, "reasons": analysis}
            if answer.status != NodeStatus.DONE:
                # Settled by the loop without a call: no explanation is written for a ruled-out answer.
                if not info.explanation:
                    ruled_out["write_error"] = "not written: you ruled its path out first"
                ctx.graph.update(answer, merge_data=ruled_out)
                continue
            answer = ctx.graph.update(
                answer, merge_data=ruled_out, label=answer_label(info.model_copy(update=ruled_out))
            )
            self._remember(ctx, Tree.of(ctx.graph.nodes()), answer)
        return {REPORT}

    def _add_entity(self, ctx: RunContext[FgdipParams], payload: AddEntityPayload) -> set[str]:
        entity = next(iter(distinct([payload.entity], 1)), "")
        if not entity:
            raise CommandRejected("the entity is empty; type a name to search from")
        root = ctx.graph.root()
        if root is None:
            raise CommandRejected("the run has no question yet; try again in a moment")
        tree = Tree.of(ctx.graph.nodes())
        if any(entity_of(n).casefold() == entity.casefold() for n in tree.children(root)):
            raise CommandRejected(f"'{entity}' is already a branch of this search")
        ctx.graph.add(
            kind=ENTITY,
            label=entity,
            parent=root,
            data={
                "entity": entity,
                "user": True,
                "forced": True,
                "thought": f"You asked to search {entity}.",
                "action": "search",
                "argument": entity,
            },
        )
        return {REPORT}

    def _edit_memory(self, ctx: RunContext[FgdipParams], payload: EditErrorMemoryPayload) -> None:
        memory = self._memory(ctx)
        entries = list(memory.entries)
        text = " ".join(payload.analysis.split())
        if payload.number == 0:
            if not text:
                raise CommandRejected("a new lesson needs its text; write it under Lesson")
            entries.append(ErrorEntry(analysis=text, by_user=True))
            change = "you added a lesson"
        elif not text:
            del entries[payload.number - 1]
            change = f"you removed lesson {payload.number}"
        else:
            entries[payload.number - 1] = entries[payload.number - 1].model_copy(
                update={"analysis": text, "by_user": True}
            )
            change = f"you rewrote lesson {payload.number}"
        ctx.graph.save_state(ERROR_MEMORY, ErrorMemory(entries=entries, change=change))
