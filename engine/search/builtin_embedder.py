"""The built-in `Embedder`: all-MiniLM-L6-v2 on this CPU, used when no embeddings endpoint is set.

`builtin_embedder(models_dir)` checks the prepared model's files (`embedding_model.py`: sizes on
every call, sha256 when a file changed) and returns a `BuiltinEmbedder`, or raises
`EmbeddingModelUnavailable` saying what is wrong and the fix. The embedder reads its 90 MB of weights
only on the first `embed`, once, under a lock: a process that never compares texts never pays for
them, and concurrent runs share one encoder (`MiniLMEncoder.encode` is thread-safe).

Vectors are deterministic (the encoder is), so runs on `--llm fake` stay reproducible.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from engine.search.embedding_model import EMBEDDING_MODEL, locate_embedding_model
from engine.search.embeddings import EmbeddingError, Vector

DESCRIPTION = f"built-in {EMBEDDING_MODEL.name} (CPU)"


class BuiltinEmbedder:
    """An `Embedder` over `MiniLMEncoder`, loaded on first use. `load` makes the encoder from the
    folder (injected by tests)."""

    def __init__(self, folder: Path, *, load: Callable[[Path], object] | None = None) -> None:
        self.folder = folder
        self._load = load or _load_minilm
        self._encoder = None
        self._failure: EmbeddingError | None = None
        self._lock = threading.Lock()

    @property
    def description(self) -> str:
        return DESCRIPTION

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        if not texts:
            return []
        return self._loaded().encode(list(texts)).tolist()

    def _loaded(self):
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
                        hint="Run `thoughtmap model prepare --force` to install it again.")
                    raise self._failure from exc
            return self._encoder


def _load_minilm(folder: Path):
    from engine.search.minilm import MiniLMEncoder  # numpy and the tokenizer: only when texts are compared

    return MiniLMEncoder(folder)


def builtin_embedder(models_dir: Path) -> BuiltinEmbedder:
    """The built-in embedder over the prepared model in `models_dir`; raises
    `EmbeddingModelUnavailable` when the model is missing or damaged."""
    return BuiltinEmbedder(locate_embedding_model(models_dir))
