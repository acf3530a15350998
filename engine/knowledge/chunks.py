"""Documents as the chunks the LLM extracts from (MTQA Step 1, Eq. 1: chunks of C_len tokens; the
paper's 1,200). We have no tokenizer here, so a token is taken as 0.75 of an English word (the usual
rule of thumb for BPE vocabularies); chunks follow paragraph and sentence boundaries
(`engine/search/chunking.py`). A document shorter than a chunk is one chunk.

A chunk is keyed by the hash of its text, so the same passage reached twice (two searches, a resumed
build, a corpus chunk that a run also retrieved) is one chunk, extracted once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from engine.search.chunking import chunk_text
from engine.search.local import corpus_hit
from engine.search.protocol import Hit
from storage.corpus_store import ChunkHit, text_hash
from storage.knowledge import ChunkInput

DEFAULT_CHUNK_TOKENS = 1200  # the paper's chunk size
WORDS_PER_TOKEN = 0.75
OVERLAP_TOKENS = 100  # LightRAG's overlap between consecutive chunks of one document


def words_for_tokens(tokens: int) -> int:
    return max(1, round(tokens * WORDS_PER_TOKEN))


def chunk_chars(tokens: int) -> int:
    """About how many characters a chunk of `tokens` holds (an English word and its space: 6)."""
    return words_for_tokens(tokens) * 6


def chunk_documents(documents: Sequence[Hit], chunk_tokens: int = DEFAULT_CHUNK_TOKENS) -> list[ChunkInput]:
    """Every document's text (its snippet when it has no text) as chunks of about `chunk_tokens`,
    each carrying the document's ref, title, URL and kind, so it is cited as that document."""
    if chunk_tokens < 1:
        raise ValueError("chunk_tokens must be at least 1")
    target = words_for_tokens(chunk_tokens)
    overlap = min(words_for_tokens(OVERLAP_TOKENS), target // 4)
    chunks: dict[str, ChunkInput] = {}
    for document in documents:
        for piece in chunk_text(document.text or document.snippet, target, overlap):
            key = text_hash(piece)
            chunks.setdefault(
                key,
                ChunkInput(
                    key=key, ref=document.ref, title=document.title, text=piece, url=document.url, kind=document.kind
                ),
            )
    return list(chunks.values())


def corpus_chunks(chunks: Iterable[ChunkHit], chunk_tokens: int = DEFAULT_CHUNK_TOKENS) -> Iterator[ChunkInput]:
    """A collection's corpus chunks as knowledge chunks. The corpus splits documents into passages
    (about 180 words) shorter than a knowledge chunk, so each passage is one chunk: its ref stays the
    one the corpus search returns, and the same passage retrieved by a run is the same, extracted
    chunk. (Passages are not joined up to `chunk_tokens`; a passage longer than it is split.)"""
    for chunk in chunks:
        yield from chunk_documents([corpus_hit(chunk)], chunk_tokens)
