"""OmniThink (arXiv 2501.09751): an information tree and a conceptual pool grown by expansion and
reflection, then a concept-guided outline and an article written section by section with citations.

Stored graph: the information tree is `topic` (root) and `subtopic` nodes, each holding what was
retrieved for it (sources linked). The conceptual pool (one version per reflection step, so its
history is kept) and the outline are the run's state (`kinds.py`); the article is its report.
Every step is decided from what is stored, so a resumed run continues where it stopped.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from typing import Any, cast

from engine.citations import (
    attribute_uncited,
    cited_source_ids,
    number_citations,
    source_blocks,
    to_stored_markers,
)
from engine.contract import CommandPayload, CommandRejected, CommandSpec, Notice, UnsupportedCommand
from engine.graph import NewNode, RunGraph
from engine.llm.protocol import StructuredOutputError
from engine.methods.base import REPORT, Method, RunContext
from engine.methods.coverage import save_uncovered_report, uncovered_section
from engine.methods.estimate import CostEstimate
from engine.methods.omnithink import estimate as cost
from engine.methods.omnithink import prompts
from engine.methods.omnithink.kinds import (
    COMMANDS,
    NODE_KINDS,
    OUTLINE,
    POOL,
    RUN_STATES,
    STEPS,
    SUBTOPIC,
    TOPIC,
    VIEW,
    AddSubtopicPayload,
    ConceptPool,
    ExpandPayload,
    OutlineState,
    TreeNodeData,
    tree_of,
)
from engine.methods.omnithink.params import OmniThinkParams
from engine.methods.omnithink.pool import merge
from engine.methods.omnithink.schemas import Reflection, expansion_model, outline_model
from engine.reader_text import REPORT_NOT_WRITTEN, SECTION_NOT_WRITTEN, UNWRITTEN, first_readable
from engine.search.embeddings import top_for_each
from engine.search.protocol import Hit, HitKind, SearchError
from engine.search.relevance import not_covered, nothing_found, relevant_hits
from storage.models import Node, Source, stored_id
from storage.statuses import NodeStatus

ARTICLE = REPORT


def tree_signature(nodes: Iterable[Node]) -> list[list[Any]]:
    """The information tree as the article saw it: [id, status] by id, to tell when it changed."""
    return sorted([n.id, n.status] for n in nodes)


class OmniThinkMethod(Method[OmniThinkParams]):
    name = "omnithink"
    title = "OmniThink: information tree and conceptual pool"
    summary = (
        "Grows an information tree by expansion and a conceptual pool by reflection, then writes a "
        "concept-guided outline and a long-form article with citations, section by section."
    )
    good_for = "a long-form, outlined article on a topic, with citations"
    paper = "OmniThink: Expanding Knowledge Boundaries in Machine Writing through Thinking (arXiv 2501.09751)"
    Params = OmniThinkParams
    node_kinds = NODE_KINDS
    commands = COMMANDS
    run_states = RUN_STATES
    view = VIEW
    steps = STEPS

    @classmethod
    def estimate(cls, params: OmniThinkParams) -> CostEstimate:
        return cost.estimate(params)

    # ------------------------------------------------------------------ the growth loop

    def start(self, ctx: RunContext[OmniThinkParams]) -> None:
        self._root(ctx)

    def step(self, ctx: RunContext[OmniThinkParams]) -> bool:
        """Retrieve for the pending nodes; else reflect the new ones into the pool; else expand."""
        return self._retrieve_pending(ctx) or self._reflect(ctx) or self._expand(ctx)

    def write_outputs(self, ctx: RunContext[OmniThinkParams], rewrite: set[str]) -> None:
        self._write(ctx, rewrite)

    def write_report(self, ctx: RunContext[OmniThinkParams]) -> None:
        self._write(ctx, {ARTICLE})

    def notices(self, graph: RunGraph) -> list[Notice]:
        article = graph.report()
        if article is None or "tree" not in article.data:
            return []
        if tree_signature(n for n in graph.nodes() if n.kind in (TOPIC, SUBTOPIC)) == article.data["tree"]:
            return []
        return [Notice("The information tree changed since the article was written.", command="regenerate_article")]

    # ------------------------------------------------------------------ tree helpers

    def _root(self, ctx: RunContext[OmniThinkParams]) -> Node:
        root = ctx.graph.root()
        if root is None:
            root = ctx.graph.add(
                kind=TOPIC, label=ctx.question, depth=0, priority=3.0, data={"keywords": [ctx.question]}
            )
        return root

    def _tree(self, ctx: RunContext[OmniThinkParams]) -> list[Node]:
        """The information tree level by level, each node's children in the order they were proposed.
        Not by row id alone: leaves expand in parallel, so which leaf's children got the lower ids is
        chance, and the prompts built from this list must not depend on it."""
        nodes = [n for n in ctx.graph.nodes() if n.kind in (TOPIC, SUBTOPIC)]
        children: dict[int | None, list[Node]] = {}
        for node in nodes:  # by id: one expansion's children are stored together, in order
            children.setdefault(node.parent_id, []).append(node)
        ordered = list(children.get(None, []))
        for node in ordered:  # grows while it is read: breadth first
            ordered.extend(children.get(node.id, []))
        return ordered

    def _live(self, ctx: RunContext[OmniThinkParams]) -> list[Node]:
        return [n for n in self._tree(ctx) if n.status != NodeStatus.PRUNED]

    def _pool_state(self, ctx: RunContext[OmniThinkParams]) -> ConceptPool:
        return ctx.graph.state(POOL, ConceptPool) or ConceptPool()

    # ------------------------------------------------------------------ retrieval

    def _retrieve_pending(self, ctx: RunContext[OmniThinkParams]) -> bool:
        pending = [n for n in self._tree(ctx) if n.status == NodeStatus.PENDING]
        if not pending:
            return False
        self._retrieve_all(ctx, pending)
        return True

    def _retrieve_all(self, ctx: RunContext[OmniThinkParams], pending: list[Node]) -> None:
        # The round's queries are embedded first, in a batch a core, not each by its own search. The
        # relevance floor embeds the query as the model wrote it, when `prefix_topic` searches another.
        floor = ctx.params.relevance_floor > 0
        ctx.embed_ahead(
            [
                text
                for node in pending
                for query in self._queries(node)
                for text in (self._searched(ctx, node, query), *([query] if floor else []))
            ]
        )
        ctx.parallel([partial(self._retrieve, ctx, node) for node in pending])

    @staticmethod
    def _queries(node: Node) -> list[str]:
        return tree_of(node).keywords or [node.label]

    @staticmethod
    def _searched(ctx: RunContext[OmniThinkParams], node: Node, query: str) -> str:
        # The paper searches a subtopic's keywords as they are; `prefix_topic` adds the topic.
        return f"{ctx.question} {query}" if node.kind == SUBTOPIC and ctx.params.prefix_topic else query

    def _retrieve(self, ctx: RunContext[OmniThinkParams], node: Node) -> None:
        params = ctx.params
        ctx.checkpoint()
        node = ctx.graph.start(node)
        queries = self._queries(node)
        errors = []
        dropped: list[dict[str, Any]] = []
        # Every query's results are stored at once, each ranked within its own search: one write
        # per node, not one per query.
        found: list[list[Hit]] = []
        for query in queries:
            try:
                hits = ctx.search(self._searched(ctx, node, query), k=params.search_results, node=node)
            except SearchError as exc:
                errors.append(f"{query}: {exc}")
                continue
            relevant = relevant_hits(query, hits, floor=params.relevance_floor, embedder=ctx.embedder)
            ctx.note_unrelated(query, relevant, node)
            dropped.extend(relevant.dropped_summary())
            # Web results: the page's passage about the query (the article writer quotes 900 characters).
            kept = ctx.read_pages(query, relevant.kept, limit=params.read_pages, max_chars=900, node=node).hits
            if kept:
                found.append(kept)
        sources: list[Source] = []
        for source in (s for batch in ctx.graph.add_source_batches(found, node=node) for s in batch):
            if source.id not in {s.id for s in sources}:
                sources.append(source)
        if not sources and errors:
            ctx.graph.fail(node, "every search failed: " + "; ".join(errors))
            return
        data = {"retrieved": len(sources), "search_errors": errors, "dropped_as_unrelated": dropped}
        if not sources and ctx.sources_only:
            ctx.graph.finish(
                node, content=not_covered(node.label, ctx.searcher.description), data={**data, "not_covered": True}
            )
            return
        lines = [f"- **{s.title}** [[S{s.id}]]: {(s.snippet or s.text)[:300].strip()}" for s in sources]
        nothing = "_" + nothing_found(ctx.searcher.description) + "_"
        ctx.graph.finish(node, content="\n".join(lines) or nothing, data=data)

    def _node_info(
        self, ctx: RunContext[OmniThinkParams], node: Node, max_chars: int = 2500
    ) -> tuple[str, list[Source]]:
        sources = ctx.graph.sources(node)
        return source_blocks(sources, max_chars=500)[:max_chars] if sources else "(nothing retrieved)", sources

    # ------------------------------------------------------------------ reflection

    def _reflect(self, ctx: RunContext[OmniThinkParams]) -> bool:
        new = [
            n
            for n in self._live(ctx)
            if n.status == NodeStatus.DONE and tree_of(n).reflected_step is None and not tree_of(n).not_covered
        ]
        if not new:
            return False
        ctx.checkpoint()
        state = self._pool_state(ctx)
        step = state.step + 1
        info = "\n\n".join(f"## {n.label}\n{self._node_info(ctx, n, 1500)[0]}" for n in new)
        pool_text = "\n".join(f"- {c}" for c in state.concepts) or "(empty)"
        try:
            reflection = ctx.llm.ask(
                prompts.REFLECT.render(topic=ctx.question, pool=pool_text, info=info[:12000]),
                Reflection,
                purpose="reflect",
                node_id=new[0].id,
            )
            insights, sufficient, error = reflection.insights, reflection.sufficient, ""
        except StructuredOutputError as exc:
            insights, sufficient, error = [], False, str(exc)
        result = merge(insights, state.concepts)
        ctx.graph.save_state(
            POOL,
            ConceptPool(
                step=step,
                concepts=result.pool,
                added=result.added,
                duplicates=result.duplicates,
                sufficient=sufficient,
                from_nodes=[stored_id(n) for n in new],
                error=error,
            ),
        )
        for node in new:
            ctx.graph.update(node, merge_data={"reflected_step": step})
        return True

    # ------------------------------------------------------------------ expansion

    def _expand(self, ctx: RunContext[OmniThinkParams]) -> bool:
        params = ctx.params
        if self._pool_state(ctx).sufficient:
            return False
        leaves = [
            n
            for n in self._live(ctx)
            if n.status == NodeStatus.DONE
            and tree_of(n).expansion is None
            and n.depth < params.max_depth
            and not ctx.graph.children(n)
            and not tree_of(n).not_covered
        ]
        if not leaves:
            return False
        # What is explored is read once for the whole layer: a leaf's prompt must not depend on which of
        # its siblings' expansions happened to finish first (and `--llm fake` stays deterministic).
        live = self._live(ctx)
        ctx.parallel([partial(self._expand_and_retrieve, ctx, leaf, params.subnodes, live) for leaf in leaves])
        return True

    def _expand_and_retrieve(self, ctx: RunContext[OmniThinkParams], leaf: Node, k: int, live: list[Node]) -> None:
        """A leaf's expansion, then at once the searches of the sub-nodes it made: they need nothing
        but its answer, so they run while the layer's other leaves still wait for theirs (a model
        answers a layer's prompts seconds apart). The next step reflects on the whole layer."""
        if self._expand_leaf(ctx, leaf, k, False, live):
            self._retrieve_all(ctx, [n for n in ctx.graph.children(leaf) if n.status == NodeStatus.PENDING])

    def _expand_leaf(
        self, ctx: RunContext[OmniThinkParams], leaf: Node, k: int, forced: bool, live: list[Node] | None = None
    ) -> int:
        """Ask whether and how to expand `leaf`; create its sub-nodes. Returns how many were created.
        `live`: the tree's live nodes as the layer began (read now when None)."""
        params = ctx.params
        ctx.checkpoint()
        pool = "\n".join(f"- {c}" for c in self._pool_state(ctx).concepts) or "(empty)"
        explored = (
            ", ".join(n.label for n in (self._live(ctx) if live is None else live) if n.id != leaf.id) or "(none)"
        )
        info, _ = self._node_info(ctx, leaf)
        try:
            decision = ctx.llm.ask(
                prompts.EXPAND.render(
                    topic=ctx.question,
                    node=leaf.label,
                    explored=explored,
                    pool=pool,
                    info=info,
                    k=k,
                    keywords=params.keywords_per_subtopic,
                ),
                expansion_model(k, params.keywords_per_subtopic),
                purpose="expand",
                node_id=leaf.id,
            )
        except StructuredOutputError as exc:
            if forced:  # a steering command that fails changes nothing
                raise ValueError(f"the model gave no usable expansion: {exc}") from exc
            ctx.graph.update(leaf, merge_data={"expansion": {"expand": False, "error": str(exc), "created": []}})
            return 0
        existing = {c.label.strip().lower() for c in ctx.graph.children(leaf)}
        proposed = [s for s in decision.subtopics[:k] if s.category.strip()] if decision.expand else []
        fresh = [s for s in proposed if s.category.strip().lower() not in existing]
        if forced and not fresh:
            return 0  # the command fails and leaves the node as it was
        new = []
        for sub in fresh:
            if sub.category.strip().lower() not in existing:
                existing.add(sub.category.strip().lower())
                new.append(
                    NewNode(
                        SUBTOPIC, sub.category.strip(), parent=leaf, data={"keywords": sub.keywords, "forced": forced}
                    )
                )
        created = [node.id for node in ctx.graph.add_many(new)]
        expansion = tree_of(leaf).expansion
        previous = expansion.created if expansion is not None else []
        ctx.graph.update(
            leaf,
            merge_data={
                "expansion": {
                    "expand": decision.expand,
                    "subtopics": [s.model_dump() for s in decision.subtopics],
                    "created": previous + created,
                }
            },
        )
        return len(created)

    # ------------------------------------------------------------------ outline and article

    def _write(self, ctx: RunContext[OmniThinkParams], regenerate: set[str]) -> None:
        if ctx.sources_only and not self._tree_sources(ctx):
            self._uncovered_article(ctx)
            return
        if OUTLINE in regenerate or ctx.graph.state(OUTLINE) is None:
            self._outline(ctx)
            regenerate = regenerate | {ARTICLE}
        if ARTICLE in regenerate or not ctx.graph.has_report():
            self._article(ctx)

    def _uncovered_article(self, ctx: RunContext[OmniThinkParams]) -> None:
        """The article of a run on a model that answers only from sources, none of which was found:
        said by us (`coverage.uncovered_report`), not an outline and sections written from nothing."""
        tree = [TreeNodeData.model_validate(n.data) for n in self._live(ctx) if n.status == NodeStatus.DONE]
        searched = [keyword for data in tree for keyword in data.keywords]
        nearest = [hit.title for data in tree for hit in data.dropped_as_unrelated]
        save_uncovered_report(ctx, searched, nearest, {"method": self.name, "tree": tree_signature(self._tree(ctx))})

    def _outline(self, ctx: RunContext[OmniThinkParams]) -> None:
        params = ctx.params
        Outline = outline_model(params.max_sections)
        try:
            draft = ctx.llm.ask(
                prompts.DRAFT_OUTLINE.render(topic=ctx.question, max_sections=params.max_sections),
                Outline,
                purpose="outline",
            )
        except StructuredOutputError:
            # The tree itself is a usable draft: its first-level subtopics become the sections.
            subtopics = [n.label for n in self._live(ctx) if n.depth == 1][: params.max_sections]
            draft = Outline.model_validate(
                {"sections": [{"title": t} for t in subtopics] or [{"title": "Overview"}, {"title": "Details"}]}
            )
        pool = "\n".join(f"- {c}" for c in self._pool_state(ctx).concepts) or "(empty)"
        polish = partial(
            ctx.llm.ask,
            prompts.POLISH_OUTLINE.render(
                topic=ctx.question,
                max_sections=params.max_sections,
                draft=self._outline_md(draft.model_dump()),
                pool=pool,
            ),
            Outline,
            purpose="outline",
        )
        # The draft's headings are embedded while the model polishes it: the headings it keeps find
        # their vectors made when the sections' evidence is ranked (`_section_evidence`).
        headings = [h for group in self._headings(draft.model_dump()["sections"]) for h in group]
        try:
            polished = ctx.parallel([polish, partial(ctx.embed_ahead, headings)])[0]
            final, note = polished.model_dump(), ""
        except StructuredOutputError as exc:
            final, note = draft.model_dump(), f"polishing failed, the draft is used: {exc}"
        ctx.graph.save_state(OUTLINE, OutlineState(draft=draft.model_dump(), outline=final, note=note))

    @staticmethod
    def _outline_md(outline: dict[str, Any]) -> str:
        lines = []
        for section in outline["sections"]:
            lines.append(f"# {section['title']}")
            lines.extend(f"## {sub}" for sub in section.get("subsections", []))
        return "\n".join(lines)

    def _tree_sources(self, ctx: RunContext[OmniThinkParams]) -> list[Source]:
        """The information tree's own sources (unpruned nodes), each once."""
        by_ref: dict[str, Source] = {}
        for node in self._live(ctx):
            for source in ctx.graph.sources(node):
                by_ref.setdefault(source.ref, source)
        return list(by_ref.values())

    def _article(self, ctx: RunContext[OmniThinkParams]) -> None:
        params = ctx.params
        state = ctx.graph.state(OUTLINE, OutlineState)
        if state is None:  # `_write` saves the outline first
            raise RuntimeError("the article is written from the outline, and there is none yet")
        outline = state.outline
        sources = self._tree_sources(ctx)
        by_ref = {s.ref: s for s in sources}
        # Every source was stored from a Hit (`RunGraph.add_sources`), so its kind is a HitKind.
        hits = [
            Hit(title=s.title, ref=s.ref, snippet=s.snippet, text=s.text, kind=cast(HitKind, s.kind), url=s.url)
            for s in sources
        ]
        sections = outline["sections"]
        results: list[dict[str, Any] | None] = [None] * len(sections)
        evidence = self._section_evidence(ctx, sections, hits, by_ref)

        def write(index: int, section: dict[str, Any]) -> None:
            ctx.checkpoint()
            chosen, found = evidence[index]
            heading = section["title"] + (
                "" if not section.get("subsections") else " (subsections: " + "; ".join(section["subsections"]) + ")"
            )
            text = first_readable(
                lambda: ctx.llm.text(
                    prompts.WRITE_SECTION.render(
                        sources=source_blocks(chosen, max_chars=900) if chosen else "(no sources)",
                        topic=ctx.question,
                        section=heading,
                        words=params.section_words,
                    ),
                    purpose="writer",
                    max_tokens=params.section_words * 3,
                )
            )
            attributed = 0
            if text is not None and params.attribute_citations:
                text, attributed = attribute_uncited(text, chosen)
            # A section the model could not write (twice) keeps its place with a note, never its junk.
            body, dropped = to_stored_markers(self._with_heading(text or SECTION_NOT_WRITTEN, section["title"]), chosen)
            results[index] = {
                "title": section["title"],
                "markdown": body,
                "snippets": [s.id for s in chosen],
                "evidence": found,
                "invalid_citations": dropped,
                "attributed_citations": attributed,
                UNWRITTEN: text is None,
            }

        ctx.parallel([partial(write, i, section) for i, section in enumerate(sections)])
        draft = "\n\n".join(r["markdown"] for r in results if r)
        unwritten = all(r is None or r[UNWRITTEN] for r in results)
        article, polish_note = (REPORT_NOT_WRITTEN, "") if unwritten else self._polish(ctx, draft)
        # The outline's titles are the article's planned sections: their heading lines stay headings.
        planned = [title for group in self._headings(sections) for title in group]
        uncovered = [n.label for n in self._live(ctx) if tree_of(n).not_covered]
        ctx.graph.save_report(
            article,
            headings=planned,
            own=uncovered_section(uncovered),
            data={
                "method": self.name,
                "sections": results,
                "draft": draft,
                "polish": polish_note,
                UNWRITTEN: unwritten,
                "tree": tree_signature(self._tree(ctx)),
            },
        )

    def _section_evidence(
        self,
        ctx: RunContext[OmniThinkParams],
        sections: list[dict[str, Any]],
        hits: list[Hit],
        by_ref: dict[str, Source],
    ) -> list[tuple[list[Source], dict[str, Any]]]:
        """Each section's evidence (paper 3.3): the tree's `snippets_per_section` sources most similar
        to the section's title, and as many for each subsection title, in that order, each once. By
        cosine similarity of the configured embeddings (the paper's Sentence-BERT), by BM25 without
        them. One ranking for the whole article. Returns, per section, the chosen sources and what
        was found for which heading (the section's data)."""
        params = ctx.params
        headings = self._headings(sections)
        queries = [heading for group in headings for heading in group]

        def failed(exc: Exception) -> None:
            ctx.graph.narrate(
                f"the embeddings endpoint failed, so section evidence is ranked by BM25: {exc}"[:400],
                kind="failed",
                error=str(exc)[:2000],
            )

        ranked = top_for_each(queries, hits, params.snippets_per_section, ctx.embedder, on_error=failed)
        out, position = [], 0
        for group in headings:
            chosen: list[Source] = []
            found = []
            for heading in group:
                refs = [h.ref for h in ranked.per_query[position]]
                position += 1
                found.append({"heading": heading, "sources": [by_ref[r].id for r in refs]})
                for ref in refs:
                    if all(source.ref != ref for source in chosen):
                        chosen.append(by_ref[ref])
            out.append((chosen, {"by": ranked.by, "headings": found}))
        return out

    @staticmethod
    def _headings(sections: list[dict[str, Any]]) -> list[list[str]]:
        """Each section's title and its subsections' titles."""
        return [[section["title"], *section.get("subsections", [])] for section in sections]

    @staticmethod
    def _with_heading(text: str, title: str) -> str:
        text = text.strip()
        if text.startswith("#"):
            first, _, rest = text.partition("\n")
            return f"## {first.lstrip('#').strip() or title}\n{rest}".strip()
        return f"## {title}\n\n{text}"

    def _polish(self, ctx: RunContext[OmniThinkParams], draft: str) -> tuple[str, str]:
        """Remove repetition across sections; keep the draft if the edit loses content or citations."""
        all_sources = {stored_id(s): s for s in ctx.graph.sources()}
        numbered = number_citations(draft, all_sources.keys())
        ordered = [all_sources[sid] for _, sid in sorted(numbered.numbering.items())]
        polished = ctx.llm.text_reply(
            prompts.POLISH_ARTICLE.render(article=numbered.text), purpose="writer", max_tokens=max(800, len(draft) // 2)
        )
        if polished.cut_off:  # an edit that stopped part-way lost the article's end
            return draft, "the polished version was cut off by the length limit; the draft is kept"
        converted, _dropped = to_stored_markers(polished.text.strip(), ordered)
        kept = set(cited_source_ids(converted))
        drafted = set(cited_source_ids(draft))
        if len(converted) < 0.5 * len(draft) or len(kept) < 0.7 * len(drafted) or "## " not in converted:
            return draft, "the polished version lost content or citations; the draft is kept"
        return converted, "polished"

    # ------------------------------------------------------------------ steering

    def apply(
        self, ctx: RunContext[OmniThinkParams], command: CommandSpec, payload: CommandPayload, node: Node | None
    ) -> set[str]:
        """Apply a steering command (its target already checked against `kinds.COMMANDS`); returns
        which outputs must be rewritten."""
        params = ctx.params
        if command.name == "regenerate_outline":
            return {OUTLINE}
        if command.name in ("regenerate_article", "regenerate_report"):
            return {ARTICLE}
        assert node is not None
        if command.name == "expand":
            assert isinstance(payload, ExpandPayload)
            if self._expand_leaf(ctx, node, payload.n or params.subnodes, True) == 0:
                raise CommandRejected(
                    "the model judged this node complete and proposed no new subtopic; add your own subtopic instead"
                )
            return set()
        if command.name == "add_subtopic":
            assert isinstance(payload, AddSubtopicPayload)
            subtopic = payload.subtopic.strip()
            if not subtopic:
                raise CommandRejected("the subtopic is empty; type the subtopic to add")
            keywords = [k.strip() for k in payload.keywords if k.strip()] or [subtopic]
            ctx.graph.add(kind=SUBTOPIC, label=subtopic, parent=node, data={"keywords": keywords, "user": True})
            return set()
        if command.name == "prune":
            ctx.graph.prune(node, kinds={TOPIC, SUBTOPIC})
            return set()
        if command.name == "restore":
            ctx.graph.restore(node)
            return set()
        raise UnsupportedCommand(f"the omnithink method does not support '{command.name}'")
