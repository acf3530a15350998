"""Retrieval on the gold sets, no LLM: every first stage and reranker on the same items (issue 42).

For each configuration (BM25, BM25 + reranker, dense, hybrid, hybrid + reranker, and each other
reranker that can run here), a fresh process with an empty THOUGHTMAP_HOME builds the bundled index
(the full-text build, then the shipped vectors' import), builds the searcher as `thoughtmap
search-eval` does (engine/evaluate/retrieval_setup.py), and measures it with the same runner
(engine/evaluate/retrieval_eval.py) on HotpotQA AutoAct (300), 2WikiMultihopQA (500) and NQ (500):
all-gold@10, nDCG@10, MRR, query p50/p95, the index build's time and the process's memory after
loading (RSS once the searcher, its vectors and its model have served a few queries). A fresh
process per configuration keeps one's memory out of another's.

The `llm` reranker (one LLM call per candidate: hours on the built-in model) is measured only when
named: `--configs bm25/llm --limit 20`; `endpoint` is measured when THOUGHTMAP_RERANK_URL is set. A
configuration that cannot run here (no embedding model, no vectors) gets a row saying why.

Then the K curve of the reranked default: the first stage's top K reranked, K = 10, 20, 30, 50,
100, with all-gold@10 and the query p95 per K.

A script, not a test: it measures and prints.

    .venv/bin/python benchmarks/bench_retrieval.py --limit 20            # a quick look
    .venv/bin/python benchmarks/bench_retrieval.py --write --out benchmarks/results/retrieval.json
    .venv/bin/python benchmarks/bench_retrieval.py --from benchmarks/results/retrieval.json --write  # re-render
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import facts_block, machine_facts, publish, table  # noqa: E402

SECTION = "bench_retrieval"
DATASETS = ("hotpotqa-autoact", "2wiki", "nq")
DATASET_TITLES = {"hotpotqa-autoact": "HotpotQA AutoAct", "2wiki": "2WikiMultihopQA", "nq": "NQ"}
CURVE_KS = (10, 20, 30, 50, 100)
# The K curve's datasets: the multi-hop ones, where the reranker's K matters (NQ's single gold
# passage is found by every first stage).
CURVE_DATASETS = ("hotpotqa-autoact", "2wiki")
# The former `auto` reranker without an endpoint: BM25 recomputed over the hits (engine/search/rerank.py).
HITS_BM25 = "hits-bm25"


@dataclass(frozen=True)
class Config:
    retriever: str
    reranker: str  # a THOUGHTMAP_RERANKER name, or HITS_BM25

    @property
    def label(self) -> str:
        names = {
            "none": "",
            "builtin": " + built-in reranker",
            "llm": " + LLM yes/no reranker",
            "endpoint": " + rerank endpoint",
            HITS_BM25: " + BM25 over the hits (the former default)",
        }
        return {"bm25": "BM25", "dense": "dense", "hybrid": "hybrid"}[self.retriever] + names[self.reranker]


CONFIGS = (
    Config("bm25", "none"),
    Config("bm25", HITS_BM25),
    Config("bm25", "builtin"),
    Config("dense", "none"),
    Config("dense", "builtin"),
    Config("hybrid", "none"),
    Config("hybrid", "builtin"),
)


# ---------------------------------------------------------------- the child: one configuration


def rss_mib() -> float:
    """This process's resident memory now, in MiB (/proc/self/status VmRSS)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def build_index(settings) -> tuple[float, float]:
    """Build the bundled index in this (fresh) home: (seconds of the full-text build, seconds of the
    shipped vectors' import), split where engine/search/bundled.py says it starts the import."""
    from engine.search.bundled import open_default_corpus

    import_started: list[float] = []

    def progress(message: str, _fraction: float) -> None:
        if "shipped vectors" in message and not import_started:
            import_started.append(time.perf_counter())

    started = time.perf_counter()
    corpus = open_default_corpus(settings, progress)
    ready = time.perf_counter()
    corpus.store.close()
    split = import_started[0] if import_started else ready
    return split - started, ready - split


def child(args) -> dict:
    from engine.config import load_settings
    from engine.evaluate.datasets import load_items
    from engine.evaluate.retrieval_eval import SEARCH_DEPTH, evaluate_retrieval
    from engine.evaluate.retrieval_setup import RerankedSearcher, build_eval_searcher, eval_settings
    from engine.services import build_services

    imports_rss = rss_mib()
    hits_bm25 = args.reranker == HITS_BM25
    services = build_services(eval_settings(load_settings(), args.retriever, "none" if hits_bm25 else args.reranker))
    fts_s, vectors_s = build_index(services.settings)
    candidates = [int(k) for k in args.candidates.split(",")]
    searcher = build_eval_searcher(services, candidates=candidates[0])
    if hits_bm25:
        from engine.search.rerank import BM25Reranker

        searcher = RerankedSearcher(searcher, BM25Reranker(), candidates[0])
    datasets = args.datasets.split(",")
    items = {name: load_items(name, limit=args.limit) for name in datasets}
    for item in items[datasets[0]][:3]:  # loads what searching loads: vectors, model, index pages
        searcher.search(item.question, SEARCH_DEPTH)
    result = {
        "searcher": searcher.description,
        "fts_build_s": fts_s,
        "vector_import_s": vectors_s,
        "rss_imports_mib": imports_rss,
        "rss_loaded_mib": rss_mib(),
        "reports": {},
    }
    for k in candidates:
        if k != candidates[0]:
            searcher.pool = k  # the K curve: the same first stage and reranker, another K
        for name in datasets:
            report = evaluate_retrieval(
                searcher, items[name], dataset=name, retriever=args.retriever, reranker=args.reranker
            )
            result["reports"][f"{name}@{k}"] = report.to_json()
            print(
                f"  {args.retriever}/{args.reranker} K={k} {name}: all-gold@10 {report.all_gold_at_10:.3f}, "
                f"p95 {report.p95_ms:.0f} ms",
                file=sys.stderr,
                flush=True,
            )
    result["rss_peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    services.close()
    return result


# ---------------------------------------------------------------- the parent: every configuration


def measure(config: Config, *, datasets: Sequence[str], limit: int | None, candidates: Sequence[int]) -> dict:
    """One configuration in a fresh process with an empty THOUGHTMAP_HOME; its result, or its error."""
    with tempfile.TemporaryDirectory(prefix="bench-retrieval-") as home:
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--child",
            "--retriever",
            config.retriever,
            "--reranker",
            config.reranker,
            "--datasets",
            ",".join(datasets),
            "--candidates",
            ",".join(str(k) for k in candidates),
        ]
        if limit is not None:
            command += ["--limit", str(limit)]
        env = {**os.environ, "THOUGHTMAP_HOME": home}
        print(f"measuring {config.label} ...", file=sys.stderr, flush=True)
        done = subprocess.run(command, env=env, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines:
            return {
                "retriever": config.retriever,
                "reranker": config.reranker,
                "error": f"the measuring process exited with {done.returncode}",
            }
        return {"retriever": config.retriever, "reranker": config.reranker, **json.loads(lines[-1])}


def _f(value) -> str:
    return "–" if value is None else f"{value:.3f}"


def _ms(value) -> str:
    return "–" if value is None else f"{value:.1f}"


def render(results: dict, command: str, facts: dict[str, str]) -> str:
    default = results.get("default", {})
    rows = []
    for result in results["configs"]:
        config = Config(result["retriever"], result["reranker"])
        label = config.label + (
            " **(default)**"
            if (config.retriever, config.reranker) == (default.get("retriever"), default.get("reranker"))
            else ""
        )
        if "error" in result:
            rows.append([label, "–", "not measured: " + result["error"], "", "", "", "", "", ""])
            continue
        uses_vectors = config.retriever != "bm25" or config.reranker == "builtin"
        build = result["fts_build_s"] + (result["vector_import_s"] if uses_vectors else 0.0)
        build_text = f"{build:.1f}" + (
            f" ({result['fts_build_s']:.1f} + {result['vector_import_s']:.1f})" if uses_vectors else ""
        )
        first = True
        for key, report in result["reports"].items():
            name, _, k = key.partition("@")
            if int(k) != results["candidates"]:
                continue
            rows.append(
                [
                    label if first else "",
                    f"{DATASET_TITLES[name]} ({report['items']})",
                    _f(report["all_gold_at_10"]),
                    _f(report["ndcg_at_10"]),
                    _f(report["mrr"]),
                    _ms(report["p50_ms"]),
                    _ms(report["p95_ms"]),
                    build_text if first else "",
                    f"{result['rss_loaded_mib']:.0f}" if first else "",
                ]
            )
            first = False
    curve = results.get("curve")
    curve_rows = []
    if curve and "error" not in curve:
        for k in results["curve_ks"]:
            row = [str(k)]
            for name in results["curve_datasets"]:
                report = curve["reports"][f"{name}@{k}"]
                row += [_f(report["all_gold_at_10"]), _ms(report["p95_ms"])]
            curve_rows.append(row)
    curve_header = ["K"] + [
        h for name in results.get("curve_datasets", ()) for h in (f"{DATASET_TITLES[name]} all-gold@10", "p95 ms")
    ]
    measured = [result for result in results["configs"] if "error" not in result]
    skipped = (
        {key.partition("@")[0]: report["skipped"] for key, report in measured[0]["reports"].items()} if measured else {}
    )
    limit_note = f" (the first {results['limit']} items of each sample)" if results.get("limit") else ""
    skipped_note = (
        "Items without gold titles are skipped: "
        + ", ".join(f"{count} of {DATASET_TITLES[name]}" for name, count in skipped.items() if count)
        + "."
        if any(skipped.values())
        else "Every item has gold titles: none is skipped."
    )
    lines = [
        "## Retrieval: first stage and reranker on the gold sets (no LLM)",
        "",
        facts_block(command, facts),
        "",
        "**The corpus is easy on purpose, and this table is about it only.** The bundled corpus is the "
        "datasets' own paragraphs pooled together (HotpotQA's and 2Wiki's context paragraphs with the "
        "HippoRAG 2Wiki passages, NQ's passages, FreshWiki; about 18k paragraphs): every question's gold "
        "paragraphs are in it, among a few thousand distractors. The papers retrieve from the whole of "
        "Wikipedia (millions of articles), a much harder setting, so these numbers rank configurations "
        "against each other and are not comparable with published open-domain figures.",
        "",
        f"Every configuration is measured on the same items{limit_note}, with `thoughtmap search-eval`'s runner: "
        "the raw question, the top 50 hits, titles counted once at their best rank (a document's several "
        "chunks, or one article in two collections, are one document). **all-gold@10**: every gold "
        "paragraph's title in the first 10 documents; **nDCG@10**: binary relevance over the gold "
        "titles; **MRR**: of the first gold document; **p50/p95**: one search's wall time after 3 untimed "
        "warm-up queries; a reranker sees the first stage's top 50. **Index build**: a fresh home's "
        "bundled full-text build, plus the shipped vectors' import for the configurations that use "
        "vectors (in brackets). **RSS**: the process's memory once the searcher, its vectors and model "
        "have served three queries (a fresh process per configuration; Python, the database and the "
        "datasets included). " + skipped_note,
        "",
        table(
            [
                "Configuration",
                "Dataset (items)",
                "all-gold@10",
                "nDCG@10",
                "MRR",
                "p50 ms",
                "p95 ms",
                "Index build s",
                "RSS MiB",
            ],
            rows,
        ),
    ]
    if curve_rows:
        reranked = Config(curve["retriever"], curve["reranker"]).label
        lines += [
            "",
            f"**K against quality** for {reranked}: the first stage's top K reranked, then the first 10 "
            "documents scored (a search returns at most K hits, so K = 10 leaves the reranker nothing "
            "to bring up from below 10). p95 is one search's, reranking included.",
            "",
            table(curve_header, curve_rows),
        ]
    elif curve:
        lines += [
            "",
            f"The K curve of {Config(curve['retriever'], curve['reranker']).label} was not measured: {curve['error']}.",
        ]
    lines += [
        "",
        "Any of these rows on its own, and as JSON:",
        "",
        "```sh",
        "thoughtmap search-eval --dataset hotpotqa --retriever bm25 --reranker none",
        "thoughtmap search-eval --dataset 2wiki --json          # what the methods use by default",
        "```",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="replace this section in docs/benchmarks.md")
    parser.add_argument("--limit", type=int, default=None, help="only the first N items of each dataset's sample")
    parser.add_argument(
        "--configs",
        default=None,
        help="comma-separated retriever/reranker pairs (default: every one that can run here), "
        f"e.g. bm25/none,hybrid/builtin; rerankers: none, builtin, llm, endpoint, {HITS_BM25}",
    )
    parser.add_argument("--no-curve", action="store_true", help="skip the K curve")
    parser.add_argument(
        "--curve-config",
        default=None,
        metavar="R/X",
        help="the reranked configuration of the K curve (default: the default one when it reranks, "
        "else hybrid/builtin)",
    )
    parser.add_argument("--out", type=Path, help="also write every measurement as JSON to this file")
    parser.add_argument("--from", dest="from_file", type=Path, help="render a JSON file written by --out")
    # The child's arguments (one configuration in a fresh process).
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--retriever", help=argparse.SUPPRESS)
    parser.add_argument("--reranker", help=argparse.SUPPRESS)
    parser.add_argument("--datasets", default=",".join(DATASETS), help=argparse.SUPPRESS)
    parser.add_argument("--candidates", default="50", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        from engine.evaluate.retrieval_setup import RetrievalSetupError

        try:
            print(json.dumps(child(args)))
        except RetrievalSetupError as exc:  # this configuration cannot run here: said in its row
            print(json.dumps({"error": str(exc)}))
        return 0
    command = " ".join([".venv/bin/python benchmarks/bench_retrieval.py", *(sys.argv[1:] if argv is None else argv)])
    if args.from_file:
        results = json.loads(args.from_file.read_text(encoding="utf-8"))
        publish(SECTION, render(results, results["command"], results["facts"]), args.write)
        return 0

    from engine.config import load_settings
    from engine.evaluate.retrieval_eval import SEARCH_DEPTH

    settings = load_settings()
    configs = list(CONFIGS)
    if settings.rerank.url:
        configs += [Config("bm25", "endpoint"), Config("hybrid", "endpoint")]
    if args.configs:
        configs = [Config(*pair.split("/", 1)) for pair in args.configs.split(",")]
    default = Config(settings.retrieval.retriever, settings.retrieval.reranker)
    results = {
        "command": command,
        "facts": machine_facts(),
        "limit": args.limit,
        "candidates": SEARCH_DEPTH,
        "default": {"retriever": default.retriever, "reranker": default.reranker},
        "configs": [measure(c, datasets=DATASETS, limit=args.limit, candidates=[SEARCH_DEPTH]) for c in configs],
    }
    if not args.no_curve:
        reranked = (
            Config(*args.curve_config.split("/", 1))
            if args.curve_config
            else default
            if default.reranker != "none"
            else Config(default.retriever, "builtin")
        )
        results.update(
            curve_ks=list(CURVE_KS),
            curve_datasets=list(CURVE_DATASETS),
            curve=measure(reranked, datasets=CURVE_DATASETS, limit=args.limit, candidates=CURVE_KS),
        )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1), encoding="utf-8")
    publish(SECTION, render(results, command, results["facts"]), args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
