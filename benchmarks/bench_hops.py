"""Hop-following retrieval (engine/search/hops.py) against plain BM25 on the bundled corpus.

For every item of HotpotQA (AutoAct's 300), 2WikiMultihopQA (500) and NQ (500, items with a gold
passage), both searchers rank documents (one per title) and are scored on the item's gold titles:
all-gold@10 (every gold title among the first 10), nDCG@10 and MRR. BM25 is the corpus's top 50
chunks, collapsed to their titles, as the hop step sees them. The hop rule was chosen on the even
items (dev) and is reported on the odd ones (test) too, so a reader can see it is not fitted to
what it is scored on. No LLM is involved.

    .venv/bin/python benchmarks/bench_hops.py            # print the Markdown section
    .venv/bin/python benchmarks/bench_hops.py --write    # also replace it in docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import facts_block, machine_facts, percentile, publish, table  # noqa: E402
from engine.config import load_settings  # noqa: E402
from engine.evaluate.datasets import load_items  # noqa: E402
from engine.search.bundled import open_default_corpus  # noqa: E402
from engine.search.hops import CANDIDATES, HopSearcher, TitleLinker  # noqa: E402

SECTION = "bench_hops"
DATASETS = {"hotpotqa-autoact": 300, "2wiki": 500, "nq": 500}
K = 10


def key(title: str) -> str:
    return " ".join(title.casefold().split())


def scores(titles: Sequence[str], gold: Sequence[str]) -> tuple[float, float, float]:
    """all-gold@10, nDCG@10 (binary gains) and MRR of the first 10 distinct titles."""
    wanted = {key(t) for t in gold}
    top = list(dict.fromkeys(key(t) for t in titles))[:K]
    dcg = sum(1 / math.log2(rank + 2) for rank, title in enumerate(top) if title in wanted)
    ideal = sum(1 / math.log2(rank + 2) for rank in range(min(len(wanted), K)))
    mrr = next((1 / (rank + 1) for rank, title in enumerate(top) if title in wanted), 0.0)
    return float(wanted <= set(top)), dcg / ideal, mrr


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="replace this section in docs/benchmarks.md")
    args = parser.parse_args(argv)
    command = " ".join([".venv/bin/python benchmarks/bench_hops.py", *(sys.argv[1:] if argv is None else argv)])

    bm25 = open_default_corpus(load_settings())
    started = time.perf_counter()
    linker = TitleLinker(bm25.store.titles())
    build_s = time.perf_counter() - started
    hops = HopSearcher(bm25)
    hops.search("warm-up: builds the title linker", 1)
    paragraphs = [chunk.text for chunk in bm25.store.iter_collection_chunks("hotpotqa", limit=1000)]
    started = time.perf_counter()
    for text in paragraphs:
        linker.links(text)
    link_ms = (time.perf_counter() - started) * 1000 / max(1, len(paragraphs))
    paragraph_chars = statistics.fmean(len(text) for text in paragraphs) if paragraphs else 0
    rows = []
    for dataset, limit in DATASETS.items():
        items = [item for item in load_items(dataset, limit=limit) if item.supporting_titles]
        results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
        times: dict[str, list[float]] = {"BM25": [], "BM25 + hops": []}
        for index, item in enumerate(items):
            half = "dev" if index % 2 == 0 else "test"
            started = time.perf_counter()
            plain = [hit.title for hit in bm25.search(item.question, CANDIDATES)]
            times["BM25"].append(time.perf_counter() - started)
            started = time.perf_counter()
            hopped = [hit.title for hit in hops.search(item.question, K)]
            times["BM25 + hops"].append(time.perf_counter() - started)
            for name, titles in (("BM25", plain), ("BM25 + hops", hopped)):
                results.setdefault((name, half), []).append(scores(titles, item.supporting_titles))
        for name in ("BM25", "BM25 + hops"):
            cells = []
            for half in ("dev", "test"):
                measured = results[(name, half)]
                cells += [f"{statistics.fmean(m[i] for m in measured):.3f}" for i in range(3)]
            p50, p95 = (percentile(times[name], q) * 1000 for q in (50, 95))
            rows.append([dataset, len(items), name, *cells, f"{p50:.0f} / {p95:.0f}"])
    bm25.store.close()

    body = "\n".join(
        [
            "## Hop-following retrieval (first stage)",
            "",
            facts_block(command, machine_facts()),
            "",
            f"Documents ranked for each item's question, scored on its gold titles: all-gold@{K} (every gold "
            f"title among the first {K} documents), nDCG@{K} and MRR. *BM25*: the corpus's top {CANDIDATES} "
            "chunks, one per title. *BM25 + hops*: `engine/search/hops.py` over the same candidates (question "
            "titles, the pages they name, BM25's top-2 links). The rule was chosen on the even items (*dev*); "
            "*test* is the odd items. The corpus holds the datasets' own pooled paragraphs, named by their "
            "Wikipedia titles: an easier setting than open Wikipedia, and the one in which linking titles works "
            "best. Query time includes the BM25 search; NQ items without a gold passage are left out.",
            "",
            f"The title linker: {len(linker):,} linkable titles, built in {build_s:.2f} s (once per corpus change); "
            f"linking a paragraph ({paragraph_chars:.0f} characters on average) takes {link_ms:.2f} ms.",
            "",
            table(
                [
                    "dataset",
                    "items",
                    "searcher",
                    "dev all-gold@10",
                    "dev nDCG@10",
                    "dev MRR",
                    "test all-gold@10",
                    "test nDCG@10",
                    "test MRR",
                    "ms p50 / p95",
                ],
                rows,
            ),
            "",
        ]
    )
    publish(SECTION, body, args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
