"""What `thoughtmap search-eval` and benchmarks/bench_retrieval.py measure: a dataset by name, and a
retriever with a reranker by name, built as the methods build them (engine/search/retrieval.py).

A configuration that cannot be measured as asked (an unknown dataset, the `endpoint` reranker with no
THOUGHTMAP_RERANK_URL, `llm` with no LLM to ask, the embedding model missing) raises
`RetrievalSetupError` with one line saying what to do. It never falls back the way a run does (a
missing model means BM25 there): a measurement of BM25 labelled "dense" would be wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import get_args

from engine.config import RerankerName, Retriever, RetrievalSettings
from engine.search.protocol import Hit, Searcher
from engine.search.rerank import Reranker

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
        self.candidates = candidates

    @property
    def description(self) -> str:
        return f"{self.first_stage.description}; top {self.candidates} reranked by {self.reranker.description}"

    def search(self, query: str, k: int = 5) -> list[Hit]:
        return self.reranker.rerank(query, self.first_stage.search(query, self.candidates), k)


def check_names(retriever: str, reranker: str) -> RetrievalSettings:
    if retriever not in RETRIEVERS:
        raise RetrievalSetupError(f"unknown retriever {retriever!r}: choose one of {', '.join(RETRIEVERS)}")
    if reranker not in RERANKERS:
        raise RetrievalSetupError(f"unknown reranker {reranker!r}: choose one of {', '.join(RERANKERS)}")
    return RetrievalSettings(retriever=retriever, reranker=reranker)


def reranked(first_stage: Searcher, reranker: Reranker | None, candidates: int) -> Searcher:
    """`first_stage` itself without a reranker, else its top `candidates` reranked."""
    return first_stage if reranker is None else RerankedSearcher(first_stage, reranker, candidates)


def build_eval_searcher(services, retriever: str, reranker: str, *, candidates: int,
                        progress: Callable[[str, float], None] | None = None) -> Searcher:
    """The searcher to measure: `retriever`'s first stage over the local corpus (bundled data and the
    user's files, as runs search it), its top `candidates` reranked by `reranker` unless `none`.
    The reranker is checked first: a configuration that cannot work says so before the corpus opens."""
    from engine.search.bundled import open_default_corpus

    settings = check_names(retriever, reranker)
    embedder = _embedder(services) if retriever != "bm25" or reranker == "builtin" else None
    chosen = _reranker(services, reranker, embedder)
    embedding = _corpus_embedding(services, embedder) if retriever != "bm25" else None
    corpus = open_default_corpus(services.settings, progress, embedding=embedding)
    if retriever == "bm25":
        return reranked(corpus, chosen, candidates)
    require_vectors(corpus)
    from engine.search.retrieval import build_local_retrieval

    first_stage = build_local_retrieval(corpus, settings, embedder, vectors=corpus.vectors)
    return reranked(first_stage, chosen, candidates)


def _embedder(services):
    """The embedder runs use (`Services.embedder`), loaded now: a model that is off, missing or
    cannot load is said here, where a run would rank by BM25 instead."""
    from engine.search.embeddings import build_embedder
    from engine.search.protocol import SearchError

    settings = services.settings
    try:
        embedder = services.embedder
        if embedder is None and settings.embeddings is None and not settings.builtin_embeddings:
            raise RetrievalSetupError("THOUGHTMAP_BUILTIN_EMBEDDINGS=0 turns the built-in embedding model off, "
                                      "and this configuration needs one: unset it or set THOUGHTMAP_EMBEDDINGS_URL")
        if embedder is None:  # built again for its error, which says what is wrong and the fix
            embedder = build_embedder(settings.embeddings, settings.local.models_dir)
        embedder.embed(["a first text loads the model"])
    except SearchError as exc:
        raise RetrievalSetupError(exc.user_message) from exc
    return embedder


def _corpus_embedding(services, embedder):
    """The corpus's vectors are kept per model: the endpoint's model, else the built-in one."""
    import numpy as np

    from engine.search.embedding_model import EMBEDDING_MODEL
    from engine.search.vectors import CorpusEmbedding

    endpoint = services.settings.embeddings
    return CorpusEmbedding(model=endpoint.model if endpoint is not None else EMBEDDING_MODEL.name,
                           encode=lambda texts: np.asarray(embedder.embed(list(texts)), dtype=np.float32))


def require_vectors(corpus) -> None:
    """Dense search over passages half of which have no vector would measure the half."""
    missing = corpus.vectors.missing()
    if missing:
        raise RetrievalSetupError(
            f"{missing:,} passages of the corpus have no {corpus.vectors.model} vector, so dense search would "
            "not see them: the bundled corpus's come with it (data/vectors, imported when its index is built), "
            "your own files' are made when they are ingested (ingest them again to embed them)")


def _reranker(services, name: str, embedder) -> Reranker | None:
    """The reranker `name` means here, or None for `none`."""
    if name == "none":
        return None
    if name == "builtin":
        from engine.search.retrieval import builtin_reranker

        return builtin_reranker(embedder)
    if name == "endpoint":
        rerank = services.settings.rerank
        if not rerank.url:
            raise RetrievalSetupError("the endpoint reranker needs THOUGHTMAP_RERANK_URL (an OpenAI-compatible "
                                      "/rerank endpoint); choose another --reranker or set it")
        from engine.search.rerankers import EndpointReranker

        return EndpointReranker(rerank.url, rerank.model, api_key=rerank.api_key,
                                timeout_s=services.settings.llm.timeout_s)
    kind = services.resolve_llm(services.settings.llm_choice, services.settings.llm.api_key)
    if kind == "fake":
        raise RetrievalSetupError("the llm reranker needs an LLM to judge: set OPENAI_BASE_URL or OPENAI_API_KEY "
                                  "(with THOUGHTMAP_LLM=openai), or THOUGHTMAP_LLM=local for the built-in model")
    from engine.search.rerankers import LLMReranker

    return LLMReranker(services.llm(kind))
