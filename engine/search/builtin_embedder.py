"""The built-in `Embedder`: all-MiniLM-L6-v2 on this CPU, used when no embeddings endpoint is set.

`builtin_embedder(models_dir)` checks the prepared model's files (`embedding_model.py`: sizes on
every call, sha256 when a file changed) and returns a `BuiltinEmbedder`, or raises
`EmbeddingModelUnavailable` saying what is wrong and the fix. The embedder reads its 90 MB of weights
only on the first `embed`, once, under a lock: a process that never compares texts never pays for
them, and concurrent runs share one encoder (`MiniLMEncoder.encode` is thread-safe).

Vectors are deterministic (the encoder is), so runs on `--llm fake` stay reproducible.

Texts embedded before are not embedded again: the bundled corpus's chunks have their vectors shipped
(`data/vectors/`, keyed by the sha256 of the embedded text), and a text this process embedded is
remembered (up to `REMEMBERED` of them). A corpus hit's text is its chunk's embedded text
(`embeddings.hit_text` = `vectors.embedded_text` for chunks under 2,000 characters; a longer chunk's
first 2,000, found through the shipped aliases: `vectors.shipped_aliases_path`), so reranking or
ranking evidence among the bundled corpus's hits costs one product per hit, not a forward pass: the
research agent's relevance floor spent about 0.5 s of CPU per search embedding its 2-3 long hits.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from engine.search.embedding_model import EMBEDDING_MODEL, locate_embedding_model
from engine.search.embeddings import EmbeddingError, Vector

DESCRIPTION = f"built-in {EMBEDDING_MODEL.name} (CPU)"
REMEMBERED = 20_000  # texts whose vectors a process keeps (384 floats each: about 30 MB)


def text_digest(text: str) -> str:
    """The key of a text's vector: the first 16 hex digits of its sha256 (`vectors.text_key`)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class Encoder(Protocol):
    """What `BuiltinEmbedder` embeds with (`MiniLMEncoder`, or a test's stand-in)."""

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class BuiltinEmbedder:
    """An `Embedder` over `MiniLMEncoder`, loaded on first use. `load` makes the encoder from the
    folder (injected by tests)."""

    # Texts embedded are remembered: embedding a query ahead of its search is not work done twice
    # (`RunContext.embed_ahead`).
    remembers_texts = True

    def __init__(
        self, folder: Path, *, load: Callable[[Path], Encoder] | None = None, shipped: Path | None = None
    ) -> None:
        self.folder = folder
        self._load = load or _load_minilm
        self._encoder: Encoder | None = None
        self._failure: EmbeddingError | None = None
        self._lock = threading.Lock()
        self._shipped_path = shipped
        self._shipped: tuple[dict[str, int], np.ndarray] | None = None
        self._remembered: OrderedDict[str, list[float]] = OrderedDict()
        self._embedding: dict[str, threading.Event] = {}  # texts being embedded now, by key

    @property
    def description(self) -> str:
        return DESCRIPTION

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        if not texts:
            return []
        keys = [text_digest(text) for text in texts]
        vectors: list[Vector | None] = [self._known(key) for key in keys]
        # A text asked twice in one call is embedded once.
        todo = {keys[i]: texts[i] for i, vector in enumerate(vectors) if vector is None}
        if not todo:
            return vectors  # type: ignore[return-value]
        # A text another thread is embedding now (a query embedded ahead of its search,
        # `RunContext._embed_while_searching`) is waited for, not embedded twice.
        with self._lock:
            theirs = {self._embedding[key] for key in todo if key in self._embedding}
            mine = {key: text for key, text in todo.items() if key not in self._embedding}
            done = threading.Event()
            self._embedding.update(dict.fromkeys(mine, done))
        computed: dict[str, Vector] = {}
        try:
            if mine:
                computed = dict(zip(mine, self._loaded().encode(list(mine.values())).tolist()))
                with self._lock:
                    self._remembered.update(computed)
                    while len(self._remembered) > REMEMBERED:
                        self._remembered.popitem(last=False)
        finally:
            with self._lock:
                for key in mine:
                    self._embedding.pop(key, None)
            done.set()
        for event in theirs:
            event.wait()
        # What the other thread could not embed (its encoder failed) is embedded here, or fails here.
        return [
            vector if vector is not None else computed.get(key) or self._known(key) or self.embed([text])[0]
            for key, text, vector in zip(keys, texts, vectors)
        ]

    def remembers(self, text: str) -> bool:
        """Whether `text`'s vector is made already (remembered, or shipped with the corpus)."""
        return self._known(text_digest(text)) is not None

    def _known(self, key: str) -> Vector | None:
        with self._lock:
            if key in self._remembered:
                self._remembered.move_to_end(key)
                return self._remembered[key]
            if self._shipped is None:
                self._shipped = _read_shipped(self._shipped_path)
            row = self._shipped[0].get(key)
            if row is None:
                return None
            vector = self._shipped[1][row].astype(np.float32)
            unit: Vector = (vector / max(float(np.linalg.norm(vector)), 1e-12)).tolist()
            return unit

    def _loaded(self) -> Encoder:
        with self._lock:
            if self._failure is not None:
                raise self._failure  # a model that failed to load is not read again on every call
            if self._encoder is None:
                try:
                    self._encoder = self._load(self.folder)
                except Exception as exc:  # noqa: BLE001 - any load failure degrades to BM25, said
                    self._failure = EmbeddingError(
                        f"the built-in embedding model in {self.folder} could not be loaded: "
                        f"{type(exc).__name__}: {exc}"[:500],
                        hint="Run `thoughtmap model prepare --force` to install it again.",
                    )
                    raise self._failure from exc
            return self._encoder


def _read_shipped(path: Path | None) -> tuple[dict[str, int], np.ndarray]:
    """The shipped vectors of the bundled corpus (key -> row, float16 matrix); empty when absent."""
    from engine.search.vectors import shipped_aliases_path, shipped_vectors_path

    path = path or shipped_vectors_path()
    if not path.is_file():
        return {}, np.zeros((0, 0), dtype=np.float16)
    with np.load(path) as shipped:
        rows, vectors = {str(key): row for row, key in enumerate(shipped["keys"])}, shipped["vectors"]
    aliases = shipped_aliases_path(path)
    if aliases.is_file():  # a missing or spoiled file costs speed only: those texts are embedded
        try:
            named = json.loads(aliases.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            named = {}
        for alias, key in named.items() if isinstance(named, dict) else ():
            if key in rows:
                rows.setdefault(str(alias), rows[key])
    return rows, vectors


def _load_minilm(folder: Path) -> Encoder:
    from engine.search.minilm import MiniLMEncoder  # numpy and the tokenizer: only when texts are compared

    return MiniLMEncoder(folder)


def builtin_embedder(models_dir: Path) -> BuiltinEmbedder:
    """The built-in embedder over the prepared model in `models_dir`; raises
    `EmbeddingModelUnavailable` when the model is missing or damaged."""
    return BuiltinEmbedder(locate_embedding_model(models_dir))
