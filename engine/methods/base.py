"""The Method contract. Every reasoning method (baselines and the five papers' methods) is a class
with a pydantic `Params` model, typed declarations (`engine/contract.py`: node kinds, edge
kinds, commands, run state, view) and a resumable growth loop: `start` once, then `step` until it
says there is nothing left to do, then `write_outputs`. Steering commands are validated and applied
between steps by the shared toolkit (`engine/methods/steering.py`)."""

from __future__ import annotations

import contextlib
import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from datetime import date
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from engine import narration
from engine.contract import (
    CommandPayload,
    CommandSpec,
    EdgeKind,
    Lenient,
    MethodContract,
    NodeData,
    NodeKind,
    Notice,
    RunStateSpec,
    UnsupportedCommand,
    ViewSpec,
    regenerate_report_command,
)
from engine.graph import PARTIAL_REPORT, RunGraph
from engine.llm.accounting import RunLLM
from engine.llm.protocol import Message
from engine.methods.estimate import CostEstimate
from engine.parallel import run_parallel, run_parallel_settled
from engine.reader_text import UNWRITTEN, is_placeholder
from engine.run_services import RunServices
from engine.search.embeddings import Embedder, EmbeddingError
from engine.search.fetch import PageFetcher
from engine.search.pages import PagesRead, read_pages, readable
from engine.search.protocol import Candidates, Hit, Searcher, SearchError, candidates_of
from engine.search.relevance import DEFAULT_FLOOR, RelevanceResult
from storage.models import Command, Node
from storage.statuses import NodeStatus

if TYPE_CHECKING:  # the knowledge layer is imported by the methods that use it, not by every run
    from engine.knowledge.units import KnowledgeBase


class MethodParams(BaseModel):
    """Base of every method's parameters: unknown keys are errors, every field has a description
    (shown as help text in the UI and the CLI) and the paper's default."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # The quick profile: values that make a run finish in minutes on a small model on a CPU (the
    # built-in model). Only these fields change; the user may still raise any of them.
    quick_profile: ClassVar[dict[str, Any]] = {}


class Coverage(Lenient, NodeData):
    """What `Method.assess` reads of any method's answer (`Coverage.of(node)`): whether it answered
    "the sources at hand do not cover this" (`RunContext.sources_only`). A view, never written: it
    ignores the kind's other fields, so an answer whose data would not validate whole (a DEoT
    question's spoiled solving checkpoint) is still read."""

    model_config = ConfigDict(extra="ignore")

    not_covered: bool = False


@dataclass(frozen=True)
class RunOutcome:
    """What a finished run achieved, so its status tells the truth: a run that answered nothing is
    `failed` (with the reason), one with some failed nodes is `done` with a warning."""

    answered: int  # answer-bearing nodes that succeeded
    failed: int  # nodes of any kind that failed (not pruned)
    reason: str = ""  # why the run failed: nothing was answered, or no report could be written
    caveat: str = ""  # what a done run's reader must know of its answer (e.g. no candidate passed a check)

    @property
    def ok(self) -> bool:
        return self.answered > 0 and not self.reason

    @property
    def warning(self) -> str:
        if not self.ok:
            return ""
        nodes = "node" if self.failed == 1 else "nodes"
        failed = f"{self.failed} {nodes} failed; resume the run to retry them" if self.failed else ""
        return "; ".join(part for part in (self.caveat, failed) if part)


def relevance_floor_field() -> Any:
    """The `relevance_floor` parameter, the same for every method that searches."""
    return Field(
        default=DEFAULT_FLOOR,
        ge=0.0,
        le=1.0,
        description="Relevance floor: a search hit must contain at least this share of the query's distinctive "
        "words to be used and cited (0 keeps every hit). Keeps unrelated nearest matches out of the evidence; "
        "when nothing passes, the node says no relevant source was found.",
    )


def yes_no_field() -> Any:
    """The baselines' `yes_no` parameter: a benchmark of yes/no questions (StrategyQA) tells every
    method the answer's form, as the papers prompt their baselines, so accuracy compares the
    methods and not whether one of them was told to start with "yes" or "no"."""
    return Field(
        default=False,
        description="Yes/no mode (StrategyQA): the answer begins with 'Yes' or 'No', then says why.",
    )


def read_pages_field(default: int) -> Any:
    """The `read_pages` parameter of a method that searches the web (`RunContext.read_pages`)."""
    return Field(
        default=default,
        ge=0,
        le=50,
        description="Web results only: how many of a search's results have their page fetched and read (the "
        "passages that best match the query) instead of the search engine's two-line snippet. 0: snippets only. "
        "Corpus documents are read whole anyway.",
    )


# The output every method writes; `write_outputs` gets the names of the outputs to rewrite.
REPORT = "report"

# `embed_ahead` makes a batch per core only when each gets this many texts: below it, one batch costs
# about as much as two (2 short queries: 18 ms in one batch, 22 ms in two; 18: 146 ms against 107).
EMBED_BATCH = 4


# A method's parameters model: `RunContext[DeotParams]` is a DEoT run's context, whose `params` are DEoT's.
P = TypeVar("P", bound=MethodParams)
# A structured answer's model (`RunLLM.ask`).
T = TypeVar("T", bound=BaseModel)
R = TypeVar("R")  # what a search gives (`RunContext._told`)
Svc = TypeVar("Svc")  # a service a method asks its run for (`RunContext.service`)


@dataclass
class RunContext(Generic[P]):
    """Everything a method may use during a run; all dependencies are injected. Generic over the
    method's `Params`, so a method reads `ctx.params` as its own model."""

    run_id: str
    question: str
    params: P
    llm: RunLLM
    searcher: Searcher
    graph: RunGraph
    # Blocks while paused, raises RunStopped when stopped; call it between steps.
    checkpoint: Callable[[], None]
    # Claims queued steering commands (not pause/resume/stop) for the method's scheduler.
    take_steering: Callable[[], list[Command]]
    executor: Executor
    # Marks a steering command the method took as applied (or failed, with the reason).
    complete_command: Callable[..., None] = lambda command_id, ok=True, error="": None
    today: date = field(default_factory=date.today)
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("thoughtmap.run"))
    # The run's services, asked by type (`service`): `Embedder` (semantic similarity; None: rank by
    # BM25), `PageFetcher` (the page behind a web hit; None: the snippet), `RerankEndpoint` (the
    # configured /rerank endpoint), `KnowledgeLayer` (the knowledge graphs; see `knowledge`).
    services: RunServices = field(default_factory=RunServices)
    # THOUGHTMAP_RERANKER: what a method's `auto` reranker means (engine/search/retrieval.py).
    default_reranker: str = "none"
    # The model answers only from sources: a node none of whose searches found a passage about its
    # question answers `relevance.not_covered` (the sources at hand do not cover this) instead of
    # asking the model. True on the built-in 0.5B model, whose own "knowledge" wrote that greenhouse
    # gases cause the seasons; a connected model answers from its own knowledge, marked uncited.
    sources_only: bool = False

    def service(self, kind: type[Svc]) -> Svc | None:
        """The run's service of type `kind` (`Embedder`, `PageFetcher`...), or None when it has none."""
        return self.services.get(kind)

    @property
    def embedder(self) -> Embedder | None:
        """`service(Embedder)`: what every method's relevance floor and evidence ranking use."""
        return self.services.get(Embedder)

    def search(self, query: str, *, k: int, node: Node | None = None, searcher: Searcher | None = None) -> list[Hit]:
        """`searcher.search`, told to the step log: what was searched, where, how much came back
        (or why the search failed: the SearchError is raised again). `searcher` is the run's own
        search seen another way (`combined.web_first`); the run's searcher by default."""
        return self._told(query, node, searcher or self.searcher, lambda s: s.search(query, k=k), len)

    def candidates(
        self, query: str, *, k: int, node: Node | None = None, searcher: Searcher | None = None
    ) -> Candidates:
        """As `search`, for a step that keeps a few of the `k` hits: the snippets to come (the local
        corpus's cost more than its ranking) are made by `finish`, for the hits it keeps."""
        return self._told(
            query, node, searcher or self.searcher, lambda s: candidates_of(s, query, k), lambda c: len(c.hits)
        )

    def _told(
        self,
        query: str,
        node: Node | None,
        searcher: Searcher,
        search: Callable[[Searcher], R],
        count: Callable[[R], int],
    ) -> R:
        where = searcher.description
        node_id = node.id if node is not None else None
        self._embed_while_searching(query)
        try:
            found = search(searcher)
        except SearchError as exc:
            self.graph.narrate(
                narration.search_failed_text(query, where, str(exc)),
                node_id=node_id,
                kind=narration.SEARCH,
                query=query,
                error=str(exc)[:2000],
            )
            raise
        self.graph.narrate(
            narration.search_text(query, where, count(found)),
            node_id=node_id,
            kind=narration.SEARCH,
            query=query,
            found=count(found),
        )
        return found

    def _embed_while_searching(self, query: str) -> None:
        """Start the query's vector on the pool, when the run's embedder remembers what it embedded:
        the search ranks by words meanwhile, and its dense stage and the relevance floor find the
        vector made or being made (`BuiltinEmbedder` waits for it) instead of making it after. A
        query's vector is about 13 ms of CPU, as long as the rest of a search."""
        embedder = self.embedder
        if embedder is None or not getattr(embedder, "remembers_texts", False) or not query.strip():
            return
        remembers = getattr(embedder, "remembers", None)
        if remembers is not None and remembers(query):
            return  # embedded ahead already (a round's queries, a plan's): no task for the pool
        with contextlib.suppress(RuntimeError):  # the pool is shutting down: the search embeds it
            self.executor.submit(embedder.embed, [query])  # a failure is the search's to meet and say

    def embed_ahead(self, texts: Sequence[str]) -> None:
        """Make these texts' vectors now, when the run's embedder remembers what it embedded (the
        built-in one): a method calls it for what it will search next, alongside an LLM call (`parallel`)
        or once for a whole round of searches, so each search finds its query's vector made. A query's
        vector is about 10 ms of CPU when embedded alone; a batch costs less a text, and a batch of up
        to 32 texts runs on one core, so a batch is made per core (of at least `EMBED_BATCH` texts). A failure is left
        to the search, which embeds again and says so."""
        embedder = self.embedder
        if not texts or embedder is None or not getattr(embedder, "remembers_texts", False):
            return
        unique = list(dict.fromkeys(texts))
        parts = max(1, min(os.cpu_count() or 1, len(unique) // EMBED_BATCH))
        try:
            self.parallel([partial(embedder.embed, unique[i::parts]) for i in range(parts)])
        except EmbeddingError:
            pass

    def note_unrelated(self, query: str, relevance: RelevanceResult, node: Node | None = None) -> None:
        """Tell the step log which share of a search's hits the relevance floor left out."""
        if relevance.dropped:
            found = len(relevance.kept) + len(relevance.dropped)
            self.graph.narrate(
                narration.unrelated_text(query, len(relevance.dropped), found),
                node_id=node.id if node is not None else None,
                kind=narration.DROPPED,
                query=query,
                dropped=relevance.dropped_summary(),
            )

    def read_pages(
        self, query: str, hits: list[Hit], *, limit: int, max_chars: int, node: Node | None = None
    ) -> PagesRead:
        """The first `limit` web hits with the passages of their page that best match `query` (at
        most `max_chars`) in place of the search engine's snippet (engine/search/pages.py); told to
        the step log. Hits from the corpus, and every hit when no page fetcher is injected or
        `limit` is 0, are returned unchanged."""
        wanted = min(max(limit, 0), sum(readable(hit) for hit in hits))
        fetcher = self.services.get(PageFetcher)
        if fetcher is None or not wanted:
            return PagesRead(list(hits))
        pages = read_pages(fetcher, hits, limit=limit, max_chars=max_chars, query=query)
        self.graph.narrate(
            f'read {pages.read} of {wanted} web pages for "{query[:80]}"'
            + (f"; {len(pages.failures)} kept their snippet" if pages.failures else ""),
            node_id=node.id if node is not None else None,
            failures=pages.failures,
        )
        return pages

    def knowledge(
        self,
        scope: str = "question",
        *,
        collection: str | None = None,
        chunk_tokens: int | None = None,
        node: Node | None = None,
        extract_max_tokens: int | None = None,
    ) -> KnowledgeBase:
        """A `KnowledgeBase` (engine/knowledge/units.py) for this run: `question` is the run's own graph
        (grown by `add_documents`, deleted with the run), `collection` the graph of a corpus collection
        built by `thoughtmap kg build` (read only; `KnowledgeNotBuilt` says how to build it). Its LLM
        calls are this run's (budgeted, accounted, told to the step log, for `node` when given), its
        chunks are extracted concurrently through `parallel`, and a pause or stop takes effect between
        chunks (`checkpoint`). `chunk_tokens` (default 1,200, the paper's) and `extract_max_tokens` (the cap
        on each extraction's answer) default to the knowledge layer's values when not given. Keywords
        are matched to keys by this run's `embedder` and BM25; when it fails, by BM25, and the step
        log says so (for `node`), once per failure."""
        from engine.knowledge.open import KnowledgeLayer  # only the methods that use it pay for it

        layer = self.services.get(KnowledgeLayer)
        if layer is None:
            raise RuntimeError("this run context has no knowledge layer (the runner injects it from Services)")
        node_id = node.id if node is not None else None

        def ask(messages: Sequence[Message], output_type: type[T], **options: Any) -> T:
            return self.llm.ask(messages, output_type, node_id=node_id, **options)

        def embedding_failed(exc: Exception) -> None:  # as OmniThink's section evidence tells it
            self.graph.narrate(
                f"the embeddings failed, so keywords are matched to the knowledge graph's keys by BM25: {exc}"[:400],
                node_id=node_id,
                kind="failed",
                error=str(exc)[:2000],
            )

        options = {
            name: value
            for name, value in (("chunk_tokens", chunk_tokens), ("extract_max_tokens", extract_max_tokens))
            if value is not None
        }
        return layer.open(
            run_id=self.run_id,
            scope=scope,  # type: ignore[arg-type]
            collection=collection,
            ask=ask,
            parallel=self.parallel,
            checkpoint=self.checkpoint,
            embedder=self.embedder,
            on_embedding_error=embedding_failed,
            **options,
        )

    def parallel(self, calls: Sequence[Callable[[], Any]]) -> list[Any]:
        """Run calls concurrently on the process-wide pool (nesting is safe: `engine/parallel.py`);
        results in order; every call ends before the first error is raised."""
        return run_parallel(self.executor, calls)

    def parallel_settled(self, calls: Sequence[Callable[[], Any]]) -> list[tuple[Any, BaseException | None]]:
        """As `parallel`, but every outcome in order, (result, None) or (None, error), and nothing
        raised: for a caller that keeps what succeeded before it raises what failed."""
        return run_parallel_settled(self.executor, calls)


class Method(ABC, Generic[P]):
    name: ClassVar[str]
    title: ClassVar[str]
    summary: ClassVar[str]
    # What a caller should pick it for, in a line (the MCP server's tool descriptions).
    good_for: ClassVar[str] = ""
    paper: ClassVar[str] = ""
    Params: ClassVar[type[MethodParams]]

    # ---- declarations (typed data; the app, the CLI and the tests are built from them)
    node_kinds: ClassVar[tuple[NodeKind, ...]] = ()
    edge_kinds: ClassVar[tuple[EdgeKind, ...]] = ()
    commands: ClassVar[tuple[CommandSpec, ...]] = (regenerate_report_command(),)
    run_states: ClassVar[tuple[RunStateSpec, ...]] = ()
    view: ClassVar[ViewSpec] = ViewSpec()
    # Prompt name -> what the model is doing, in a reader's words (the step log; contract.steps).
    steps: ClassVar[Mapping[str, str]] = {}
    # True when `write_report` composes the report from the stored graph without the model: a run
    # stopped part-way (its budget, Stop) then gets a partial report of what it found so far.
    report_without_model: ClassVar[bool] = False

    # ---- derived from the declarations (set for each subclass; read-only)
    steering: ClassVar[frozenset[str]] = frozenset()
    answer_kinds: ClassVar[frozenset[str]] = frozenset()
    _contract: ClassVar[MethodContract | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            return  # an abstract helper base, not a method
        # Checked at import: a method whose declarations contradict each other never loads.
        contract = MethodContract.build(
            cls.name, cls.node_kinds, cls.edge_kinds, cls.commands, cls.run_states, cls.view, cls.steps
        )
        cls._contract = contract
        cls.steering = frozenset(contract.commands)
        cls.answer_kinds = contract.answer_kinds

    @classmethod
    def contract(cls) -> MethodContract:
        if cls._contract is None:
            raise TypeError(f"{cls.__name__} declares no name, so it is not a method")
        return cls._contract

    # ---- the growth loop

    def run(self, ctx: RunContext[P]) -> None:
        """Grow the run's graph to completion. Every step decides from the stored graph, so a
        resumed run skips every finished node; steering is applied between steps."""
        from engine.methods.steering import apply_and_record  # the toolkit builds on this module

        self.start(ctx)
        rewrite: set[str] = set()
        while True:
            ctx.checkpoint()
            for command in ctx.take_steering():
                rewrite |= apply_and_record(ctx, self, command) or set()
            if not self.step(ctx):
                break
        self.write_outputs(ctx, rewrite)

    def steer(self, ctx: RunContext[P], command: Command) -> None:
        """Apply one steering command on a finished run, grow what it added, refresh the outputs.
        The command's outcome is recorded as soon as it is applied or refused (a refused one
        changes nothing and grows nothing)."""
        from engine.methods.steering import apply_and_record

        rewrite = apply_and_record(ctx, self, command)
        if rewrite is None:
            return
        self.start(ctx)
        while self.step(ctx):
            ctx.checkpoint()
        self.write_outputs(ctx, rewrite)

    def start(self, ctx: RunContext[P]) -> None:
        """Create what the run starts from (its root), once."""

    def step(self, ctx: RunContext[P]) -> bool:
        """Do the next unit of work (one layer, one stage); False when nothing is left."""
        return False

    def apply(self, ctx: RunContext[P], command: CommandSpec, payload: CommandPayload, node: Node | None) -> set[str]:
        """Apply a validated command (its target node already checked against the declaration);
        returns the outputs to rewrite. Raise CommandRejected (a ValueError) to refuse it."""
        if command.name == "regenerate_report":
            return {REPORT}
        raise UnsupportedCommand(f"the {self.name} method does not support '{command.name}'")

    def write_outputs(self, ctx: RunContext[P], rewrite: set[str]) -> None:
        """Write the outputs named in `rewrite`, and any that do not exist yet, were written
        part-way (`write_stopped_report`) or before the last applied command (`report_outdated`)."""
        report = ctx.graph.report()
        if (
            REPORT in rewrite or report is None or report.data.get(PARTIAL_REPORT) or ctx.graph.report_outdated()
        ):  # a command's rewrite that a stop or a kill cut off
            self.write_report(ctx)

    def write_stopped_report(self, ctx: RunContext[P], reason: str) -> bool:
        """A run stopped before its end: write the report of what its graph holds, marked partial,
        when the method needs no model for that (`report_without_model`; its budget may be spent)
        and one of its answers is done. Without an answer, the generic partial results (each
        finished node, `engine/report.py`) say more than a report that has nothing to report.
        True when written."""
        if not self.report_without_model:
            return False
        if not any(n.status == NodeStatus.DONE for n in ctx.graph.nodes() if n.kind in self.answer_kinds):
            return False
        with ctx.graph.partial_reports(reason):
            self.write_report(ctx)
        return True

    @abstractmethod
    def write_report(self, ctx: RunContext[P]) -> None:
        """(Re)write the run's final report from the stored graph."""

    def notices(self, graph: RunGraph) -> list[Notice]:
        """What the reader should know about the run now (e.g. the article is older than the
        tree), each with the command to offer, if any."""
        return []

    def assess(self, ctx: RunContext[P]) -> RunOutcome:
        """What the finished run achieved, read from the stored graph."""
        nodes = ctx.graph.nodes()
        answers = [n for n in nodes if n.kind in self.answer_kinds and n.status != NodeStatus.PRUNED]
        answered = sum(n.status == NodeStatus.DONE for n in answers)
        failed = [n for n in nodes if n.status == NodeStatus.FAILED]
        reason = ""
        if not answered:
            first_error = next((n.error for n in answers if n.status == NodeStatus.FAILED and n.error), "")
            what = " or ".join(sorted(self.answer_kinds))
            reason = f"nothing was answered: no {what} node succeeded" + (
                f" (the first failure: {first_error})" if first_error else ""
            )
        else:
            if self.report_unwritten(ctx.graph):
                # Answers without a report are not a finished run: the reader would get nothing.
                reason = (
                    "the model could not write the report; press Rewrite report (or Resume) to try "
                    "again; the answers of the tree are kept"
                )
        caveat = ""
        done = [n for n in answers if n.status == NodeStatus.DONE]
        if done and all(Coverage.of(n).not_covered for n in done):
            caveat = "the sources at hand do not cover this question; the report says what was searched"
        return RunOutcome(answered=answered, failed=len(failed), reason=reason, caveat=caveat)

    @staticmethod
    def report_unwritten(graph: RunGraph) -> bool:
        """The run has a report the model could not write (a placeholder stands in its place)."""
        report = graph.report()
        return report is not None and bool(report.data.get(UNWRITTEN) or is_placeholder(report.markdown))

    def reset_failed(self, ctx: RunContext[P]) -> int:
        """Put the failed nodes back to pending so the next `run` tries them again (resume of a
        finished or failed run). Returns how many were reset."""
        failed = ctx.graph.nodes(status=NodeStatus.FAILED)
        for node in failed:
            ctx.graph.update(node, status=NodeStatus.PENDING, error="", started_at=None, finished_at=None)
        return len(failed)

    @classmethod
    def estimate(cls, params: P) -> CostEstimate | None:
        """The LLM calls and tokens a run with these parameters is expected to cost, counted from
        the method's loop within the bounds its parameters set (`engine/methods/estimate.py`);
        None for a method that declares no formula."""
        return None

    @classmethod
    def evidence_titles(cls, nodes: Sequence[Node]) -> list[str] | None:
        """The titles of the passages the method itself chose as its evidence, best first, when that
        is not simply the run's sources (MTQA: the knowledge units it retrieved out of the documents
        it stored). The evaluation harness scores their recall of the gold passages beside the
        sources' recall. None: the sources are the evidence."""
        return None

    @classmethod
    def describe_params(cls) -> list[dict[str, Any]]:
        """Name, type, default and help of every parameter (for the CLI and UI forms)."""
        rows = []
        for name, info in cls.Params.model_fields.items():
            rows.append(
                {
                    "name": name,
                    "type": getattr(info.annotation, "__name__", str(info.annotation)),
                    "default": info.default,
                    "help": info.description or "",
                }
            )
        return rows
