"""Benchmark of the local corpus: bundled index build, query latency, retrieval recall, ingest.

A script, not a test: it measures and prints, it never asserts on time.

    .venv/bin/python benchmarks/bench_corpus.py            # print the Markdown section
    .venv/bin/python benchmarks/bench_corpus.py --write    # also replace it in docs/benchmarks.md

Everything happens in fresh temporary THOUGHTMAP_HOME folders, removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.config import load_settings  # noqa: E402
from engine.search.bundled import BUNDLED_DATA_DIR, open_default_corpus  # noqa: E402
from engine.search.local import LocalCorpusSearcher  # noqa: E402

SECTION = "bench_corpus"
DATA = BUNDLED_DATA_DIR
HOTPOT_DEV = DATA / "hotpotqa" / "hotpotqa_dev_fullwiki_500.jsonl"
HOTPOT_AUTOACT = DATA / "hotpotqa" / "hotpotqa_autoact_easy_medium_hard_300.jsonl"
NQ = DATA / "nq" / "nq_open_oracle_first500.jsonl"
FRESHWIKI = DATA / "freshwiki" / "freshwiki_articles_100.jsonl"


from benchmarks._common import (  # noqa: E402,F401
    DOCS_FILE,
    facts_block,
    jsonl,
    machine_facts,
    ms,
    percentile,
    publish,
    table,
    write_section,
)

# ------------------------------------------------------------------ inputs


def fresh_home(parent: Path, name: str) -> Path:
    home = parent / name
    home.mkdir()
    os.environ["THOUGHTMAP_HOME"] = str(home)
    return home


def index_bytes(index: Path) -> int:
    return sum(p.stat().st_size for p in index.parent.glob(index.name + "*") if p.is_file())


def write_user_files(folder: Path, count: int) -> tuple[int, int]:
    """~`count` files (half .md, half .txt) made from FreshWiki article halves; (files, bytes)."""
    articles = jsonl(FRESHWIKI)
    written = total = 0
    index = 0
    while written < count:
        article = articles[index % len(articles)]
        round_ = index // len(articles)
        index += 1
        paragraphs = [p for p in article["text"].split("\n\n") if p.strip()][1:]  # drop file stem
        stem = f"{article['file_stem']}_{round_}"
        # Alternate paragraphs, so the chunks differ from the bundled article's (the index
        # deduplicates identical chunk text across documents).
        parts = [
            (f"{stem}_notes.md", f"# {article['topic']}: notes\n\n" + "\n\n".join(paragraphs[0::2])),
            (f"{stem}_more.txt", f"More about {article['topic']}.\n\n" + "\n\n".join(paragraphs[1::2])),
        ]
        for name, text in parts:
            if written >= count:
                break
            sub = folder / ("notes" if name.endswith(".md") else "text")  # a nested layout
            sub.mkdir(parents=True, exist_ok=True)
            (sub / name).write_text(text, encoding="utf-8")
            written += 1
            total += len(text.encode("utf-8"))
    return written, total


# ------------------------------------------------------------------ measurements


def time_call(fn: Callable[[], object]) -> tuple[float, object]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def bench_build(tmp: Path, repeats: int) -> dict:
    builds = []
    status = None
    for i in range(repeats):
        fresh_home(tmp, f"build{i}")
        settings = load_settings()
        seconds, searcher = time_call(lambda: open_default_corpus(settings))
        builds.append(seconds)
        store = searcher.store
        status = {
            "documents": store.count_documents(),
            "chunks": store.count_chunks(),
            "collections": store.collections(),
        }
        store.close()
        print(f"  build {i + 1}/{repeats}: {seconds:.2f}s", file=sys.stderr)
    # The last home keeps its index: measure the idempotent second call and the size.
    index = settings.corpus_index_path
    size = index_bytes(index)
    again = []
    for _ in range(5):
        seconds, searcher = time_call(lambda: open_default_corpus(settings))
        searcher.store.close()
        again.append(seconds)
    return {"builds": builds, "again": again, "size": size, "home": settings.home, **status}


def bench_queries(searcher: LocalCorpusSearcher, queries: dict[str, list[str]], ks: Sequence[int]) -> list[dict]:
    warm = [q for qs in queries.values() for q in qs][:30]
    for q in warm:
        searcher.search(q, 5)
    rows = []
    for k in ks:
        all_times: list[float] = []
        slowest: list[tuple[float, str]] = []
        for name, qs in queries.items():
            times = []
            for q in qs:
                seconds, _ = time_call(lambda q=q: searcher.search(q, k))
                times.append(seconds)
                slowest.append((seconds, q))
            all_times += times
            rows.append({"set": name, "k": k, "times": times})
        rows.append({"set": "all", "k": k, "times": all_times, "slowest": sorted(slowest, reverse=True)[:3]})
    return rows


def bench_recall(searcher: LocalCorpusSearcher, items: list[dict], ks: Sequence[int]) -> list[dict]:
    top = max(ks)
    per_level: dict[str, dict[int, list[tuple[float, bool]]]] = {}
    for item in items:
        support = {title for title, _ in item["supporting_facts"]}
        hits = searcher.search(item["question"], top)
        for k in ks:
            titles = {h.title for h in hits[:k]}
            found = len(support & titles)
            for level in ("all", item.get("level", "?")):
                per_level.setdefault(level, {}).setdefault(k, []).append((found / len(support), found == len(support)))
    rows = []
    for level in ["all"] + sorted(lv for lv in per_level if lv != "all"):
        row = {"level": level, "n": len(per_level[level][ks[0]])}
        for k in ks:
            values = per_level[level][k]
            row[f"recall@{k}"] = statistics.fmean(v for v, _ in values)
            row[f"all@{k}"] = statistics.fmean(1.0 if full else 0.0 for _, full in values)
        rows.append(row)
    return rows


def bench_ingest(home: Path, tmp: Path, files: int) -> dict:
    os.environ["THOUGHTMAP_HOME"] = str(home)
    folder = tmp / "user_files"
    count, size = write_user_files(folder, files)
    searcher = open_default_corpus(load_settings())
    first_s, first = time_call(lambda: searcher.ingest([folder]))
    second_s, second = time_call(lambda: searcher.ingest([folder]))
    searcher.store.close()
    return {"files": count, "bytes": size, "first_s": first_s, "first": first, "second_s": second_s, "second": second}


# ------------------------------------------------------------------ report


def render(
    args: argparse.Namespace,
    facts: dict,
    build: dict,
    queries: list[dict],
    recall: list[dict],
    ingest: dict,
    command: str,
) -> str:
    out = ["## Local corpus (`bench_corpus.py`)\n\n", facts_block(command, facts)]

    b = build["builds"]
    out.append("\n### Bundled corpus index\n\n")
    out.append(
        table(
            ["measure", "value"],
            [
                [
                    f"build from scratch, {len(b)} fresh homes (min / median / max)",
                    f"{min(b):.2f} s / {statistics.median(b):.2f} s / {max(b):.2f} s",
                ],
                [
                    "second call, already indexed (`open_default_corpus`, median of 5)",
                    f"{ms(statistics.median(build['again']))} ms",
                ],
                ["index size on disk", f"{build['size'] / 2**20:.1f} MiB"],
                ["documents", f"{build['documents']:,}"],
                ["chunks", f"{build['chunks']:,}"],
                ["documents per collection", ", ".join(f"{c} {n:,}" for c, n in build["collections"].items())],
            ],
        )
    )
    out.append(
        "\nBuild = `open_default_corpus(settings)` in an empty THOUGHTMAP_HOME: create the SQLite "
        "file and FTS5 schema, read the bundled JSONL files, chunk FreshWiki, insert, commit.\n"
    )

    out.append(
        f"\n### Query latency (`LocalCorpusSearcher.search`, one thread, warm cache)\n\n"
        f"Queries: the questions of the first {args.hotpot} HotpotQA dev (fullwiki) items and the "
        f"first {args.nq} NQ-open items; times in ms.\n\n"
    )
    rows = []
    for r in queries:
        t = r["times"]
        rows.append(
            [
                r["set"],
                r["k"],
                len(t),
                ms(statistics.fmean(t)),
                ms(percentile(t, 50)),
                ms(percentile(t, 95)),
                ms(percentile(t, 99)),
                ms(max(t)),
            ]
        )
    out.append(table(["queries", "k", "n", "mean", "p50", "p95", "p99", "max"], rows))
    slow = [r for r in queries if r.get("slowest")]
    if slow:
        worst = slow[-1]
        out.append(
            f"\nSlowest queries at k={worst['k']}: "
            + "; ".join(f"{ms(s)} ms \u201c{q[:80]}\u201d" for s, q in worst["slowest"])
            + "\n"
        )

    ks = args.recall_k
    out.append(
        f"\n### Retrieval quality: supporting-fact titles in the hits\n\n"
        f"HotpotQA AutoAct file ({HOTPOT_AUTOACT.name}): for each question, the share of its "
        "supporting-fact titles found among the titles of the top-k hits (recall@k), and the "
        "share of questions with all of them found (all@k). Their paragraphs are in the bundled "
        "corpus, so this measures ranking, not coverage. Plain BM25 over the question text.\n\n"
    )
    header = ["level", "n"] + [f"recall@{k}" for k in ks] + [f"all@{k}" for k in ks]
    out.append(
        table(
            header,
            [
                [r["level"], r["n"]] + [f"{r[f'recall@{k}']:.3f}" for k in ks] + [f"{r[f'all@{k}']:.3f}" for k in ks]
                for r in recall
            ],
        )
    )

    first, second = ingest["first"], ingest["second"]
    out.append(
        f"\n### Ingest of user files (`LocalCorpusSearcher.ingest`)\n\n"
        f"{ingest['files']} files ({ingest['bytes'] / 2**20:.1f} MiB; half .md, half .txt, in two "
        "sub-folders) made from the FreshWiki articles (odd paragraphs in one file, even in the other), ingested into an index "
        "that already holds the bundled corpus.\n\n"
    )
    out.append(
        table(
            ["pass", "seconds", "files/s", "docs added", "chunks added", "duplicates skipped"],
            [
                [
                    "first",
                    f"{ingest['first_s']:.2f}",
                    f"{ingest['files'] / ingest['first_s']:.0f}",
                    first.documents_added,
                    first.chunks_added,
                    first.duplicates_skipped,
                ],
                [
                    "second (all duplicates)",
                    f"{ingest['second_s']:.2f}",
                    f"{ingest['files'] / ingest['second_s']:.0f}",
                    second.documents_added,
                    second.chunks_added,
                    second.duplicates_skipped,
                ],
            ],
        )
    )
    return "".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="replace this section in docs/benchmarks.md")
    parser.add_argument("--builds", type=int, default=3, help="index builds from scratch (default 3)")
    parser.add_argument("--hotpot", type=int, default=300, help="HotpotQA dev questions (default 300)")
    parser.add_argument("--nq", type=int, default=200, help="NQ questions (default 200)")
    parser.add_argument("--k", type=int, nargs="+", default=[5, 20], help="k values for latency")
    parser.add_argument("--recall-k", type=int, nargs="+", default=[5, 20])
    parser.add_argument("--files", type=int, default=200, help="user files to ingest (default 200)")
    args = parser.parse_args(argv)
    command = " ".join([".venv/bin/python benchmarks/bench_corpus.py", *(sys.argv[1:] if argv is None else argv)])

    facts = machine_facts()
    tmp = Path(tempfile.mkdtemp(prefix="thoughtmap-bench-"))
    previous_home = os.environ.get("THOUGHTMAP_HOME")
    try:
        print("building the bundled index...", file=sys.stderr)
        build = bench_build(tmp, args.builds)
        os.environ["THOUGHTMAP_HOME"] = str(build["home"])
        searcher = open_default_corpus(load_settings())
        queries = {
            f"HotpotQA dev ({args.hotpot})": [i["question"] for i in jsonl(HOTPOT_DEV, args.hotpot)],
            f"NQ-open ({args.nq})": [i["question"] for i in jsonl(NQ, args.nq)],
        }
        print("timing queries...", file=sys.stderr)
        query_rows = bench_queries(searcher, queries, args.k)
        print("measuring recall...", file=sys.stderr)
        recall_rows = bench_recall(searcher, jsonl(HOTPOT_AUTOACT), sorted(args.recall_k))
        searcher.store.close()
        print("timing ingest...", file=sys.stderr)
        ingest = bench_ingest(build["home"], tmp, args.files)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if previous_home is None:
            os.environ.pop("THOUGHTMAP_HOME", None)
        else:
            os.environ["THOUGHTMAP_HOME"] = previous_home
    args.recall_k = sorted(args.recall_k)
    body = render(args, facts, build, query_rows, recall_rows, ingest, command)
    publish(SECTION, body, args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
