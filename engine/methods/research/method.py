"""The deep research agent (Yamada et al., "An Open and Reproducible Deep Research Agent for
Long-Form Question Answering", a winner of MMU-RAG at NeurIPS 2025, seed paper 002): the search tool
(search → rerank → summarize with a marker per document) is called first with the question itself;
then the agent reasons over what the searches found, decides whether another search is needed and
with which query, until it is done or `max_searches` / `max_turns` are used; then it writes a
long-form answer with inline citations, every marker checked to point to a document retrieved in
this run and every cited sentence checked against its source.

Stored graph, a chain: `question` → `search` (round 1, the question) → `reasoning` (turn 1) →
`search` → `reasoning` → ... → `answer`. Each step below decides from what is stored, so a resumed
run recomputes nothing finished: a search stores its reranked documents, then its summary; a turn
stores its decision before the search it asks for is created; the answer stores its text before
its citation check.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from engine.citations import cited_source_ids, number_citations, strip_markers
from engine.contract import ANSWER_NODE, CommandPayload, CommandRejected, CommandSpec, UnsupportedCommand
from engine.llm.protocol import StructuredOutputError
from engine.methods.base import REPORT, Method, RunContext, RunOutcome
from engine.methods.estimate import CostEstimate
from engine.methods.research import estimate as cost
from engine.methods.research import prompts
from engine.methods.research.answer import check_answer, write_answer
from engine.methods.research.kinds import (
    ANSWER,
    COMMANDS,
    DROPPED_SOURCES,
    NODE_KINDS,
    QUESTION,
    REASONING,
    RUN_STATES,
    SEARCH,
    STEPS,
    VIEW,
    AddQueryPayload,
    DigIntoPayload,
    DroppedSource,
    DroppedSources,
    DropSourcePayload,
    answer_of,
    search_of,
    turn_of,
)
from engine.methods.research.params import ResearchParams
from engine.methods.research.report import report
from engine.methods.research.schemas import AgentTurn
from engine.methods.research.search_tool import RUN_WIDE_NUMBER, findings, retrieve, summarize
from engine.methods.research.steps import RERANK, SUMMARY, step_node
from engine.prompting import inert
from engine.reader_text import is_placeholder
from engine.safe_text import one_line
from engine.search.relevance import not_covered, ungrounded_note
from storage.models import Node, Source, stored_id
from storage.statuses import NodeStatus

UNFINISHED = (NodeStatus.PENDING, NodeStatus.RUNNING)


def _query_of(text: str) -> str:
    return " ".join(text.split())[:300]


def _same_query(a: str, b: str) -> bool:
    def words(text: str) -> str:
        return " ".join(re.findall(r"\w+", text.casefold()))

    return words(a) == words(b)


class Chain:
    """The stored run read once per step: its searches, turns and live answer, in order."""

    def __init__(self, nodes: list[Node]) -> None:
        live = [n for n in nodes if n.status != NodeStatus.PRUNED]
        self.root = next((n for n in nodes if n.parent_id is None), None)
        self.searches = sorted((n for n in live if n.kind == SEARCH), key=stored_id)
        self.turns = sorted((n for n in live if n.kind == REASONING), key=stored_id)
        self.answer = next((n for n in live if n.kind == ANSWER), None)
        steps = self.searches + self.turns
        self.tip = max(steps, key=stored_id) if steps else None
        # Each search's rerank and summary steps (`steps.py`), by the search's id.
        by_id = {n.id: n for n in live}
        self.reranks = {n.parent_id: n for n in live if n.kind == RERANK}
        self.summaries_of = {
            by_id[n.parent_id].parent_id: n for n in live if n.kind == SUMMARY and n.parent_id in by_id
        }

    @property
    def summaries(self) -> dict[int, str]:
        """Search node id -> its summary: its summary step's text, or (a search stored before the
        steps were drawn) its own."""
        return {
            stored_id(s): (self.summaries_of[s.id].content if s.id in self.summaries_of else s.content) or ""
            for s in self.searches
        }

    def end_of(self, node: Node) -> Node:
        """Where what follows `node` hangs on the map: under a search's last step (search → rerank →
        summary → the next turn), else under the node itself."""
        return self.summaries_of.get(node.id) or self.reranks.get(node.id) or node

    def agent_searches(self) -> int:
        return sum(search_of(n).by == "agent" for n in self.searches)

    def agent_turns(self) -> int:
        return sum(not turn_of(n).focus for n in self.turns)

    def reasoning(self, before: int | None = None) -> list[str]:
        """The finished turns' reasoning, for the next prompts, without its [n]: they were run-wide
        document numbers when it was written, which a dropped source has shifted since (the writer
        would read "[7]" as another document) and the summarizer numbers per search."""
        return [
            RUN_WIDE_NUMBER.sub("", turn_of(n).reasoning)
            for n in self.turns
            if n.status == NodeStatus.DONE and (before is None or stored_id(n) < before) and turn_of(n).reasoning
        ]

    def queries(self) -> list[str]:
        """The queries searched: a search whose backend failed found nothing, so asking it again
        (the agent, or Add a query) is not a repeat."""
        return [search_of(n).query for n in self.searches if not search_of(n).search_error]

    def failed_searches(self) -> list[Node]:
        """Searches whose backend failed and whose query no later search found again."""
        failed = [n for n in self.searches if n.status == NodeStatus.DONE and search_of(n).search_error]
        return [n for n in failed if not any(_same_query(search_of(n).query, q) for q in self.queries())]


UNCHECKED_NOTE = (
    "_The run stopped before this answer's citation check finished: its citations point to "
    "retrieved documents, but whether each source says what its sentence claims is not verified._"
)


class ResearchMethod(Method[ResearchParams]):
    name = "research"
    title = "Deep research agent: search, rerank, summarize with citations, iterate"
    summary = (
        "Searches the question, reranks the documents and summarizes the best ones with a citation marker "
        "per document; then reasons, searches again while something is missing, and writes a long-form "
        "answer whose every citation points to a retrieved document and is checked against it."
    )
    good_for = "a long-form answer to a research question whose every citation is checked against its source"
    paper = (
        "An Open and Reproducible Deep Research Agent for Long-Form Question Answering (the MMU-RAG "
        "text-to-text winner, NeurIPS 2025)"
    )
    Params = ResearchParams
    node_kinds = NODE_KINDS
    commands = COMMANDS
    run_states = RUN_STATES
    view = VIEW
    steps = STEPS
    report_without_model = True  # composed from the stored graph: a stopped run gets a partial one

    @classmethod
    def estimate(cls, params: ResearchParams) -> CostEstimate:
        return cost.estimate(params)

    def _params(self, ctx: RunContext[ResearchParams]) -> ResearchParams:
        return ctx.params

    def _dropped(self, ctx: RunContext[ResearchParams]) -> DroppedSources:
        return ctx.graph.state(DROPPED_SOURCES, DroppedSources) or DroppedSources()

    # ------------------------------------------------------------------ the growth loop

    def start(self, ctx: RunContext[ResearchParams]) -> None:
        if ctx.graph.root() is None:
            ctx.graph.add(kind=QUESTION, label=ctx.question, content=ctx.question, depth=0)

    def step(self, ctx: RunContext[ResearchParams]) -> bool:
        chain = Chain(ctx.graph.nodes())
        return (
            self._open(ctx, chain)
            or self._run_searches(ctx, chain)
            or self._run_turns(ctx, chain)
            or self._next(ctx, chain)
            or self._write_answer(ctx, chain)
        )

    def write_stopped_report(self, ctx: RunContext[ResearchParams], reason: str) -> bool:
        """Also when the run stopped during the answer's citation check: the answer is written (its
        markers valid), only its check is missing, and the partial report says so."""
        answer = Chain(ctx.graph.nodes()).answer
        if answer is None or answer.status == NodeStatus.DONE or not (answer.content or "").strip():
            return super().write_stopped_report(ctx, reason)
        with ctx.graph.partial_reports(reason):
            ctx.graph.save_report(
                answer.content.strip(),
                own=f"\n\n{UNCHECKED_NOTE}",
                data={"method": self.name, ANSWER_NODE: answer.id, "checked": False},
            )
        return True

    def write_report(self, ctx: RunContext[ResearchParams]) -> None:
        chain = Chain(ctx.graph.nodes())
        sources = ctx.graph.sources()
        markdown, own, data = report(chain.answer, chain.searches, chain.turns, sources, self.name)
        if (
            chain.answer is not None
            and chain.answer.status == NodeStatus.DONE
            and not sources
            and not answer_of(chain.answer).not_covered
        ):
            # Said to the reader, not left to the model: no search found anything to ground it.
            own += ungrounded_note(ctx.searcher.description)
        ctx.graph.save_report(markdown, data=data, own=own)

    # ------------------------------------------------------------------ the first search: the question

    def _open(self, ctx: RunContext[ResearchParams], chain: Chain) -> bool:
        root = chain.root
        if root is None or root.status == NodeStatus.DONE:
            return False
        if not chain.searches:
            ctx.graph.add(
                kind=SEARCH,
                label=f"search 1: {ctx.question}"[:80],
                parent=root,
                data={"query": ctx.question, "round": 1, "by": "question"},
            )
        ctx.graph.finish(root, content=ctx.question)
        return True

    # ------------------------------------------------------------------ the search tool

    def assess(self, ctx: RunContext[ResearchParams]) -> RunOutcome:
        """A search whose backend failed after the first is kept as "found nothing" so the research
        goes on: the run says the answer was written without it."""
        outcome = super().assess(ctx)
        chain = Chain(ctx.graph.nodes())
        failed = chain.failed_searches()
        caveats = [outcome.caveat] if outcome.caveat else []
        if failed:
            queries = "; ".join(one_line(search_of(n).query)[:80] for n in failed[:3])
            caveats.append(
                f"{len(failed)} of the searches failed ({queries}): the answer was written without "
                "what they would have found"
            )
        if chain.answer is not None and answer_of(chain.answer).uncited and ctx.graph.sources():
            caveats.append("the answer cites none of the retrieved documents, even when asked again")
        return replace(outcome, caveat="; ".join(caveats)) if outcome.ok and caveats else outcome

    def _run_searches(self, ctx: RunContext[ResearchParams], chain: Chain) -> bool:
        waiting = [n for n in chain.searches if n.status in UNFINISHED]
        if not waiting:
            return False
        dropped = self._dropped(ctx).ids()
        for node in waiting:
            ctx.checkpoint()
            node = ctx.graph.start(node)
            if search_of(node).ranked is None:
                node = retrieve(ctx, node)
            error = search_of(node).search_error
            if error and not any(s.status == NodeStatus.DONE and s.id != node.id for s in chain.searches):
                # Nothing found yet and the search itself failed: an answer would rest on nothing. The
                # node fails (the run with it) and forgets its result, so a resume searches again.
                kept = search_of(node).model_dump(exclude_unset=True, exclude={"ranked", "search_error", "found"})
                node = ctx.graph.update(node, replace_data=kept)
                ctx.graph.fail(node, f"the search failed: {error}; resume the run to search again")
                continue
            if not search_of(node).stepped:
                # Stored before the steps were drawn, or a failed search: the summary is the search's own.
                summary, data = summarize(ctx, node, chain.reasoning(before=node.id), dropped)
                ctx.graph.finish(node, content=summary, data=data)
                continue
            rerank = step_node(ctx.graph, node, RERANK, "rerank")
            step = ctx.graph.start(step_node(ctx.graph, rerank, SUMMARY, f"summary of search {search_of(node).round}"))
            summary, data = summarize(ctx, node, chain.reasoning(before=node.id), dropped, step=step)
            ctx.graph.link_sources(step, cited_source_ids(summary))
            ctx.graph.finish(step, content=summary, data=data)
            ctx.graph.finish(node)
        return True

    # ------------------------------------------------------------------ the agent's turns

    def _run_turns(self, ctx: RunContext[ResearchParams], chain: Chain) -> bool:
        waiting = [n for n in chain.turns if n.status in UNFINISHED]
        if not waiting:
            return False
        for node in waiting:
            ctx.checkpoint()
            # Read again: a turn steered in after another sees that one's reasoning and query.
            self._turn(ctx, Chain(ctx.graph.nodes()), ctx.graph.start(node))
        return True

    def _turn(self, ctx: RunContext[ResearchParams], chain: Chain, node: Node) -> None:
        params = self._params(ctx)
        focus = turn_of(node).focus
        left = max(0, params.max_searches - chain.agent_searches())
        numbers, _ = self._numbering(ctx, chain)
        done = [s for s in chain.searches if s.status == NodeStatus.DONE]
        messages = prompts.AGENT.render(
            question=ctx.question,
            left=str(left if not focus else max(left, 1)),
            searches=str(len(done)),
            queries="; ".join(f"<<<{inert(q)}>>>" for q in chain.queries()) or "(none)",
            findings=findings(done, numbers, chain.summaries),
            reasoning=inert("\n\n".join(chain.reasoning(before=node.id))) or "(none yet)",
            focus=prompts.FOCUS.replace("$point", inert(focus)) if focus else "",
        )
        try:
            turn = ctx.llm.ask(
                messages, AgentTurn, purpose="agent", node_id=node.id, max_tokens=1500, temperature=params.temperature
            )
        except StructuredOutputError as exc:
            # Plain words for the reader; the parse error goes to the step log's event data.
            then = "your point is searched as you wrote it" if focus else "it writes the answer now"
            ctx.graph.narrate(f"the agent's reply could not be read; {then}", node_id=node.id, error=str(exc)[:2000])
            if not focus:
                ctx.graph.finish(
                    node,
                    content="The agent's reply could not be read; it writes the answer now.",
                    data={"decision": "answer", "why_stopped": "its reply could not be read"},
                )
                return
            turn = AgentTurn.model_construct(reasoning="", need_more_search=True, next_query="")  # an empty turn
        query = _query_of(turn.next_query)
        if focus and (not query or any(_same_query(query, q) for q in chain.queries())):
            # Digging into your point must search: when the agent gives no new query, your words are it.
            query = _query_of(focus)
        decision, why = "answer", ""
        if turn.need_more_search or focus:
            if not query:
                why = "it gave no query"
            elif any(_same_query(query, q) for q in chain.queries()):
                why = "it repeated an earlier query"
            elif left <= 0 and not focus:
                why = "no searches are left (max_searches)"
            else:
                decision = "search"
        # The reasoning cites nothing of its own: a marker typed in it would cite a source of the run.
        content = (
            strip_markers(turn.reasoning).strip() + (f"\n\nNext search: {query}" if decision == "search" else "")
        ).strip()
        ctx.graph.finish(
            node,
            content=content,
            data={
                "reasoning": turn.reasoning.strip(),
                "decision": decision,
                "next_query": query if decision == "search" else "",
                "why_stopped": why,
            },
        )
        if why:
            ctx.graph.narrate(f"the agent stops searching: {why}", node_id=node.id)

    def _next(self, ctx: RunContext[ResearchParams], chain: Chain) -> bool:
        """What follows the chain's tip: a new turn after a search, the search a turn asked for, or
        the answer (when the turn decided so or the limits are met)."""
        if chain.answer is not None:
            return False
        # Every finished turn's decided search, not only the tip's: a command that arrived while a
        # turn was still to run joined the chain under it, and that turn's search must not be lost.
        for turn in chain.turns:
            if (
                turn.status == NodeStatus.DONE
                and turn_of(turn).decision == "search"
                and self._decided_search(ctx, chain, turn) is not None
            ):
                return True
        tip = chain.tip
        if tip is None or tip.status != NodeStatus.DONE:
            return False
        params = self._params(ctx)
        if tip.kind == REASONING and turn_of(tip).decision == "search":
            return self._decided_search(ctx, chain, tip) is not None
        if tip.kind == SEARCH:
            stop = ""
            if chain.agent_turns() >= params.max_turns:
                stop = f"the agent has used its {params.max_turns} turns (max_turns)"
            elif chain.agent_searches() >= params.max_searches:
                stop = f"the agent has used its {params.max_searches} searches (max_searches)"
            if not stop:
                ctx.graph.add(
                    kind=REASONING,
                    label=f"turn {chain.agent_turns() + 1}",
                    parent=chain.end_of(tip),
                    data={"turn": chain.agent_turns() + 1},
                )
                return True
            ctx.graph.narrate(f"writing the answer: {stop}", node_id=tip.id)
        ctx.graph.add(kind=ANSWER, label="answer", parent=chain.end_of(tip))
        return True

    def _decided_search(self, ctx: RunContext[ResearchParams], chain: Chain, turn: Node) -> Node | None:
        """The search a finished turn decided on, created once (None when it exists already). Its own
        search is the child with its query: a search you added under the turn before it ran is not."""
        data = turn_of(turn)
        if any(s.parent_id == turn.id and _same_query(search_of(s).query, data.next_query) for s in chain.searches):
            return None
        number = len(chain.searches) + 1
        return ctx.graph.add(
            kind=SEARCH,
            label=f"search {number}: {data.next_query}"[:80],
            parent=turn,
            data={"query": data.next_query, "round": number, "by": "you" if data.focus else "agent"},
        )

    def _tip_for_steering(self, ctx: RunContext[ResearchParams], chain: Chain) -> Node:
        """Where a person's search or point joins the chain: after the search the last turn decided
        on, which is created first (attached to the turn itself, it would take that search's place)."""
        tip = chain.tip
        assert tip is not None
        if tip.kind == REASONING and tip.status == NodeStatus.DONE and turn_of(tip).decision == "search":
            return self._decided_search(ctx, chain, tip) or tip
        return chain.end_of(tip)

    # ------------------------------------------------------------------ the answer

    def _numbering(self, ctx: RunContext[ResearchParams], chain: Chain) -> tuple[dict[int, int], list[Source]]:
        """Run-wide document numbers (source id → n) in retrieval order, without dropped sources."""
        dropped = self._dropped(ctx).ids()
        by_id = {s.id: s for s in ctx.graph.sources()}
        numbers: dict[int, int] = {}
        for search in chain.searches:
            for doc in search_of(search).ranked or []:
                sid = doc.source_id
                if sid in by_id and sid not in dropped and sid not in numbers:
                    numbers[sid] = len(numbers) + 1
        return numbers, [by_id[sid] for sid in numbers]

    def _write_answer(self, ctx: RunContext[ResearchParams], chain: Chain) -> bool:
        answer = chain.answer
        if answer is None or answer.status not in UNFINISHED:
            return False
        ctx.checkpoint()
        params = self._params(ctx)
        answer = ctx.graph.start(answer)
        data = answer_of(answer)
        if not data.attempts and ctx.sources_only and not ctx.graph.sources() and not chain.failed_searches():
            # No search kept a document about the question, and the model answers only from sources.
            ctx.graph.finish(
                answer,
                content=not_covered(ctx.question, ctx.searcher.description),
                data={"not_covered": True, "search_count": sum(s.status == NodeStatus.DONE for s in chain.searches)},
            )
            return True
        if not data.attempts:
            numbers, documents = self._numbering(ctx, chain)
            done = [s for s in chain.searches if s.status == NodeStatus.DONE]
            cited = write_answer(
                ctx,
                answer,
                reasoning=chain.reasoning(),
                findings=findings(done, numbers, chain.summaries),
                documents=documents,
            )
            if is_placeholder(cited.text):
                # Empty, or only schema words or an error message ("Field required."): no answer.
                ctx.graph.fail(
                    answer,
                    "the model wrote no answer (empty, or only an error message); resume the run to ask again",
                    data={"attempts": 0},
                )
                return True
            if cited.removed:
                ctx.graph.narrate(
                    f"the answer still cited wrongly after {cited.attempts} tries; removed "
                    f"{len(cited.removed)} bad markers",
                    node_id=answer.id,
                    removed=cited.removed,
                )
            if cited.uncited:
                ctx.graph.narrate(f"the answer still cites no document after {cited.attempts} tries", node_id=answer.id)
            ctx.graph.link_sources(answer, cited_source_ids(cited.text))
            answer = ctx.graph.update(
                answer,
                content=cited.text,
                merge_data={"attempts": cited.attempts, "removed_markers": cited.removed, "uncited": cited.uncited},
            )
            data = answer_of(answer)
        update: dict[str, Any] = {"search_count": sum(s.status == NodeStatus.DONE for s in chain.searches)}
        if params.check_citations and not data.checked:
            ctx.checkpoint()
            sources = {stored_id(s): s for s in ctx.graph.sources() if s.id not in self._dropped(ctx).ids()}
            update |= check_answer(ctx, answer, answer.content or "", sources, len(data.removed_markers))
        ctx.graph.finish(answer, data=update)
        return True

    # ------------------------------------------------------------------ steering

    def apply(
        self, ctx: RunContext[ResearchParams], command: CommandSpec, payload: CommandPayload, node: Node | None
    ) -> set[str]:
        if command.name == "regenerate_report":
            return {REPORT}
        chain = Chain(ctx.graph.nodes())
        if chain.root is None or chain.tip is None:
            raise CommandRejected("the run has not searched yet; try again in a moment")
        if command.name == "add_query":
            assert isinstance(payload, AddQueryPayload)
            query = " ".join(payload.query.split())
            if any(_same_query(query, q) for q in chain.queries()):
                raise CommandRejected(f"'{query}' was already searched; add a different query")
            self._retire_answer(ctx, chain)
            tip = self._tip_for_steering(ctx, chain)
            number = len(Chain(ctx.graph.nodes()).searches) + 1
            ctx.graph.add(
                kind=SEARCH,
                label=f"search {number}: {query}"[:80],
                parent=tip,
                data={"query": query, "round": number, "by": "you"},
            )
            return {REPORT}
        if command.name == "dig_into":
            assert isinstance(payload, DigIntoPayload)
            point = " ".join(payload.point.split())
            self._retire_answer(ctx, chain)
            ctx.graph.add(
                kind=REASONING,
                label=f"dig into: {point}"[:80],
                parent=self._tip_for_steering(ctx, chain),
                data={"turn": len(chain.turns) + 1, "focus": point},
            )
            return {REPORT}
        if command.name == "drop_source":
            assert isinstance(payload, DropSourcePayload)
            self._drop(ctx, chain, payload.number)
            return {REPORT}
        raise UnsupportedCommand(f"the {self.name} method does not support '{command.name}'")

    def _retire_answer(self, ctx: RunContext[ResearchParams], chain: Chain) -> None:
        """The answer is written again after a steering command: the old one is pruned (kept on the map)."""
        if chain.answer is not None:
            ctx.graph.prune(chain.answer)

    def _drop(self, ctx: RunContext[ResearchParams], chain: Chain, number: int) -> None:
        current = ctx.graph.report()
        if current is None or chain.answer is None:
            raise CommandRejected("there is no report yet to drop a source from; wait for the answer")
        if (current.data or {}).get(ANSWER_NODE) != chain.answer.id or ctx.graph.report_outdated():
            # [n] is numbered from the report: one written before the current answer or before your
            # last change may give [n] to a different source than the one you read.
            raise CommandRejected(
                "the report is being written again after the last change; drop the source once the new report is shown"
            )
        sources = {stored_id(s): s for s in ctx.graph.sources()}
        numbering = number_citations(current.markdown, sources).numbering
        if number not in numbering:
            raise CommandRejected(
                f"the report has no source [{number}]; it cites {len(numbering)} "
                f"source{'s' if len(numbering) != 1 else ''}"
            )
        source = sources[numbering[number]]
        dropped = self._dropped(ctx)
        if any(d.source_id == source.id for d in dropped.sources):
            raise CommandRejected(f"source [{number}] ('{source.title}') is already dropped")
        ctx.graph.save_state(
            DROPPED_SOURCES,
            DroppedSources(
                sources=[*dropped.sources, DroppedSource(source_id=stored_id(source), title=source.title)],
                change=f"you dropped '{source.title}'",
            ),
        )
        self._retire_answer(ctx, chain)
