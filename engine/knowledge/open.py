"""Which stored graph a knowledge base is over, and opening it: a run's own graph (question scope)
or a collection's graph built by `thoughtmap kg build` (collection scope)."""

from __future__ import annotations

from collections.abc import Callable

from engine.knowledge.browse import GraphBrowser
from engine.knowledge.chunks import DEFAULT_CHUNK_TOKENS
from engine.knowledge.extract import EXTRACT_MAX_TOKENS, Asker, Parallel
from engine.knowledge.index import OnError
from engine.knowledge.stored import GraphViews, KnowledgeError, StoredKnowledgeBase
from engine.knowledge.units import KnowledgeScope
from engine.search.embeddings import Embedder
from storage.knowledge import KnowledgeStore
from storage.models import stored_id


class KnowledgeNotBuilt(KnowledgeError):
    """A collection's graph has not been built (or nothing of it was extracted yet)."""


def question_graph_key(run_id: str, chunk_tokens: int) -> str:
    return f"run:{run_id}:{chunk_tokens}"


def collection_graph_key(collection: str, chunk_tokens: int) -> str:
    return f"collection:{collection}:{chunk_tokens}"


class KnowledgeLayer:
    """The knowledge graphs of the process (Services owns one; the runner hands it to every run):
    their store, and the views runs share while a graph does not change."""

    def __init__(self, store: KnowledgeStore) -> None:
        self.store = store
        self.views = GraphViews(store)

    def open(
        self,
        *,
        run_id: str,
        scope: KnowledgeScope,
        collection: str | None,
        ask: Asker,
        parallel: Parallel,
        chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
        checkpoint: Callable[[], None] | None = None,
        extract_max_tokens: int = EXTRACT_MAX_TOKENS,
        embedder: Embedder | None = None,
        on_embedding_error: OnError | None = None,
    ) -> StoredKnowledgeBase:
        """The run's own graph (question scope), or a built collection graph, read only. `checkpoint`
        (the run's) is called before each chunk is extracted; `extract_max_tokens` caps each extraction's
        answer (a small model on a CPU writes slowly: a quick profile lowers it). `embedder` (the
        run's) matches keywords to keys by meaning; `on_embedding_error` is told when it fails and
        BM25 matches instead (`index.py`)."""
        store = self.store
        if chunk_tokens < 1:
            raise KnowledgeError("chunk_tokens must be at least 1")
        if scope == "question":
            graph = store.open_graph(
                question_graph_key(run_id, chunk_tokens), scope="question", run_id=run_id, chunk_tokens=chunk_tokens
            )
            return StoredKnowledgeBase(
                store,
                graph,
                ask=ask,
                parallel=parallel,
                writable=True,
                views=self.views,
                checkpoint=checkpoint,
                extract_max_tokens=extract_max_tokens,
                embedder=embedder,
                on_embedding_error=on_embedding_error,
            )
        if scope != "collection":
            raise KnowledgeError(f"unknown knowledge scope '{scope}' (question or collection)")
        if not collection:
            raise KnowledgeError("the collection scope needs a collection name (e.g. hotpotqa, or uploads)")
        built = store.find_graph(collection_graph_key(collection, chunk_tokens))
        counts = store.counts(stored_id(built)) if built is not None else None
        size = "" if chunk_tokens == DEFAULT_CHUNK_TOKENS else f" --chunk-tokens {chunk_tokens}"
        if counts is not None and not counts.chunks_done and counts.chunks_failed:
            raise KnowledgeNotBuilt(
                f"the knowledge graph of collection '{collection}' has nothing in it: extraction failed on all "
                f"{counts.chunks_failed} chunks its build tried (`thoughtmap kg status`). Build it again with a "
                f"more capable model (`thoughtmap kg build --collection {collection}{size} --llm openai`), or use "
                "the question scope"
            )
        if built is None or counts is None or not counts.chunks_done:
            raise KnowledgeNotBuilt(
                f"the knowledge graph of collection '{collection}' (chunks of {chunk_tokens} tokens) is not built "
                f"yet: build it once with `thoughtmap kg build --collection {collection}{size}`, or use the "
                "question scope"
            )
        return StoredKnowledgeBase(
            store,
            built,
            ask=ask,
            parallel=parallel,
            writable=False,
            views=self.views,
            embedder=embedder,
            on_embedding_error=on_embedding_error,
        )

    def browse(self, key: str) -> GraphBrowser | None:
        """The stored graph named `key`, to read around one entity at a time (no LLM, read only);
        None when no graph has that key (never built, or deleted with its run)."""
        graph = self.store.find_graph(key) if key else None
        return GraphBrowser(self.store, graph) if graph is not None else None
