"""The composition root: builds the process's shared objects once and injects them.

Nothing here is a module global; the CLI and the web app each build one `Services`."""

from __future__ import annotations

import threading
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from engine.access import Access
from engine.config import LLMSettings, Settings, is_search_mode, load_settings
from engine.config_values import ConfigError
from engine.evaluate.claims import ClaimSupportResult, check_and_store
from engine.evaluate.run_report import load_judged_run
from engine.heap import freeze_loaded
from engine.knowledge.open import KnowledgeLayer
from engine.llm.counted import EvalLLM
from engine.llm.fake import FakeLLM
from engine.llm.limits import ConcurrencyLimiter, SharedConcurrencyLimiter
from engine.llm.pricing import PriceTable
from engine.llm.protocol import LLM, LLMAuthError, LLMRequestError
from engine.llm.structured_modes import StructuredModeMemory
from engine.methods.base import Method
from engine.methods.registry import get_method, load_methods
from engine.person_models import (
    PERSON_ENDPOINT,
    KeyRing,
    adapter_identity,
    endpoint_problem,
    run_llm_settings,
)
from engine.reads import Reads
from engine.redact import redact_url
from engine.run_queue import QueueDepth, RunQueue
from engine.run_services import RunServices
from engine.runner import HeldRun, Runner
from engine.search.combined import build_searcher
from engine.search.embedders import build_embedder
from engine.search.embedding_model import EmbeddingModelUnavailable
from engine.search.embeddings import Embedder
from engine.search.exclusion import ExcludingSearcher, OwnUploadsOnly, SearchExclusions
from engine.search.fetch import PageFetcher
from engine.search.hops import LinkerCache
from engine.search.local import LocalCorpusSearcher
from engine.search.protocol import Searcher
from engine.search.rerank import RerankEndpoint
from engine.search.retrieval import build_local_retrieval, corpus_embedding
from storage import Repository, open_database
from storage.db import Database
from storage.evaluation import EvaluationStore
from storage.knowledge import KnowledgeStore
from storage.leases import SharedCooldown, SlotLocks
from storage.models import Run
from storage.tokens import TokenStore
from storage.users import UserStore

if TYPE_CHECKING:  # only for annotations: imported where first used, so a process not using them never loads them
    from engine.evaluate.runner import BenchmarkRunner
    from engine.llm.local_server import LocalModelServer
    from engine.preferences import Preferences

LLMKind = Literal["fake", "local", "openai"]
LLM_KINDS: tuple[str, ...] = ("fake", "local", "openai")


@dataclass
class Services:
    settings: Settings
    db: Database
    repo: Repository
    limiter: ConcurrencyLimiter
    prices: PriceTable
    runner: Runner = field(init=False)
    # What the app reads (runs, graphs, reports, judgments): components/ and pages/ read only here.
    reads: Reads = field(init=False)
    # Who may read and change which run (engine/access.py): every door asks here.
    access: Access = field(init=False)
    tokens: TokenStore = field(init=False)
    # The knowledge graphs (MTQA's knowledge layer): runs open them through ctx.knowledge.
    knowledge: KnowledgeLayer = field(init=False)
    # Semantic similarity: an OpenAI-compatible /embeddings endpoint when configured, else the
    # built-in all-MiniLM-L6-v2; None (BM25 instead) when that model is missing or damaged, or
    # THOUGHTMAP_BUILTIN_EMBEDDINGS=0.
    embedder: Embedder | None = field(init=False)
    # Why the built-in embedding model is not used (missing, damaged) and that BM25 is, for the
    # app's and the CLI's "running on" line; "" when embeddings work as configured.
    embedder_notice: str = field(init=False, default="")
    # The methods this process serves: the built-in ones and THOUGHTMAP_METHODS' plugins.
    methods: MutableMapping[str, type[Method[Any]]] = field(default_factory=dict)
    # What auto mode learned per endpoint and model; survives `configure_openai`, shown in Settings.
    structured_modes: StructuredModeMemory = field(default_factory=StructuredModeMemory)
    _llms: dict[str, LLM] = field(default_factory=dict)
    # People's typed keys (multi-user mode), in this process's memory only (engine/person_models.py).
    keys: KeyRing = field(default_factory=KeyRing)
    # One adapter per person's endpoint, models and key; they share the process's LLM limiter.
    _endpoint_llms: dict[tuple[Any, ...], LLM] = field(default_factory=dict)
    _local_server: LocalModelServer | None = None  # the built-in model's server, started on first use
    _searchers: dict[str, Searcher] = field(default_factory=dict)
    # The corpus searcher under the first stage (ingest, counts), and the hop linker shared by all
    # searchers of this process (built once per corpus generation).
    _corpus: LocalCorpusSearcher | None = None
    _linkers: LinkerCache = field(default_factory=LinkerCache)
    _benchmarks: BenchmarkRunner | None = None  # made on first use
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # Distributed execution (THOUGHTMAP_EXECUTION=queue): the task queue runs are handed to.
    queue: RunQueue | None = None

    def __post_init__(self) -> None:
        if not self.methods:
            self.methods = load_methods(self.settings.method_plugins)
        self.knowledge = KnowledgeLayer(KnowledgeStore(self.db))
        self.reads = Reads(self.repo, EvaluationStore(self.db))
        self.access = Access(self.repo, UserStore(self.db), self.settings.team)
        self.tokens = TokenStore(self.db)  # the HTTP API's and MCP server's bearer tokens
        self.embedder, self.embedder_notice = self._build_embedder()
        self.runner = Runner(
            self.repo,
            llm_for=self.llm_for_run,
            searcher_for=self.searcher_for_run,
            prices=self.prices,
            methods=self.methods,
            max_workers=self.settings.workers,
            services=self._run_services(),
            default_reranker=self.settings.retrieval.reranker,
            dispatch=self._enqueue if self.queue is not None else None,
            person_cost_cap=self.settings.team.max_cost if self.settings.team.sign_in else None,
        )

    def _build_embedder(self) -> tuple[Embedder | None, str]:
        """The embedder, and the notice saying why there is none. A missing or damaged built-in
        model is not an error: searches and evidence rank by BM25, and nothing stored changes."""
        builtin = self.settings.local.models_dir if self.settings.builtin_embeddings else None
        try:
            return build_embedder(self.settings.embeddings, builtin), ""
        except EmbeddingModelUnavailable as exc:
            return None, f"{exc} Search ranks by BM25 word match instead; nothing stored is affected. {exc.hint}"

    def _run_services(self) -> RunServices:
        """What every run may ask for by type (engine/run_services.py). A new service is one more
        entry here: methods ask `ctx.service(ItsType)`, and RunContext and Runner stay as they are."""
        return RunServices(
            {
                KnowledgeLayer: self.knowledge,
                Embedder: self.embedder,  # None: relevance and evidence rank by BM25
                RerankEndpoint: self._rerank_endpoint(),  # THOUGHTMAP_RERANK_URL, None when unset
                PageFetcher: PageFetcher(allow_private=self.settings.allow_private_fetch),
            }
        )

    def _rerank_endpoint(self) -> RerankEndpoint | None:
        """The /rerank endpoint THOUGHTMAP_RERANK_URL configures, or None."""
        rerank = self.settings.rerank
        if not rerank.url:
            return None
        from engine.search.rerankers import EndpointReranker

        return EndpointReranker(rerank.url, rerank.model, api_key=rerank.api_key, timeout_s=self.settings.llm.timeout_s)

    def _enqueue(self, run_id: str, retry_failed: bool, steered_from: HeldRun | None = None) -> None:
        if self.queue is None:  # the runner dispatches here only when there is a queue
            raise RuntimeError(f"run {run_id} cannot be enqueued: runs execute embedded (no task queue)")
        self.queue.enqueue(
            run_id, retry_failed=retry_failed, steered_from=steered_from.as_job() if steered_from is not None else None
        )

    def queue_depth(self) -> QueueDepth | None:
        """Runs waiting for a worker and being executed by one; None when runs execute embedded."""
        return self.queue.depth() if self.queue is not None else None

    def method(self, name: str) -> type[Method[Any]]:
        return get_method(name, self.methods)

    # --------------------------------------------------------------- LLMs

    def llm(self, kind: str) -> LLM:
        """The shared LLM of a kind (one adapter instance, one limiter, for all runs)."""
        with self._lock:
            if kind not in self._llms:
                if kind == "fake":
                    # THOUGHTMAP_FAKE_LATENCY slows the fake down, to watch a tree grow in demos and UI tests.
                    self._llms[kind] = FakeLLM(latency_s=self.settings.fake_latency_s)
                elif kind == "openai":
                    # Imported here: the openai SDK costs ~0.5 s to import, wasted on fake runs.
                    from engine.llm.openai_compat import OpenAICompatibleLLM, missing_key_error

                    error = missing_key_error(self.settings.llm)
                    if error is not None:
                        raise error
                    self._llms[kind] = OpenAICompatibleLLM(self.settings.llm, self.limiter, modes=self.structured_modes)
                    freeze_loaded("openai SDK")
                elif kind == "local":
                    self._llms[kind] = self._build_local_llm()
                else:
                    raise ValueError(f"unknown LLM '{kind}'. Choose one of: {', '.join(LLM_KINDS)}")
            return self._llms[kind]

    def _build_local_llm(self) -> LLM:
        from engine.llm.local import LocalModelLLM
        from engine.llm.local_server import LocalModelServer

        if self._local_server is None:
            self._local_server = LocalModelServer(self.settings.local, self.settings.home / "logs")
        return LocalModelLLM(self._local_server, self.settings.local, self.settings.llm)

    def local_model_ready(self) -> bool:
        """Whether `auto` may pick the built-in model: its runtime and model file are installed."""
        from engine.llm.local_model import model_available

        return model_available(self.settings.local)

    def resolve_llm(self, choice: str, api_key: str | None, preferences: Preferences | None = None) -> str:
        """The LLM kind a choice (auto, local, openai, fake) means on this machine now."""
        from engine.preferences import Preferences

        prefs = (preferences or Preferences.from_settings(self.settings)).model_copy(update={"llm": choice})
        return prefs.resolved_llm(api_key, local_ready=choice == "auto" and self.local_model_ready())

    def configure_openai(self, llm_settings: LLMSettings) -> None:
        """Point the shared OpenAI-compatible adapter at another endpoint/model (app Settings)."""
        with self._lock:
            self.settings = self.settings.model_copy(update={"llm": llm_settings})
            self._llms.pop("openai", None)

    def use_llm(self, kind: str, llm: LLM) -> None:
        """Install a specific LLM for a kind (a scripted fake in tests, a custom adapter)."""
        with self._lock:
            self._llms[kind] = llm

    def llm_info(self, kind: str) -> dict[str, str]:
        """What a run runs on, as stored with it (never a key)."""
        if kind == "fake":
            return {"kind": "fake", "model": "fake", "description": "scripted fake LLM (offline, deterministic)"}
        if kind == "local":
            from engine.llm.local_model import describe

            name = describe(self.settings.local)
            return {"kind": "local", "model": name, "description": f"{name} (llama.cpp on this machine)"}
        cfg = self.settings.llm
        # Stored with the run and shown everywhere: credentials in the URL never go with it.
        base_url = redact_url(cfg.base_url)
        return {"kind": kind, "model": cfg.model, "base_url": base_url, "description": f"{cfg.model} at {base_url}"}

    def llm_for_run(self, run: Run) -> LLM:
        info = run.llm_info or {}
        if info.get("endpoint") == PERSON_ENDPOINT:
            settings = run_llm_settings(info, self.settings.llm, self.keys, run.user_id)
            self._check_person_endpoint(run.user_id, settings.base_url)
            return self._endpoint_llm(settings)
        return self.llm(info.get("kind", "openai"))

    def _check_person_endpoint(self, user_id: int | None, base_url: str) -> None:
        """Again at execution, whatever door started the run: a person who is not an admin may not
        point the server at its own network (engine/person_models.py)."""
        if user_id is not None and self.access.viewer_for(user_id).is_admin:
            return
        problem = endpoint_problem(
            base_url, team_url=self.settings.llm.base_url, allow_private=self.settings.allow_private_fetch
        )
        if problem:
            raise LLMRequestError(problem)

    def _endpoint_llm(self, settings: LLMSettings) -> LLM:
        """The adapter of a person's endpoint (made once per endpoint, models and key)."""
        from engine.llm.openai_compat import OpenAICompatibleLLM, missing_key_error

        error = missing_key_error(settings)
        if error is not None:
            raise error
        identity = adapter_identity(settings)
        with self._lock:
            if identity not in self._endpoint_llms:
                self._endpoint_llms[identity] = OpenAICompatibleLLM(settings, self.limiter, modes=self.structured_modes)
                freeze_loaded("openai SDK")
            return self._endpoint_llms[identity]

    # ------------------------------------------------------------- search

    def searcher(self, mode: str, progress: Callable[[str, float], None] | None = None) -> Searcher:
        """The process's searcher for a search mode, made on first use. `progress` hears about the
        corpus index's first build (or the wait for another process's) when this call makes it."""
        with self._lock:
            if mode not in self._searchers:
                if not is_search_mode(mode):
                    raise ValueError(f"unknown search mode '{mode}': use local, web, both or none")
                self._searchers[mode] = build_searcher(
                    mode,
                    self.settings,
                    progress=progress,
                    local=self._local_retrieval,
                    embedding=corpus_embedding(self.settings, self.embedder),
                )
            return self._searchers[mode]

    def _local_retrieval(self, corpus: LocalCorpusSearcher) -> Searcher:
        """The first stage every method searches the corpus with (THOUGHTMAP_RETRIEVER); the corpus
        searcher itself is kept for managing it (`corpus`)."""
        self._corpus = corpus
        embedding = corpus.embedding
        # The corpus is searched by the built-in model's vectors even when an embeddings endpoint
        # serves the methods' similarity: re-embedding a corpus at an endpoint would take minutes.
        return build_local_retrieval(
            corpus,
            self.settings.retrieval,
            embedding.embedder if embedding is not None else None,
            vectors=corpus.vectors,
            linkers=self._linkers,
        )

    def corpus(self, progress: Callable[[str, float], None] | None = None) -> LocalCorpusSearcher:
        """The local corpus searcher (bundled data + ingested files), for corpus management (runs
        search it through `searcher`, the first stage over it). `progress`: as for `searcher`."""
        self.searcher("local", progress=progress)
        assert self._corpus is not None
        return self._corpus

    @property
    def uploads_dir(self) -> Path:
        return self.settings.home / "uploads"

    @property
    def benchmarks(self) -> BenchmarkRunner:
        """The process's benchmark runner (the app's Evaluate page starts benchmarks through it)."""
        with self._lock:
            if self._benchmarks is None:
                from engine.evaluate.runner import BenchmarkRunner

                self._benchmarks = BenchmarkRunner(self)
            return self._benchmarks

    def searcher_for_run(self, run: Run) -> Searcher:
        searcher = self.searcher(run.search_mode)
        if self.settings.team.sign_in:
            # A person's uploads are theirs: a run sees the shared corpus and its own person's files.
            searcher = OwnUploadsOnly(searcher, run.user_id)
        if run.search_exclusions:
            # A benchmark item never sees its own answer: those sources are kept out of every search.
            return ExcludingSearcher(searcher, SearchExclusions.model_validate(run.search_exclusions))
        return searcher

    def rename_run(self, run_id: str, title: str) -> None:
        """The run's name in Sessions; ValueError for an empty or too long name."""
        self.repo.rename_run(run_id, title)

    def check_citations(self, run_id: str, llm_kind: str) -> ClaimSupportResult:
        """Every cited sentence of the run's latest report judged against its source, stored as a
        judgment (`Reads.judgments`). JudgeInputError without a report; LLMError from the judge."""
        return check_and_store(
            EvaluationStore(self.db), EvalLLM(self.llm(llm_kind), self.prices), load_judged_run(self.repo, run_id)
        )

    def close(self) -> None:
        if self._benchmarks is not None:
            self._benchmarks.stop_all()
        self.runner.shutdown(wait=False)
        if self.queue is not None:
            self.queue.close()
        if self._local_server is not None:
            self._local_server.stop()
        self.db.dispose()


def build_services(settings: Settings | None = None, *, read_only_ok: bool = False) -> Services:
    """The process's services. `read_only_ok`: for commands that only read, a database that cannot
    be written is opened for reading (`db.read_only`) instead of refused. A configuration that
    cannot work raises ConfigError (engine/config_values.py)."""
    settings = settings or load_settings()
    try:
        settings.home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"THOUGHTMAP_HOME={settings.home}: the folder cannot be created ({exc.strerror or exc}). "
            "Point THOUGHTMAP_HOME at a folder this user can write"
        ) from None
    db = open_database(settings.database_url, read_only_ok=read_only_ok, variable=settings.database_variable)
    if not settings.team.sign_in and UserStore(db).has_people():
        # A database people sign in to, opened by a process that found no [auth]: it would serve
        # every person's runs to anyone, as the local user. Said, not done.
        db.dispose()
        raise ConfigError(
            "this database is a team's (people have signed in to it), but no secrets file with [auth] "
            "was found, so this process would run single-user and show everyone's runs. Point "
            "THOUGHTMAP_SECRETS_FILE at the team's secrets.toml (docs/teams.md)"
        )
    prices = PriceTable.from_file(settings.llm.prices_file) if settings.llm.prices_file else PriceTable()
    limiter: ConcurrencyLimiter
    if settings.execution == "queue":
        # Runs execute on workers; the LLM calls of every worker share one cap, in the database.
        queue = RunQueue(db)
        limiter = SharedConcurrencyLimiter(
            settings.llm.concurrency, SlotLocks(db, "llm", settings.llm.concurrency), cooldown=SharedCooldown(db, "llm")
        )
    else:
        queue, limiter = None, ConcurrencyLimiter(settings.llm.concurrency)
    services = Services(settings=settings, db=db, repo=Repository(db), limiter=limiter, prices=prices, queue=queue)
    # The modules, their pydantic schemas and SQLAlchemy tables, and these services.
    freeze_loaded("start-up")
    return services


__all__ = ["LLM_KINDS", "LLMAuthError", "Services", "build_services"]
