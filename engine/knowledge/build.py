"""Building a collection's knowledge graph once (`thoughtmap kg build`), as a resumable job.

The collection's corpus chunks are registered in the graph (all of them, or the first `limit`), then
extracted in batches, each batch's chunks concurrently on the process-wide pool; every chunk is
merged and marked done as soon as its answer arrives. So a build stopped (Ctrl-C, `kg stop`, the
budget) or killed at any moment continues, the next time, with the chunks not done yet: a finished
chunk is never extracted again. Chunks that failed are tried once more by each new build.

Building is LLM work outside any run: its calls are counted by `EvalLLM` (as judge calls are) and
added to the graph's row after every batch (calls, tokens, cost), so `kg status` says what it cost.
A budget (`max_cost`, `max_tokens`) is checked between batches: a build may pass it by one batch.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from engine.evaluate.accounting import EvalLLM
from engine.knowledge.chunks import DEFAULT_CHUNK_TOKENS, corpus_chunks
from engine.knowledge.extract import ChunkExtractor, Parallel
from engine.knowledge.open import collection_graph_key
from engine.knowledge.stored import KnowledgeError
from engine.knowledge.units import BuildProgress
from engine.llm.protocol import BudgetExceeded, LLMError
from engine.redact import redact_secrets
from storage.corpus_store import CorpusStore
from storage.knowledge import KnowledgeStore
from storage.models import KnowledgeGraph, KnowledgeGraphStatus, utcnow

BATCH_SIZE = 16  # chunks per batch: progress, usage and the stop flag are seen between batches
# A build on another machine is taken for dead when its graph was not updated for this long.
STALE_AFTER = timedelta(minutes=10)


@dataclass(frozen=True)
class BuildOutcome:
    graph: KnowledgeGraph
    progress: BuildProgress
    status: str  # done, stopped or failed
    reason: str = ""


def new_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def owner_alive(graph: KnowledgeGraph) -> bool:
    """Whether the process named in the graph's `owner` may still be building it."""
    host, _, rest = graph.owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname():
        updated = graph.updated_at if graph.updated_at.tzinfo else graph.updated_at.replace(tzinfo=utcnow().tzinfo)
        return utcnow() - updated < STALE_AFTER
    try:
        os.kill(int(pid_text), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def shown_status(graph: KnowledgeGraph) -> str:
    """The status to show: a build whose process died is `interrupted` (resumable)."""
    if graph.status in (KnowledgeGraphStatus.BUILDING, KnowledgeGraphStatus.STOPPING) and not owner_alive(graph):
        return "interrupted"
    return graph.status


class CollectionBuilder:
    def __init__(self, store: KnowledgeStore, corpus: CorpusStore, llm: EvalLLM, parallel: Parallel, *,
                 batch_size: int = BATCH_SIZE) -> None:
        self.store = store
        self.corpus = corpus
        self.llm = llm
        self.parallel = parallel
        self.batch_size = batch_size
        self.owner = new_owner()

    def graph(self, collection: str, chunk_tokens: int = DEFAULT_CHUNK_TOKENS) -> KnowledgeGraph | None:
        return self.store.find_graph(collection_graph_key(collection, chunk_tokens))

    def build(self, collection: str, *, chunk_tokens: int = DEFAULT_CHUNK_TOKENS, limit: int | None = None,
              stop: threading.Event | None = None, on_progress: Callable[[BuildProgress], None] | None = None,
              llm_info: dict | None = None, max_cost: float | None = None,
              max_tokens: int | None = None) -> BuildOutcome:
        if collection not in self.corpus.collections():
            known = ", ".join(self.corpus.collections()) or "none yet"
            raise KnowledgeError(f"the corpus has no collection '{collection}' (it has: {known})")
        graph = self.store.open_graph(collection_graph_key(collection, chunk_tokens), scope="collection",
                                      collection=collection, chunk_tokens=chunk_tokens)
        gid: int = graph.id  # type: ignore[assignment]
        if self.store.claim_graph(gid, self.owner, owner_alive) is None:
            raise KnowledgeError(f"the graph of '{collection}' is being built by another process "
                                 f"({graph.owner.split(':')[1] if ':' in graph.owner else graph.owner}); "
                                 f"stop it with `thoughtmap kg stop --collection {collection}`")
        if llm_info:
            self.store.set_llm_info(gid, llm_info)
        self.store.add_chunks(gid, corpus_chunks(self.corpus.iter_collection_chunks(collection, limit), chunk_tokens))
        self.store.retry_failed(gid)
        extractor = ChunkExtractor(self.store, gid, self.llm.ask, self.parallel)
        after = 0
        try:
            while True:
                reason = self._why_stop(gid, stop, max_cost, max_tokens)
                if reason:
                    return self._end(gid, KnowledgeGraphStatus.STOPPED, reason)
                batch = self.store.pending_chunks(gid, self.batch_size, after_id=after)
                if not batch:
                    break
                after = batch[-1].id or after
                before = self.llm.usage.as_dict()
                try:
                    extractor.extract(batch)
                finally:
                    self._account(gid, before)
                if on_progress is not None:
                    on_progress(self.progress(gid))
        except BudgetExceeded as exc:
            return self._end(gid, KnowledgeGraphStatus.STOPPED, exc.user_message)
        except LLMError as exc:
            self._end(gid, KnowledgeGraphStatus.FAILED, redact_secrets(exc.user_message))
            raise
        except BaseException:  # Ctrl-C or a bug: stop cleanly; the next build continues
            self._end(gid, KnowledgeGraphStatus.STOPPED, "interrupted")
            raise
        return self._end(gid, KnowledgeGraphStatus.DONE, "")

    def progress(self, graph_id: int) -> BuildProgress:
        counts = self.store.counts(graph_id)
        return BuildProgress(chunks_done=counts.chunks_done, chunks_total=counts.chunks_total,
                             entities=counts.entities, relations=counts.relations, failed_chunks=counts.chunks_failed)

    def _why_stop(self, graph_id: int, stop: threading.Event | None, max_cost: float | None,
                  max_tokens: int | None) -> str:
        if stop is not None and stop.is_set():
            return "stopped by the user"
        graph = self.store.get_graph(graph_id)
        if graph.status == KnowledgeGraphStatus.STOPPING:
            return "stopped by the user (kg stop)"
        if max_cost is not None and graph.cost >= max_cost:
            return f"cost budget reached: ${graph.cost:.4f} of ${max_cost:.4f}"
        if max_tokens is not None and graph.prompt_tokens + graph.completion_tokens >= max_tokens:
            return f"token budget reached: {graph.prompt_tokens + graph.completion_tokens} of {max_tokens}"
        return ""

    def _account(self, graph_id: int, before: dict) -> None:
        after = self.llm.usage.as_dict()
        self.store.add_usage(graph_id, **{key: after[key] - before[key] for key in after})

    def _end(self, graph_id: int, status: str, reason: str) -> BuildOutcome:
        self.store.set_status(graph_id, status, error=reason)
        return BuildOutcome(graph=self.store.get_graph(graph_id), progress=self.progress(graph_id), status=status,
                            reason=reason)
