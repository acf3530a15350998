"""Compute the shipped vectors of the bundled corpus: `scripts/embed-bundled [--index PATH]`.

Builds the bundled corpus into an index of its own (by default `build/embed-bundled/corpus.sqlite3`),
embeds every chunk with the built-in all-MiniLM-L6-v2 (about 25 minutes on 2 cores), and writes
`data/vectors/all-MiniLM-L6-v2.npz`: `keys` (`text_key` of each chunk: the first 16 hex digits of
the sha256 of ``f"{title}\\n{text}"``) and `vectors` (float16, one unit row per key), and beside it
`all-MiniLM-L6-v2.aliases.json` (`vectors.shipped_aliases_path`). Run it when the bundled data, its
chunking or the model changes, then commit both files. `--aliases-only` writes the aliases of the
vectors shipped now, in seconds.

The work index keeps what was embedded: a run that was stopped goes on where it stopped. The
vectors shipped before are not reused (`--index` starts with none), so the file is the model's own.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

from engine.search.bundled import ensure_bundled_corpus
from engine.search.embeddings import HIT_CHARS
from engine.search.vectors import (
    SHIPPED_MODEL,
    VectorIndex,
    embedded_text,
    shipped_aliases_path,
    shipped_vectors_path,
    text_key,
)
from storage.corpus_store import CorpusStore

REPO = Path(__file__).resolve().parents[2]
WORK_INDEX = REPO / "build" / "embed-bundled" / "corpus.sqlite3"
# Marks the work index's vectors as computed here, not imported from a shipped file.
COMPUTED_KEY = "embed_bundled_started"


def shipped_arrays(store: CorpusStore, model: str) -> tuple[np.ndarray, np.ndarray]:
    """(keys, float16 vectors) of every chunk of `store` with a vector of `model`, by chunk id."""
    stored = store.load_vectors(model)
    hits = store.chunk_hits(stored.ids.tolist())
    if len(hits) != len(stored.ids):
        raise RuntimeError("the index changed while its vectors were read")
    keys = np.array([text_key(hit.title, hit.text) for hit in hits])
    return keys, stored.matrix.astype(np.float16)


def alias_keys(store: CorpusStore, model: str) -> dict[str, str]:
    """For each chunk of `store` with a vector whose embedded text is longer than a search hit's
    (`HIT_CHARS`): the key of the hit's text -> the chunk's key (`vectors.shipped_aliases_path`)."""
    stored = store.load_vectors(model)
    aliases = {}
    for hit in store.chunk_hits(stored.ids.tolist()):
        text = embedded_text(hit.title, hit.text)
        if len(text) > HIT_CHARS:
            short = hashlib.sha256(text[:HIT_CHARS].encode("utf-8")).hexdigest()[:16]
            aliases[short] = text_key(hit.title, hit.text)
    return dict(sorted(aliases.items()))


def write_aliases(store: CorpusStore, model: str, vectors: Path) -> Path:
    path = shipped_aliases_path(vectors)
    path.write_text(json.dumps(alias_keys(store, model), indent=0) + "\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - a maintainer's tool
    parser = argparse.ArgumentParser(prog="scripts/embed-bundled", description=__doc__.split("\n")[0])
    parser.add_argument("--index", type=Path, default=WORK_INDEX, help="the work index (kept between runs)")
    parser.add_argument(
        "--model-dir", type=Path, default=None, help="the prepared all-MiniLM-L6-v2 folder (default: the models dir's)"
    )
    parser.add_argument("--out", type=Path, default=shipped_vectors_path(SHIPPED_MODEL))
    parser.add_argument(
        "--aliases-only",
        action="store_true",
        help="write only the aliases file of the vectors shipped now (no embedding)",
    )
    args = parser.parse_args(argv)
    if args.aliases_only:
        with CorpusStore(args.index) as store:
            ensure_bundled_corpus(store)  # the bundled chunks, with the shipped vectors imported
            path = write_aliases(store, SHIPPED_MODEL, args.out)
        print(f"wrote {path}", file=sys.stderr)
        return 0

    from engine.config import load_settings
    from engine.search.minilm import MiniLMEncoder

    folder = args.model_dir or load_settings().local.models_dir / SHIPPED_MODEL
    encoder = MiniLMEncoder(folder)
    started = time.perf_counter()
    with CorpusStore(args.index) as store:
        status = ensure_bundled_corpus(store)  # imports the vectors shipped now: dropped below
        if status.indexed_now or store.get_meta(COMPUTED_KEY) is None:
            store.delete_vectors()
            store.set_meta(COMPUTED_KEY, time.strftime("%Y-%m-%dT%H:%M:%S"))
        index = VectorIndex(store, SHIPPED_MODEL)
        print(f"{status.chunks:,} chunks, {index.missing():,} to embed", file=sys.stderr)

        def say(done: int, total: int) -> None:
            elapsed = time.perf_counter() - started
            print(f"{done:,} of {total:,} embedded, {elapsed:.0f} s", file=sys.stderr, flush=True)

        index.update(encoder.encode, say, batch=512)
        keys, vectors = shipped_arrays(store, SHIPPED_MODEL)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, keys=keys, vectors=vectors)  # float16 vectors: about 13 MB
    with CorpusStore(args.index) as store:
        write_aliases(store, SHIPPED_MODEL, args.out)
    print(f"wrote {args.out}: {len(keys):,} vectors, {args.out.stat().st_size / 1e6:.1f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
