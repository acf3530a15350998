"""A benchmark's table: per method, each metric's mean with a 95 % bootstrap confidence interval,
as Markdown (terminal, docs) and JSON (tools).

Answer metrics (EM, F1, accuracy, outline and ROUGE-L) are averaged over every finished item of a
method, a failed run counting as 0: a method that fails often must not look better for it.
Retrieval recall is what the run retrieved, whatever became of its answer: a failed run counts
what it had retrieved when it failed (measured from its stored sources), and 0 when it stored none.
Usage metrics (tokens, calls, cost, seconds) are averaged over the items that have them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.evaluate import metrics
from engine.evaluate.datasets import DatasetError, get_dataset, items_by_id
from engine.evaluate.reader import reader_version
from engine.methods.registry import get_method
from engine.safe_text import inline_text
from storage.evaluation import EvaluationStore, ItemStatus
from storage.models import Benchmark, BenchmarkItem

# How a failed run counts in a column: ZERO (an answer metric: it answered nothing), MEASURED (a
# retrieval metric: what it stored before failing, else 0) or AS_STORED (its value when it has one:
# usage, and what is measured only where it applies).
ZERO, MEASURED, AS_STORED = "zero", "measured", "as_stored"
# (key, column title, how a failed run counts)
ANSWER_METRICS = (
    ("em", "EM", ZERO),
    ("f1", "F1", ZERO),
    ("accuracy", "Accuracy", ZERO),
    ("recall_any", "Recall@10 any-gold", MEASURED),
    ("recall_all", "Recall@10 all-gold", MEASURED),
    # Of the passages a method chose as evidence (MTQA's knowledge units), when it declares them.
    ("evidence_recall_all", "Evidence recall@10 all-gold", MEASURED),
    # Of the sources the report cites (all of them, no cut at 10).
    ("cited_recall_all", "Cited all-gold", ZERO),
    ("heading_recall", "Heading recall", ZERO),
    ("rouge_l", "ROUGE-L", ZERO),
    ("information_diversity", "Info. diversity", AS_STORED),
    # LLM-judged (thoughtmap bench --judges): shown when a benchmark has them.
    ("support_rate", "Claim support", AS_STORED),
    ("citation_error_rate", "Unsupported citations", AS_STORED),
    ("knowledge_density", "Knowledge density", AS_STORED),
    ("factuality", "Key-point factuality", AS_STORED),
    ("rubric_clarity", "Clarity", AS_STORED),
    ("rubric_insightfulness", "Insightfulness", AS_STORED),
    ("rubric_relevance", "Relevance", AS_STORED),
    ("rubric_breadth", "Breadth", AS_STORED),
    ("rubric_depth", "Depth", AS_STORED),
    ("rubric_novelty", "Novelty", AS_STORED),
)
JUDGED = {
    "support_rate",
    "citation_error_rate",
    "knowledge_density",
    "factuality",
    "rubric_clarity",
    "rubric_insightfulness",
    "rubric_relevance",
    "rubric_breadth",
    "rubric_depth",
    "rubric_novelty",
}
USAGE_METRICS = (
    ("llm_calls", "LLM calls"),
    ("tokens", "Tokens"),
    ("cost", "Cost $"),
    ("searches", "Searches"),
    ("citations", "Citations"),
    ("dangling_citations", "Dangling"),
    ("seconds", "Seconds"),
    ("critical_path_s", "Critical path s"),
)
EVIDENCE_METRICS = {"evidence_recall_all"}
# In a failed item's metrics: the harness failed on it (scoring, a judge), not the method; counted as
# a failure like any other until `--rescore` scores it, and said under the table.
HARNESS_ERROR = "harness_error"
# In a scored item's metrics: an LLM judge failed on it, so it has no judged scores (the judged
# columns average over fewer items); `--rescore` asks the judges again.
JUDGE_ERROR = "judge_error"


def declares_evidence(method: str) -> bool:
    try:
        return get_method(method).evidence_titles(()) is not None
    except LookupError:
        return False


# The answer metrics each kind of dataset is scored on (the others do not apply to it).
_APPLIES = {
    "short": {
        "em",
        "f1",
        "recall_any",
        "recall_all",
        "evidence_recall_all",
        "cited_recall_all",
        "information_diversity",
    },
    "yesno": {"accuracy", "information_diversity"},
    "article": {"heading_recall", "rouge_l", "information_diversity"},
    "long": {"information_diversity"},
}


@dataclass
class MetricSummary:
    mean: float
    low: float
    high: float
    n: int


@dataclass
class MethodRow:
    method: str
    items: int
    finished: int
    failed: int
    metrics: dict[str, MetricSummary] = field(default_factory=dict)
    group: str = ""  # the value of the breakdown key (e.g. "hard"), when the table is broken down
    harness_errors: int = 0  # of `failed`: the harness's failures (HARNESS_ERROR), not the method's

    @property
    def label(self) -> str:
        return f"{self.method} · {self.group}" if self.group else self.method


@dataclass
class PairedDifference:
    """`method` minus `baseline` on one answer metric, item by item over the items both finished:
    the mean difference and its paired bootstrap interval. Two methods' own intervals overlap more
    often than their difference's includes 0: comparing rows, this is the interval that decides."""

    method: str
    baseline: str
    key: str
    summary: MetricSummary


@dataclass
class BenchmarkTable:
    benchmark: Benchmark
    rows: list[MethodRow]
    columns: list[tuple[str, str]]
    paired: int | None = None  # with `paired`: how many items every method has finished
    differences: list[PairedDifference] = field(default_factory=list)  # with `paired`
    older_readings: int = 0  # items read by an older version of the reader's prompt (mixed in one table)
    judge_errors: int = 0  # finished items an LLM judge failed on: no judged scores (JUDGE_ERROR)


def _values(rows: list[BenchmarkItem], key: str, failed_counts: str) -> list[float]:
    values = []
    for row in rows:
        if row.status == ItemStatus.FAILED and failed_counts == ZERO:
            values.append(0.0)  # whatever it stored: a failed run answered nothing
            continue
        value = row.metrics.get(key)
        if (
            row.status == ItemStatus.FAILED
            and failed_counts == MEASURED
            and not isinstance(value, (int, float))
            and not row.metrics.get(HARNESS_ERROR)
        ):
            value = 0.0  # it failed before it retrieved anything (what the harness did not measure: left out)
        if isinstance(value, bool):
            value = float(value)
        if isinstance(value, (int, float)):
            values.append(float(value))
    return values


def summarize(
    store: EvaluationStore, benchmark_id: str, *, seed: int = 0, by: str | None = None, paired: bool = False
) -> BenchmarkTable:
    """The table; with `by` (an item meta key such as "level"), one row per method and value; with
    `paired`, only the items every method has finished (a benchmark part-way compares methods on
    the same items)."""
    bench = store.get_benchmark(benchmark_id)
    applies = _APPLIES[get_dataset(bench.dataset).answer_type]
    all_rows = store.list_items(bench.id)
    common: int | None = None
    if paired:
        done = {
            m: {r.item_id for r in all_rows if r.method == m and r.status in ItemStatus.FINISHED} for m in bench.methods
        }
        shared = set.intersection(*done.values()) if done else set()
        all_rows = [r for r in all_rows if r.item_id in shared]
        common = len(shared)
    judged = {k for r in all_rows for k in r.metrics if k in JUDGED}
    columns = [(k, t) for k, t, _z in ANSWER_METRICS if k in applies or k in judged] + list(USAGE_METRICS)
    failed_counts = {k: z for k, _t, z in ANSWER_METRICS}
    groups = item_groups(bench, all_rows, by)
    table_rows = []
    for method, (group, members) in ((m, g) for m in bench.methods for g in groups.items()):
        rows = [r for r in all_rows if r.method == method and (members is None or r.item_id in members)]
        finished = [r for r in rows if r.status in ItemStatus.FINISHED]
        summary = MethodRow(
            method=method,
            items=len(rows),
            finished=len(finished),
            failed=sum(1 for r in rows if r.status == ItemStatus.FAILED),
            group=group,
            harness_errors=sum(1 for r in rows if r.status == ItemStatus.FAILED and r.metrics.get(HARNESS_ERROR)),
        )
        for key, _title in columns:
            if key in EVIDENCE_METRICS and not declares_evidence(method):
                continue  # not a zero: the method chooses no evidence beyond its sources
            values = _values(finished, key, failed_counts.get(key, AS_STORED))
            if values:
                mean, low, high = metrics.bootstrap_ci(values, seed=seed)
                summary.metrics[key] = MetricSummary(mean, low, high, len(values))
        table_rows.append(summary)
    # Over every paired item: the pairing is per item, whatever the breakdown.
    differences = _paired_differences(bench, all_rows, columns, failed_counts, seed) if paired else []
    current = reader_version(get_dataset(bench.dataset).answer_type == "yesno")
    older = sum(
        1
        for r in all_rows
        if r.status in ItemStatus.FINISHED
        and r.metrics.get("answer_source") == "reader"
        and r.metrics.get("reader_version", 1) != current
    )
    judge_failed = sum(1 for r in all_rows if r.status in ItemStatus.FINISHED and r.metrics.get(JUDGE_ERROR))
    return BenchmarkTable(
        bench,
        table_rows,
        columns,
        paired=common,
        differences=differences,
        older_readings=older,
        judge_errors=judge_failed,
    )


def _paired_differences(
    bench: Benchmark,
    rows: list[BenchmarkItem],
    columns: list[tuple[str, str]],
    failed_counts: dict[str, str],
    seed: int,
) -> list[PairedDifference]:
    """Each later method against each earlier one (in the benchmark's order), on every answer metric
    both have a value for on the same items."""
    answer_keys = [k for k, _t in columns if k in failed_counts and k not in EVIDENCE_METRICS]
    finished = [r for r in rows if r.status in ItemStatus.FINISHED]
    per_item: dict[tuple[str, str], dict[str, float]] = {}
    for key in answer_keys:
        for row in finished:
            values = _values([row], key, failed_counts[key])
            if values:
                per_item.setdefault((row.method, key), {})[row.item_id] = values[0]
    differences = []
    for i, baseline in enumerate(bench.methods):
        for method in bench.methods[i + 1 :]:
            for key in answer_keys:
                ours, theirs = per_item.get((method, key), {}), per_item.get((baseline, key), {})
                shared = sorted(ours.keys() & theirs.keys())
                if not shared:
                    continue
                mean, low, high = metrics.bootstrap_ci([ours[item] - theirs[item] for item in shared], seed=seed)
                differences.append(PairedDifference(method, baseline, key, MetricSummary(mean, low, high, len(shared))))
    return differences


def item_groups(bench: Benchmark, rows: list[BenchmarkItem], by: str | None) -> Mapping[str, set[str] | None]:
    """The item ids of each value of `by`, in the order the dataset first gives them (AutoAct's
    easy, medium, hard; not alphabetical), or one group of every item."""
    if not by:
        return {"": None}
    items = items_by_id(bench.dataset, sorted({r.item_id for r in rows}))
    missing = sorted({i for i in items if by not in items[i].meta})
    if missing or not items:
        raise DatasetError(f"the {bench.dataset} items have no '{by}' to break the table down by")
    groups: dict[str, set[str]] = {}
    for item in items.values():  # in the dataset file's order
        groups.setdefault(item.meta[by], set()).add(item.id)
    return groups


def metric_text(summary: MetricSummary | None, key: str) -> str:
    """One cell of the table: a usage mean as a number, an answer metric as mean [95 % CI]."""
    if summary is None:
        return "–"
    if key in {"llm_calls", "tokens", "searches", "citations", "dangling_citations"}:
        return f"{summary.mean:,.1f}"
    if key == "cost":
        return f"{summary.mean:.4f}"
    if key in {"seconds", "critical_path_s"}:
        return f"{summary.mean:.1f}"
    if summary.n > 1 and summary.high > summary.low:
        return f"{summary.mean:.3f} [{summary.low:.3f}, {summary.high:.3f}]"
    return f"{summary.mean:.3f}"


def to_markdown(table: BenchmarkTable) -> str:
    bench = table.benchmark
    model = inline_text(str(bench.llm_info.get("description") or bench.llm_info.get("model") or "?"))
    balanced = f", balanced by {inline_text(bench.balance)}" if bench.balance else ""
    lines = [
        f"Benchmark `{bench.id}`: {inline_text(get_dataset(bench.dataset).title)}, {bench.limit} items "
        f"(seed {bench.seed}{balanced}), model {model}, search {inline_text(bench.search_mode)}, status {bench.status}.",
        "Answer metrics: mean [95 % bootstrap CI]; a failed run counts as 0 (in recall: what it had retrieved). "
        "Usage: mean per item."
        + (f" Paired: the {table.paired} items every method has finished." if table.paired is not None else ""),
        "",
        "| Method | Done | Failed | " + " | ".join(title for _k, title in table.columns) + " |",
        "| --- | ---: | ---: | " + " | ".join("---:" for _ in table.columns) + " |",
    ]
    for row in table.rows:
        cells = [metric_text(row.metrics.get(key), key) for key, _t in table.columns]
        lines.append(
            f"| {inline_text(row.label)} | {row.finished}/{row.items} | {row.failed} | " + " | ".join(cells) + " |"
        )
    for note in table_notes(table):
        lines += ["", note]
    lines += _differences_markdown(table)
    if bench.note:
        lines += ["", inline_text(bench.note)]
    return "\n".join(lines) + "\n"


def table_notes(table: BenchmarkTable) -> list[str]:
    """What a reader of the table must know to trust it (mixed reader versions, the harness's own
    failures, missing judged scores) with the command that mends it: under the CLI's table and the
    app's alike."""
    bench_id = table.benchmark.id
    notes = []
    if table.older_readings:
        notes.append(
            f"{table.older_readings} of these item runs were read by an older version of the reader's prompt: "
            f"`thoughtmap bench --rescore {bench_id}` reads them again where their runs are stored."
        )
    harness = sum(row.harness_errors for row in table.rows)
    if harness:
        notes.append(
            f"{harness} of the failed items failed in the harness, not in the method: "
            f"`thoughtmap bench --rescore {bench_id}` scores them again."
        )
    if table.judge_errors:
        notes.append(
            f"Judged scores are missing for {table.judge_errors} finished items: an LLM judge failed on them "
            f"(the judged columns average over the others). `thoughtmap bench --rescore {bench_id}` asks "
            "the judges again."
        )
    return notes


def differences_rows(table: BenchmarkTable, names: dict[str, str] | None = None) -> list[dict[str, str]]:
    """The paired differences as rows of cells (one per pair of methods, one column per metric);
    `names` gives methods their titles (the app's)."""
    names = names or {}
    titles = dict(table.columns)
    keys = list(dict.fromkeys(d.key for d in table.differences))
    pairs = list(dict.fromkeys((d.method, d.baseline) for d in table.differences))
    found = {(d.method, d.baseline, d.key): d.summary for d in table.differences}
    rows = []
    for method, baseline in pairs:
        row = {"Difference": f"{names.get(method, method)} − {names.get(baseline, baseline)}"}
        for key in keys:
            summary = found.get((method, baseline, key))
            # Over fewer items than the table pairs (a metric some items have no value for): said.
            fewer = f" (n={summary.n})" if summary is not None and summary.n != table.paired else ""
            row[titles[key]] = (
                "–" if summary is None else f"{summary.mean:+.3f} [{summary.low:+.3f}, {summary.high:+.3f}]{fewer}"
            )
        rows.append(row)
    return rows


DIFFERENCES_CAPTION = (
    "Paired differences, item by item: mean [95 % paired bootstrap CI]; an interval that excludes "
    "0 is a difference these items support."
)


def _differences_markdown(table: BenchmarkTable) -> list[str]:
    rows = differences_rows(table)
    if not rows:
        return []
    headers = list(rows[0])
    lines = [
        "",
        DIFFERENCES_CAPTION,
        "",
        "| " + " | ".join(headers) + " |",
        "| --- | " + " | ".join("---:" for _ in headers[1:]) + " |",
    ]
    # Method names are the only text not written here (numbers and brackets stay as they are).
    lines += [
        "| " + " | ".join(inline_text(row[h]) if h == "Difference" else row[h] for h in headers) + " |" for row in rows
    ]
    return lines


def to_json(table: BenchmarkTable) -> dict[str, Any]:
    bench = table.benchmark
    return {
        "benchmark": {
            "id": bench.id,
            "dataset": bench.dataset,
            "methods": bench.methods,
            "limit": bench.limit,
            "seed": bench.seed,
            "params": bench.params,
            "llm": bench.llm_info,
            "search": bench.search_mode,
            "balance": bench.balance or None,
            "status": bench.status,
            "note": bench.note,
        },
        "paired_items": table.paired,
        "older_readings": table.older_readings,
        "judge_errors": table.judge_errors,
        "paired_differences": [
            {
                "method": d.method,
                "baseline": d.baseline,
                "metric": d.key,
                "mean": d.summary.mean,
                "low": d.summary.low,
                "high": d.summary.high,
                "n": d.summary.n,
            }
            for d in table.differences
        ],
        "methods": [
            {
                "method": row.method,
                **({"group": row.group} if row.group else {}),
                "items": row.items,
                "finished": row.finished,
                "failed": row.failed,
                "metrics": {
                    k: {"mean": m.mean, "low": m.low, "high": m.high, "n": m.n} for k, m in row.metrics.items()
                },
            }
            for row in table.rows
        ],
    }


__all__ = [
    "BenchmarkTable",
    "MethodRow",
    "MetricSummary",
    "PairedDifference",
    "metric_text",
    "summarize",
    "to_json",
    "to_markdown",
]
