"""`thoughtmap search-eval`: how well the local corpus's search finds a dataset's gold paragraphs,
with no LLM (unless the `llm` reranker is asked for).

`search-eval --dataset D [--retriever R] [--reranker X] [--limit N] [--json]` asks the searcher
every item's question and prints all-gold@10, recall@k, nDCG@10, MRR and the query time p50/p95
(engine/evaluate/retrieval_eval.py). Without --retriever or --reranker it measures what the methods
use (THOUGHTMAP_RETRIEVER, THOUGHTMAP_RERANKER). A configuration that cannot be measured as asked
(engine/evaluate/retrieval_setup.py) is one line and exit 2; a search that fails, exit 1.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.cli import common
from engine.cli.basics import EXIT_OK, CLIError

if TYPE_CHECKING:  # only for annotations: imported where first used
    from engine.evaluate.retrieval_eval import RetrievalReport

# Only the names: the evaluation itself (numpy, the datasets) is imported when the command runs.

# A progress line on stderr at most this often.
PROGRESS_EVERY_S = 2.0


def cmd_search_eval(args: argparse.Namespace) -> int:
    from engine.config import load_settings
    from engine.evaluate.datasets import DatasetError, load_items
    from engine.evaluate.retrieval_eval import SEARCH_DEPTH, evaluate_retrieval
    from engine.evaluate.retrieval_setup import RetrievalSetupError, build_eval_searcher, dataset_name, eval_settings
    from engine.services import build_services

    settings = load_settings()
    retriever = args.retriever or settings.retrieval.retriever
    reranker = args.reranker or settings.retrieval.reranker
    try:
        dataset = dataset_name(args.dataset)
        items = load_items(dataset, limit=args.limit)
        # The methods' own services, with the retriever and reranker to measure in the settings.
        services = build_services(eval_settings(settings, retriever, reranker))
    except (RetrievalSetupError, DatasetError) as exc:
        raise CLIError(str(exc)) from exc
    try:
        try:
            searcher = build_eval_searcher(
                services, candidates=SEARCH_DEPTH, progress=None if args.quiet else common.corpus_progress()
            )
        except RetrievalSetupError as exc:
            raise CLIError(str(exc)) from exc
        if not args.quiet:
            common.err(f"measuring {searcher.description} on {dataset} ({len(items)} items)")
        report = evaluate_retrieval(
            searcher,
            items,
            dataset=dataset,
            retriever=retriever,
            reranker=reranker,
            progress=None if args.quiet else _progress(common.err),
        )
    finally:
        services.close()
    if args.json:
        print(json.dumps(report.to_json()))
    else:
        for line in report_lines(report):
            common.say(line)
    return EXIT_OK


def _progress(say: Callable[[str], None]) -> Callable[[int, int], None]:
    last = [time.monotonic()]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY_S and done < total:
            last[0] = now
            say(f"  {done} of {total} questions")

    return progress


def _number(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f} ms"


def report_lines(report: RetrievalReport) -> list[str]:
    """The human table of a `RetrievalReport`: what was measured, then one metric a line."""
    from engine.evaluate.retrieval_eval import RECALL_KS

    lines = [
        f"dataset    {report.dataset}: {report.items} items scored, {report.skipped} without gold titles skipped",
        f"retriever  {report.retriever}   reranker {report.reranker}",
        f"searcher   {report.searcher} ({report.depth} hits a question)",
        "",
        f"all-gold@10  {_number(report.all_gold_at_10)}",
        f"nDCG@10      {_number(report.ndcg_at_10)}",
        f"MRR          {_number(report.mrr)}",
    ]
    lines += [f"recall@{k:<5} {_number(report.recall_at_k[k])}" for k in RECALL_KS]
    lines += [f"query p50    {_ms(report.p50_ms)}", f"query p95    {_ms(report.p95_ms)}"]
    return lines
