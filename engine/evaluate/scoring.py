"""One benchmark item's scores, from its stored run and the dataset item.

Everything is read back from storage, so a score can be recomputed and explained from the run a
reader opens: the answer from the report (engine/evaluate/reader.py), the retrieved titles from the
run's sources in the order its searches returned them, the searches from the step log, the usage from the
run's LLM calls.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from typing import Any

from engine.citations import cited_source_ids, strip_markers
from engine.evaluate import metrics
from engine.evaluate.datasets import Item
from engine.evaluate.reader import ReadAnswer, own_short_answer, read_answer, reader_version
from engine.llm.counted import EvalLLM
from engine.methods.registry import get_method
from engine.narration import SEARCH, active_seconds
from engine.safe_text import shown_text
from storage.models import LLMCall, NodeSource, Run, Source, stored_id
from storage.repository import Repository
from storage.statuses import RunStatus

log = logging.getLogger(__name__)
RECALL_AT = 10
_STORED_MARKER = re.compile(r"\[\[S(\d+)\]\]")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def evidence_recall(repo: Repository, run: Run, item: Item) -> dict[str, float]:
    """Recall@10 of the passages a method chose as its evidence (`Method.evidence_titles`: MTQA's
    knowledge units), for the methods that declare them; nothing for the others."""
    try:
        method = get_method(run.method)
    except LookupError:  # a method no longer registered: its stored sources are all there is
        return {}
    titles = method.evidence_titles(repo.list_nodes(run.id))
    recall = metrics.retrieval_recall(titles, item.supporting_titles, k=RECALL_AT) if titles is not None else None
    if recall is None:
        return {}
    return {
        "evidence_recall_any": recall.any_gold,
        "evidence_recall_all": recall.all_gold,
        "evidence_recall_fraction": recall.fraction,
    }


def cited_recall(markdown: str, sources: Sequence[Source], item: Item) -> dict[str, float]:
    """Recall of the gold titles among every source the report cites (issue 42: what each run saw,
    `recall_*`, and what it cited, this). No cut at 10: a report's citations are what it rests on."""
    by_id = {stored_id(s): s for s in sources}
    titles = [by_id[i].title for i in cited_source_ids(markdown) if i in by_id]
    recall = metrics.retrieval_recall(titles, item.supporting_titles, k=max(1, len(titles)))
    if recall is None:
        return {}
    return {"cited_recall_any": recall.any_gold, "cited_recall_all": recall.all_gold}


def retrieval_order(sources: Sequence[Source], links: Iterable[NodeSource]) -> list[Source]:
    """The run's sources in the order its searches returned them, for recall@k: by the first node
    that linked each (nodes are numbered as they are created: the search that found a source comes
    before any node that cites it), then by its rank in that node's results. Stored ids are no such
    order: a batch is inserted sorted by ref, so that concurrent batches lock rows in one order, and
    "Alpha" then outranked a better-ranked "Zurich". A source no node links comes last, by id."""
    first: dict[int, tuple[int, int]] = {}
    for link in links:
        key = (link.node_id, link.rank)
        if link.source_id not in first or key < first[link.source_id]:
            first[link.source_id] = key
    unlinked = (float("inf"), 0)
    return sorted(sources, key=lambda s: (*first.get(stored_id(s), unlinked), stored_id(s)))


def answered(run: Run) -> bool:
    """A run that did not end `done` answered nothing a reader should score."""
    return run.status == RunStatus.DONE


def score_item(
    repo: Repository, run_id: str, item: Item, reader: EvalLLM, known_reading: str | None = None
) -> tuple[str, dict[str, Any], str]:
    """(prediction, metrics, error) of one finished run. A run that failed or stopped scores zero on
    its answer metrics and keeps its usage; the error says why. A reader that fails scores the
    answer 0 with `reader_error` set (the run is not failed for it; a rescore reads it again).
    `known_reading`: the reader's earlier reading of this same report, reused instead of asking
    again when the answer is still the reader's to read (a rescore)."""
    run = repo.get_run(run_id)
    report = repo.latest_report(run_id)
    markdown = report.markdown if report is not None else ""
    scores: dict[str, Any] = usage_metrics(repo, run)
    sources = repo.list_sources(run_id)
    scores.update(citation_counts(markdown, {s.id for s in sources if s.id is not None}))  # stored: all have ids
    if answered(run):  # a failed run's own citation check measured a placeholder, not an answer
        scores.update(own_citation_check(report.data if report is not None else {}))
    # Fewer than two sources: no diversity at all (the metric's own 0.0), not an item left out.
    texts = [s.text or s.snippet for s in sources]
    scores["information_diversity"] = (
        metrics.information_diversity(metrics.text_vectors(texts)) if len(texts) >= 2 else 0.0
    )
    if item.supporting_titles:
        ordered = retrieval_order(sources, repo.node_source_links(run_id))
        recall = metrics.retrieval_recall([s.title for s in ordered], item.supporting_titles, k=RECALL_AT)
        if recall is not None:
            scores.update(
                {"recall_any": recall.any_gold, "recall_all": recall.all_gold, "recall_fraction": recall.fraction}
            )
        scores.update(evidence_recall(repo, run, item))
        if answered(run):  # a failed run's report cites nothing it found
            scores.update(cited_recall(markdown, sources, item))

    error = "" if answered(run) else (run.error or run.stop_reason or f"the run ended {run.status}")
    prediction = ""
    if item.answer_type in ("short", "yesno"):
        if answered(run):
            data = report.data if report is not None else {}
            if known_reading is not None and own_short_answer(data) is None and markdown.strip():
                # A reading stored before the reader read `shown_text` may carry its escapes (`&amp;`).
                read = ReadAnswer(answer=shown_text(known_reading), source="reader")
            else:
                read = read_answer(
                    reader,
                    question=item.question,
                    report_markdown=markdown,
                    report_data=data,
                    yes_no=item.answer_type == "yesno",
                )
            prediction = read.answer
            scores["answer_source"] = read.source
            if read.source == "reader":
                scores["reader_version"] = reader_version(item.answer_type == "yesno")
            if read.error:
                scores["reader_error"] = read.error
        if item.answer_type == "short":
            scores["em"] = metrics.exact_match(prediction, item.answers) if prediction else 0.0
            scores["f1"] = metrics.f1(prediction, item.answers) if prediction else 0.0
        else:
            scores["accuracy"] = metrics.yes_no_accuracy(prediction, item.answers[0]) if prediction else 0.0
    elif item.answer_type == "article":
        # A failed run's report is a placeholder that says so: it is no article to score.
        text = shown_text(strip_markers(markdown)) if answered(run) else ""
        prediction = text
        scores["heading_recall"] = (
            metrics.heading_recall(_HEADING.findall(markdown), item.reference_outline) if text.strip() else 0.0
        )
        scores["rouge_l"] = metrics.rouge_l(text, item.reference_text) if text.strip() else 0.0
        # Must stay False: the item's own article is excluded from its retrieval (datasets.Item.exclusions).
        own = item.reference_title.casefold()
        scores["own_article_retrieved"] = bool(own) and any(s.title.casefold() == own for s in sources)
    else:
        prediction = shown_text(strip_markers(markdown)) if answered(run) else ""
    return prediction, scores, error


def usage_metrics(repo: Repository, run: Run) -> dict[str, Any]:
    """What the run cost and how long it took: tokens, cost, calls, active seconds, critical path."""
    events = repo.list_events(run.id)
    calls = repo.list_llm_calls(run.id)
    return {
        "status": run.status,
        "tokens": run.prompt_tokens + run.completion_tokens,
        "prompt_tokens": run.prompt_tokens,
        "completion_tokens": run.completion_tokens,
        "cost": run.cost,
        "llm_calls": run.llm_calls,
        "nodes": run.node_count,
        "searches": sum(1 for e in events if e.kind == SEARCH),
        "seconds": round(active_seconds(events), 3),
        "critical_path_s": round(critical_path(repo, run, calls), 3),
    }


def critical_path(repo: Repository, run: Run, calls: Sequence[LLMCall]) -> float:
    nodes = repo.list_nodes(run.id)
    try:
        return metrics.critical_path_seconds(nodes, calls, waits=dependency_edges(repo, run))
    except ValueError:  # declared waits that loop back: a method's bug, not a reason to lose the item
        log.warning("run %s: its dependency edges form a cycle; its critical path follows the tree only", run.id)
        return metrics.critical_path_seconds(nodes, calls)


def dependency_edges(repo: Repository, run: Run) -> list[tuple[int, int]]:
    """(source, target) of the run's edges whose kind the method declares as a wait (`EdgeKind.waits`)."""
    try:
        kinds = {kind.name for kind in get_method(run.method).edge_kinds if kind.waits}
    except LookupError:
        return []
    return [(edge.src, edge.dst) for edge in repo.list_edges(run.id) if edge.kind in kinds] if kinds else []


def citation_counts(markdown: str, source_ids: set[int]) -> dict[str, Any]:
    """Markers in the final report and the ones that point to no source of the run (judge-free)."""
    markers = [int(m) for m in _STORED_MARKER.findall(markdown)]
    dangling = sum(1 for m in markers if m not in source_ids)
    return {
        "citations": len(markers),
        "cited_sources": len(set(cited_source_ids(markdown))),
        "dangling_citations": dangling,
    }


def own_citation_check(data: dict[str, Any]) -> dict[str, Any]:
    """The support and citation error rates a method measured itself (the research agent checks
    every cited sentence: `metrics` in its report's data); `--judges claims` replaces them."""
    own = data.get("metrics") if isinstance(data, dict) else None
    if not isinstance(own, dict):
        return {}
    return {
        key: float(own[key])
        for key in ("support_rate", "citation_error_rate")
        if isinstance(own.get(key), (int, float)) and not isinstance(own.get(key), bool)
    }


__all__ = ["RECALL_AT", "answered", "citation_counts", "own_citation_check", "score_item", "usage_metrics"]
