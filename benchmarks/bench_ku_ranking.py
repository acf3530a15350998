"""Knowledge-unit ranking, measured on a stored benchmark's MTQA runs without any LLM call.

Each MTQA run keeps its question graph and the keywords its first retrieval (KU_1) used. This script
retrieves again from that graph with those keywords and compares the recall@10 of the gold passages
(HotpotQA, 2WikiMultihopQA) for two orders of the same units: by their summed score (the ranking
before session 14) and as the knowledge layer ranks them now (best matched key first, then that
sum: `engine/knowledge/stored.py`), each cut to the run's `units` parameter.

    THOUGHTMAP_HOME=/work/benchhome .venv/bin/python benchmarks/bench_ku_ranking.py 16b88af92916
"""

from __future__ import annotations

import argparse
import os

from engine.config import load_settings
from engine.evaluate import metrics
from engine.evaluate.datasets import load_items
from engine.knowledge.stored import StoredKnowledgeBase
from engine.knowledge.units import Keywords
from storage import Repository, open_database
from storage.evaluation import EvaluationStore
from storage.knowledge import KnowledgeStore


def chunk_id(unit) -> int:
    return int(unit.id.rsplit("-c", 1)[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benchmark", help="a stored benchmark id with MTQA runs (thoughtmap bench --list)")
    args = parser.parse_args()
    if not os.environ.get("THOUGHTMAP_HOME"):
        raise SystemExit("set THOUGHTMAP_HOME to the home that holds the benchmark's runs")
    db = open_database(load_settings().database_url)
    repo, store, evaluations = Repository(db), KnowledgeStore(db), EvaluationStore(db)
    bench = evaluations.get_benchmark(args.benchmark)
    items = {
        i.id: i for i in load_items(bench.dataset, limit=bench.limit, seed=bench.seed, balance=bench.balance or None)
    }
    graphs = {g.key: g for g in store.list_graphs(scope="question")}
    rows: dict[str, list] = {"stored KU_1": [], "summed score": [], "best matched key first": []}
    for entry in evaluations.list_items(args.benchmark, method="mtqa"):
        if not entry.run_id:
            continue
        run = repo.get_run(entry.run_id)
        holder = next(iter(repo.list_nodes(run.id, kind="knowledge")), None)
        data = (holder.data or {}) if holder is not None else {}
        graph = graphs.get(data.get("graph_key", ""))
        if graph is None or not data.get("keywords_ready"):
            continue
        base = StoredKnowledgeBase(store, graph, ask=None, parallel=None, writable=False)  # type: ignore[arg-type]
        keywords = Keywords(tuple(data["detailed_keywords"]), tuple(data["general_keywords"]))
        units = base.retrieve(
            run.question, keywords, top_k=run.params["top_k"], hops=run.params["hops"], max_units=10**6
        )
        keep = run.params["units"]
        gold = items[entry.item_id].supporting_titles
        orders = {
            "stored KU_1": [u["title"] for u in data.get("units", [])],
            "summed score": [u.hit.title for u in sorted(units, key=lambda u: (-u.score, chunk_id(u)))][:keep],
            "best matched key first": [u.hit.title for u in units][:keep],
        }
        for name, titles in orders.items():
            recall = metrics.retrieval_recall(titles, gold, k=10)
            if recall is not None:
                rows[name].append(recall)
    print(f"Benchmark {args.benchmark} ({bench.dataset}): KU_1 recall@10 of the gold passages, MTQA runs\n")
    print("| order | runs | all gold | any gold | fraction |\n| --- | ---: | ---: | ---: | ---: |")
    for name, recalls in rows.items():
        n = len(recalls) or 1
        print(
            f"| {name} | {len(recalls)} | {sum(r.all_gold for r in recalls) / n:.3f} | "
            f"{sum(r.any_gold for r in recalls) / n:.3f} | {sum(r.fraction for r in recalls) / n:.3f} |"
        )


if __name__ == "__main__":
    main()
