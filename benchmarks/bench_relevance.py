"""Benchmark of the relevance floor (engine/search/relevance.py) on the bundled corpus.

What the floor must do: keep the passages a question needs, drop the nearest-but-unrelated ones
BM25 returns when the corpus does not cover a question. Measured on the bundled data:

- kept gold: HotpotQA questions (AutoAct 300 and dev 500); of the top-k BM25 hits whose title is a
  gold supporting title, the share the floor keeps;
- dropped off-corpus: Researchy Questions (web search queries the Wikipedia corpus does not cover);
  the share of their hits dropped, and of queries left with no hit ("no relevant source found").

A script, not a test: it measures and prints.

    .venv/bin/python benchmarks/bench_relevance.py            # print the Markdown section
    .venv/bin/python benchmarks/bench_relevance.py --write    # also replace it in docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import facts_block, jsonl, machine_facts, publish, table  # noqa: E402
from engine.config import load_settings  # noqa: E402
from engine.search.bundled import BUNDLED_DATA_DIR, open_default_corpus  # noqa: E402
from engine.search.relevance import DEFAULT_FLOOR, judge  # noqa: E402

SECTION = "bench_relevance"
HOTPOT = [
    BUNDLED_DATA_DIR / "hotpotqa" / "hotpotqa_autoact_easy_medium_hard_300.jsonl",
    BUNDLED_DATA_DIR / "hotpotqa" / "hotpotqa_dev_fullwiki_500.jsonl",
]
RESEARCHY = BUNDLED_DATA_DIR / "deepresearchgym" / "researchy_queries_sample_doc_click_1000.jsonl"
# The case from the issue: nothing on it in the corpus, and BM25 offered an unrelated biography.
EXAMPLES = ["What were the economic effects of the 1973 OPEC oil embargo on Western economies?"]


def scored(searcher, questions: list[str], k: int):
    for question in questions:
        hits = searcher.search(question, k=k)
        yield question, hits, judge(question, hits)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="replace this section in docs/benchmarks.md")
    parser.add_argument("--k", type=int, default=5, help="hits per question (default 5, DEoT's search size)")
    parser.add_argument("--researchy", type=int, default=300, help="off-corpus queries (default 300)")
    parser.add_argument("--floors", type=float, nargs="+", default=[0.2, 0.25, 0.3, DEFAULT_FLOOR, 0.4, 0.5])
    args = parser.parse_args(argv)
    command = " ".join([".venv/bin/python benchmarks/bench_relevance.py", *(sys.argv[1:] if argv is None else argv)])

    searcher = open_default_corpus(load_settings())
    gold_scores: list[float] = []
    gold_questions = 0
    for path in HOTPOT:
        for item in jsonl(path):
            support = {title for title, _ in item["supporting_facts"]}
            _, hits, verdicts = next(scored(searcher, [item["question"]], args.k))
            scores = [v.score for v in verdicts if v.hit.title.split(" (")[0] in support or v.hit.title in support]
            gold_questions += 1
            gold_scores.extend(scores)
    off_scores: list[list[float]] = []
    for item in jsonl(RESEARCHY, args.researchy):
        _, hits, verdicts = next(scored(searcher, [item["query"]], args.k))
        off_scores.append([v.score for v in verdicts])

    rows = []
    for floor in sorted(set(args.floors)):
        kept_gold = statistics.fmean(s >= floor for s in gold_scores) if gold_scores else 0.0
        all_off = [s for scores in off_scores for s in scores]
        dropped_off = statistics.fmean(s < floor for s in all_off) if all_off else 0.0
        empty = statistics.fmean(all(s < floor for s in scores) for scores in off_scores) if off_scores else 0.0
        mark = " (default)" if floor == DEFAULT_FLOOR else ""
        rows.append([f"{floor:.2f}{mark}", f"{kept_gold:.3f}", f"{dropped_off:.3f}", f"{empty:.3f}"])

    example_lines = []
    for question, hits, verdicts in scored(searcher, EXAMPLES, args.k):
        example_lines.append(f"- *{question}*")
        for v in verdicts:
            verdict = "kept" if v.score >= DEFAULT_FLOOR else "dropped"
            example_lines.append(
                f"  - {v.hit.title}: score {v.score:.2f}, {verdict} (matched: {', '.join(v.matched) or '-'})"
            )
    searcher.store.close()

    body = "\n".join(
        [
            "## Relevance floor (what a node may cite)",
            "",
            facts_block(command, machine_facts()),
            "",
            f"Top-{args.k} BM25 hits of the bundled corpus. *Kept gold*: share of HotpotQA gold-title hits kept "
            f"({len(gold_scores)} gold hits over {gold_questions} questions). *Dropped off-corpus*: share of the hits "
            f"dropped for {len(off_scores)} Researchy Questions (web queries the corpus does not cover); *no source*: "
            'share of those queries left with no hit, which the node reports as "no relevant source found". '
            "No LLM is involved: these numbers are the same for every model.",
            "",
            table(["floor", "kept gold", "dropped off-corpus", "no source (off-corpus)"], rows),
            "",
            "The issue's example, offline:",
            "",
            *example_lines,
            "",
        ]
    )
    publish(SECTION, body, args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
