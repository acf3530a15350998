"""Vector index for a user's corpus: exact numpy search against ANN libraries, on synthetic vectors.

The questions (issue 42): up to what corpus size does exact search meet a 50 ms p95 first-stage
budget, which approximate-nearest-neighbour (ANN) library to use above it, with which parameters,
and what a million 384-dimensional chunks cost in memory.

A script, not a test: it measures and prints, it never asserts on time. The ANN libraries are not
project dependencies, so it runs from a scratch virtual environment (numpy pinned as the project's):

    /usr/bin/python3.11 -m venv /tmp/annvenv
    /tmp/annvenv/bin/pip install numpy==2.4.6 usearch==2.26.6 hnswlib==0.8.0 \\
        faiss-cpu==1.15.1 sqlite-vec==0.1.9
    nice /tmp/annvenv/bin/python benchmarks/bench_ann.py            # print the Markdown section
    nice /tmp/annvenv/bin/python benchmarks/bench_ann.py --write    # also replace it in docs/benchmarks.md

An index whose library is missing is skipped, and the section says so.

Vectors: a clustered Gaussian mixture normalised to unit length, never uniform noise (ANN recall
on isotropic noise says nothing about text embeddings): super-topics, clusters of log-normal
sizes around them, a direction every vector shares a little of, and within each cluster noise
whose variance decays over the dimensions as a power law. `synthetic_vectors` documents the knobs;
`--calibrate FILE.npy` compares their statistics with real embeddings (for example a few hundred
all-MiniLM-L6-v2 paragraph vectors). Queries are drawn from the same mixture, a little further
from their cluster centres than the documents, and are not in the index.

Each (index, size) is built and queried in a child process of its own, so that its resident
memory (RSS) before and after the build, and its peak, are its own. The parent generates the
vectors once per size into a temporary folder, with the exact top-10 of every query (float32,
batched matrix products), which is what recall@10 is measured against.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import facts_block, machine_facts, percentile, publish, table  # noqa: E402

SECTION = "bench_ann"
DIM = 384
TRUTH_K = 10
BLOCK_ROWS = 131_072  # rows per matrix product in exact search: bounds the scratch memory
TARGET_P95_MS = 50.0

# Which indexes run at which sizes by default, to keep the whole run within about half an hour:
# one HNSW build of a million vectors takes 15-30 CPU-minutes on these cores. usearch in float32
# is measured at the bundled size only (against its float16); sqlite-vec, hnswlib and faiss's HNSW
# up to 100k, where sqlite-vec's linear scan and the three HNSW libraries' equal recall are clear.
# At a million: exact search, and the HNSW index we would adopt.
ALL_INDEXES = [
    "numpy-f32",
    "numpy-f16",
    "faiss-flat-f16",
    "sqlite-vec",
    "hnswlib",
    "usearch-f32",
    "usearch-f16",
    "faiss-hnsw",
]
SIZE_INDEXES = {  # first size at which each list applies
    0: ALL_INDEXES,
    50_000: ["numpy-f32", "numpy-f16", "faiss-flat-f16", "sqlite-vec", "hnswlib", "usearch-f16", "faiss-hnsw"],
    500_000: ["numpy-f32", "numpy-f16", "faiss-flat-f16", "usearch-f16"],
}
EXACT_ONLY = ["numpy-f32"]  # at the extra sizes that only locate where exact search crosses 50 ms


# ------------------------------------------------------------------ synthetic vectors


def synthetic_vectors(
    n: int,
    queries: int,
    seed: int,
    spread: tuple[float, float] = (0.06, 0.10),
    decay: float = 0.35,
    shared: float = 0.3,
    chunk_rows: int = 100_000,
) -> tuple[np.ndarray, np.ndarray, int]:
    """`n` document vectors and `queries` query vectors (float32, unit length); and the cluster count.

    One cluster per ~250 vectors on average (log-normal sizes, so some topics are large), grouped
    under super-topics (one per 25 clusters). A centre is the normalised sum of `shared` times one
    common direction (text embeddings all lean one way, so unrelated pairs have a cosine above 0),
    its super-topic's direction and its own. A vector is its centre plus Gaussian noise of the
    cluster's spread, drawn from `spread`, with per-dimension standard deviations decaying as
    (i+1)^-decay (rescaled to the same total variance), then normalised: a few directions carry
    most of the variation, as in real embeddings, instead of all 384 equally.
    """
    rng = np.random.default_rng(seed)
    clusters = max(64, n // 250)
    topics = max(8, clusters // 25)

    def unit(rows: np.ndarray) -> np.ndarray:
        return rows / np.linalg.norm(rows, axis=-1, keepdims=True)

    common = unit(rng.standard_normal(DIM))
    topic_dirs = unit(rng.standard_normal((topics, DIM)))
    own = unit(rng.standard_normal((clusters, DIM)))
    centres = unit(shared * common + topic_dirs[rng.integers(topics, size=clusters)] + 0.9 * own)
    weights = rng.lognormal(0.0, 1.0, clusters)
    weights /= weights.sum()
    spreads = rng.uniform(*spread, clusters)
    scales = (np.arange(DIM) + 1.0) ** -decay
    scales *= np.sqrt(DIM / np.sum(scales**2))
    scales = scales[rng.permutation(DIM)].astype(np.float32)  # no privileged coordinates

    def draw(count: int, widen: float) -> np.ndarray:
        out = np.empty((count, DIM), dtype=np.float32)
        for start in range(0, count, chunk_rows):
            rows = min(chunk_rows, count - start)
            labels = rng.choice(clusters, size=rows, p=weights)
            noise = rng.standard_normal((rows, DIM), dtype=np.float32) * scales
            block = centres[labels].astype(np.float32) + (widen * spreads[labels, None]).astype(np.float32) * noise
            out[start : start + rows] = unit(block)
        return out

    return draw(n, 1.0), draw(queries, 1.25), clusters


def exact_top(matrix: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k ids and scores (inner product, best first) of each query row: batched matrix products
    over blocks of rows, argpartition in each, merged. A float16 matrix is cast block by block."""
    single = queries.ndim == 1  # one query: matrix-vector products (gemv), not a 1-row gemm
    queries = np.atleast_2d(queries).astype(np.float32, copy=False)
    best_ids = np.empty((len(queries), 0), dtype=np.int64)
    best_scores = np.empty((len(queries), 0), dtype=np.float32)
    for start in range(0, len(matrix), BLOCK_ROWS):
        block = matrix[start : start + BLOCK_ROWS]
        if block.dtype != np.float32:
            block = block.astype(np.float32)
        scores = (block @ queries[0])[None, :] if single else queries @ block.T
        take = min(k, scores.shape[1])
        part = np.argpartition(-scores, take - 1, axis=1)[:, :take]
        best_ids = np.concatenate([best_ids, part + start], axis=1)
        best_scores = np.concatenate([best_scores, np.take_along_axis(scores, part, axis=1)], axis=1)
        if best_ids.shape[1] > k:
            keep = np.argpartition(-best_scores, k - 1, axis=1)[:, :k]
            best_ids = np.take_along_axis(best_ids, keep, axis=1)
            best_scores = np.take_along_axis(best_scores, keep, axis=1)
    order = np.argsort(-best_scores, axis=1, kind="stable")
    return np.take_along_axis(best_ids, order, axis=1), np.take_along_axis(best_scores, order, axis=1)


def vector_stats(vectors: np.ndarray, sample: int = 600, seed: int = 3) -> dict:
    """On a random sample of `sample` vectors (the size of the real set we compare with): the
    cosine of all pairs, the variance share of the top 10 and 50 principal components, and each
    vector's nearest neighbour within the sample."""
    rng = np.random.default_rng(seed)
    rows = vectors[rng.choice(len(vectors), size=sample, replace=False)] if len(vectors) > sample else vectors
    cosines = rows @ rows.T
    pairs = cosines[np.triu_indices(len(rows), 1)]
    variance = np.linalg.svd(rows - rows.mean(axis=0), compute_uv=False) ** 2
    share = np.cumsum(variance) / variance.sum()
    np.fill_diagonal(cosines, -1.0)
    return {
        "pair_mean": float(pairs.mean()),
        "pair_std": float(pairs.std()),
        "pc10": float(share[9]),
        "pc50": float(share[49]),
        "nn": float(cosines.max(axis=1).mean()),
        "sample": len(rows),
    }


# ------------------------------------------------------------------ the indexes (in the child)


class Exact:
    """The matrix itself, searched by `exact_top`; float32 or float16 storage."""

    def __init__(self, dtype: type) -> None:
        self.dtype = dtype
        self.matrix = np.empty((0, DIM), dtype=dtype)

    def build(self, vectors: np.ndarray, threads: int) -> None:
        self.matrix = np.array(vectors, dtype=self.dtype)  # a copy, as an application holds one

    def tune(self, ef: int | None) -> None:
        pass

    def search(self, query: np.ndarray, k: int) -> np.ndarray:
        return exact_top(self.matrix, query, k)[0][0]

    def search_batch(self, queries: np.ndarray, k: int) -> np.ndarray:
        return exact_top(self.matrix, queries, k)[0]

    def save(self, path: Path) -> None:
        with path.open("wb") as handle:  # np.save(path) would append ".npy" to the name
            np.save(handle, self.matrix)

    def load(self, path: Path) -> object:
        return np.load(path)


class SqliteVec:
    """sqlite-vec's vec0 table (float32, L2 distance, same order as cosine on unit vectors): a
    brute-force scan inside SQLite, the kind of index that would live in the corpus file."""

    def __init__(self, folder: Path) -> None:
        import sqlite_vec

        self.module = sqlite_vec
        self.path = folder / "vec.sqlite3"
        self.db = self.open(self.path)

    def open(self, path: Path) -> sqlite3.Connection:
        db = sqlite3.connect(path)
        db.enable_load_extension(True)
        self.module.load(db)
        db.enable_load_extension(False)
        return db

    def build(self, vectors: np.ndarray, threads: int) -> None:
        self.db.execute(f"CREATE VIRTUAL TABLE vec USING vec0(embedding float[{DIM}])")
        with self.db:
            for start in range(0, len(vectors), 10_000):
                block = vectors[start : start + 10_000]
                self.db.executemany(
                    "INSERT INTO vec(rowid, embedding) VALUES (?, ?)",
                    ((start + i, row.tobytes()) for i, row in enumerate(block)),
                )

    def tune(self, ef: int | None) -> None:
        pass

    def search(self, query: np.ndarray, k: int) -> np.ndarray:
        rows = self.db.execute(
            "SELECT rowid FROM vec WHERE embedding MATCH ? AND k = ? ORDER BY distance",
            (query.astype(np.float32).tobytes(), k),
        ).fetchall()
        return np.array([r[0] for r in rows], dtype=np.int64)

    def search_batch(self, queries: np.ndarray, k: int) -> np.ndarray:
        return np.stack([self.search(q, k) for q in queries])

    def save(self, path: Path) -> None:
        self.db.commit()
        shutil.copyfile(self.path, path)

    def load(self, path: Path) -> object:
        db = self.open(path)
        db.execute("SELECT count(*) FROM vec").fetchone()
        return db


class Hnswlib:
    def __init__(self, m: int, ef_construction: int) -> None:
        import hnswlib

        self.module, self.m, self.ef_construction = hnswlib, m, ef_construction
        self.index = None

    def build(self, vectors: np.ndarray, threads: int) -> None:
        self.index = self.module.Index(space="ip", dim=DIM)
        self.index.init_index(
            max_elements=len(vectors), M=self.m, ef_construction=self.ef_construction, random_seed=100
        )
        self.index.add_items(vectors, np.arange(len(vectors)), num_threads=threads)

    def tune(self, ef: int | None) -> None:
        self.index.set_ef(ef)

    def search(self, query: np.ndarray, k: int) -> np.ndarray:
        return self.index.knn_query(query, k=k, num_threads=1)[0][0]

    def search_batch(self, queries: np.ndarray, k: int) -> np.ndarray:
        return self.index.knn_query(queries, k=k, num_threads=1)[0]

    def save(self, path: Path) -> None:
        self.index.save_index(str(path))

    def load(self, path: Path) -> object:
        index = self.module.Index(space="ip", dim=DIM)
        index.load_index(str(path))
        return index


class Usearch:
    def __init__(self, dtype: str, m: int, ef_construction: int) -> None:
        from usearch.index import Index

        self.cls, self.dtype, self.m, self.ef_construction = Index, dtype, m, ef_construction
        self.index = None

    def build(self, vectors: np.ndarray, threads: int) -> None:
        self.index = self.cls(
            ndim=DIM, metric="ip", dtype=self.dtype, connectivity=self.m, expansion_add=self.ef_construction
        )
        self.index.add(np.arange(len(vectors)), vectors, threads=threads)

    def tune(self, ef: int | None) -> None:
        self.index.expansion_search = ef

    def search(self, query: np.ndarray, k: int) -> np.ndarray:
        return self.index.search(query, k, threads=1).keys

    def search_batch(self, queries: np.ndarray, k: int) -> np.ndarray:
        return self.index.search(queries, k, threads=1).keys

    def save(self, path: Path) -> None:
        self.index.save(str(path))

    def load(self, path: Path) -> object:
        return self.cls.restore(str(path))


class Faiss:
    """faiss's HNSW over float32 vectors, or its flat (brute-force) scan over float16 ones."""

    def __init__(self, kind: str, m: int, ef_construction: int) -> None:
        import faiss

        self.faiss, self.kind, self.m, self.ef_construction = faiss, kind, m, ef_construction
        self.index = None

    def build(self, vectors: np.ndarray, threads: int) -> None:
        faiss = self.faiss
        faiss.omp_set_num_threads(threads)
        if self.kind == "hnsw":
            self.index = faiss.IndexHNSWFlat(DIM, self.m, faiss.METRIC_INNER_PRODUCT)
            self.index.hnsw.efConstruction = self.ef_construction
        else:
            self.index = faiss.IndexScalarQuantizer(DIM, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
            self.index.train(vectors[:1000])  # fp16 needs no statistics; train() only marks it ready
        self.index.add(vectors)

    def tune(self, ef: int | None) -> None:
        if self.kind == "hnsw":
            self.index.hnsw.efSearch = ef
        self.faiss.omp_set_num_threads(1)  # queries on one thread, as every index here

    def search(self, query: np.ndarray, k: int) -> np.ndarray:
        return self.index.search(query[None, :], k)[1][0]

    def search_batch(self, queries: np.ndarray, k: int) -> np.ndarray:
        return self.index.search(queries, k)[1]

    def save(self, path: Path) -> None:
        self.faiss.write_index(self.index, str(path))

    def load(self, path: Path) -> object:
        return self.faiss.read_index(str(path))


def make_index(name: str, m: int, ef_construction: int, folder: Path):
    factories: dict[str, Callable[[], object]] = {
        "numpy-f32": lambda: Exact(np.float32),
        "numpy-f16": lambda: Exact(np.float16),
        "faiss-flat-f16": lambda: Faiss("flat-f16", m, ef_construction),
        "sqlite-vec": lambda: SqliteVec(folder),
        "hnswlib": lambda: Hnswlib(m, ef_construction),
        "usearch-f32": lambda: Usearch("f32", m, ef_construction),
        "usearch-f16": lambda: Usearch("f16", m, ef_construction),
        "faiss-hnsw": lambda: Faiss("hnsw", m, ef_construction),
    }
    return factories[name]()


IS_GRAPH = {"hnswlib", "usearch-f32", "usearch-f16", "faiss-hnsw"}
PACKAGE = {
    "numpy-f32": "numpy",
    "numpy-f16": "numpy",
    "faiss-flat-f16": "faiss-cpu",
    "sqlite-vec": "sqlite-vec",
    "hnswlib": "hnswlib",
    "usearch-f32": "usearch",
    "usearch-f16": "usearch",
    "faiss-hnsw": "faiss-cpu",
}
MODULE = {
    "numpy": "numpy",
    "faiss-cpu": "faiss",
    "sqlite-vec": "sqlite_vec",
    "hnswlib": "hnswlib",
    "usearch": "usearch",
}


def package_version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version
    from importlib.util import find_spec

    if find_spec(MODULE[package]) is None:
        return None
    try:
        return version(package)
    except PackageNotFoundError:
        return "?"


# ------------------------------------------------------------------ the child: one index, one size


def memory_kib() -> dict[str, int]:
    """This process's VmRSS and VmHWM (peak) from /proc/self/status, in KiB."""
    found = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0])
    return found


def reset_peak() -> bool:
    """Start VmHWM again from the current RSS (Linux: clear_refs 5), so the peak is the build's."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def time_queries(index, queries: np.ndarray, truth: np.ndarray, k: int, budget_s: float) -> dict:
    """Single queries, one after another, until all are done or `budget_s` has passed.

    Besides the wall time, each call's CPU time on this thread (every index here searches on the
    calling thread): on a shared machine a call is sometimes descheduled for a few ms, which
    inflates the wall p95 but not the CPU time, so the CPU p95 is what an idle core would show."""
    for q in queries[:3]:  # warm-up: caches, lazily allocated search state
        index.search(q, k)
    walls, cpus, hits = [], [], 0
    started = time.perf_counter()
    for i, q in enumerate(queries):
        wall0, cpu0 = time.perf_counter(), time.thread_time()
        ids = index.search(q, k)
        cpu1, wall1 = time.thread_time(), time.perf_counter()
        walls.append(wall1 - wall0)
        cpus.append(cpu1 - cpu0)
        hits += len(set(np.asarray(ids[:TRUTH_K]).tolist()) & set(truth[i].tolist()))
        if wall1 - started > budget_s:
            break
    n = len(walls)
    wall0 = time.perf_counter()
    index.search_batch(queries[:n], k)
    batch_s = time.perf_counter() - wall0
    return {
        "n": n,
        "p50_ms": percentile(walls, 50) * 1000,
        "p95_ms": percentile(walls, 95) * 1000,
        "cpu_p50_ms": percentile(cpus, 50) * 1000,
        "cpu_p95_ms": percentile(cpus, 95) * 1000,
        "batch_ms": batch_s / n * 1000,
        "recall10": hits / (n * TRUTH_K),
    }


def run_child(args: argparse.Namespace) -> int:
    data = Path(args.data)
    base = np.load(data / "base.npy")
    queries = np.load(data / "queries.npy")
    truth = np.load(data / "truth.npy")
    work = Path(tempfile.mkdtemp(prefix="ann-child-", dir=data))
    index = make_index(args.child, args.m, args.ef_construction, work)
    before = memory_kib()
    peak_reset = reset_peak()
    load0 = os.getloadavg()[0]
    wall0, cpu0 = time.perf_counter(), time.process_time()
    index.build(base, args.threads)
    build_s, build_cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    after = memory_kib()
    result = {
        "index": args.child,
        "n": len(base),
        "build_s": build_s,
        "build_cpu_s": build_cpu,
        "rss_delta_mib": (after["VmRSS"] - before["VmRSS"]) / 1024,
        "peak_delta_mib": (after["VmHWM"] - before["VmRSS"]) / 1024 if peak_reset else None,
        "load_at_build": load0,
        "runs": [],
    }
    for ef in args.ef_search if args.child in IS_GRAPH else [None]:
        index.tune(ef)
        run = time_queries(index, queries, truth, args.k, args.query_budget)
        result["runs"].append({"ef": ef, **run})
    saved = work / "index.bin"
    index.save(saved)
    result["index_mib"] = saved.stat().st_size / 2**20
    wall0 = time.perf_counter()
    loaded = index.load(saved)
    result["load_s"] = time.perf_counter() - wall0
    del loaded
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result))
    return 0


# ------------------------------------------------------------------ the parent


def prepare(n: int, args: argparse.Namespace, folder: Path) -> dict:
    """Write base.npy, queries.npy and truth.npy (exact top-10 ids) for size `n` into `folder`."""
    started = time.perf_counter()
    base, queries, clusters = synthetic_vectors(n, args.queries, seed=args.seed + n)
    truth_ids, truth_scores = exact_top(base, queries, max(args.k, TRUTH_K))
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "base.npy", base)
    np.save(folder / "queries.npy", queries)
    np.save(folder / "truth.npy", truth_ids[:, :TRUTH_K])
    stats = vector_stats(base)
    stats.update(
        clusters=clusters,
        top1=float(truth_scores[:, 0].mean()),
        top10=float(truth_scores[:, 9].mean()),
        top50=float(truth_scores[:, min(49, args.k - 1)].mean()),
        seconds=time.perf_counter() - started,
    )
    return stats


def run_parent_child(name: str, folder: Path, args: argparse.Namespace) -> dict:
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        name,
        "--data",
        str(folder),
        "--k",
        str(args.k),
        "--m",
        str(args.m),
        "--ef-construction",
        str(args.ef_construction),
        "--threads",
        str(args.threads),
        "--query-budget",
        str(args.query_budget),
        "--ef-search",
        *map(str, args.ef_search),
    ]
    # Queries run on one thread everywhere: in the application the built-in LLM and the embedder
    # share these 2 cores, and on a busy machine a second BLAS thread only waits (measured: numpy's
    # exact search at 5k vectors took 16 ms with two OpenBLAS threads, 0.3 ms with one).
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    started = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.child_timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"index": name, "error": f"no result within {args.child_timeout:.0f} s"}
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"index": name, "error": f"exit {done.returncode}: {tail[0][:200]}"}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["wall_s"] = time.perf_counter() - started
    return result


def read_kept(path: Path) -> tuple[dict[int, dict], list[dict]]:
    """Datasets and results a previous run kept in `path` (JSON lines), if it exists."""
    datasets: dict[int, dict] = {}
    results: dict[tuple[int, str], dict] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            kind = entry.pop("kind")
            if kind == "dataset":
                datasets[entry.pop("n")] = entry
            else:
                results[(entry["n"], entry["index"])] = entry
    return datasets, list(results.values())


def keep(path: Path | None, entry: dict) -> None:
    """Append one entry to the keep file, so a run that dies (or is stopped) loses only its row."""
    if path is not None:
        with path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")


def crossing(points: list[tuple[int, float]], target: float) -> str | None:
    """Where p95 reaches `target` ms: interpolated between the two measured sizes around it, or
    extrapolated along the last two; None with fewer than two sizes."""
    points = sorted(points)
    if len(points) < 2:
        return None
    if points[0][1] >= target:
        return f"already over at {points[0][0]:,}"
    for (n0, t0), (n1, t1) in zip(points, points[1:]):
        if t1 >= target:
            return f"~{n0 + (n1 - n0) * (target - t0) / (t1 - t0):,.0f}"
    (n0, t0), (n1, t1) = points[-2:]
    if t1 <= t0:
        return f"not by {n1:,}"
    return f"~{n1 + (n1 - n0) * (target - t1) / (t1 - t0):,.0f} (extrapolated)"


def params_text(result: dict, run: dict, args: argparse.Namespace) -> str:
    if result["index"] in IS_GRAPH:
        return f"M={args.m}, efC={args.ef_construction}, ef={run['ef']}"
    return "exact"


def render(
    args: argparse.Namespace,
    facts: dict,
    versions: dict,
    loads: tuple,
    datasets: dict,
    results: list[dict],
    calibration: dict | None,
    command: str,
    skipped: list[str],
) -> str:
    out = ["## Vector index for large corpora (`bench_ann.py`)\n\n", facts_block(command, facts)]
    builds = [r["load_at_build"] for r in results if "load_at_build" in r]
    seconds = sum(r.get("wall_s", 0.0) for r in results)
    out.append(
        f"Load: the machine was shared (other jobs in the background); load average "
        f"{min(builds, default=loads[0]):.1f}-{max(builds, default=loads[1]):.1f} when the builds "
        "started, so wall times are inflated and the CPU columns are the steadier ones. Run under "
        f"`nice`; the rows took {seconds / 60:.0f} min in all.  \n"
        "Libraries: " + ", ".join(f"{p} {v}" for p, v in versions.items() if v) + "\n"
    )
    if skipped:
        out.append(f"\nSkipped (library not installed): {', '.join(skipped)}.\n")

    out.append(
        f"\n### Vectors\n\n{DIM}-dimensional synthetic vectors, a clustered Gaussian mixture normalised "
        "to unit length, not uniform noise (`synthetic_vectors`: log-normal cluster sizes under "
        "super-topics, a shared direction, power-law decaying noise variance). Queries come from "
        f"the same mixture, not from the index; {args.queries} per size. Truth: exact float32 top-10.\n\n"
    )
    rows = []
    if calibration:
        c = calibration
        rows.append(
            [
                f"real ({c['label']})",
                f"{c['n']:,}",
                "",
                f"{c['pair_mean']:.3f} ± {c['pair_std']:.3f}",
                f"{c['pc10']:.2f} / {c['pc50']:.2f}",
                f"{c['nn']:.3f}",
                "",
                "",
                "",
            ]
        )
    for n, s in datasets.items():
        rows.append(
            [
                "synthetic",
                f"{n:,}",
                f"{s['clusters']:,}",
                f"{s['pair_mean']:.3f} ± {s['pair_std']:.3f}",
                f"{s['pc10']:.2f} / {s['pc50']:.2f}",
                f"{s['nn']:.3f}",
                f"{s['top1']:.3f}",
                f"{s['top10']:.3f}",
                f"{s['top50']:.3f}",
            ]
        )
    sample = next(iter(datasets.values()))["sample"] if datasets else 600
    out.append(
        table(
            [
                "vectors",
                "n",
                "clusters",
                "cosine of pairs (mean ± sd)",
                "variance in top 10 / 50 PCs",
                f"nearest in a {sample}-sample",
                "query: top-1 cosine",
                "top-10",
                f"top-{args.k}",
            ],
            rows,
        )
    )
    out.append(
        f"\nThe first four columns are computed on a random sample of {sample} vectors of each set, "
        "the size of the real one, so they compare like with like.\n"
    )

    out.append(
        f"\n### Build, memory, queries (k={args.k}, recall@10 against exact)\n\n"
        f"Build with {args.threads} threads. Memory in MiB: RSS after the build minus before it "
        "(the vectors were already loaded), peak during the build minus before it, and the saved "
        "index file; load = reading that file back. Queries: one at a time on one thread (numpy's "
        f"BLAS too), for at most {args.query_budget:.0f} s per row (n says how many ran); CPU = "
        "the call's CPU time on its thread, what the wall time would be on an idle core; batch = "
        "the same queries in one call, still one thread, per query.\n\n"
    )
    rows = []
    for r in results:
        if "error" in r:
            rows.append([f"{r['n']:,}" if "n" in r else "", r["index"], "failed: " + r["error"]] + [""] * 12)
            continue
        for run in r["runs"]:
            peak = f"{r['peak_delta_mib']:.0f}" if r.get("peak_delta_mib") is not None else "?"
            rows.append(
                [
                    f"{r['n']:,}",
                    r["index"],
                    params_text(r, run, args),
                    f"{r['build_s']:.1f} / {r['build_cpu_s']:.1f}",
                    f"{r['rss_delta_mib']:.0f}",
                    peak,
                    f"{r['index_mib']:.0f}",
                    f"{r['load_s']:.2f}",
                    f"{run['p50_ms']:.2f}",
                    f"{run['p95_ms']:.2f}",
                    f"{run['cpu_p50_ms']:.2f}",
                    f"{run['cpu_p95_ms']:.2f}",
                    f"{run['batch_ms']:.2f}",
                    f"{run['recall10']:.3f}",
                    run["n"],
                ]
            )
    out.append(
        table(
            [
                "chunks",
                "index",
                "params",
                "build s (wall / CPU)",
                "RSS Δ",
                "peak Δ",
                "file",
                "load s",
                "p50 ms",
                "p95 ms",
                "CPU p50",
                "CPU p95",
                "batch ms/q",
                "recall@10",
                "n",
            ],
            rows,
        )
    )

    lines = []
    for name in ("numpy-f32", "numpy-f16", "faiss-flat-f16", "sqlite-vec"):
        measured = [r for r in results if r.get("index") == name and "runs" in r]
        wall = crossing([(r["n"], r["runs"][0]["p95_ms"]) for r in measured], TARGET_P95_MS)
        cpu = crossing([(r["n"], r["runs"][0]["cpu_p95_ms"]) for r in measured], TARGET_P95_MS)
        if wall is not None and cpu is not None:
            lines.append(f"{name} {wall} chunks (CPU p95: {cpu})")
    if lines:
        out.append(
            f"\nExact search reaches a p95 of {TARGET_P95_MS:.0f} ms at (interpolated between "
            "the measured sizes; wall time on this loaded machine, in brackets the CPU p95): "
            + "; ".join(lines)
            + ".\n"
        )
    return "".join(out)


def load_calibration(path: Path) -> dict:
    vectors = np.load(path).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    stats = vector_stats(vectors)
    return {"label": path.name, "n": len(vectors), **stats}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="replace this section in docs/benchmarks.md")
    parser.add_argument("--sizes", type=int, nargs="+", default=[18_000, 100_000, 1_000_000])
    parser.add_argument(
        "--exact-sizes",
        type=int,
        nargs="*",
        default=[250_000, 500_000],
        help="extra sizes for numpy-f32 only: where exact search crosses 50 ms",
    )
    parser.add_argument(
        "--indexes",
        nargs="+",
        default=None,
        help="indexes at every size (default: SIZE_INDEXES in the script), from " + " ".join(ALL_INDEXES),
    )
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=50)
    parser.add_argument("--m", type=int, default=16, help="HNSW links per node (M, connectivity)")
    parser.add_argument("--ef-construction", type=int, default=100)
    parser.add_argument("--ef-search", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--threads", type=int, default=2, help="threads for builds")
    parser.add_argument("--query-budget", type=float, default=30.0, help="seconds of single queries per row")
    parser.add_argument(
        "--child-timeout",
        type=float,
        default=7200.0,
        help="seconds for one index at one size (wall: a stopped process counts)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="JSON-lines file: every result is appended as it comes, and results "
        "already in it are reused, not measured again (a run can be continued)",
    )
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--calibrate", type=Path, help=".npy of real embeddings to compare statistics with")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return run_child(args)

    command = " ".join(
        ["nice /tmp/annvenv/bin/python benchmarks/bench_ann.py", *(sys.argv[1:] if argv is None else argv)]
    )
    facts = machine_facts()
    load_start = os.getloadavg()[0]
    versions = {p: package_version(p) for p in ("numpy", "usearch", "hnswlib", "faiss-cpu", "sqlite-vec")}
    skipped = sorted({name for name in ALL_INDEXES if not versions[PACKAGE[name]]})
    calibration = load_calibration(args.calibrate) if args.calibrate else None

    plan: list[tuple[int, list[str]]] = []
    for n in sorted(set(args.sizes) | set(args.exact_sizes)):
        if n not in args.sizes:
            names = EXACT_ONLY
        elif args.indexes:
            names = args.indexes
        else:
            names = SIZE_INDEXES[max(size for size in SIZE_INDEXES if size <= n)]
        plan.append((n, [name for name in names if name not in skipped]))

    datasets, results = read_kept(args.keep) if args.keep else ({}, [])
    done = {(r["n"], r["index"]) for r in results}
    reused = len(results)
    tmp = Path(tempfile.mkdtemp(prefix="thoughtmap-bench-ann-"))
    try:
        for n, names in plan:
            todo = [name for name in names if (n, name) not in done]
            if not todo and n in datasets:
                continue
            folder = tmp / str(n)
            print(f"{n:,} vectors: generating and computing the exact top-10...", file=sys.stderr)
            datasets[n] = prepare(n, args, folder)
            keep(args.keep, {"kind": "dataset", "n": n, **datasets[n]})
            for name in todo:
                print(f"  {name}...", file=sys.stderr, flush=True)
                result = run_parent_child(name, folder, args)
                result.setdefault("n", n)
                results.append(result)
                if "error" not in result:
                    keep(args.keep, {"kind": "result", **result})
                summary = result.get("error") or ", ".join(
                    f"ef={run['ef']} p95 {run['p95_ms']:.1f} ms recall {run['recall10']:.3f}" for run in result["runs"]
                )
                print(f"    build {result.get('build_s', 0):.1f} s; {summary}", file=sys.stderr, flush=True)
            shutil.rmtree(folder, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    wanted = {(n, name) for n, names in plan for name in names}
    results = sorted(
        (r for r in results if (r["n"], r["index"]) in wanted), key=lambda r: (r["n"], ALL_INDEXES.index(r["index"]))
    )
    datasets = {n: datasets[n] for n in sorted(datasets) if any(n == size for size, _ in plan)}
    if reused:
        print(f"reused {reused} results from {args.keep}", file=sys.stderr)
    body = render(
        args, facts, versions, (load_start, os.getloadavg()[0]), datasets, results, calibration, command, skipped
    )
    publish(SECTION, body, args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
