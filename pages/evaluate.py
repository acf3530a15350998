"""Evaluate: run methods on a bundled dataset (each item a stored run), watch it, read the table,
open any item's run."""

import streamlit as st

from components import identity
from components.app_state import active_llm, get_services, preferences, running_on_notice, start_local_model
from components.benchmark_view import benchmark_label, benchmark_view, form_wording, sample_size
from components.method_choice import choose_methods
from components.routing import through_the_app
from engine.evaluate.compare import budget_problem
from engine.evaluate.datasets import DATASETS, DEFAULT_SEED, DatasetError
from engine.evaluate.runner import MAX_CONCURRENCY, BenchmarkError, BenchmarkSpec
from engine.methods.params import profile_for_llm
from engine.reads import BenchmarkNotFound
from engine.safe_text import code_span

through_the_app()  # first: a deep link opened first after a start still runs through app.py

DEFAULT_LIMIT = 10

services = get_services()
st.title("Evaluate")
running_on_notice(services)
current = st.query_params.get("benchmark")

with st.expander("New benchmark", expanded=current is None):
    dataset = st.selectbox("Dataset", list(DATASETS), format_func=lambda n: DATASETS[n].title, key="eval-dataset")
    st.caption(f"Protocol: {DATASETS[dataset].protocol}")
    cols = st.columns(3)
    # No bounds in the number widgets (Streamlit would keep the last valid value of a bad entry):
    # the runner refuses a bad value with the reason.
    limit = cols[0].number_input(
        "Items",
        value=DEFAULT_LIMIT,
        step=1,
        key="eval-limit",
        help="How many items of the dataset (a fixed sample for a seed). Empty: all.",
    )
    seed = cols[1].number_input(
        "Seed", value=DEFAULT_SEED, step=1, key="eval-seed", help="The same seed gives the same items."
    )
    concurrency = cols[2].number_input(
        "Concurrency", value=2, step=1, key="eval-concurrency", help=f"Runs at a time, 1 to {MAX_CONCURRENCY}."
    )
    kind = active_llm(services)
    profile = profile_for_llm(kind)
    choice = choose_methods(
        services,
        key="eval",
        profile=profile,
        model=services.llm_info(kind)["model"],
        default=[],
        help_text="Each item is run by every method chosen.",
        items=sample_size(dataset, limit),
    )
    st.caption("The budget is the whole benchmark's: no new run starts once it is spent.")
    if st.button("Start benchmark", type="primary", key="eval-start"):
        problem = (
            "Choose at least one method in Methods"
            if not choice.methods
            else budget_problem(choice.max_cost, choice.max_tokens)
        )
        spec = BenchmarkSpec(
            dataset=dataset,
            methods=choice.methods,
            limit=None if limit is None else int(limit),
            seed=DEFAULT_SEED if seed is None else int(seed),
            values={
                f"{method}.{name}": value for method, values in choice.values.items() for name, value in values.items()
            },
            llm=kind,
            profile=profile,
            search_mode=preferences(services).search,
            max_cost=choice.max_cost,
            max_tokens=choice.max_tokens,
            concurrency=0 if concurrency is None else int(concurrency),
            user_id=identity.viewer(services).user_id,
        )
        if problem:
            st.error(f"{problem}. Nothing was started.")
        else:
            try:
                bench = services.benchmarks.create(spec)
            except (BenchmarkError, DatasetError) as exc:
                st.error(f"Cannot start the benchmark: {form_wording(str(exc))}. Change it above; nothing was stored.")
            else:
                if kind != "local" or start_local_model(services):
                    services.benchmarks.start(bench.id)
                st.query_params["benchmark"] = bench.id
                st.rerun()

person = identity.viewer(services)
# Multi-user mode: yours (an admin sees everyone's).
benchmarks = services.benchmarks.store.list_benchmarks(user_id=None if person.sees_everything else person.user_id)
if current and current not in {b.id for b in benchmarks}:
    try:
        named = services.benchmarks.store.get_benchmark(current)
    except BenchmarkNotFound:
        current = None  # an address typed by hand: the newest is shown, as before teams
    else:
        if person.sees_everything or named.user_id == person.user_id:
            benchmarks.append(named)  # older than the newest listed: still shown
        else:
            st.error(
                f"Benchmark {code_span(current[:40])} is not one of yours, so nothing of it is shown.",
                icon=":material/lock:",
            )
            current = None
if not benchmarks:
    st.info("No benchmarks yet: choose a dataset and methods above and press Start benchmark.")
    st.stop()
titles = {name: cls.title for name, cls in services.methods.items()}
labels = {b.id: benchmark_label(b, titles) for b in benchmarks}
if current in labels:
    st.session_state["eval-open"] = current
elif st.session_state.get("eval-open") not in labels:
    st.session_state["eval-open"] = benchmarks[0].id


def _opened() -> None:
    st.query_params["benchmark"] = st.session_state["eval-open"]


opened = st.selectbox("Benchmark", list(labels), format_func=labels.get, key="eval-open", on_change=_opened)
try:
    benchmark_view(services, opened)
except BenchmarkNotFound as exc:
    st.error(str(exc))
