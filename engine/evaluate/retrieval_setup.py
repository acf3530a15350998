"""What `thoughtmap search-eval` and benchmarks/bench_retrieval.py measure: a dataset by name, and a
retriever with a reranker by name, built as the methods build them (engine/search/retrieval.py).

A configuration that cannot be measured as asked (an unknown dataset, the `endpoint` reranker with no
THOUGHTMAP_RERANK_URL, `llm` with no LLM to ask, the embedding model missing) raises
`RetrievalSetupError` with one line saying what to do. It never falls back the way a run does (a
missing model means BM25 there): a measurement of BM25 labelled "dense" would be wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, cast, get_args

from engine.config import RerankerName, RetrievalSettings, Retriever, Settings
from engine.search.protocol import Hit, Searcher
from engine.search.rerank import RerankEndpoint, Reranker

if TYPE_CHECKING:  # only for annotations
    from engine.search.embeddings import Embedder
    from engine.services import Services
    from storage.corpus_store import CorpusStore

# search-eval's dataset names -> the bundled datasets with gold supporting titles.
DATASETS = {"hotpotqa-autoact": "hotpotqa-autoact", "hotpotqa": "hotpotqa-autoact", "2wiki": "2wiki", "nq": "nq"}
RETRIEVERS: tuple[str, ...] = get_args(Retriever)
RERANKERS: tuple[str, ...] = get_args(RerankerName)


class RetrievalSetupError(ValueError):
    """The configuration asked for cannot be measured; the message says what to do."""


def dataset_name(name: str) -> str:
    """The bundled dataset `name` stands for (`hotpotqa` is HotpotQA AutoAct's 300 items)."""
    if name not in DATASETS:
        raise RetrievalSetupError(f"unknown dataset {name!r}: choose one of {', '.join(DATASETS)}")
    return DATASETS[name]


class RerankedSearcher:
    """The first stage's top `candidates` hits, ordered by `reranker`: what a method that reranks
    (the research agent's top K → reranker) reads, as one `Searcher`. `search(query, k)` returns at
    most `candidates` hits, so a small K shows in recall@20 as it does in a run."""

    def __init__(self, first_stage: Searcher, reranker: Reranker, candidates: int) -> None:
        if candidates < 1:
            raise ValueError(f"candidates must be at least 1, not {candidates}")
        self.first_stage = first_stage
        self.reranker = reranker
        self.pool = candidates  # the first stage's top K that are reranked

    @property
    def description(self) -> str:
        return f"{self.first_stage.description}; top {self.pool} reranked by {self.reranker.description}"

    def search(self, query: str, k: int = 5) -> list[Hit]:
        return self.reranker.rerank(query, self.first_stage.search(query, self.pool), k)


def check_names(retriever: str, reranker: str) -> RetrievalSettings:
    if retriever not in RETRIEVERS:
        raise RetrievalSetupError(f"unknown retriever {retriever!r}: choose one of {', '.join(RETRIEVERS)}")
    if reranker not in RERANKERS:
        raise RetrievalSetupError(f"unknown reranker {reranker!r}: choose one of {', '.join(RERANKERS)}")
    # cast: both names were just checked against the Literals' own values.
    return RetrievalSettings(retriever=cast(Retriever, retriever), reranker=cast(RerankerName, reranker))


def reranked(first_stage: Searcher, reranker: Reranker | None, candidates: int) -> Searcher:
    """`first_stage` itself without a reranker, else its top `candidates` reranked."""
    return first_stage if reranker is None else RerankedSearcher(first_stage, reranker, candidates)


def eval_settings(settings: Settings, retriever: str, reranker: str) -> Settings:
    """`settings` with the retriever and reranker to measure in place of the configured ones."""
    return settings.model_copy(update={"retrieval": check_names(retriever, reranker)})


def build_eval_searcher(
    services: Services, *, candidates: int, progress: Callable[[str, float], None] | None = None
) -> Searcher:
    """The searcher to measure, for `services` built with `eval_settings`: the first stage every
    method searches the local corpus with (`Services.searcher("local")`, the settings' retriever),
    its top `candidates` reranked by the settings' reranker unless `none`. What the measurement
    needs is checked first, so a configuration that cannot work says so before the corpus opens."""
    retrieval = services.settings.retrieval
    if retrieval.retriever != "bm25":
        _corpus_model(services)
    chosen = _reranker(services, retrieval.reranker)
    first_stage = services.searcher("local", progress)
    if retrieval.retriever != "bm25":
        require_vectors(services.corpus().store)
    return reranked(first_stage, chosen, candidates)


def _loaded(embedder: Embedder) -> None:
    """Load the model now: one that cannot load is said here, not half-way through a measurement."""
    from engine.search.protocol import SearchError

    try:
        embedder.embed(["a first text loads the model"])
    except SearchError as exc:
        raise RetrievalSetupError(exc.user_message) from exc


def _corpus_model(services: Services) -> None:
    """Dense search needs the built-in model, whose vectors the corpus holds (Services' rule); the
    methods' own embedder when it is that model, so its weights are loaded once."""
    from engine.search.builtin_embedder import BuiltinEmbedder, builtin_embedder
    from engine.search.embedding_model import EmbeddingModelUnavailable

    if not services.settings.builtin_embeddings:
        raise RetrievalSetupError(
            "THOUGHTMAP_BUILTIN_EMBEDDINGS=0 turns the built-in embedding model off, and "
            "dense and hybrid retrieval search the corpus by its vectors: unset it"
        )
    try:
        embedder = (
            services.embedder
            if isinstance(services.embedder, BuiltinEmbedder)
            else builtin_embedder(services.settings.local.models_dir)
        )
    except EmbeddingModelUnavailable as exc:
        raise RetrievalSetupError(exc.user_message) from exc
    _loaded(embedder)


def _embedder(services: Services) -> Embedder:
    """The embedder the methods use (`Services.embedder`: an endpoint's, else the built-in one),
    loaded; said when there is none, where a run would rank by BM25 instead."""
    from engine.search.embedders import build_embedder
    from engine.search.embedding_model import EmbeddingModelUnavailable

    settings = services.settings
    embedder = services.embedder
    if embedder is None and settings.embeddings is None and not settings.builtin_embeddings:
        raise RetrievalSetupError(
            "THOUGHTMAP_BUILTIN_EMBEDDINGS=0 turns the built-in embedding model off, and the "
            "builtin reranker needs it (or THOUGHTMAP_EMBEDDINGS_URL): unset it"
        )
    if embedder is None:
        try:  # built again for its error, which says what is wrong and the fix
            # cast: given a models_dir, build_embedder returns an embedder or raises, never None.
            embedder = cast("Embedder", build_embedder(settings.embeddings, settings.local.models_dir))
        except EmbeddingModelUnavailable as exc:
            raise RetrievalSetupError(exc.user_message) from exc
    _loaded(embedder)
    return embedder


def require_vectors(store: CorpusStore) -> None:
    """Dense search over passages half of which have no vector would measure the half."""
    from engine.search.vectors import SHIPPED_MODEL, VectorIndex

    missing = VectorIndex(store, SHIPPED_MODEL).missing()
    if missing:
        raise RetrievalSetupError(
            f"{missing:,} passages of the corpus have no {SHIPPED_MODEL} vector, so dense search would "
            "not see them: the bundled corpus's come with it (data/vectors, imported when its index is built), "
            "your own files' are made when they are ingested (ingest them again to embed them)"
        )


def _reranker(services: Services, name: str) -> Reranker | None:
    """The reranker `name` means here, as the research agent makes it; None for `none`."""
    if name == "none":
        return None
    if name == "builtin":
        from engine.search.retrieval import builtin_reranker

        return builtin_reranker(_embedder(services))
    if name == "endpoint":
        # The one Services made from THOUGHTMAP_RERANK_URL, as every run's context gets it.
        endpoint = services.runner.services.get(RerankEndpoint)
        if endpoint is None:
            raise RetrievalSetupError(
                "the endpoint reranker needs THOUGHTMAP_RERANK_URL (an OpenAI-compatible "
                "/rerank endpoint); choose another --reranker or set it"
            )
        return endpoint
    kind = services.resolve_llm(services.settings.llm_choice, services.settings.llm.api_key)
    if kind == "fake":
        raise RetrievalSetupError(
            "the llm reranker needs an LLM to judge: set OPENAI_BASE_URL or OPENAI_API_KEY "
            "(with THOUGHTMAP_LLM=openai), or THOUGHTMAP_LLM=local for the built-in model"
        )
    from engine.search.rerankers import LLMReranker

    return LLMReranker(services.llm(kind))
