"""The CPU one default local search costs, alone and in a retrieval round (issue 44).

A tree method's retrieval round searches every new node's keywords at once: OmniThink's second
round is 9 subtopics of 2 keywords each. On a 2-core machine those searches are mostly Python under
one GIL, so their CPU is wall time the LLM-only critical path does not count
(`bench_critical_path.py`). This measures the default local searcher (BM25 + MiniLM + hops, the
bundled corpus) with no LLM:

- **one at a time**: each query of the round searched in turn, k=3 (OmniThink's default), then the
  relevance floor on its hits, as `_retrieve` does: wall and CPU per search;
- **a round at once**: the same queries on 9 threads (2 each, one after the other), as the run's
  node workers search them: the round's wall time and the process's CPU.

Query vectors are remembered after the first pass (a run encodes each new keyword once, about 10 ms
of MiniLM), so the figures are the search itself. Each row is the median of `--repeat` passes.

    .venv/bin/python benchmarks/bench_search_cpu.py            # print the Markdown section
    .venv/bin/python benchmarks/bench_search_cpu.py --write    # also replace it in docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import facts_block, machine_facts, publish, table  # noqa: E402
from engine.config import load_settings  # noqa: E402
from engine.search.relevance import relevant_hits  # noqa: E402
from engine.services import build_services  # noqa: E402

SECTION = "bench_search_cpu"
TOPIC = "2022 AFL Grand Final"  # bench_critical_path.py's OmniThink question
# Two keywords for each of 9 subtopics, prefixed by the topic as OmniThink's `prefix_topic` does.
KEYWORDS = [
    ("Geelong Cats premiership", "Sydney Swans season"),
    ("Melbourne Cricket Ground crowd", "Norm Smith Medal winner"),
    ("Isaac Smith", "Chris Scott coach"),
    ("Tom Hawkins goals", "Lance Franklin"),
    ("AFL finals series 2022", "preliminary final"),
    ("Brownlow Medal", "grand final entertainment"),
    ("Geelong history", "Swans history"),
    ("umpires grand final", "broadcast ratings"),
    ("Patrick Dangerfield", "Joel Selwood retirement"),
]
K = 3
FLOOR = 0.2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7, help="passes per row; rows show the median")
    parser.add_argument("--write", action="store_true", help="replace the section in docs/benchmarks.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        services = build_services(load_settings({**os.environ, "THOUGHTMAP_HOME": home}))
        searcher, embedder = services.searcher("local"), services.embedder
        groups = [[f"{TOPIC} {keyword}" for keyword in pair] for pair in KEYWORDS]
        queries = [query for group in groups for query in group]

        def node(group: list[str]) -> None:
            for query in group:
                relevant_hits(query, searcher.search(query, k=K), floor=FLOOR, embedder=embedder)

        def serial() -> tuple[float, float]:
            wall, cpu = time.perf_counter(), time.process_time()
            node(queries)
            return time.perf_counter() - wall, time.process_time() - cpu

        def round_at_once() -> tuple[float, float]:
            threads = [threading.Thread(target=node, args=(group,)) for group in groups]
            wall, cpu = time.perf_counter(), time.process_time()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            return time.perf_counter() - wall, time.process_time() - cpu

        serial()  # the index, the embedding model, the linker and each query's vector, once
        alone = [serial() for _ in range(args.repeat)]
        together = [round_at_once() for _ in range(args.repeat)]
        services.close()
    n = len(queries)
    rows = [
        [
            "one at a time",
            n,
            f"{1000 * statistics.median(w for w, _ in alone) / n:.2f}",
            f"{1000 * statistics.median(c for _, c in alone) / n:.2f}",
            f"{1000 * statistics.median(w for w, _ in alone):.0f}",
        ],
        [
            "a round at once (9 threads)",
            n,
            "",
            f"{1000 * statistics.median(c for _, c in together) / n:.2f}",
            f"{1000 * statistics.median(w for w, _ in together):.0f}",
        ],
    ]
    body = "\n".join(
        [
            "## Search CPU: one default local search, alone and in a retrieval round (`bench_search_cpu.py`)",
            "",
            facts_block(f".venv/bin/python benchmarks/bench_search_cpu.py --repeat {args.repeat}", machine_facts()),
            f"The default local searcher (BM25 + MiniLM + hops over the bundled corpus) on OmniThink's second "
            f'retrieval round for "{TOPIC}": 9 subtopics of 2 topic-prefixed keywords, k={K}, each search followed by '
            f"the relevance floor ({FLOOR}). Query vectors are remembered after a first pass, so the figures are the "
            f"search itself. No LLM. Medians of {args.repeat} passes.",
            "",
            table(["searches", "queries", "wall per search (ms)", "CPU per search (ms)", "wall of all (ms)"], rows),
        ]
    )
    publish(SECTION, body, args.write)


if __name__ == "__main__":
    main()
