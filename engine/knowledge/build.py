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
from pathlib import Path
from typing import Any

from engine.knowledge.chunks import DEFAULT_CHUNK_TOKENS, corpus_chunks
from engine.knowledge.extract import ChunkExtractor, Parallel
from engine.knowledge.open import collection_graph_key
from engine.knowledge.stored import KnowledgeError
from engine.knowledge.units import BuildProgress
from engine.llm.counted import EvalLLM
from engine.llm.protocol import BudgetExceeded, LLMError
from engine.redact import redact_secrets
from engine.search.uploads import is_personal_collection
from storage.corpus_store import CorpusStore
from storage.knowledge import KnowledgeStore
from storage.models import KnowledgeGraph, KnowledgeGraphStatus, utcnow

BATCH_SIZE = 16  # chunks per batch: progress, usage and the stop flag are seen between batches
# Whole batches in a row from which nothing could be extracted: the model cannot do this (it fails
# the build then, instead of paying for every chunk of the collection to the same end).
FAILED_BATCHES_TO_GIVE_UP = 2
# A build on another machine is taken for dead when its graph was not updated for this long.
STALE_AFTER = timedelta(minutes=10)


@dataclass(frozen=True)
class BuildOutcome:
    graph: KnowledgeGraph
    progress: BuildProgress
    status: str  # done, stopped or failed
    reason: str = ""


def process_started(pid: int) -> str:
    """When process `pid` started (clock ticks since boot, from Linux's /proc), "" where unknown: it
    tells the builder apart from a later process given the same pid (a container restarted)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return ""
    fields = stat.rsplit(")", 1)[-1].split()  # after the name, which may hold spaces and parentheses
    return fields[19] if len(fields) > 19 else ""  # field 22 of proc(5)


def new_owner() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{uuid.uuid4().hex[:8]}:{process_started(pid)}"


def owner_alive(graph: KnowledgeGraph) -> bool:
    """Whether the process named in the graph's `owner` may still be building it."""
    host, _, rest = graph.owner.partition(":")
    parts = rest.split(":")
    if host != socket.gethostname():
        updated = graph.updated_at if graph.updated_at.tzinfo else graph.updated_at.replace(tzinfo=utcnow().tzinfo)
        return utcnow() - updated < STALE_AFTER
    try:
        pid = int(parts[0])
        os.kill(pid, 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    started = parts[2] if len(parts) > 2 else ""
    # The pid is alive, but a process that started later than the builder is not the builder.
    return not started or process_started(pid) in ("", started)


def shown_status(graph: KnowledgeGraph) -> str:
    """The status to show: a build whose process died is `interrupted` (resumable)."""
    if graph.status in (KnowledgeGraphStatus.BUILDING, KnowledgeGraphStatus.STOPPING) and not owner_alive(graph):
        return "interrupted"
    return graph.status


class CollectionBuilder:
    def __init__(
        self,
        store: KnowledgeStore,
        corpus: CorpusStore,
        llm: EvalLLM,
        parallel: Parallel,
        *,
        batch_size: int = BATCH_SIZE,
    ) -> None:
        self.store = store
        self.corpus = corpus
        self.llm = llm
        self.parallel = parallel
        self.batch_size = batch_size
        self.owner = new_owner()

    def graph(self, collection: str, chunk_tokens: int = DEFAULT_CHUNK_TOKENS) -> KnowledgeGraph | None:
        return self.store.find_graph(collection_graph_key(collection, chunk_tokens))

    def build(
        self,
        collection: str,
        *,
        chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
        limit: int | None = None,
        stop: threading.Event | None = None,
        on_progress: Callable[[BuildProgress], None] | None = None,
        llm_info: dict[str, Any] | None = None,
        max_cost: float | None = None,
        max_tokens: int | None = None,
    ) -> BuildOutcome:
        if is_personal_collection(collection):
            raise KnowledgeError(
                f"'{collection}' is one person's uploads: a knowledge graph of it would show them to "
                "everyone's runs, so none is built"
            )
        if collection not in self.corpus.collections():
            known = ", ".join(self.corpus.collections()) or "none yet"
            raise KnowledgeError(f"the corpus has no collection '{collection}' (it has: {known})")
        graph = self.store.open_graph(
            collection_graph_key(collection, chunk_tokens),
            scope="collection",
            collection=collection,
            chunk_tokens=chunk_tokens,
        )
        gid: int = graph.id  # type: ignore[assignment]
        if self.store.claim_graph(gid, self.owner, owner_alive) is None:
            raise KnowledgeError(
                f"the graph of '{collection}' is being built by another process "
                f"({graph.owner.split(':')[1] if ':' in graph.owner else graph.owner}); "
                f"stop it with `thoughtmap kg stop --collection {collection}`"
            )
        if llm_info:
            self.store.set_llm_info(gid, llm_info)
        self.store.add_chunks(gid, corpus_chunks(self.corpus.iter_collection_chunks(collection, limit), chunk_tokens))
        self.store.retry_failed(gid)
        extractor = ChunkExtractor(self.store, gid, self.llm.ask, self.parallel)
        after = 0
        fruitless = 0  # batches in a row that extracted nothing
        # The budget is this build's: a build stopped by it continues when run again with the same flag.
        spent = self.store.get_graph(gid)
        try:
            while True:
                reason = self._why_stop(gid, stop, max_cost, max_tokens, spent)
                if reason:
                    return self._end(gid, KnowledgeGraphStatus.STOPPED, reason)
                batch = self.store.pending_chunks(gid, self.batch_size, after_id=after)
                if not batch:
                    break
                after = batch[-1].id or after
                before = self.llm.usage.as_dict()
                done_before = self.progress(gid).chunks_done
                try:
                    extractor.extract(batch)
                finally:
                    self._account(gid, before)
                progress = self.progress(gid)
                if on_progress is not None:
                    on_progress(progress)
                fruitless = fruitless + 1 if progress.chunks_done == done_before else 0
                if fruitless >= FAILED_BATCHES_TO_GIVE_UP and progress.chunks_done == 0:
                    return self._end(gid, KnowledgeGraphStatus.FAILED, self._nothing_extracted(gid, progress))
        except BudgetExceeded as exc:
            return self._end(gid, KnowledgeGraphStatus.STOPPED, exc.user_message)
        except LLMError as exc:
            self._end(gid, KnowledgeGraphStatus.FAILED, redact_secrets(exc.user_message))
            raise
        except BaseException:  # Ctrl-C or a bug: stop cleanly; the next build continues
            self._end(gid, KnowledgeGraphStatus.STOPPED, "interrupted")
            raise
        progress = self.progress(gid)
        if progress.chunks_done == 0 and progress.failed_chunks:
            return self._end(gid, KnowledgeGraphStatus.FAILED, self._nothing_extracted(gid, progress))
        return self._end(gid, KnowledgeGraphStatus.DONE, "")

    def _nothing_extracted(self, graph_id: int, progress: BuildProgress) -> str:
        first = self.store.first_chunk_error(graph_id)
        return (
            f"the model's answers could not be used for any of the {progress.failed_chunks} chunks tried"
            + (f" (the first: {first[:300]})" if first else "")
            + "; use a more capable model (THOUGHTMAP_MODEL_KNOWLEDGE, --llm openai), then build again"
        )

    def progress(self, graph_id: int) -> BuildProgress:
        counts = self.store.counts(graph_id)
        return BuildProgress(
            chunks_done=counts.chunks_done,
            chunks_total=counts.chunks_total,
            entities=counts.entities,
            relations=counts.relations,
            failed_chunks=counts.chunks_failed,
        )

    def _why_stop(
        self,
        graph_id: int,
        stop: threading.Event | None,
        max_cost: float | None,
        max_tokens: int | None,
        spent: KnowledgeGraph,
    ) -> str:
        """Why the build stops before its next batch ("" to go on). `spent`: the graph as it stood when
        this build began (the budget counts what this build spends)."""
        if stop is not None and stop.is_set():
            return "stopped by the user"
        graph = self.store.get_graph(graph_id)
        if graph.status == KnowledgeGraphStatus.STOPPING:
            return "stopped by the user (kg stop)"
        cost = graph.cost - spent.cost
        tokens = graph.prompt_tokens + graph.completion_tokens - spent.prompt_tokens - spent.completion_tokens
        if max_cost is not None and cost >= max_cost:
            return f"this build's cost budget reached: ${cost:.4f} of ${max_cost:.4f}"
        if max_tokens is not None and tokens >= max_tokens:
            return f"this build's token budget reached: {tokens} of {max_tokens}"
        return ""

    def _account(self, graph_id: int, before: dict[str, Any]) -> None:
        after = self.llm.usage.as_dict()
        self.store.add_usage(graph_id, **{key: after[key] - before[key] for key in after})

    def _end(self, graph_id: int, status: str, reason: str) -> BuildOutcome:
        self.store.set_status(graph_id, status, error=reason)
        return BuildOutcome(
            graph=self.store.get_graph(graph_id), progress=self.progress(graph_id), status=status, reason=reason
        )
