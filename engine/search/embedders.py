"""Which embedder a configuration gets: the endpoint's client when `THOUGHTMAP_EMBEDDINGS_URL` is
set, else the built-in model. Apart from `embeddings.py` (the seam and the endpoint's client), which
the built-in model's module imports."""

from __future__ import annotations

from pathlib import Path

from engine.config import EmbeddingsSettings
from engine.search.builtin_embedder import builtin_embedder
from engine.search.embeddings import Embedder, OpenAIEmbeddings


def build_embedder(settings: EmbeddingsSettings | None, models_dir: Path | None = None) -> Embedder | None:
    """The endpoint's embedder when one is configured; else the built-in model prepared in
    `models_dir` (raises `EmbeddingModelUnavailable` when it is missing or damaged: the caller says
    so and uses BM25); None when there is neither (BM25 is used where embeddings would be)."""
    if settings is not None:
        return OpenAIEmbeddings(settings)
    if models_dir is None:
        return None
    return builtin_embedder(models_dir)
