"""MTQA (paper 004): a Matrix of Thought over knowledge units from an LLM-built knowledge graph.

Per question (the paper's setting, and the default scope): the question's documents are retrieved
(`ctx.search`, under the relevance floor) and added to the knowledge base, which extracts their
entities and relations; the question's keywords are asked once, beside that extraction (they need
the question only); the first column's knowledge units
KU_1 are retrieved with them. Then column by column: the thoughts of the column (the first from the
column's units and the previous summary; each next one also gets ⌈α × paragraphs⌉ of the thought
above as a strategy already taken; thoughts whose α is 0 do not wait and run concurrently); then the
column's units KU' are retrieved with the question plus the column's thoughts and the summary node
corrects the thoughts against them. The next column thinks from that summary and those units; the
last summary is the answer. LLM calls: one per thought and one per summary (m·n + n), plus the
keywords and the knowledge base's extraction calls.

Every step decides from the stored graph (which thoughts and summaries are done, which units were
retrieved), so a killed run resumes without thinking a finished node again."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import partial
from typing import cast

from pydantic import ValidationError

from engine.citations import cited_source_ids, number_citations, strip_markers, to_stored_markers
from engine.contract import CommandPayload, CommandRejected, CommandSpec, UnsupportedCommand
from engine.knowledge.chunks import chunk_chars
from engine.knowledge.stored import KnowledgeError
from engine.knowledge.units import BuildProgress, Keywords, KnowledgeBase
from engine.llm.protocol import StructuredOutputError
from engine.llm.structured import repeats_instructions
from engine.methods.base import REPORT, Method, RunContext
from engine.methods.coverage import save_uncovered_report
from engine.methods.estimate import CostEstimate
from engine.methods.mtqa import estimate as cost
from engine.methods.mtqa import knowledge, matrix, prompts
from engine.methods.mtqa.kinds import (
    CELL,
    CHOICES,
    COMMANDS,
    COMMUNICATION,
    EDGE_KINDS,
    KNOWLEDGE,
    NODE_KINDS,
    QUESTION,
    RUN_STATES,
    STEPS,
    SUMMARY,
    VIEW,
    WEIGHTS,
    AddColumnPayload,
    CellData,
    ChoicePayload,
    ChoicesState,
    KnowledgeData,
    RerunColumnPayload,
    SummaryData,
    UnitPayload,
    cell_data,
    choice_exists,
    column_of,
    holder_data,
    listed_units,
    summary_data,
    unit_line,
)
from engine.methods.mtqa.knowledge import UnitRecord
from engine.methods.mtqa.params import MtqaParams
from engine.methods.mtqa.schemas import MAX_PARAGRAPHS, ColumnSummary, MergedColumn, Thought
from engine.methods.mtqa.weights import passed_paragraphs
from engine.safe_text import inline_text, one_line
from engine.search.protocol import Hit, HitKind, SearchError
from engine.search.relevance import not_covered, relevant_hits, ungrounded_note
from storage.models import Node, Source, stored_id
from storage.statuses import NodeStatus

_SPACE_BEFORE_PUNCTUATION = re.compile(r"[ \t]+([.,;:!?])")
_BARE_CITATION = re.compile(r"\s*\[\d+(?:\s*[,;]\s*\d+)*\]")
_ANSWER_LINE = re.compile(r"^[ \t*_#>-]*answer[ \t*_]*:[ \t*_]*(.*?)[ \t*_]*$", re.IGNORECASE | re.MULTILINE)


def _text_summary(text: str, instructions: str) -> MergedColumn | str:
    """A plain-text summary as paragraphs and the short answer of its last "Answer:" line, without
    the lines (or short answer) that only repeat the instructions, as a small model's often do; or
    why it is not usable."""
    answers = list(_ANSWER_LINE.finditer(text))
    short = answers[-1].group(1).strip() if answers else ""
    body = text[: answers[-1].start()] if answers else text
    body = "\n".join(line for line in body.splitlines() if not repeats_instructions(line, instructions))
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", body) if p.strip()][:MAX_PARAGRAPHS]
    if repeats_instructions(short, instructions):
        short = ""
    if not paragraphs and short:
        paragraphs = [short]  # it wrote only its answer line: that is the whole summary
    if not paragraphs:
        return "it was empty or only repeated the instructions" if text.strip() else "it was empty"
    try:
        return MergedColumn(paragraphs=paragraphs, short_answer=short[:200])
    except ValidationError as exc:
        return f"its paragraphs were not usable ({exc.errors()[0].get('msg', '')[:200]})"


# Characters of a column's thoughts used as the text of its KU' retrieval query.
RETRIEVAL_TEXT_CHARS = 2000
# A first row past every column's last: reset a column's summary only.
NO_ROW = 10**6


def stored_short_answer(text: str) -> str:
    """The model's short answer as stored: one line (the caption and the report show it as one),
    without citations of either form (a typed `[[S<id>]]` would cite a source it was never shown)."""
    return one_line(strip_markers(_BARE_CITATION.sub("", text)))


def plain(text: str) -> str:
    """Stored text without its citation markers, for another prompt (whose sources are numbered
    differently)."""
    return _SPACE_BEFORE_PUNCTUATION.sub(r"\1", strip_markers(text)).strip()


class MtqaMethod(Method[MtqaParams]):
    name = "mtqa"
    title = "MTQA: Matrix of Thought over a knowledge graph"
    summary = (
        "Builds a knowledge graph from the question's documents, then reasons in a rows × columns matrix "
        "of thoughts: thoughts in a column pass part of their strategy down (weights α) so the next one "
        "differs, and each column's summary corrects them against retrieved knowledge units."
    )
    good_for = "multi-hop questions whose answer joins facts spread over several documents; a short answer"
    paper = "MTQA: Matrix of Thought for Enhanced Reasoning in Complex Question Answering (seed paper 004)"
    Params = MtqaParams
    node_kinds = NODE_KINDS
    edge_kinds = EDGE_KINDS
    commands = COMMANDS
    run_states = RUN_STATES
    view = VIEW
    steps = STEPS
    report_without_model = True  # composed from the stored graph: a stopped run gets a partial one

    def __init__(self) -> None:
        self._kb: KnowledgeBase | None = None
        self._documents_added = False
        self._progress: BuildProgress | None = None

    @classmethod
    def estimate(cls, params: MtqaParams) -> CostEstimate:
        return cost.estimate(params)

    @classmethod
    def evidence_titles(cls, nodes: Sequence[Node]) -> list[str]:
        """The knowledge units' titles: the first column's units (retrieved for the question) best
        first, then each summary's correction units in column order; dropped units left out. The
        documents stored for the knowledge graph are the run's sources, so the harness's source
        recall measures the document retrieval and this the knowledge units (the issue's KU recall)."""
        holders = [n for n in nodes if n.kind == KNOWLEDGE and n.status == NodeStatus.DONE]
        holders += sorted(
            (n for n in nodes if n.kind == SUMMARY and summary_data(n).units_ready),
            key=lambda n: summary_data(n).column,
        )
        return [
            unit.title for holder in holders for unit in holder_data(holder).units if unit.title and not unit.dropped
        ]

    # ------------------------------------------------------------------ the growth loop

    def start(self, ctx: RunContext[MtqaParams]) -> None:
        params = ctx.params
        root = ctx.graph.root()
        if root is None:
            root = ctx.graph.add(
                kind=QUESTION, label=ctx.question, content=ctx.question, status=NodeStatus.DONE, depth=0
            )
        if matrix.knowledge_node(ctx.graph) is None:
            ctx.graph.add(kind=KNOWLEDGE, label="Knowledge base", parent=root, data={"scope": params.scope})
        # Idempotent: a run killed while its columns were being created gets the missing ones now.
        weights = params.weights()
        stored = matrix.columns(ctx.graph)
        for index in range(max(params.columns, len(stored))):
            if index >= len(stored) or len(stored[index].cells) < params.rows or stored[index].summary is None:
                matrix.ensure_column(ctx.graph, index, params.rows, matrix.column_alphas(weights, params.rows, index))
        if ctx.graph.state(WEIGHTS) is None:
            matrix.save_weights(ctx.graph, params.weight_preset, weights)

    def step(self, ctx: RunContext[MtqaParams]) -> bool:
        knowledge_base = matrix.created_knowledge_node(ctx.graph)
        if knowledge_base.status == NodeStatus.PENDING:
            self._prepare_knowledge(ctx, knowledge_base)
            return True
        if holder_data(knowledge_base).not_covered:
            return self._close_uncovered(ctx)
        columns = matrix.columns(ctx.graph)
        for column in columns:
            # What it thinks from, as `matrix.created_source_of_column` finds it, without reading
            # the summaries again: a step reads the graph once (each read copies every node it returns).
            source = knowledge_base if column.index == 0 else columns[column.index - 1].created_summary()
            pending = [c for c in column.cells if c.status == NodeStatus.PENDING]
            if pending:
                if source.status != NodeStatus.DONE:
                    self._fail_column(ctx, column, source)
                else:
                    if source.kind == SUMMARY:
                        # Retrieved with the summary, except under the no-correction ablation.
                        source = self._ensure_units(ctx, source)
                    ctx.parallel(
                        [
                            partial(self._think_chain, ctx, chain, source)
                            for chain in column.chains()
                            if any(c.status == NodeStatus.PENDING for c in chain)
                        ]
                    )
                return True
            if column.created_summary().status == NodeStatus.PENDING:
                self._summarise(ctx, column.index)
                return True
        return False

    def _close_uncovered(self, ctx: RunContext[MtqaParams]) -> bool:
        """The sources at hand hold nothing about the question and the model answers only from sources
        (`RunContext.sources_only`): every thought and summary says so, none is asked of the model,
        which would think from its own inventions. Returns whether any node was closed."""
        answer = not_covered(ctx.question, ctx.searcher.description)
        pending = [
            node
            for column in matrix.columns(ctx.graph)
            for node in [*column.cells, column.summary]
            if node is not None and node.status == NodeStatus.PENDING
        ]
        for node in pending:
            ctx.graph.finish(node, content=answer, data={"not_covered": True})
        return bool(pending)

    def _fail_column(self, ctx: RunContext[MtqaParams], column: matrix.Column, source: Node) -> None:
        what = "the knowledge base" if source.kind == KNOWLEDGE else f"the summary of column {column.index}"
        for node in [*column.cells, column.created_summary()]:
            if node.status == NodeStatus.PENDING:
                ctx.graph.fail(
                    node, f"{what} failed, so this column has nothing to think from; resume the run to retry"
                )

    # ------------------------------------------------------------------ knowledge

    def _knowledge_base(self, ctx: RunContext[MtqaParams]) -> KnowledgeBase:
        """The run's knowledge base, opened once per process, with the question's documents added
        (again after a resume: the knowledge layer extracts only chunks it has not extracted yet)."""
        kb = self._opened(ctx)
        self._add_documents(ctx, kb)
        return kb

    def _opened(self, ctx: RunContext[MtqaParams]) -> KnowledgeBase:
        if self._kb is None:
            params = ctx.params
            self._kb = knowledge.open_knowledge_base(
                ctx,
                params.scope,
                collection=params.collection,
                chunk_tokens=params.chunk_tokens,
                node=matrix.created_knowledge_node(ctx.graph),
            )
        return self._kb

    def _add_documents(self, ctx: RunContext[MtqaParams], kb: KnowledgeBase) -> None:
        if not self._documents_added:
            node = matrix.created_knowledge_node(ctx.graph)
            data = ctx.graph.data(node, KnowledgeData)
            if data.searched:
                self._progress = kb.add_documents(self._document_hits(ctx, node, data)) if data.documents else None
                self._documents_added = True

    @staticmethod
    def _document_hits(ctx: RunContext[MtqaParams], node: Node, data: KnowledgeData) -> list[Hit]:
        by_ref = {s.ref: s for s in ctx.graph.sources(node)}
        # A source's kind is that of the Hit it was stored from (`RunGraph.add_sources`).
        return [
            Hit(title=s.title, ref=s.ref, snippet=s.snippet, text=s.text, kind=cast(HitKind, s.kind), url=s.url)
            for s in (by_ref.get(ref) for ref in data.documents)
            if s is not None
        ]

    def _prepare_knowledge(self, ctx: RunContext[MtqaParams], node: Node) -> None:
        """Search the question's documents, add them to the knowledge base, ask the question's
        keywords, retrieve KU_1; each result is stored as it comes, so a resume skips it."""
        params = ctx.params
        ctx.checkpoint()
        node = ctx.graph.start(node)
        data = ctx.graph.data(node, KnowledgeData)
        if not data.searched and params.scope == "collection":
            # The collection's graph was built once, from the whole collection: nothing to add.
            node = ctx.graph.update(node, merge_data={"searched": True})
            data = ctx.graph.data(node, KnowledgeData)
        if not data.searched:
            try:
                hits = ctx.search(ctx.question, k=params.documents, node=node)
            except SearchError as exc:
                # Not "no knowledge": the matrix would reason with nothing and the run end done. Failed,
                # so a resume searches again.
                why = exc.user_message
                ctx.graph.fail(
                    node, f"the search for the question's documents failed: {why}; resume the run to search again"
                )
                return
            relevant = relevant_hits(ctx.question, hits, floor=params.relevance_floor, embedder=ctx.embedder)
            ctx.note_unrelated(ctx.question, relevant, node)
            # Web results: the page's passage about the question, about one extraction chunk of it.
            kept = ctx.read_pages(
                ctx.question,
                relevant.kept,
                limit=params.read_pages,
                max_chars=chunk_chars(params.chunk_tokens),
                node=node,
            ).hits
            sources = ctx.graph.add_sources(kept, node=node) if kept else []
            node = ctx.graph.update(
                node,
                merge_data={
                    "searched": True,
                    "documents": [s.ref for s in sources],
                    "dropped_as_unrelated": relevant.dropped_summary(),
                },
            )
            data = ctx.graph.data(node, KnowledgeData)
            if not sources and ctx.sources_only:
                ctx.graph.finish(
                    node, content=not_covered(ctx.question, ctx.searcher.description), data={"not_covered": True}
                )
                return
        try:
            if data.documents and not self._documents_added:
                ctx.graph.narrate(
                    f"building the knowledge graph from {len(data.documents)} document(s)", node_id=node.id
                )
            kb = self._opened(ctx)
            if not data.keywords_ready and data.documents and not self._documents_added:
                # The keywords need the question only: asked beside the chunks' extraction, they take
                # a slot of its wave (whose last round has room: 11 calls on 8 slots) instead of a
                # call of their own after it. The graph's keys are embedded as its chunks' answers come
                # (`KnowledgeBase.add_documents`), no longer while the keywords are asked. Kept
                # whatever the extraction did (its chunks failed, or it raised: a stop, the budget,
                # the endpoint), so a resume does not ask them again; then its error is raised.
                (keywords, asking_failed), (_, extraction_failed) = ctx.parallel_settled(
                    [lambda: kb.keywords(ctx.question), lambda: self._add_documents(ctx, kb)]
                )
                if keywords is not None:
                    node = self._keep_keywords(ctx, node, keywords)
                    data = ctx.graph.data(node, KnowledgeData)
                if asking_failed is not None or extraction_failed is not None:
                    raise cast(BaseException, asking_failed or extraction_failed)
            self._add_documents(ctx, kb)
            progress = self._progress or kb.progress()
            if progress is not None:
                node = ctx.graph.update(
                    node,
                    merge_data={
                        "chunks": progress.chunks_total,
                        "chunks_done": progress.chunks_done,
                        "entities": progress.entities,
                        "relations": progress.relations,
                        "failed_chunks": progress.failed_chunks,
                        "graph_key": kb.key,
                    },
                )
                if progress.chunks_total and progress.failed_chunks >= progress.chunks_total:
                    # Documents were found but nothing could be extracted from any of them: no graph.
                    ctx.graph.fail(
                        node,
                        f"the model's entity and relation extraction failed on all "
                        f"{progress.chunks_total} chunks of the documents; resume the run to try "
                        "them again (or use a more capable model)",
                    )
                    return
            if not data.keywords_ready:
                node = self._keep_keywords(ctx, node, kb.keywords(ctx.question))
            ctx.graph.narrate("retrieving the knowledge units of the first column", node_id=node.id)
            units = self._retrieve(ctx, node, ctx.question, self._question_keywords(ctx))
        except (KnowledgeError, StructuredOutputError) as exc:
            # The knowledge layer's message says what to do (e.g. build a collection's graph first).
            ctx.graph.fail(node, str(exc))
            return
        ctx.graph.finish(node, content=self._units_content(units), data={"units": [u.model_dump() for u in units]})

    @staticmethod
    def _keep_keywords(ctx: RunContext[MtqaParams], node: Node, keywords: Keywords) -> Node:
        return ctx.graph.update(
            node,
            merge_data={
                "detailed_keywords": list(keywords.detailed),
                "general_keywords": list(keywords.general),
                "keywords_ready": True,
            },
        )

    def _question_keywords(self, ctx: RunContext[MtqaParams]) -> Keywords:
        data = ctx.graph.data(matrix.created_knowledge_node(ctx.graph), KnowledgeData)
        return Keywords(detailed=tuple(data.detailed_keywords), general=tuple(data.general_keywords))

    def _retrieve(self, ctx: RunContext[MtqaParams], holder: Node, query: str, keywords: Keywords) -> list[UnitRecord]:
        """Knowledge units for `query`, with your pins and drops, their sources stored on `holder`."""
        params = ctx.params
        found = self._knowledge_base(ctx).retrieve(
            query,
            keywords,
            top_k=params.top_k,
            hops=params.hops,
            with_triples=not params.no_triples,
            with_text=not params.no_source_text,
            max_units=params.units,
        )
        records = knowledge.apply_choices([knowledge.unit_record(u) for u in found], self._choices(ctx))
        # One source per document chunk; pinned units brought in from elsewhere keep their source.
        hits = {u.hit.ref: u.hit for u in found}
        stored = {s.ref: s for s in ctx.graph.add_sources(list(hits.values()), node=holder)} if hits else {}
        pinned_sources = [r.source_id for r in records if r.ref not in stored and r.source_id is not None]
        if pinned_sources:
            ctx.graph.link_sources(holder, pinned_sources)
        unique: dict[str, UnitRecord] = {}
        for record in records:
            source = stored.get(record.ref)
            unique.setdefault(record.ref, record.with_source(source.id if source else record.source_id))
        return list(unique.values())

    def _choices(self, ctx: RunContext[MtqaParams]) -> ChoicesState:
        return ctx.graph.state(CHOICES, ChoicesState) or ChoicesState()

    def _units_of(self, ctx: RunContext[MtqaParams], holder: Node) -> tuple[list[UnitRecord], list[Source]]:
        """A holder's units still in use, and their stored sources in the same order."""
        units = holder_data(holder).units
        by_id = {s.id: s for s in ctx.graph.sources()}
        kept = [u for u in knowledge.active(units) if u.source_id in by_id]
        return kept, [by_id[u.source_id] for u in kept]

    @staticmethod
    def _units_content(units: Sequence[UnitRecord]) -> str:
        if not units:
            return "_No knowledge unit was found for this question._"
        # Escaped as in the node panel: a stopped run's export shows this content as it is.
        return "\n".join(f"- {unit_line(unit, 3, bold=True)}" for unit in units)

    def _unit_blocks(self, ctx: RunContext[MtqaParams], units: Sequence[UnitRecord], sources: Sequence[Source]) -> str:
        params = ctx.params
        return knowledge.unit_blocks(
            units,
            sources,
            with_triples=not params.no_triples,
            with_text=not params.no_source_text,
            max_chars=params.unit_chars,
        )

    # ------------------------------------------------------------------ thoughts

    def _think_chain(self, ctx: RunContext[MtqaParams], chain: Sequence[Node], source: Node) -> None:
        """A chain's thoughts in order: each one gets α of the one above it."""
        above: Node | None = None
        for cell in chain:
            cell = ctx.graph.node(stored_id(cell))
            if cell.status == NodeStatus.PENDING:
                if above is not None and above.status != NodeStatus.DONE:
                    ctx.graph.fail(
                        cell,
                        "the thought above it failed, so its strategy could not be passed on; resume the run to retry",
                    )
                else:
                    cell = self._think(ctx, cell, source, above)
            above = cell

    def _think(self, ctx: RunContext[MtqaParams], cell: Node, source: Node, above: Node | None) -> Node:
        params = ctx.params
        ctx.checkpoint()
        cell = ctx.graph.start(cell)
        data = ctx.graph.data(cell, CellData)
        passed = (
            [plain(p) for p in passed_paragraphs(data.alpha, ctx.graph.data(above, CellData).paragraphs)]
            if above is not None
            else []
        )
        cell = ctx.graph.update(cell, merge_data={"passed": passed, "passed_count": len(passed)})
        units, sources = self._units_of(ctx, source)
        context = ""
        if source.kind == SUMMARY:
            context = (
                "Summary of the previous column (build on its promising strategies):\n<<<\n"
                f"{plain(source.content)}\n>>>\n\n"
            )
        communication = ""
        if passed:
            communication = (
                "A strategy already taken in this column (the end of the thought above). "
                "Take a clearly different one:\n<<<\n" + "\n\n".join(passed) + "\n>>>\n\n"
            )
        messages = prompts.THOUGHT.render(
            question=ctx.question,
            units=self._unit_blocks(ctx, units, sources),
            context=context,
            communication=communication,
            row=data.row + 1,
            rows=params.rows,
            column=data.column + 1,
        )
        try:
            thought = ctx.llm.ask(
                messages, Thought, purpose="thought", node_id=cell.id, max_tokens=params.thought_tokens
            )
        except StructuredOutputError as exc:
            return ctx.graph.fail(cell, str(exc))
        paragraphs, dropped = self._stored(thought.paragraphs, sources)
        content = "\n\n".join(paragraphs)
        ctx.graph.link_sources(cell, cited_source_ids(content))
        return ctx.graph.finish(cell, content=content, data={"paragraphs": paragraphs, "invalid_citations": dropped})

    @staticmethod
    def _stored(paragraphs: Sequence[str], sources: Sequence[Source]) -> tuple[list[str], list[int]]:
        out, dropped = [], []
        for paragraph in paragraphs:
            text, lost = to_stored_markers(paragraph.strip(), sources)
            if text.strip():
                out.append(text.strip())
            dropped += lost
        return out, dropped

    # ------------------------------------------------------------------ summaries

    def _ensure_units(self, ctx: RunContext[MtqaParams], summary: Node) -> Node:
        """KU' of a column: retrieved once with the question and the column's thoughts, then kept."""
        data = ctx.graph.data(summary, SummaryData)
        if data.units_ready:
            return summary
        thoughts = self._thoughts(ctx, data.column)
        text = "\n\n".join(plain(c.content) for c in thoughts)
        keywords = knowledge.column_keywords(self._question_keywords(ctx), text)
        ctx.graph.narrate(
            f"retrieving knowledge units with the question and column {data.column + 1}'s thoughts", node_id=summary.id
        )
        units = self._retrieve(ctx, summary, f"{ctx.question}\n\n{text[:RETRIEVAL_TEXT_CHARS]}", keywords)
        return ctx.graph.update(
            summary,
            merge_data={
                "units": [u.model_dump() for u in units],
                "units_ready": True,
                "graph_key": self._knowledge_base(ctx).key,
                "retrieval_keywords": list(keywords.detailed + keywords.general),
            },
        )

    def _thoughts(self, ctx: RunContext[MtqaParams], column: int) -> list[Node]:
        return sorted(
            (c for c in ctx.graph.nodes(kind=CELL) if cell_data(c).column == column and c.status == NodeStatus.DONE),
            key=lambda c: cell_data(c).row,
        )

    def _summarise(self, ctx: RunContext[MtqaParams], column: int) -> None:
        params = ctx.params
        ctx.checkpoint()
        summary = next(n for n in ctx.graph.nodes(kind=SUMMARY) if summary_data(n).column == column)
        summary = ctx.graph.start(summary)
        thoughts = self._thoughts(ctx, column)
        if not thoughts:
            ctx.graph.fail(summary, "every thought of this column failed; resume the run to retry them")
            return
        output_type: type[MergedColumn] | type[ColumnSummary]
        if params.no_correction:
            # The -RAG ablation: no retrieval, no check; the thoughts' own citations are kept.
            units, sources = self._units_of(ctx, matrix.created_source_of_column(ctx.graph, column))
            fields = {
                "question": ctx.question,
                "column": column + 1,
                "thoughts": self._numbered_thoughts(thoughts, sources),
            }
            prompt, text_prompt, output_type = prompts.MERGE, prompts.MERGE_TEXT, MergedColumn
        else:
            summary = self._ensure_units(ctx, summary)
            units, sources = self._units_of(ctx, summary)
            fields = {
                "question": ctx.question,
                "column": column + 1,
                "units": self._unit_blocks(ctx, units, sources),
                "thoughts": self._numbered_thoughts(thoughts, sources),
            }
            prompt, text_prompt, output_type = prompts.SUMMARY, prompts.SUMMARY_TEXT, ColumnSummary
        messages = prompt.render(**fields)
        fallback = ""
        result: ColumnSummary | MergedColumn | str
        try:
            result = ctx.llm.ask(
                messages, output_type, purpose="summary", node_id=summary.id, max_tokens=params.summary_tokens
            )
        except StructuredOutputError as exc:
            # A model that cannot fill the schema may still write the summary as text (the paper's
            # summary node is text): asked once, with the short answer as its last line.
            text_messages = text_prompt.render(**fields)
            text = ctx.llm.text(text_messages, purpose="summary", node_id=summary.id, max_tokens=params.summary_tokens)
            result = _text_summary(text, text_messages[0].content)
            if isinstance(result, str):
                ctx.graph.fail(summary, f"{exc}; asked again for plain text, {result}")
                return
            fallback = f"written as plain text: the structured answer failed ({str(exc)[:300]})"
            ctx.graph.narrate(
                f"the summary of column {column + 1} was written as plain text after the structured answer failed",
                node_id=summary.id,
            )
        paragraphs, dropped = self._stored(result.paragraphs, sources)
        content = "\n\n".join(paragraphs)
        ctx.graph.link_sources(summary, cited_source_ids(content))
        checks = [c.model_dump() for c in getattr(result, "checks", []) if 1 <= c.thought <= len(thoughts)]
        ctx.graph.finish(
            summary,
            content=content,
            data={
                "paragraphs": paragraphs,
                "checks": checks,
                "corrected": not params.no_correction,
                "invalid_citations": dropped,
                "short_answer": stored_short_answer(result.short_answer),
                "fallback": fallback,
            },
        )

    @staticmethod
    def _numbered_thoughts(thoughts: Sequence[Node], sources: Sequence[Source]) -> str:
        """The thoughts for a summary prompt, their citations numbered as the prompt's units are
        (citations of units not listed there are left out)."""
        numbers = {s.id: n for n, s in enumerate(sources, start=1) if s.id is not None}
        return "\n\n".join(
            f"Thought {cell_data(c).row + 1}:\n" + number_citations(c.content, numbers.keys(), start=numbers).text
            for c in thoughts
        )

    # ------------------------------------------------------------------ report

    def write_report(self, ctx: RunContext[MtqaParams]) -> None:
        holder = matrix.knowledge_node(ctx.graph)
        if holder is not None and holder_data(holder).not_covered:
            nearest = [hit.title for hit in ctx.graph.data(holder, KnowledgeData).dropped_as_unrelated]
            save_uncovered_report(ctx, [ctx.question], nearest, {"method": self.name})
            return
        columns = matrix.columns(ctx.graph)
        done = [c.summary for c in columns if c.summary is not None and c.summary.status == NodeStatus.DONE]
        last = columns[-1].summary if columns else None
        if not done:
            ctx.graph.save_report(
                "_No answer was produced: no column's summary was written. Resume the run to try again._",
                data={"method": self.name},
            )
            return
        final = done[-1]
        data = ctx.graph.data(final, SummaryData)
        note = ""
        if last is not None and final.id != last.id:
            note = (
                f"\n\n> The last column's summary failed; this is the summary of column {data.column + 1}. "
                "Resume the run to retry the rest."
                if last.status == NodeStatus.FAILED
                else f"\n\n> This is the summary of column {data.column + 1} of {len(columns)}: the later "
                "columns have not been written yet."
            )
        note += self._ungrounded_note(ctx, columns)
        # One line of the model's: escaped, so it cannot start a heading ("## Sources"), a list or a citation.
        short = f"**Answer:** {inline_text(data.short_answer)}\n\n" if data.short_answer else ""
        ctx.graph.save_report(
            short + final.content,
            own=note,
            data={
                "method": self.name,
                "short_answer": data.short_answer,
                "summary_node": final.id,
                "column": data.column + 1,
            },
        )

    @staticmethod
    def _ungrounded_note(ctx: RunContext[MtqaParams], columns: Sequence[matrix.Column]) -> str:
        """Said to the reader when no retrieval found a knowledge unit, so the matrix reasoned from the
        model's own knowledge (no relevant document, nothing extracted, no key matched): else ""."""
        holder = matrix.knowledge_node(ctx.graph)
        data = ctx.graph.data(holder, KnowledgeData) if holder is not None else KnowledgeData()
        if data.units or any(ctx.graph.data(c.summary, SummaryData).units for c in columns if c.summary is not None):
            return ""
        if data.scope == "question" and not data.documents:
            return ungrounded_note(ctx.searcher.description)
        where = (
            f"{len(data.documents)} document(s), {data.entities} entities and {data.relations} relations "
            "extracted from them"
            if data.scope == "question"
            else "the collection's knowledge graph"
        )
        return (
            f"\n\n> No knowledge unit was found for this question ({where}). This answer is the model's own "
            "and cites nothing."
        )

    # ------------------------------------------------------------------ steering

    def apply(
        self, ctx: RunContext[MtqaParams], command: CommandSpec, payload: CommandPayload, node: Node | None
    ) -> set[str]:
        if command.name == "regenerate_report":
            return {REPORT}
        if command.name == "add_column":
            assert isinstance(payload, AddColumnPayload)
            return self._add_column(ctx, payload.alpha)
        if command.name == "undo_choice":
            assert isinstance(payload, ChoicePayload)
            return self._undo_choice(ctx, payload.choice)
        assert node is not None
        if command.name == "rerun_column":
            assert isinstance(payload, RerunColumnPayload)
            return self._rerun_column(ctx, node, payload.alpha)
        if command.name in ("pin_unit", "drop_unit"):
            assert isinstance(payload, UnitPayload)
            return self._choose_unit(ctx, node, payload.unit, pin=command.name == "pin_unit")
        raise UnsupportedCommand(f"the {self.name} method does not support '{command.name}'")

    def _add_column(self, ctx: RunContext[MtqaParams], alpha: float | None) -> set[str]:
        params = ctx.params
        columns = matrix.columns(ctx.graph)
        if columns and columns[-1].created_summary().status == NodeStatus.FAILED:
            raise CommandRejected(
                "the last column's summary failed, so a new column has nothing to build on; resume the run first"
            )
        index = len(columns)
        if params.no_communication and alpha:
            raise CommandRejected("this run has the no-communication ablation on: every α is 0")
        if params.rows < 2 and alpha:
            raise CommandRejected(
                "a column of one thought passes nothing between thoughts, so α changes nothing; "
                "add the column without α"
            )
        matrix.ensure_column(
            ctx.graph, index, params.rows, matrix.column_alphas(params.weights(), params.rows, index, override=alpha)
        )
        matrix.save_weights(ctx.graph, params.weight_preset, params.weights())
        return {REPORT}

    def _rerun_column(self, ctx: RunContext[MtqaParams], node: Node, alpha: float) -> set[str]:
        params = ctx.params
        if params.rows < 2:
            raise CommandRejected("a column of one thought passes nothing between thoughts, so α changes nothing")
        if params.no_communication and alpha:
            raise CommandRejected("this run has the no-communication ablation on: every α is 0")
        index = column_of(node)
        column = matrix.columns(ctx.graph)[index]
        for cell in column.cells[1:]:
            ctx.graph.update(cell, merge_data={"alpha": alpha})
        # The first thought does not depend on α: it is kept when it was written (a failed one is
        # thought again, or everything below it would fail again for want of it).
        first_row = 1 if column.cells and column.cells[0].status == NodeStatus.DONE else 0
        matrix.reset_from(ctx.graph, index, first_row=first_row)
        column = matrix.columns(ctx.graph)[index]
        for above, below in zip(column.cells, column.cells[1:]):
            # The map draws what passes now: no edge for α = 0, the new α on each edge otherwise.
            ctx.graph.unlink(above, below, COMMUNICATION)
            if alpha:
                ctx.graph.link(above, below, COMMUNICATION, data={"alpha": alpha})
        matrix.save_weights(ctx.graph, params.weight_preset, params.weights())
        return {REPORT}

    @staticmethod
    def _rethink_after(ctx: RunContext[MtqaParams], holder: Node, *, dropped: bool, listed: bool = True) -> None:
        """Think again what a pin or a drop of one of `holder`'s units (or its undoing) changes.
        `listed`: the holder still lists the unit (a drop undone after the holder's retrieval was made
        again without it: that retrieval is made again)."""
        column = 0 if holder.kind == KNOWLEDGE else summary_data(holder).column + 1
        if not dropped:
            # The unit is in this retrieval either way: only the retrievals after it change.
            matrix.reset_from(ctx.graph, column, first_row=NO_ROW)
        elif holder.kind == KNOWLEDGE:
            matrix.reset_from(ctx.graph, 0)  # (the knowledge base's own retrieval is never made again)
        else:
            # The summary that read the unit is written again (its units kept, with or without it).
            matrix.reset_from(ctx.graph, column - 1, first_row=NO_ROW, keep_units=listed)

    def _choose_unit(self, ctx: RunContext[MtqaParams], holder: Node, number: int, *, pin: bool) -> set[str]:
        units = listed_units(holder, number)  # (checked by the command's precheck: unit_choice_check)
        unit = units[number - 1]
        # The latest choice wins, and is the unit's only one: a unit dropped where another column
        # read it is pinned now; a pinned unit dropped is no longer pinned (nor marked so anywhere).
        # Pinned once, whichever holder listed it: the panel lists each unit once.
        before = self._choices(ctx)
        prior = next((c for c in before.listed() if c[2] == unit.id), None)
        prior_node = self._holders_by_id(ctx).get(before.made_on.get(unit.id)) if prior is not None else None
        choices = before.without(unit.id)
        if pin:
            choices.pinned.append(unit.model_copy(update={"pinned": True}))
        else:
            choices.dropped.append(unit.id)
            choices.dropped_titles[unit.id] = unit.title or unit.ref
        self._unmark(ctx, unit.id, pinned=not pin, dropped=pin)
        choices.made_on[unit.id] = stored_id(holder)
        ctx.graph.save_state(CHOICES, choices.numbered(unit.id))
        units[number - 1] = unit.model_copy(update={"pinned": pin, "dropped": not pin})
        ctx.graph.update(holder, merge_data={"units": [u.model_dump() for u in units]})
        if prior is not None and prior_node is not None and prior_node.id != holder.id:
            # The choice it replaces was made on another node: what that one changed is undone first
            # (a pin on the knowledge base had added the unit to every later retrieval).
            self._rethink_after(
                ctx,
                prior_node,
                dropped=prior[1] == "dropped",
                listed=self._lists(ctx.graph.node(stored_id(prior_node)), unit.id),
            )
        self._rethink_after(ctx, holder, dropped=not pin)
        return {REPORT}

    def _undo_choice(self, ctx: RunContext[MtqaParams], number: int) -> set[str]:
        """Forget your pin or drop numbered `number` in the choices panel: no node marks the unit any
        more, and what the choice changed is thought again from the node it was made on."""
        choices = self._choices(ctx)
        _, kind, unit_id, _ = choice_exists(ctx.graph, ChoicePayload(choice=number))
        holders = self._holders_by_id(ctx)
        # Made on a node we know (choices stored before `made_on` was kept: the first that marks it
        # so, else the knowledge base, from which thinking everything again is always right).
        made_on = (
            holders.get(choices.made_on.get(unit_id))
            or self._first_marked(ctx, unit_id, kind)
            or next(iter(holders.values()))
        )
        self._unmark(ctx, unit_id, pinned=True, dropped=True)
        ctx.graph.save_state(CHOICES, choices.without(unit_id))
        self._rethink_after(
            ctx, made_on, dropped=kind == "dropped", listed=self._lists(ctx.graph.node(stored_id(made_on)), unit_id)
        )
        return {REPORT}

    @staticmethod
    def _lists(holder: Node, unit_id: str) -> bool:
        return any(u.id == unit_id for u in holder_data(holder).units)

    def _holders_by_id(self, ctx: RunContext[MtqaParams]) -> dict[int | None, Node]:
        return {h.id: h for h in self._holders_in_order(ctx)}

    def _first_marked(self, ctx: RunContext[MtqaParams], unit_id: str, kind: str) -> Node | None:
        """The first node whose listing marks the unit `kind` (pinned or dropped)."""
        return next(
            (
                h
                for h in self._holders_in_order(ctx)
                if any(u.id == unit_id and getattr(u, kind) for u in holder_data(h).units)
            ),
            None,
        )

    def _unmark(self, ctx: RunContext[MtqaParams], unit_id: str, *, pinned: bool, dropped: bool) -> None:
        """Clear the given marks of `unit_id` on every node that lists it."""
        for holder in self._holders_in_order(ctx):
            records = holder_data(holder).units
            if not any(r.id == unit_id and ((pinned and r.pinned) or (dropped and r.dropped)) for r in records):
                continue
            update = {**({"pinned": False} if pinned else {}), **({"dropped": False} if dropped else {})}
            plain = [r.model_copy(update=update) if r.id == unit_id else r for r in records]
            ctx.graph.update(holder, merge_data={"units": [r.model_dump() for r in plain]})

    @staticmethod
    def _holders_in_order(ctx: RunContext[MtqaParams]) -> list[Node]:
        """The knowledge base, then each column's summary: the order their retrievals were made."""
        summaries = sorted(ctx.graph.nodes(kind=SUMMARY), key=lambda n: summary_data(n).column)
        return [*ctx.graph.nodes(kind=KNOWLEDGE), *summaries]
