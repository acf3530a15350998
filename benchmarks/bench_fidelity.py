"""Issue 17's before/after: DEoT on Researchy questions and OmniThink on FreshWiki topics, through the
evaluation harness (`engine/evaluate/runner.py`), with the numbers the issue asks for.

- DEoT (researchy): question nodes, LLM calls, citations in the report (markers), per run.
- OmniThink (freshwiki; each topic's own article excluded from retrieval by the harness): outline
  heading recall, ROUGE-L against the reference article, citations per written section.

It measures the code it is run with, so "before" is the same script run against the code before
the change (only harness APIs that predate it are used):

    # before: the engine of 29dcf2d (main just before the fidelity change), this script
    git worktree add /tmp/before 29dcf2d
    PYTHONPATH=/tmp/before .venv/bin/python benchmarks/bench_fidelity.py --llm local --label before --out before.json
    # after: this checkout
    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_fidelity.py --llm local --label after --out after.json
    .venv/bin/python benchmarks/bench_fidelity.py --compare before.json after.json   # the Markdown table

Each measurement prints its benchmark ids first; a killed one continues with `--deot-bench ID` /
`--omnithink-bench ID` (its finished runs are kept). The "after" DEoT sample is the first 20 items of
issue 16's 30-item Researchy benchmark (same seed, same parameters), so `--deot-bench` with that
benchmark's id measures it without running DEoT again.

Defaults: 20 Researchy questions and 10 FreshWiki topics (the issue's sample), seed 13, local search.
`--llm fake` proves the command works in seconds (its numbers mean nothing). Set THOUGHTMAP_HOME to a
scratch folder: the runs are stored there like any benchmark's (`thoughtmap bench --show ID`).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_MARKER = re.compile(r"\[\[S(\d+)\]\]")


def _mean(values: Sequence[float]) -> float | None:
    values = [v for v in values if v is not None]
    return round(statistics.fmean(values), 4) if values else None


def _run_benchmark(services, dataset: str, method: str, limit: int, args, stored: str | None) -> dict[str, Any]:
    from engine.evaluate.runner import BenchmarkSpec

    if stored:
        bench = _stored_benchmark(services, stored, dataset, method, args.seed)
    else:
        values = dict(v.split("=", 1) for v in args.param)
        spec = BenchmarkSpec(
            dataset=dataset,
            methods=[method],
            limit=limit,
            seed=args.seed,
            values=values,
            llm=args.llm,
            profile=args.profile,
            search_mode=args.search,
            concurrency=args.concurrency,
        )
        bench = services.benchmarks.create(spec)
        # Printed before the long part, so a killed measurement continues with --deot-bench/--omnithink-bench.
        print(
            f"{method}: benchmark {bench.id} (continue it with --{method}-bench {bench.id})",
            file=sys.stderr,
            flush=True,
        )
    services.benchmarks.execute(bench.id)
    # The sample's first `limit` items: a stored benchmark of the same seed may hold more of them.
    from engine.evaluate.datasets import load_items

    wanted = [i.id for i in load_items(dataset, limit=limit, seed=bench.seed)]
    by_item = {row.item_id: row for row in services.benchmarks.store.list_items(bench.id, method=method)}
    missing = [i for i in wanted if i not in by_item]
    if missing:
        raise SystemExit(
            f"benchmark {bench.id} lacks {len(missing)} of the first {limit} items of the sample "
            f"(e.g. {missing[0]}); use a larger stored benchmark or none"
        )
    rows = [by_item[i] for i in wanted]
    items = []
    for row in rows:
        metrics = dict(row.metrics or {})
        item = {
            "item": row.item_id,
            "status": str(row.status),
            "run": row.run_id,
            "nodes": metrics.get("nodes"),
            "llm_calls": metrics.get("llm_calls"),
            "citations": metrics.get("citations"),
        }
        if method == "omnithink":
            item["heading_recall"] = metrics.get("heading_recall")
            item["rouge_l"] = metrics.get("rouge_l")
            item["citations_per_section"] = _citations_per_section(services, row.run_id)
        items.append(item)
    keys = [
        k
        for k in ("nodes", "llm_calls", "citations", "heading_recall", "rouge_l", "citations_per_section")
        if any(k in i for i in items)
    ]
    return {
        "benchmark": bench.id,
        "dataset": dataset,
        "method": method,
        "items": items,
        "means": {k: _mean([i.get(k) for i in items]) for k in keys},
    }


def _stored_benchmark(services, benchmark_id: str, dataset: str, method: str, seed: int):
    """A stored benchmark to measure (and finish first): the same dataset, seed and method, e.g. the
    issue 16 DEoT benchmark, whose first 20 Researchy items are this script's DEoT sample."""
    bench = services.benchmarks.store.get_benchmark(benchmark_id)
    if bench.dataset != dataset or method not in bench.methods or bench.seed != seed:
        raise SystemExit(
            f"benchmark {benchmark_id} is {bench.dataset} / {','.join(bench.methods)} / seed "
            f"{bench.seed}; {method} needs {dataset} with seed {seed}"
        )
    return bench


def _citations_per_section(services, run_id: str | None) -> float | None:
    """Markers per written section of the article (the report's own record of its sections)."""
    if run_id is None:
        return None
    report = services.repo.latest_report(run_id)
    sections = (report.data or {}).get("sections") if report is not None else None
    if not sections:
        return None
    written = [s for s in sections if s and not s.get("unwritten")]
    if not written:
        return 0.0
    return statistics.fmean(len(_MARKER.findall(s.get("markdown", ""))) for s in written)


def measure(args) -> dict[str, Any]:
    from engine.config import load_settings
    from engine.services import build_services

    services = build_services(load_settings())
    try:
        if args.llm not in ("fake", "local", "openai"):
            raise SystemExit("--llm must be fake, local or openai")
        results = {
            "label": args.label,
            "llm": args.llm,
            "profile": args.profile,
            "search": args.search,
            "seed": args.seed,
            "params": args.param,
        }
        if args.deot_items:
            results["deot"] = _run_benchmark(services, "researchy", "deot", args.deot_items, args, args.deot_bench)
        if args.omnithink_items:
            results["omnithink"] = _run_benchmark(
                services, "freshwiki", "omnithink", args.omnithink_items, args, args.omnithink_bench
            )
        return results
    finally:
        services.close()


_ROWS = (
    ("deot", "nodes", "question nodes"),
    ("deot", "llm_calls", "LLM calls"),
    ("deot", "citations", "citations in the report"),
    ("omnithink", "heading_recall", "outline heading recall"),
    ("omnithink", "rouge_l", "ROUGE-L"),
    ("omnithink", "citations_per_section", "citations per section"),
    ("omnithink", "llm_calls", "LLM calls"),
)


def compare(before: dict[str, Any], after: dict[str, Any]) -> str:
    """A Markdown table of the means, before and after."""
    lines = [
        f"| method | metric | {before.get('label', 'before')} | {after.get('label', 'after')} |",
        "| --- | --- | ---: | ---: |",
    ]
    for method, key, name in _ROWS:
        a = (before.get(method) or {}).get("means", {}).get(key)
        b = (after.get(method) or {}).get("means", {}).get(key)
        if a is None and b is None:
            continue
        lines.append(f"| {method} | {name} | {'' if a is None else f'{a:g}'} | {'' if b is None else f'{b:g}'} |")
    counts = {m: len((after.get(m) or {}).get("items", [])) for m in ("deot", "omnithink")}
    lines.append("")
    lines.append(
        f"Means over {counts['deot']} Researchy questions (DEoT) and {counts['omnithink']} FreshWiki topics "
        f"(OmniThink); LLM {after.get('llm')}, profile {after.get('profile')}, search {after.get('search')}."
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--llm", default="fake", help="fake, local or openai (default fake: proves the command only)")
    parser.add_argument("--profile", default="auto", help="auto (quick on the built-in model), quick or paper")
    parser.add_argument("--search", default="local", help="local, web, both or none")
    parser.add_argument("--deot-items", type=int, default=20, help="Researchy questions for DEoT (0 skips)")
    parser.add_argument("--omnithink-items", type=int, default=10, help="FreshWiki topics for OmniThink (0 skips)")
    parser.add_argument(
        "--deot-bench",
        metavar="ID",
        help="measure DEoT from this stored benchmark (finished "
        "first if it is not): a killed measurement continues so, and a larger Researchy benchmark "
        "of the same seed (issue 16's) serves as it is",
    )
    parser.add_argument("--omnithink-bench", metavar="ID", help="the same for OmniThink on FreshWiki")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--param", action="append", default=[], help="[method.]key=value, as thoughtmap bench")
    parser.add_argument("--label", default="after", help="what this measurement is (before/after)")
    parser.add_argument("--out", type=Path, help="write the results as JSON")
    parser.add_argument(
        "--compare",
        nargs=2,
        type=Path,
        metavar=("BEFORE", "AFTER"),
        help="print the Markdown table of two result files and exit",
    )
    args = parser.parse_args(argv)
    if args.compare:
        before, after = (json.loads(p.read_text()) for p in args.compare)
        print(compare(before, after))
        return 0
    results = measure(args)
    text = json.dumps(results, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    for method in ("deot", "omnithink"):
        if method in results:
            print(method, results[method]["benchmark"], json.dumps(results[method]["means"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
