"""The sha256 of a file, read in chunks: how a model file installed from a package is checked
against the value recorded in our code (`engine/llm/local_model.py`, `engine/search/embedding_model.py`)."""

from __future__ import annotations

import hashlib
from pathlib import Path

_CHUNK = 4 * 1024 * 1024


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
