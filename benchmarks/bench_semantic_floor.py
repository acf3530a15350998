"""Benchmark of the semantic floor (engine/search/relevance.py, `SEMANTIC_FLOOR`) on the bundled corpus.

The word floor (bench_relevance.py) keeps a hit that shares enough of the query's words: "What
causes the seasons on Earth?" kept *Avatar: The Last Airbender (season 2)*, and the built-in model
wrote from it that greenhouse gases cause the seasons. The semantic floor also asks the built-in
embedder (all-MiniLM-L6-v2) whether the hit is about the query: cosine similarity of query and
passage. Measured as the methods search (the default first stage, the word floor at 0.35, hop
documents kept through the document that named them):

- kept gold: HotpotQA questions (AutoAct 300 and dev 500); of the top-k hits whose title is a
  gold supporting title and that the word floor keeps, the share the semantic floor keeps too;
- dropped off-corpus: Researchy Questions (web queries the Wikipedia corpus does not cover); the
  share of their kept hits the semantic floor drops, and of queries left with no source at all.

A script, not a test: it measures and prints. No LLM is involved.

    .venv/bin/python benchmarks/bench_semantic_floor.py            # print the Markdown section
    .venv/bin/python benchmarks/bench_semantic_floor.py --write    # also replace it in docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import facts_block, jsonl, machine_facts, publish, table  # noqa: E402
from benchmarks.bench_relevance import HOTPOT, RESEARCHY  # noqa: E402  (the same questions as the word floor's)
from engine.config import load_settings  # noqa: E402
from engine.search.relevance import DEFAULT_FLOOR, SEMANTIC_FLOOR, relevant_hits, semantic_scores  # noqa: E402
from engine.services import build_services  # noqa: E402

SECTION = "bench_semantic_floor"
# Questions a newcomer asks first, which the bundled corpus does not hold (the first one).
EXAMPLES = [
    "What causes the seasons on Earth?",
    "What were the economic effects of the 1973 OPEC oil embargo on Western economies?",
    "Which animation comedy by the creator of Wallace and Gromit matched zoo animals with "
    "people talking about their homes?",
]


def word_kept(searcher, question: str, k: int):
    """The top-k hits, and those the word floor keeps (hops kept): what the methods see before the
    semantic floor."""
    hits = searcher.search(question, k=k)
    return hits, relevant_hits(question, hits, floor=DEFAULT_FLOOR).kept


def passes(question: str, hits, embedder, floor: float) -> set[str]:
    """Refs of the hits that pass both floors at semantic floor `floor` (hops through kept hits)."""
    return {
        h.ref for h in relevant_hits(question, hits, floor=DEFAULT_FLOOR, embedder=embedder, semantic_floor=floor).kept
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="replace this section in docs/benchmarks.md")
    parser.add_argument("--k", type=int, default=5, help="hits per question (default 5, DEoT's search size)")
    parser.add_argument("--researchy", type=int, default=300, help="off-corpus queries (default 300)")
    parser.add_argument("--hotpot", type=int, default=800, help="HotpotQA questions (default 800)")
    parser.add_argument(
        "--floors", type=float, nargs="+", default=[0.0, 0.2, 0.25, 0.3, SEMANTIC_FLOOR, 0.4, 0.45, 0.5]
    )
    args = parser.parse_args(argv)
    command = " ".join(
        [".venv/bin/python benchmarks/bench_semantic_floor.py", *(sys.argv[1:] if argv is None else argv)]
    )

    services = build_services(load_settings())
    embedder = services.embedder
    if embedder is None:
        raise SystemExit("no embedder: " + services.embedder_notice)
    searcher = services.searcher("local")
    floors = sorted(set(args.floors))

    gold_total = 0
    gold_kept = dict.fromkeys(floors, 0)
    gold_questions = 0
    items = [item for path in HOTPOT for item in jsonl(path)][: args.hotpot]
    for item in items:
        support = {title for title, _ in item["supporting_facts"]}
        hits, kept_by_words = word_kept(searcher, item["question"], args.k)
        gold = [h for h in kept_by_words if h.title.split(" (")[0] in support or h.title in support]
        gold_questions += 1
        gold_total += len(gold)
        for floor in floors:
            kept = passes(item["question"], hits, embedder, floor)
            gold_kept[floor] += sum(h.ref in kept for h in gold)

    off_hits = 0
    off_dropped = dict.fromkeys(floors, 0)
    off_empty = dict.fromkeys(floors, 0)
    queries = [item["query"] for item in jsonl(RESEARCHY, args.researchy)]
    for query in queries:
        hits, kept_by_words = word_kept(searcher, query, args.k)
        off_hits += len(kept_by_words)
        for floor in floors:
            kept = passes(query, hits, embedder, floor)
            off_dropped[floor] += len(kept_by_words) - len(kept)
            off_empty[floor] += not kept

    rows = []
    for floor in floors:
        mark = " (default)" if floor == SEMANTIC_FLOOR else (" (off)" if floor == 0 else "")
        rows.append(
            [
                f"{floor:.2f}{mark}",
                f"{gold_kept[floor] / max(gold_total, 1):.3f}",
                f"{off_dropped[floor] / max(off_hits, 1):.3f}",
                f"{off_empty[floor] / max(len(queries), 1):.3f}",
            ]
        )

    example_lines = []
    for question in EXAMPLES:
        hits, kept_by_words = word_kept(searcher, question, args.k)
        kept = passes(question, hits, embedder, SEMANTIC_FLOOR)
        example_lines.append(f"- *{question}*")
        for hit, score in zip(hits, semantic_scores(question, hits, embedder) or []):
            verdict = (
                "kept" if hit.ref in kept else ("dropped" if hit in kept_by_words else "dropped by the word floor")
            )
            example_lines.append(f"  - {hit.title}: cosine {score:.2f}, {verdict}")
        if not hits:
            example_lines.append("  - (the word floor kept no hit)")
    services.close()

    body = "\n".join(
        [
            "## Semantic floor (is a hit about the query?)",
            "",
            facts_block(command, machine_facts()),
            "",
            f"Top-{args.k} hits of the default first stage ({searcher.description}), after the word floor "
            f"({DEFAULT_FLOOR}); the semantic floor is the cosine of query and passage under the built-in "
            "embedder, all-MiniLM-L6-v2, with a hop document kept when the document that named it is. "
            f"*Kept gold*: share of the word floor's HotpotQA gold-title hits the semantic floor keeps ({gold_total} "
            f"gold hits over {gold_questions} questions). *Dropped off-corpus*: share of the word floor's hits it drops "
            f"for {len(queries)} Researchy Questions (web queries the corpus does not cover); *no source*: share of "
            'those queries left with no hit, which the node answers as "the sources at hand do not cover this". '
            "No LLM is involved: these numbers are the same for every model.",
            "",
            table(["semantic floor", "kept gold", "dropped off-corpus", "no source (off-corpus)"], rows),
            "",
            "Examples, offline:",
            "",
            *example_lines,
            "",
        ]
    )
    publish(SECTION, body, args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
