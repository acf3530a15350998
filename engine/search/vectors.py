"""The dense vector index over the local corpus: exact cosine search with numpy.

Every chunk of the corpus index (bundled datasets, uploaded and ingested files) gets one vector of
the embedder in use, stored beside it (`CorpusStore` table ``chunk_vectors``, float16). What is
embedded is the document title and the chunk text, ``f"{title}\\n{text}"`` (`embedded_text`).

- `VectorIndex(store, model)`: `missing()` counts the chunks lacking a vector of `model`;
  `update(encode, progress)` embeds them a batch per transaction, so an index that grows is never
  re-embedded (and an update stopped half-way keeps what it wrote); `search(query_vector, k,
  collections)` ranks every vector by cosine with one matrix product. The matrix is loaded once
  and reloaded only after the index changed (`CorpusStore.change_signature`).
- Shipped vectors: the bundled corpus's vectors are computed once by the project
  (`scripts/embed-bundled`) and shipped in `data/vectors/<model>.npz`, keyed by `text_key` (the
  first 16 hex digits of the sha256 of the embedded text). `import_shipped` copies them to every
  chunk whose key matches, so a fresh machine never spends 20+ minutes embedding the bundled corpus.

Why exact search: at the bundled size (17,927 chunks × 384) one product takes a few milliseconds;
an approximate index would only pay off at hundreds of thousands of chunks.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from storage.corpus_store import CorpusStore, StoredVectors

if TYPE_CHECKING:
    from engine.search.embeddings import Embedder

# The model whose vectors of the bundled corpus the project ships.
SHIPPED_MODEL = "all-MiniLM-L6-v2"
SHIPPED_VECTORS_DIR = Path(__file__).resolve().parents[2] / "data" / "vectors"
# Texts per encode call and per write transaction: progress at least every few seconds on 2 cores.
UPDATE_BATCH = 64

# encode(texts) -> one vector per text, (n, dimensions), an array or lists (`Embedder.embed`);
# need not be normalised.
Encode = Callable[[Sequence[str]], "np.ndarray | Sequence[Sequence[float]]"]
# progress(done, total), chunks embedded of the chunks that lacked a vector.
VectorProgress = Callable[[int, int], None]


@dataclass(frozen=True)
class CorpusEmbedding:
    """The model the corpus's vectors are of (its name keeps them apart from another model's) and
    the function that embeds texts with it."""

    model: str
    encode: Encode
    # The `Embedder` behind `encode`, when there is one: dense retrieval embeds queries with it.
    embedder: Embedder | None = None


def shipped_vectors_path(model: str = SHIPPED_MODEL) -> Path:
    return SHIPPED_VECTORS_DIR / f"{model}.npz"


def shipped_aliases_path(vectors: Path) -> Path:
    """The aliases beside a shipped vectors file (`<model>.aliases.json`): for each chunk longer than
    a search hit's embedded text (`embeddings.HIT_CHARS`), the key of that shorter text -> the
    chunk's own key. The model reads 256 tokens, well inside the first 2,000 characters, so both
    texts have the same vector, and a hit of a long chunk is looked up, not embedded again."""
    return vectors.with_name(vectors.name.removesuffix(".npz") + ".aliases.json")


def embedded_text(title: str, text: str) -> str:
    """What a chunk's vector is computed from: its document's title, then its text."""
    return f"{title}\n{text}"


def text_key(title: str, text: str) -> str:
    """The key of a chunk's vector in a shipped vectors file."""
    return hashlib.sha256(embedded_text(title, text).encode("utf-8")).hexdigest()[:16]


def _unit_rows(rows: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
    matrix = np.asarray(rows, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    unit: np.ndarray = matrix / np.maximum(norms, 1e-12)
    return unit


class VectorIndex:
    """The vectors of one embedding model over a `CorpusStore`; safe to search from several
    threads (the loaded matrix is replaced whole, never changed in place)."""

    def __init__(self, store: CorpusStore, model: str) -> None:
        self.store = store
        self.model = model
        self._lock = threading.Lock()
        self._loaded: tuple[tuple[int, int], StoredVectors] | None = None

    def missing(self) -> int:
        """How many chunks lack a vector of this model."""
        return self.store.count_lacking_vectors(self.model)

    def update(self, encode: Encode, progress: VectorProgress | None = None, *, batch: int = UPDATE_BATCH) -> int:
        """Embed every chunk lacking a vector, `batch` at a time, each batch written in its own
        transaction; returns how many vectors were stored. `progress(done, total)` after each batch
        (and once at the start). Chunks added meanwhile are left for the next update."""
        total = self.missing()
        done = stored = 0
        if progress:
            progress(0, total)
        last = 0
        while done < total:
            page = self.store.chunks_lacking_vectors(self.model, after_id=last, limit=min(batch, total - done))
            if not page:
                break  # removed meanwhile
            vectors = _unit_rows(encode([embedded_text(title, text) for _id, title, text in page]))
            if len(vectors) != len(page):
                raise ValueError(f"the embedder returned {len(vectors)} vectors for {len(page)} texts")
            stored += self.store.put_vectors(
                self.model, ((chunk_id, text, vector) for (chunk_id, _title, text), vector in zip(page, vectors))
            )
            last = page[-1][0]
            done += len(page)
            if progress:
                progress(done, total)
        return stored

    def import_vectors(self, keys: Sequence[str], vectors: np.ndarray) -> int:
        """Copy vectors computed elsewhere (`keys[i]` = `text_key` of row i's chunk) to every chunk
        lacking one whose key is there, as unit vectors; returns how many were stored."""
        row_of = {str(key): row for row, key in enumerate(keys)}
        vectors = _unit_rows(vectors)
        stored, last = 0, 0
        while page := self.store.chunks_lacking_vectors(self.model, after_id=last):
            matched = [(chunk_id, text, row_of.get(text_key(title, text))) for chunk_id, title, text in page]
            stored += self.store.put_vectors(
                self.model, ((chunk_id, text, vectors[row]) for chunk_id, text, row in matched if row is not None)
            )
            last = page[-1][0]
        return stored

    def import_shipped(self, path: Path | None = None) -> int:
        """`import_vectors` from a shipped file (`shipped_vectors_path(model)` by default); 0 when
        there is none for this model."""
        path = path or shipped_vectors_path(self.model)
        if not path.is_file():
            return 0
        with np.load(path) as shipped:
            return self.import_vectors(shipped["keys"], shipped["vectors"])

    def _vectors(self) -> StoredVectors:
        signature = self.store.change_signature()  # before loading: a change during the load reloads next time
        with self._lock:
            if self._loaded is None or self._loaded[0] != signature:
                stored = self.store.load_vectors(self.model)
                # Unit rows again, in place: float16 storage rounds each vector's length a little.
                matrix = stored.matrix
                matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
                self._loaded = (signature, stored)
            return self._loaded[1]

    def search(
        self, query_vector: Sequence[float] | np.ndarray, k: int, collections: Sequence[str] | None = None
    ) -> list[tuple[int, float]]:
        """The k chunks most similar to `query_vector` by cosine, best first, as (chunk id,
        cosine); ties go to the lower chunk id. `collections` limits the search to those."""
        stored = self._vectors()
        if k <= 0 or not len(stored.ids):
            return []
        query = _unit_rows(np.asarray(query_vector, dtype=np.float32).reshape(-1))
        if query.shape[0] != stored.matrix.shape[1]:
            raise ValueError(
                f"a query vector of {query.shape[0]} dimensions against {self.model}'s {stored.matrix.shape[1]}"
            )
        scores = stored.matrix @ query
        ids = stored.ids
        if collections is not None:
            codes = [stored.collections.index(c) for c in collections if c in stored.collections]
            keep = np.isin(stored.collection_of, codes)
            scores, ids = scores[keep], ids[keep]
        if len(scores) > k:
            # Everything scoring at least the k-th best, so a tie at the cut goes to the lower id.
            kth = -np.partition(-scores, k - 1)[k - 1]
            top = np.flatnonzero(scores >= kth)
        else:
            top = np.arange(len(scores))
        order = top[np.lexsort((ids[top], -scores[top]))][:k]
        return [(int(ids[i]), float(scores[i])) for i in order]
