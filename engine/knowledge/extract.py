"""Extraction of chunks (MTQA Step 1): one LLM call per chunk, chunks concurrently through the
injected `parallel` (the run's `ctx.parallel`, or the builder's on the process-wide pool), each
chunk's result merged into the graph before its call returns, so whatever finished before a stop, a
crash or a kill is kept and never asked again. Results that arrive while another is being merged
wait, and are merged together in the next transaction (group commit: chunks finish in bursts).

A chunk whose answer stays unusable after the structured re-asks (`StructuredOutputError`), or whose
request alone failed (timed out, refused as too long, a server error after the adapter's retries), is
recorded as failed and tried again later; the others go on. What concerns every chunk (the budget, the
endpoint unreachable or refusing our key, a stop), or a batch in which every chunk failed on the
endpoint, ends the extraction after the chunks in flight have ended."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from engine.knowledge.chunks import WORDS_PER_TOKEN
from engine.knowledge.merge import merge_entity, merge_relation, normalise_extraction
from engine.knowledge.prompts import ENTITY_TYPES, EXTRACT
from engine.knowledge.schemas import Extraction
from engine.llm.protocol import LLMError, LLMRequestError, LLMServerError, LLMTimeoutError, StructuredOutputError
from engine.prompting import PromptMessages
from engine.redact import redact_secrets
from storage.knowledge import ChunkExtraction, EntityInput, KnowledgeStore, RelationInput
from storage.models import KnowledgeChunk, stored_id

T = TypeVar("T", bound=BaseModel)

# Errors of one chunk's request: the chunk fails, the others go on.
CHUNK_ERRORS = (StructuredOutputError, LLMTimeoutError, LLMRequestError, LLMServerError)

PURPOSE = "knowledge"  # THOUGHTMAP_MODEL_KNOWLEDGE picks the extraction model, else the default one
# An extraction lists up to 40 entities and 40 relations with descriptions: room for that, no more.
EXTRACT_MAX_TOKENS = 2500
# A chunk's extraction gets room in proportion to the chunk: a passage's entities and relations,
# each described in a sentence, take about twice the passage's own tokens. Without this a 150-token
# HotpotQA paragraph was given 2,500 tokens, and the built-in 0.5B model used them all on repeats
# (110 s for one paragraph, 4 entities kept).
EXTRACT_BASE_TOKENS = 300
EXTRACT_TOKENS_PER_CHUNK_TOKEN = 2.0


def extraction_budget(chunk: KnowledgeChunk, cap: int = EXTRACT_MAX_TOKENS) -> int:
    """Most tokens one chunk's extraction may take: in proportion to the chunk, never above `cap`."""
    chunk_tokens = len((chunk.text or "").split()) / WORDS_PER_TOKEN
    return max(1, min(cap, round(EXTRACT_BASE_TOKENS + EXTRACT_TOKENS_PER_CHUNK_TOKEN * chunk_tokens)))


class Asker(Protocol):
    """A structured LLM call (`RunLLM.ask` bound to a node, or `EvalLLM.ask` for a collection build)."""

    def __call__(
        self, messages: Any, output_type: type[T], *, purpose: str = ..., max_tokens: int | None = ...
    ) -> T: ...


Parallel = Callable[[Sequence[Callable[[], Any]]], list[Any]]


@dataclass
class _Waiting:
    """A chunk's extraction waiting to be merged, and how its merge went (set under the merge lock)."""

    extraction: ChunkExtraction
    done: bool = False
    error: BaseException | None = None


@dataclass(frozen=True)
class ExtractionOutcome:
    done: int = 0
    failed: int = 0


def extraction_prompt(chunk: KnowledgeChunk) -> PromptMessages:
    return EXTRACT.render(entity_types=", ".join(ENTITY_TYPES), title=chunk.title or "(untitled)", text=chunk.text)


class ChunkExtractor:
    """Extracts chunks of one graph and merges each result into it."""

    def __init__(
        self,
        store: KnowledgeStore,
        graph_id: int,
        ask: Asker,
        parallel: Parallel,
        checkpoint: Callable[[], None] | None = None,
        max_tokens: int = EXTRACT_MAX_TOKENS,
        on_extracted: Callable[[Sequence[EntityInput], Sequence[RelationInput]], None] | None = None,
        on_merged: Callable[[], None] | None = None,
    ) -> None:
        self._store = store
        self._graph_id = graph_id
        self._ask = ask
        self._parallel = parallel
        # The run's checkpoint, before each chunk: a pause or stop takes effect between chunks.
        self._checkpoint = checkpoint
        self._max_tokens = max_tokens
        # Called by the thread that asked a chunk: with its entities and relations as its answer
        # comes, then once it is merged, while other chunks are still being extracted (a run's
        # graph queues their keys, then embeds what is queued: `StoredKnowledgeBase`).
        self._on_extracted = on_extracted
        self._on_merged = on_merged
        # One merge at a time: a merge reads the stored entities and writes them back.
        self._merge_lock = threading.Lock()
        self._waiting: list[_Waiting] = []  # guarded by `_waiting_lock`
        self._waiting_lock = threading.Lock()

    def extract(self, chunks: Sequence[KnowledgeChunk]) -> ExtractionOutcome:
        """Extract `chunks` concurrently; how many were merged and how many failed."""
        results = self._parallel([partial(self._extract_one, chunk) for chunk in chunks])
        endpoint_errors = [r for r in results if isinstance(r, LLMError) and not isinstance(r, StructuredOutputError)]
        if endpoint_errors and len(endpoint_errors) == len(results):
            raise endpoint_errors[0]  # the endpoint failed them all: not a chunk's fault
        done = sum(1 for r in results if r is True)
        return ExtractionOutcome(done=done, failed=len(results) - done)

    def _extract_one(self, chunk: KnowledgeChunk) -> bool | LLMError:
        """True when merged (or merged by another extraction at the same time); the error when the
        chunk failed."""
        chunk_id = stored_id(chunk)  # only stored chunks are extracted
        if self._checkpoint is not None:
            self._checkpoint()
        try:
            extraction = self._ask(
                extraction_prompt(chunk),
                Extraction,
                purpose=PURPOSE,
                max_tokens=extraction_budget(chunk, self._max_tokens),
            )
        except CHUNK_ERRORS as exc:
            self._store.mark_chunk_failed(chunk_id, redact_secrets(str(exc)))
            return exc
        entities, relations = normalise_extraction(extraction)
        if self._on_extracted is not None:
            self._on_extracted(entities, relations)
        self._merge(ChunkExtraction(chunk_id, entities, relations))
        if self._on_merged is not None:
            self._on_merged()
        return True

    def _merge(self, extraction: ChunkExtraction) -> None:
        """Merge one chunk's extraction, with every other one waiting when the merge lock comes free;
        returns once it is stored (by this thread or another), and raises what the store raised for
        its transaction."""
        me = _Waiting(extraction)
        with self._waiting_lock:
            self._waiting.append(me)
        with self._merge_lock:
            if not me.done:  # else the one before us merged ours with its own
                with self._waiting_lock:
                    batch, self._waiting = self._waiting, []
                try:
                    self._store.save_extractions(
                        self._graph_id,
                        [w.extraction for w in batch],
                        merge_entity=merge_entity,
                        merge_relation=merge_relation,
                    )
                except BaseException as exc:
                    for waiting in batch:
                        waiting.error = exc
                    raise
                finally:
                    for waiting in batch:
                        waiting.done = True
        if me.error is not None:
            raise me.error
