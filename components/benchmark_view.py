"""A stored benchmark in the app: its progress (live while it runs), Stop and Resume, the results
table (mean with 95 % CI per method) and the per-item table, from which any item's run opens on
Explore. Everything is read from storage; model text (questions, predictions, errors) is shown only
in st.dataframe cells, which render text as text."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from components import identity
from components.app_state import start_local_model
from engine.evaluate.datasets import DatasetError, Item, get_dataset, items_by_id, load_items
from engine.evaluate.progress import finished_share, method_progress
from engine.evaluate.results import (
    ANSWER_METRICS,
    DIFFERENCES_CAPTION,
    differences_rows,
    metric_text,
    summarize,
    table_notes,
)
from engine.evaluate.runner import BenchmarkError, budget_that_stopped
from engine.reads import Benchmark, BenchmarkItem, BenchmarkStatus, ItemStatus
from engine.safe_text import inline_text
from engine.services import Services

REFRESH_SECONDS = 1.0
_ANSWER_KEYS = {key for key, _title, _zero in ANSWER_METRICS}
PREDICTION_CHARS = 300  # a long-form prediction is read on Explore, not in a table cell


# The runner words its refusals for the CLI; the page names its own fields.
_FORM_WORDS = (
    ("--limit", "Items"),
    ("--concurrency", "Concurrency"),
    ("--methods", "Methods"),
    ("--param ", "parameter "),
    ("--max-cost", "Max cost"),
    ("--max-tokens", "Max tokens"),
)


def form_wording(message: str) -> str:
    """A runner or dataset refusal in the page's words (its fields' labels instead of CLI flags)."""
    for flag, label in _FORM_WORDS:
        message = message.replace(flag, label)
    return message


def benchmark_label(bench: Benchmark, method_titles: dict[str, str]) -> str:
    methods = ", ".join(method_titles.get(m, m) for m in bench.methods)
    return (
        f"{bench.created_at:%Y-%m-%d %H:%M} · {get_dataset(bench.dataset).title} · {bench.limit} items × "
        f"{methods} · {bench.status} · {bench.id}"
    )


@st.cache_data(show_spinner=False)
def _dataset_size(dataset: str) -> int:
    return len(load_items(dataset))


def sample_size(dataset: str, limit: int | None) -> int | None:
    """How many items a benchmark of `limit` (None: all) would run; None for a limit Start refuses
    or a dataset that cannot be read (Start says why)."""
    if limit is not None and limit < 1:
        return None
    try:
        size = _dataset_size(dataset)
    except DatasetError:
        return None
    return size if limit is None else min(int(limit), size)


@st.cache_data(show_spinner=False, max_entries=8)
def _items(dataset: str, ids: tuple[str, ...]) -> dict[str, Item]:
    return items_by_id(dataset, list(ids))


def benchmark_view(services: Services, benchmark_id: str) -> None:
    """The whole view of one benchmark; the progress part refreshes itself while it runs."""
    store = services.benchmarks.store
    bench = store.get_benchmark(benchmark_id)
    titles = {name: cls.title for name, cls in services.methods.items()}
    st.caption(
        inline_text(
            f"{get_dataset(bench.dataset).title} · {bench.limit} items (seed {bench.seed}) · "
            f"model {bench.llm_info.get('description') or bench.llm_info.get('model', '?')} · "
            f"search {bench.search_mode} · concurrency {bench.concurrency}"
            + (f" · max cost ${bench.max_cost:g}" if bench.max_cost is not None else "")
            + (f" · max tokens {bench.max_tokens:,}" if bench.max_tokens is not None else "")
        )
    )
    active = services.benchmarks.is_active(bench.id)

    @st.fragment(run_every=REFRESH_SECONDS if active else None)
    def live_progress(was_active: bool) -> None:
        now_active = services.benchmarks.is_active(benchmark_id)
        if was_active and not now_active:
            st.rerun(scope="app")  # finished or stopped: show the final tables, stop polling
        current = store.get_benchmark(benchmark_id)
        rows = store.list_items(benchmark_id)
        _progress(current, rows, titles, now_active)
        _controls(services, current, now_active)

    live_progress(active)
    rows = store.list_items(bench.id)
    try:
        items = _items(bench.dataset, tuple(sorted({r.item_id for r in rows})))
    except DatasetError as exc:  # the data file went missing since: the scores stay readable
        st.warning(f"The dataset's items cannot be read ({exc}); questions and gold answers are left out.")
        items = {}
    answer_columns = _results(services, bench, titles)
    _item_table(bench, rows, items, titles, answer_columns)


def _progress(bench: Benchmark, rows: list[BenchmarkItem], titles: dict[str, str], active: bool) -> None:
    lines = method_progress(bench.methods, rows)
    share = finished_share(lines)
    done = sum(line.finished for line in lines)
    st.progress(
        share, text=f"{done} of {len(rows)} item runs finished · {bench.status}" + (" · running now" if active else "")
    )
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "Method": titles.get(line.method, line.method),
                    "Items": line.total,
                    "Scored": line.scored,
                    "Failed": line.failed,
                    # Not running when the benchmark is not: left for a resume (a stop, its budget).
                    ("Running" if active else "Unfinished"): line.running,
                    "Waiting": line.pending,
                }
                for line in lines
            ]
        ),
        hide_index=True,
        key=f"bench-progress-{bench.id}",
    )
    if stopped_by := budget_that_stopped(bench):
        # The stored note gives the CLI's command; here the budget is raised on the page.
        left = sum(1 for row in rows if row.status not in ItemStatus.FINISHED)
        st.warning(
            f"The {stopped_by} budget was reached with {left} runs left. Raise it below and press Resume: "
            "finished items are kept."
        )
    elif bench.note:
        st.warning(inline_text(bench.note))
    elif not active and bench.status == BenchmarkStatus.RUNNING:
        st.warning(
            "This benchmark is not running in this app now (the app was restarted, or its work was cut "
            "short). Press Resume to continue it: finished items are kept."
        )


def _budget_inputs(services: Services, bench: Benchmark) -> tuple[int | None, float | None]:
    """A stopped benchmark's budgets, to raise before Resume (one its budget stopped continues
    only on more): each input holds the stored value; None where the benchmark has no such limit."""
    tokens, cost = services.benchmarks.spent(bench.id)
    st.caption(
        f"Spent so far: {tokens:,} tokens"
        + (f", ${cost:.4f}" if bench.max_cost is not None else "")
        + ". Raise the budget here to let Resume go further."
    )
    cols = st.columns(2)
    max_tokens = max_cost = None
    if bench.max_tokens is not None:
        value = cols[0].number_input(
            "Token budget",
            value=int(bench.max_tokens),
            step=10000,
            key=f"bench-budget-tokens-{bench.id}",
            help="Prompt and completion tokens of the whole benchmark: its runs and its scoring.",
        )
        max_tokens = int(value)
    if bench.max_cost is not None:
        value = cols[1].number_input(
            "Cost budget ($)",
            value=float(bench.max_cost),
            step=0.1,
            format="%.4f",
            key=f"bench-budget-cost-{bench.id}",
            help="Dollars for the whole benchmark: its runs and its scoring.",
        )
        max_cost = float(value)
    return max_tokens, max_cost


def _controls(services: Services, bench: Benchmark, active: bool) -> None:
    person = identity.viewer(services)
    if person.signed_in and bench.user_id != person.user_id:
        return  # someone else's (an admin reading): never stopped or resumed by another
    resumable = not active and bench.status != BenchmarkStatus.DONE
    raised: tuple[int | None, float | None] = (None, None)
    if (
        resumable
        and bench.status == BenchmarkStatus.STOPPED
        and (bench.max_tokens is not None or bench.max_cost is not None)
    ):
        raised = _budget_inputs(services, bench)
    # One of the two buttons at a time (a running benchmark stops, a stopped one resumes), in one place.
    column = st.columns([1, 7])[0]
    if active and column.button("Stop", key=f"bench-stop-{bench.id}"):
        services.benchmarks.stop(bench.id)
        st.toast("Stopping: the runs under way stop at their next step and stay resumable.")
    if resumable and column.button("Resume", key=f"bench-resume-{bench.id}"):
        max_tokens, max_cost = raised
        try:
            if raised != (None, None) and raised != (bench.max_tokens, bench.max_cost):
                # Refused (BenchmarkError, below) when not more than is spent: it would stop at once.
                services.benchmarks.raise_budget(bench.id, max_tokens=max_tokens, max_cost=max_cost)
            if bench.llm_info.get("kind") == "local" and not start_local_model(services):
                return
            services.benchmarks.start(bench.id)
        except BenchmarkError as exc:  # e.g. it ran on another model than this app's
            st.error(inline_text(str(exc)))
            return
        st.rerun(scope="app")  # the progress starts polling again


def _results(services: Services, bench: Benchmark, titles: dict[str, str]) -> list[tuple[str, str]]:
    """The table per method; returns the dataset's answer metrics (key, title) for the item table."""
    st.subheader("Results")
    several = len(bench.methods) > 1
    # Done, every method has finished every item: paired is the whole table (with its differences).
    paired = several and (
        bench.status == BenchmarkStatus.DONE
        or st.toggle(
            "Only the items every method has finished",
            key=f"bench-paired-{bench.id}",
            help="While a benchmark is part-way, its methods have finished different items: compare them on the same "
            "ones, with their paired differences.",
        )
    )
    # A sample balanced on a field (e.g. level) is shown by it: a row per method and value.
    table = summarize(services.benchmarks.store, bench.id, by=bench.balance or None, paired=paired)
    st.caption(
        "Answer metrics: mean [95 % bootstrap CI] over finished items; a failed run counts as 0 (in "
        "recall: what it had retrieved). Usage: mean per item."
        + (f" Over the {table.paired} items every method has finished." if table.paired is not None else "")
    )
    st.dataframe(
        pd.DataFrame(
            [
                {
                    "Method": titles.get(row.method, row.method) + (f" · {row.group}" if row.group else ""),
                    "Done": f"{row.finished}/{row.items}",
                    "Failed": row.failed,
                    **{title: metric_text(row.metrics.get(key), key) for key, title in table.columns},
                }
                for row in table.rows
            ]
        ),
        hide_index=True,
        key=f"bench-results-{bench.id}",
    )
    for note in table_notes(table):
        st.caption(inline_text(note))
    if differences := differences_rows(table, titles):
        st.caption(DIFFERENCES_CAPTION)
        st.dataframe(pd.DataFrame(differences), hide_index=True, key=f"bench-differences-{bench.id}")
    return [(key, title) for key, title in table.columns if key in _ANSWER_KEYS]


# What is scored is not always the answer the run shows: say which (issue 14's browser review).
PREDICTION_HELP = (
    "What was scored against Gold: the method's own short answer where it writes one, else a "
    "short answer the reader model took from the run's report. Open the item's run for its full "
    "answer."
)


def _gold(item: Item | None) -> str:
    if item is None:
        return ""
    if item.answers:
        return " | ".join(item.answers)
    return item.reference_title  # an article's topic; open-ended questions have no gold text


def _row_status(bench: Benchmark, row: BenchmarkItem) -> str:
    """A row's status as a reader takes it: a run left unfinished by a benchmark that no longer runs
    (stopped by you or its budget) is waiting for a resume, not running."""
    if row.status == ItemStatus.RUNNING and bench.status != BenchmarkStatus.RUNNING:
        return "unfinished (resume to continue)"
    return row.status


def _item_table(
    bench: Benchmark,
    rows: list[BenchmarkItem],
    items: dict[str, Item],
    titles: dict[str, str],
    answer_columns: list[tuple[str, str]],
) -> None:
    st.subheader("Items")
    records = []
    for row in rows:
        item = items.get(row.item_id)
        record = {
            "Item": row.item_id,
            "Method": titles.get(row.method, row.method),
            "Question": item.question if item else "",
            "Prediction": row.prediction[:PREDICTION_CHARS],
            "Gold": _gold(item),
        }
        for key, title in answer_columns:
            value = row.metrics.get(key)
            record[title] = float(value) if isinstance(value, (int, float)) else None
        record["Status"] = _row_status(bench, row)
        record["Error"] = row.error
        records.append(record)
    st.dataframe(
        pd.DataFrame(records),
        hide_index=True,
        key=f"bench-items-{bench.id}",
        column_config={
            "Question": st.column_config.TextColumn(width="medium"),
            "Prediction": st.column_config.TextColumn(width="medium", help=PREDICTION_HELP),
        },
    )
    with_runs = [r for r in rows if r.run_id]
    if not with_runs:
        st.caption("No item has a run yet.")
        return
    # No status in the label: the browser kept showing the label it first drew ("· running") after the
    # item finished; the table above says each item's status.
    labels = {r.id: f"{r.item_id} · {titles.get(r.method, r.method)}" for r in with_runs}
    cols = st.columns([4, 1], vertical_alignment="bottom")
    picked = cols[0].selectbox(
        "An item's run",
        list(labels),
        format_func=labels.get,
        key=f"bench-pick-{bench.id}",
        help="Open the run to see why it scored what it did: its map, steps and report.",
    )
    if cols[1].button("Open on Explore", key=f"bench-open-{bench.id}"):
        run_id = next(r.run_id for r in with_runs if r.id == picked)
        st.session_state["run_id"] = run_id
        st.switch_page("pages/explore.py", query_params={"run": run_id})


__all__ = ["benchmark_label", "benchmark_view", "form_wording", "sample_size"]
