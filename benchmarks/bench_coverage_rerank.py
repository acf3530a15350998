"""A reranker with no model: does covering the question's words beat the hybrid first stage?

The research agent keeps the top N of a search's K hits. A cross-encoder is not to be had offline
(docs/benchmarks.md, "Retrieval: what the defaults are"), and the built-in bi-encoder only dilutes the
hybrid first stage. This tries the other cheap idea: greedy selection by query-term coverage, the
multi-hop retrieval papers' "cover what is not covered yet" (an MMR over the question's words).

Each step keeps the hit with the best

    c / (c + first-stage rank) + alpha * (IDF weight of the question words it adds) / (all of them)

where IDF is over the K candidates. Scored on the kept top N's distinct documents against the gold
titles: nDCG@10 and all-gold@10, as `thoughtmap search-eval` scores, on the even items (where the
grid is read) and on the odd ones (the check). No LLM.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_coverage_rerank.py [--k 100] [--n 10]
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.config import load_settings  # noqa: E402
from engine.evaluate.datasets import load_items  # noqa: E402
from engine.evaluate.retrieval_eval import all_gold_at, distinct_titles, gold_keys, ndcg_at  # noqa: E402
from engine.evaluate.retrieval_setup import build_eval_searcher, eval_settings  # noqa: E402
from engine.services import build_services  # noqa: E402
from storage.corpus_store import STOPWORDS  # noqa: E402

DATASETS = ("hotpotqa-autoact", "2wiki", "nq")
GRID = ((0.3, 10.0), (0.4, 10.0), (0.5, 5.0), (0.5, 10.0), (0.6, 5.0), (1.0, 5.0), (2.0, 5.0))
_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> set[str]:
    return {w for w in (t.casefold() for t in _WORD.findall(text)) if w not in STOPWORDS and len(w) > 1}


def coverage(question: str, hits: list, n: int, alpha: float, c: float) -> list:
    asked = words(question)
    if not asked:
        return hits[:n]
    found = [words(f"{h.title} {h.text}") & asked for h in hits]
    df = Counter(w for f in found for w in f)
    idf = {w: math.log(1 + len(hits) / (1 + df[w])) for w in asked}
    total = sum(idf.values())
    kept: list[int] = []
    covered: set[str] = set()
    left = list(range(len(hits)))
    while left and len(kept) < n:
        best = max(left, key=lambda i: c / (c + i) + alpha * sum(idf[w] for w in found[i] - covered) / total)
        kept.append(best)
        left.remove(best)
        covered |= found[best]
    return [hits[i] for i in kept]


def score(rows, choose) -> tuple[float, float]:
    ndcg, all_gold = [], []
    for gold, question, hits in rows:
        ranking = distinct_titles(h.title for h in choose(question, hits))
        ndcg.append(ndcg_at(ranking, gold, 10))
        all_gold.append(all_gold_at(ranking, gold, 10))
    return sum(ndcg) / len(ndcg), sum(all_gold) / len(all_gold)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=100, help="the first stage's hits reranked (the paper's K)")
    parser.add_argument("--n", type=int, default=10, help="the hits kept (the paper's N)")
    args = parser.parse_args()
    services = build_services(eval_settings(load_settings(), "hybrid", "none"))
    searcher = build_eval_searcher(services, candidates=args.k)
    rows = {}
    for name in DATASETS:
        items = [i for i in load_items(name) if gold_keys(i.supporting_titles)]
        rows[name] = [(gold_keys(i.supporting_titles), i.question, searcher.search(i.question, args.k)) for i in items]
    print(f"hybrid first stage, top {args.k} -> {args.n} kept; nDCG@10 / all-gold@10 of the kept documents\n")
    print("| reranker | half | " + " | ".join(DATASETS) + " |")
    print("|---|---|" + "---|" * len(DATASETS))
    choices = [("first stage (none)", lambda q, hits: hits[: args.n])]
    choices += [
        (f"coverage alpha={a} c={c:g}", lambda q, hits, a=a, c=c: coverage(q, hits, args.n, a, c)) for a, c in GRID
    ]
    for label, choose in choices:
        for half, name in ((0, "even (grid)"), (1, "odd (check)")):
            cells = []
            for dataset in DATASETS:
                ndcg, all_gold = score(rows[dataset][half::2], choose)
                cells.append(f"{ndcg:.3f} / {all_gold:.3f}")
            print(f"| {label} | {name} | " + " | ".join(cells) + " |", flush=True)
    services.close()


if __name__ == "__main__":
    main()
