"""The Evaluate and Compare pages under AppTest, offline on the scripted fake LLM: a benchmark started
from the page runs, its tables appear, an item's run opens on Explore; bad input is refused with what
to change and stores nothing; a comparison starts one run per method with the same budget and its
address reopens it."""

from __future__ import annotations

import time

import pytest
from streamlit.testing.v1 import AppTest

from components import mindmap
from engine.evaluate.compare import parse_run_ids
from engine.evaluate.datasets import load_items
from storage.evaluation import EvaluationStore, ItemStatus
from storage.models import BenchmarkStatus, RunStatus
from tests.pages.test_app_pages import (  # noqa: F401
    APP,
    TIMEOUT,
    assert_no_exception,
    follow_switch,
    joined,
    open_page,
    services,
    texts,
)

EVALUATE = "pages/evaluate.py"
COMPARE = "pages/compare.py"


def _wait_benchmark(services, benchmark_id: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not services.benchmarks.is_active(benchmark_id):
            return services.benchmarks.store.get_benchmark(benchmark_id)
        time.sleep(0.1)
    raise AssertionError(f"benchmark {benchmark_id} still running after {timeout} s")


def _choose(at, dataset: str, methods: list[str], limit: int):
    at.selectbox(key="eval-dataset").set_value(dataset).run()
    at.number_input(key="eval-limit").set_value(limit)
    at.multiselect(key="eval-methods").set_value(methods)
    return at.run()


@pytest.fixture
def no_map(monkeypatch):
    """AppTest cannot render the map component: record what it was given instead."""
    drawn: dict[str, mindmap.MapData] = {}

    def record(data, *, key, **kwargs):
        drawn[key] = data
        return None

    monkeypatch.setattr(mindmap, "mind_map", record)
    return drawn


def test_a_benchmark_started_on_the_page_runs_and_its_tables_appear(services):
    at = open_page(EVALUATE)
    assert "No benchmarks yet" in joined(at.info)
    assert "scripted fake LLM" in joined(at.info)  # what it runs on, said plainly
    at = _choose(at, "hotpotqa-autoact", ["direct", "rag"], 2)
    assert_no_exception(at)
    assert any(c.startswith("Protocol: FGDIP: EM and F1") for c in texts(at.caption))
    # The cost before Start: each method's, and the whole benchmark's.
    assert any(c.startswith("Estimate: 2 items × 2 methods: about") for c in texts(at.caption)), texts(at.caption)
    assert sum(c.startswith("About ") and "LLM call" in c for c in texts(at.caption)) == 2
    at.button(key="eval-start").click().run()
    assert_no_exception(at)
    assert not at.error, texts(at.error)
    store = EvaluationStore(services.db)
    [bench] = store.list_benchmarks()
    assert at.query_params["benchmark"] == [bench.id] or at.query_params["benchmark"] == bench.id
    assert (bench.dataset, bench.methods, bench.limit, bench.llm_info["kind"]) == (
        "hotpotqa-autoact",
        ["direct", "rag"],
        2,
        "fake",
    )
    assert _wait_benchmark(services, bench.id).status == BenchmarkStatus.DONE
    at.run()
    assert_no_exception(at)

    # The progress and results tables: one row per method, everything finished.
    progress, results, differences, items = (at.dataframe[i].value for i in range(4))
    assert list(progress["Items"]) == [2, 2] and list(progress["Scored"] + progress["Failed"]) == [2, 2]
    assert list(results["Done"]) == ["2/2", "2/2"]
    # A finished benchmark of two methods: their paired differences, as the CLI's --paired gives them.
    titles = {m: services.methods[m].title for m in ("direct", "rag")}
    assert list(differences["Difference"]) == [f"{titles['rag']} − {titles['direct']}"]
    assert {"EM", "F1"} <= set(differences.columns)
    assert any(c.startswith("Paired differences, item by item") for c in texts(at.caption))
    assert {"EM", "F1", "Recall@10 any-gold", "LLM calls"} <= set(results.columns)
    assert "ROUGE-L" not in results.columns  # not a metric of a short-answer dataset
    # The item table: every item by every method, with its question, prediction, gold answer and scores.
    gold = {i.id: i for i in load_items("hotpotqa-autoact", limit=2)}
    assert len(items) == 4 and set(items["Item"]) == set(gold)
    rows = {(r.item_id, r.method): r for r in store.list_items(bench.id)}
    for record in items.to_dict("records"):
        item = gold[record["Item"]]
        row = rows[
            (record["Item"], next(m for m in ("direct", "rag") if services.methods[m].title == record["Method"]))
        ]
        assert record["Question"] == item.question and record["Gold"] == " | ".join(item.answers)
        assert record["Prediction"] == row.prediction[:300] and record["Status"] == row.status
        assert record["EM"] == row.metrics["em"] and record["F1"] == row.metrics["f1"]
    assert all(r.status in ItemStatus.FINISHED for r in rows.values())

    # Any item's run opens on Explore.
    picked = at.selectbox(key=f"bench-pick-{bench.id}")
    row = store.get_item(picked.options and picked.value)
    at.button(key=f"bench-open-{bench.id}").click().run()
    assert_no_exception(at)
    at = follow_switch(at, "pages/explore.py").run()
    assert_no_exception(at)
    assert at.query_params["run"] in ([row.run_id], row.run_id)
    assert any(services.repo.get_run(row.run_id).question in m for m in texts(at.markdown))


def test_a_balanced_benchmark_part_way_is_shown_by_level_and_can_be_paired(services):
    from engine.evaluate.runner import BenchmarkRunner, BenchmarkSpec

    runner = BenchmarkRunner(services)
    bench = runner.create(
        BenchmarkSpec(dataset="hotpotqa-autoact", methods=["direct", "rag"], limit=3, llm="fake", balance="level")
    )
    runner.execute(bench.id)
    store = runner.store
    rag = next(r for r in store.list_items(bench.id) if r.method == "rag")
    store._update_item(rag.id, status=ItemStatus.PENDING, metrics={}, run_id=None)  # part-way
    store.set_benchmark_status(bench.id, BenchmarkStatus.STOPPED, "stopped with 1 runs left")
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.query_params["benchmark"] = bench.id
    at.switch_page(EVALUATE)
    at.run()
    assert_no_exception(at)
    results = at.dataframe[1].value
    assert len(results) == 6 and all(" · " in m for m in results["Method"])  # a row per method and level
    assert sorted(results["Done"]) == ["0/1", "1/1", "1/1", "1/1", "1/1", "1/1"]
    at.toggle(key=f"bench-paired-{bench.id}").set_value(True).run()
    assert_no_exception(at)
    assert any("Over the 2 items every method has finished." in c for c in texts(at.caption))
    assert list(at.dataframe[1].value["Done"]) == ["1/1"] * 4  # the level with no common item drops out


def test_a_benchmark_its_budget_stopped_takes_a_raised_budget_on_the_page(services):
    """Stopped by its budget, a benchmark shows what it spent and its budget to raise: one not more
    than what is spent is refused with the amount to beat; a raised one resumes it to the end."""
    from engine.evaluate.runner import BenchmarkRunner, BenchmarkSpec

    runner = BenchmarkRunner(services)
    bench = runner.create(
        BenchmarkSpec(
            dataset="hotpotqa-autoact",
            methods=["direct", "deot"],
            limit=2,
            llm="fake",
            values={"deot.max_nodes": 3},
            max_tokens=1500,
            concurrency=1,
        )
    )
    bench = runner.execute(bench.id)
    assert bench.status == BenchmarkStatus.STOPPED and "budget was reached" in bench.note
    spent, _cost = runner.spent(bench.id)
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.query_params["benchmark"] = bench.id
    at.switch_page(EVALUATE)
    at.run()
    assert_no_exception(at)
    assert f"Spent so far: {spent:,} tokens. Raise the budget here to let Resume go further." in texts(at.caption)
    # The page says it in its own words (the stored note gives the CLI's command, for the CLI).
    left = sum(1 for r in services.benchmarks.store.list_items(bench.id) if r.status not in ItemStatus.FINISHED)
    assert (
        f"The token budget was reached with {left} runs left. Raise it below and press Resume: finished items are kept."
    ) in texts(at.warning)
    assert "thoughtmap bench" not in joined(at.warning)
    budget = at.number_input(key=f"bench-budget-tokens-{bench.id}")
    assert budget.value == 1500
    budget.set_value(1000)
    at.button(key=f"bench-resume-{bench.id}").click().run()
    assert_no_exception(at)
    assert f"a token budget of 1,000 would stop it again at once; give more than {spent:,}" in joined(at.error)
    assert services.benchmarks.store.get_benchmark(bench.id).max_tokens == 1500  # kept

    at.number_input(key=f"bench-budget-tokens-{bench.id}").set_value(200_000)
    at.button(key=f"bench-resume-{bench.id}").click().run()
    assert_no_exception(at)
    assert not at.error, texts(at.error)
    done = _wait_benchmark(services, bench.id)
    assert (done.status, done.max_tokens) == (BenchmarkStatus.DONE, 200_000)
    assert all(r.status == ItemStatus.SCORED for r in services.benchmarks.store.list_items(bench.id))


def test_resuming_a_benchmark_on_another_model_says_why_on_the_page(services, monkeypatch):
    from engine.evaluate.runner import BenchmarkRunner, BenchmarkSpec

    bench = BenchmarkRunner(services).create(
        BenchmarkSpec(dataset="hotpotqa-autoact", methods=["direct"], limit=1, llm="fake")
    )
    services.benchmarks.store.set_benchmark_status(bench.id, BenchmarkStatus.STOPPED, "stopped with 1 runs left")
    real = services.llm_info
    monkeypatch.setattr(services, "llm_info", lambda kind: {**real(kind), "model": "another-model"})
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.query_params["benchmark"] = bench.id
    at.switch_page(EVALUATE)
    at.run()
    at.button(key=f"bench-resume-{bench.id}").click().run()
    assert_no_exception(at)
    assert "would mix two models in one table" in joined(at.error)
    assert services.benchmarks.store.get_benchmark(bench.id).status == BenchmarkStatus.STOPPED  # not failed


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda at: at.multiselect(key="eval-methods").set_value([]), "Choose at least one method"),
        (lambda at: at.number_input(key="eval-limit").set_value(0), "Items must be at least 1"),
        (lambda at: at.number_input(key="eval-concurrency").set_value(99), "Concurrency must be 1 to 16"),
        (lambda at: at.number_input(key="eval-max-cost").set_value(-1.0), "Max cost must be more than 0"),
        (
            lambda at: at.number_input(key="eval-params-direct-paper.max_answer_tokens").set_value(5),
            "max_answer_tokens",
        ),
    ],
    ids=["no-method", "limit", "concurrency", "budget", "parameter"],
)
def test_bad_benchmark_input_is_refused_and_nothing_is_stored(services, change, expected):
    at = _choose(open_page(EVALUATE), "hotpotqa-autoact", ["direct"], 2)
    change(at)
    at.run()
    at.button(key="eval-start").click().run()
    assert_no_exception(at)
    errors = joined(at.error)
    assert expected in errors, errors
    assert "nothing was stored" in errors or "Nothing was started" in errors
    assert EvaluationStore(services.db).list_benchmarks() == []
    assert services.repo.list_runs() == []


def test_a_comparison_runs_each_method_with_the_same_budget_side_by_side(services, no_map):
    at = open_page(COMPARE)
    at.text_area(key="compare-question").input("Who designed the Eiffel Tower?")
    at.multiselect(key="compare-methods").set_value(["direct", "rag"])
    at.number_input(key="compare-max-tokens").set_value(50_000)
    at.run()
    at.button(key="compare-start").click().run()
    assert_no_exception(at)
    assert not at.error, texts(at.error)
    run_ids = parse_run_ids(
        at.query_params["runs"] if isinstance(at.query_params["runs"], str) else at.query_params["runs"][0]
    )
    runs = [services.repo.get_run(r) for r in run_ids]
    assert [r.method for r in runs] == ["direct", "rag"]
    assert {(r.question, r.max_tokens, r.max_cost, r.llm_info["kind"], r.search_mode) for r in runs} == {
        ("Who designed the Eiffel Tower?", 50_000, None, "fake", "local")
    }
    for run_id in run_ids:
        services.runner.wait(run_id, timeout=30)
    assert all(services.repo.get_run(r).status == RunStatus.DONE for r in run_ids)

    # Reopened from its address alone (a new session): both maps, both reports, usage per run.
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.query_params["runs"] = ",".join(run_ids)
    at.switch_page(COMPARE).run()
    assert_no_exception(at)
    assert set(no_map) == {f"compare-map-{r}" for r in run_ids}
    for run_id in run_ids:
        assert len(no_map[f"compare-map-{run_id}"].nodes) == services.repo.get_run(run_id).node_count
    assert [h.value for h in at.subheader][:2] == [services.methods[m].title for m in ("direct", "rag")]
    # Each column's citations link to its own source entries: rag's [1] to "Rag source 1", never to an
    # anchor another column's report could also have (#source-1).
    cited = [m.value for m in at.markdown if "###### Rag source 1" in m.value]
    assert len(cited) == 1 and "](#rag-source-1)" in cited[0]
    assert not any("](#source-" in m.value for m in at.markdown)
    usage = [c for c in texts(at.caption) if "nodes done" in c]
    assert len(usage) == 2 and all("done" in u and "tokens" in u for u in usage)
    for run_id in run_ids:
        run = services.repo.get_run(run_id)
        assert any(f"{run.llm_calls:,} LLM call" in u for u in usage)

    # The judge on the pair: DEoT's five criteria and the overall verdict, both orders, with reasons.
    assert "No verdict for this pair and protocol yet." in texts(at.caption)
    at.button(key="compare-judge").click().run()
    assert_no_exception(at)
    assert not at.error, texts(at.error)
    verdict = at.dataframe[-1].value
    assert list(verdict["Criterion"]) == [
        "Analytical depth",
        "Specific arguments",
        "Innovation",
        "Practicality",
        "Logical coherence",
        "Overall",
    ]
    sides = {services.methods["direct"].title, services.methods["rag"].title, "tie"}
    assert set(verdict["A shown first"]) <= sides and set(verdict["Verdict"]) <= sides
    assert all(reason.strip() for reason in verdict["Why (B shown first)"])
    [judgment] = EvaluationStore(services.db).list_judgments(run_id=run_ids[0])
    assert (judgment.protocol, judgment.run_a, judgment.run_b, judgment.calls) == (
        "deot.pairwise",
        run_ids[0],
        run_ids[1],
        2,
    )
    assert all(services.repo.get_run(r).llm_calls == 1 for r in run_ids)  # the judge's calls are its own
    # Said in words, the variables only as where to change the judge (issue 43).
    note = next(c for c in texts(at.caption) if "flips with the order" in c)
    assert "The judge is the run's own model" in note and "judge_pairwise" not in note


def test_a_comparison_with_bad_input_stores_nothing(services, no_map):
    at = open_page(COMPARE)
    at.text_area(key="compare-question").input("   ")
    at.multiselect(key="compare-methods").set_value(["direct", "rag"])
    at.run()
    at.button(key="compare-start").click().run()
    assert_no_exception(at)
    assert "Cannot start the comparison" in joined(at.error)
    at.text_area(key="compare-question").input("Who designed the Eiffel Tower?")
    at.multiselect(key="compare-methods").set_value(["direct"])
    at.run()
    at.button(key="compare-start").click().run()
    assert "choose 2 or 3 methods" in joined(at.error)
    assert services.repo.list_runs() == []


def test_parse_run_ids_keeps_ids_in_order_once_and_drops_junk():
    assert parse_run_ids("a1,b2, a1,,<script>,c3,d4") == ["a1", "b2", "c3"]
    assert parse_run_ids(None) == [] and parse_run_ids("") == []


def test_a_verdict_read_with_the_pair_reversed_swaps_every_side():
    from engine.evaluate.compare import swapped
    from engine.evaluate.judges import CombinedCriterion, PairwiseResult, PairwiseRound, RoundCriterion

    result = PairwiseResult(
        protocol="deot.pairwise",
        run_a="x",
        run_b="y",
        rounds=[
            PairwiseRound(
                order="ab", valid=True, criteria={"overall": RoundCriterion(winner="a", reason="x is deeper")}
            ),
            PairwiseRound(order="ba", valid=True, criteria={"overall": RoundCriterion(winner="tie", reason="even")}),
        ],
        criteria={"overall": CombinedCriterion(winner="a", a_points=1.5, b_points=0.5)},
    )
    back = swapped(result)
    assert (back.run_a, back.run_b) == ("y", "x")
    assert [(r.order, r.criteria["overall"].winner) for r in back.rounds] == [("ba", "b"), ("ab", "tie")]
    assert back.criteria["overall"] == CombinedCriterion(winner="b", a_points=0.5, b_points=1.5)
    assert swapped(back) == result


def test_runs_already_stored_are_put_side_by_side(services, no_map):
    """Compare also takes runs you have: a question two runs answered, then its runs (the newest of
    each method preselected); fewer than two is refused; the comparison is their ids in the address."""
    from tests.support.fixtures_engine import run_to_end

    question = "Who designed the Eiffel Tower?"
    older_direct = run_to_end(services, question, "direct", {})
    rag = run_to_end(services, question, "rag", {})
    newer_direct = run_to_end(services, question, "direct", {})
    run_to_end(services, "A question asked once: what is a tower?", "direct", {})

    at = open_page(COMPARE)
    questions = at.selectbox(key="compare-existing-question")
    assert questions.options == [question]  # a question asked once is not offered
    [picker] = [m for m in at.multiselect if m.key.startswith("compare-existing-runs-")]
    assert picker.value == [newer_direct, rag]  # the newest of each method
    # Each run by its method, model, date and id (nothing that changes while the page is open), newest first.
    assert [o.rsplit(" · ", 1)[1] for o in picker.options] == [newer_direct, rag, older_direct]
    model = services.llm_info("fake")["model"]
    assert all(
        f"{services.methods[services.repo.get_run(o.rsplit(' · ', 1)[1]).method].title} · {model} · " in o
        for o in picker.options
    )

    picker.set_value([older_direct])
    at.run()
    at.button(key="compare-existing-start").click().run()
    assert_no_exception(at)
    assert "Choose 2 or 3 runs to compare (chosen: 1)." in joined(at.error)
    assert "runs" not in at.query_params

    [picker] = [m for m in at.multiselect if m.key.startswith("compare-existing-runs-")]
    picker.set_value([older_direct, rag])
    at.run()
    at.button(key="compare-existing-start").click().run()
    assert_no_exception(at)
    runs = at.query_params["runs"]
    assert parse_run_ids(runs if isinstance(runs, str) else runs[0]) == [older_direct, rag]
    assert set(no_map) == {f"compare-map-{r}" for r in (older_direct, rag)}
    assert len(services.repo.list_runs()) == 4  # nothing was started
    assert not at.warning  # same question, model, search and budget: nothing to warn of


def test_stored_runs_of_one_method_or_of_different_setups(services, no_map):
    """A question only one method answered still preselects two runs; runs that differ in more than
    their method (here their search) are compared with a warning that says in what."""
    from engine.evaluate.compare import default_pick
    from tests.support.fixtures_engine import run_to_end

    question = "Who designed the Eiffel Tower?"
    first = run_to_end(services, question, "rag", {})
    second = run_to_end(services, question, "rag", {}, search="none")
    runs = services.repo.list_runs()
    assert default_pick(runs) == [second, first]
    at = open_page(COMPARE)
    [picker] = [m for m in at.multiselect if m.key.startswith("compare-existing-runs-")]
    assert picker.value == [second, first]
    at.button(key="compare-existing-start").click().run()
    assert_no_exception(at)
    assert not at.error
    assert [w.value for w in at.warning] == [
        "These runs differ in more than their method: search. What tells them apart is not the method alone."
    ]


def test_an_item_left_unfinished_by_a_stopped_benchmark_is_not_shown_running():
    """A run the budget (or a stop) left for a resume kept its row "running" in the item table while
    nothing ran."""
    from components.benchmark_view import _row_status
    from storage.models import Benchmark, BenchmarkItem

    row = BenchmarkItem(benchmark_id="b", item_id="i", method="rag", status="running")
    running = Benchmark(id="b", dataset="hotpotqa-autoact", methods=["rag"], limit=1, seed=13, status="running")
    stopped = running.model_copy(update={"status": "stopped"})
    assert _row_status(running, row) == "running"
    assert _row_status(stopped, row) == "unfinished (resume to continue)"
    assert _row_status(stopped, row.model_copy(update={"status": "scored"})) == "scored"


def test_the_judge_protocol_starts_on_the_paper_of_a_method_compared(services, no_map):
    """MTQA beside FGDIP: MTQA's own win-rate protocol starts chosen (DEoT's open-ended criteria are
    the default only when no compared method has a protocol of its own)."""
    from tests.support.fixtures_engine import run_to_end

    run_ids = [
        run_to_end(services, "Which magazine was started first, Arthur's Magazine or First for Women?", m, {})
        for m in ("fgdip", "mtqa")
    ]
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.query_params["runs"] = ",".join(run_ids)
    at.switch_page(COMPARE).run()
    assert_no_exception(at)
    assert at.selectbox(key="compare-protocol").value == "mtqa"
