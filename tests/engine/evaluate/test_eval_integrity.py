"""What keeps a benchmark's numbers right across sessions (the second audit of the harness): a
reader that fails is not a failed run, a method's own sentence-long "short answer" goes through the
reader like any report, a benchmark continues only on the model it started on, its sample's
balance is stored with it, and `--rescore` applies a fixed scoring to what is stored."""

from __future__ import annotations

import pytest

from engine.config import load_settings
from engine.evaluate.archive import export_benchmark
from engine.evaluate.reader import OWN_ANSWER_WORDS, own_short_answer, read_answer
from engine.evaluate.results import summarize, to_markdown
from engine.evaluate.runner import BenchmarkError, BenchmarkRunner, BenchmarkSpec
from engine.llm.counted import EvalLLM
from engine.llm.fake import FakeLLM, request_text
from engine.llm.protocol import LLMConnectionError
from engine.services import build_services
from storage.evaluation import ItemStatus
from tests.support.fixtures_engine import run_to_end

READER = "evaluate.reader"


@pytest.fixture
def services(prebuilt_corpus_home):
    services = build_services(load_settings())
    yield services
    services.close()


def _create(services, reader=None, **overrides):
    spec = BenchmarkSpec(
        **{"dataset": "hotpotqa-autoact", "methods": ["direct", "rag"], "limit": 2, "llm": "fake", **overrides}
    )
    runner = BenchmarkRunner(services, reader=reader)
    return runner, runner.create(spec)


def test_a_reader_that_fails_scores_the_answer_zero_but_does_not_fail_the_run(services):
    broken = FakeLLM().when(prompt=READER, respond=LLMConnectionError("the reader's endpoint went away"))
    runner, bench = _create(services, reader=EvalLLM(broken))
    runner.execute(bench.id)
    rows = runner.store.list_items(bench.id)
    assert all(r.status == ItemStatus.SCORED for r in rows)  # every run is done: no method failed
    assert all(r.metrics["em"] == 0.0 and "the reader failed" in r.metrics["reader_error"] for r in rows)
    assert all("the reader failed" in r.error for r in rows)  # said with the item
    assert all(row.failed == 0 for row in summarize(runner.store, bench.id).rows)

    # A rescore with a working reader reads what was not read, and the reader error is gone.
    fixed = BenchmarkRunner(services, reader=EvalLLM(FakeLLM()))
    assert fixed.rescore(bench.id).scored == len(rows)
    again = fixed.store.list_items(bench.id)
    assert all("reader_error" not in r.metrics and r.metrics["answer_source"] == "reader" for r in again)
    assert all(r.prediction and not r.error for r in again)
    assert all(r.eval_usage["calls"] > before.eval_usage["calls"] for r, before in zip(again, rows))


def test_a_rescore_reuses_the_readers_reading_and_keeps_what_it_does_not_compute(services):
    runner, bench = _create(services, reader=EvalLLM(FakeLLM()))
    runner.execute(bench.id)
    rows = runner.store.list_items(bench.id)
    row = rows[0]
    runner.store.finish_item(
        row.id,
        status=row.status,
        prediction=row.prediction,
        metrics={**row.metrics, "f1": 0.123, "factuality": 0.5},
        eval_usage=row.eval_usage,
    )
    no_reader = FakeLLM().when(prompt=READER, respond=AssertionError("the stored reading is reused"))
    BenchmarkRunner(services, reader=EvalLLM(no_reader)).rescore(bench.id)
    again = runner.store.get_item(row.id)
    assert again.prediction == row.prediction and again.metrics["f1"] == row.metrics["f1"]  # recomputed
    assert again.metrics["factuality"] == 0.5 and no_reader.calls == []


def test_a_rescore_keeps_to_the_benchmarks_budget(services):
    """A rescore that would ask the reader again does not once the benchmark's budget is spent: those
    items keep their scores and the result says how many; raised, the budget lets them be read."""
    runner, bench = _create(services, reader=EvalLLM(FakeLLM()))
    runner.execute(bench.id)
    rows = [r for r in runner.store.list_items(bench.id) if r.metrics.get("answer_source") == "reader"]
    assert rows
    for row in rows:  # readings by an older reader: a rescore would ask it again
        runner.store.finish_item(
            row.id,
            status=row.status,
            prediction="an older reading",
            eval_usage=row.eval_usage,
            metrics={k: v for k, v in row.metrics.items() if k != "reader_version"},
        )
    runner.store.set_budget(bench.id, max_tokens=1)  # already spent: the runs used more than that

    refused = FakeLLM().when(prompt=READER, respond=AssertionError("the budget is spent: no reader call"))
    rescored = BenchmarkRunner(services, reader=EvalLLM(refused)).rescore(bench.id)
    assert refused.calls == []
    assert rescored.left == len(rows) and rescored.reached == "tokens"
    assert rescored.scored == 0  # every item here needs the reader again
    assert all(runner.store.get_item(r.id).prediction == "an older reading" for r in rows)
    assert f"thoughtmap bench --rescore {bench.id} --max-tokens N" in rescored.budget_note(bench.id)

    with pytest.raises(BenchmarkError, match="give more than"):  # a "raise" that is not one is refused
        runner.raise_budget(bench.id, max_tokens=2)
    runner.raise_budget(bench.id, max_tokens=10_000_000)
    reader = FakeLLM().when(prompt=READER, respond={"answer": "yes"})
    rescored = BenchmarkRunner(services, reader=EvalLLM(reader)).rescore(bench.id)
    assert rescored.left == 0 and rescored.budget_note(bench.id) == ""
    assert len(reader.calls) == len(rows)
    assert all(runner.store.get_item(r.id).prediction == "yes" for r in rows)


def test_a_rescore_on_a_spent_budget_still_scores_what_needs_no_llm_and_holds_back_the_judges(services, monkeypatch):
    """The budget is checked at each reader or judge call, not guessed in advance: an article item
    (no reader) is scored again on a spent budget, and on any model; a judge that failed waits for a
    raised budget and keeps saying it has no scores."""
    broken = FakeLLM().when(prompt="judge.rubric_omnithink", respond=LLMConnectionError("the judge went away"))
    runner, bench = _create(
        services, reader=EvalLLM(broken), dataset="freshwiki", methods=["direct", "rag"], limit=1, judges=("rubric",)
    )
    runner.execute(bench.id)
    rows = runner.store.list_items(bench.id)
    assert all("the judge went away" in r.metrics["judge_error"] for r in rows)
    runner.store.set_budget(bench.id, max_tokens=1)

    refused = FakeLLM().when(prompt="judge.", respond=AssertionError("the budget is spent: no judge call"))
    rescored = BenchmarkRunner(services, reader=EvalLLM(refused)).rescore(bench.id)
    assert refused.calls == []
    assert (rescored.scored, rescored.left, rescored.reached) == (2, 2, "tokens")  # read again, judges held back
    assert all("the judge went away" in runner.store.get_item(r.id).metrics["judge_error"] for r in rows)

    # No judge to ask again and no reader needed: a rescore on another model asks nothing, and runs.
    for row in rows:
        row = runner.store.get_item(row.id)
        runner.store.finish_item(
            row.id,
            status=row.status,
            prediction=row.prediction,
            eval_usage=row.eval_usage,
            metrics={k: v for k, v in row.metrics.items() if k != "judge_error"},
        )
    real = services.llm_info
    monkeypatch.setattr(services, "llm_info", lambda kind: {**real(kind), "model": "another-model"})
    assert BenchmarkRunner(services, reader=EvalLLM(refused)).rescore(bench.id).scored == 2


def test_a_rescore_that_must_read_again_does_so_only_on_the_benchmarks_model(services, monkeypatch):
    runner, bench = _create(services, methods=["direct"], limit=1, reader=EvalLLM(FakeLLM()))
    runner.execute(bench.id)
    (row,) = runner.store.list_items(bench.id)
    runner.store.finish_item(
        row.id,
        status=row.status,
        prediction="an older reading",
        eval_usage=row.eval_usage,
        metrics={k: v for k, v in row.metrics.items() if k != "reader_version"},
    )
    real = services.llm_info
    monkeypatch.setattr(services, "llm_info", lambda kind: {**real(kind), "model": "another-model"})
    reader = FakeLLM()
    with pytest.raises(BenchmarkError, match="would mix two models in one table"):
        BenchmarkRunner(services, reader=EvalLLM(reader)).rescore(bench.id)
    assert reader.calls == [] and runner.store.get_item(row.id).prediction == "an older reading"


def test_the_budget_that_stopped_a_benchmark_is_read_from_its_note_old_wording_too():
    from engine.evaluate.runner import budget_that_stopped
    from storage.models import Benchmark, BenchmarkStatus

    def bench(note, status=BenchmarkStatus.STOPPED):
        return Benchmark(id="b", dataset="d", methods=["direct"], status=status, note=note)

    assert budget_that_stopped(bench("the token budget was reached with 3 runs left; raise it")) == "token"
    assert budget_that_stopped(bench("the tokens budget was reached with 3 runs left; raise it")) == "token"
    assert budget_that_stopped(bench("the cost budget was reached with 1 runs left; raise it")) == "cost"
    assert budget_that_stopped(bench("stopped with 3 runs left; resume to finish")) is None
    assert budget_that_stopped(bench("the token budget was reached with 3 runs left", BenchmarkStatus.DONE)) is None


def test_a_rescore_reads_again_what_an_older_reader_read(services):
    """The reader's version is stored with each reading: a reading from before READER learned yes/no
    (version 1, stored with no version) is read again on a rescore, and this one's is kept."""
    from engine.evaluate.reader import READER_VERSION

    runner, bench = _create(services, reader=EvalLLM(FakeLLM()))
    runner.execute(bench.id)
    rows = runner.store.list_items(bench.id)
    assert all(r.metrics["reader_version"] == READER_VERSION for r in rows if r.metrics["answer_source"] == "reader")
    old = rows[0]
    older = {k: v for k, v in old.metrics.items() if k != "reader_version"}
    runner.store.finish_item(
        old.id, status=old.status, prediction="an older reading", metrics=older, eval_usage=old.eval_usage
    )
    reader = FakeLLM().when(prompt=READER, respond={"answer": "yes"})
    BenchmarkRunner(services, reader=EvalLLM(reader)).rescore(bench.id)
    assert len(reader.calls) == 1  # the older reading only
    assert runner.store.get_item(old.id).prediction == "yes"
    assert runner.store.get_item(old.id).metrics["reader_version"] == READER_VERSION
    assert [runner.store.get_item(r.id).prediction for r in rows[1:]] == [r.prediction for r in rows[1:]]


def test_the_reader_is_told_that_yes_or_no_is_an_answer():
    """HotpotQA and 2Wiki ask yes/no comparison questions among their short-answer items; the
    official EM/F1 gives 0 to anything but "yes"/"no" there, and the reader read "unknown"."""
    fake = FakeLLM().when(prompt=READER, respond={"answer": "yes"})
    read = read_answer(
        EvalLLM(fake),
        question="Are Janise Yntema and Bianca Halstead from the same country?",
        report_markdown="Janise Yntema and Bianca Halstead are from the same country.",
        report_data={},
    )
    assert read.answer == "yes"
    assert "yes or no when the question asks yes or no" in request_text(fake.calls[0])


def test_a_sentence_long_own_answer_is_read_like_any_report():
    assert own_short_answer({"short_answer": "Félix Erviti Barcelona"}) == "Félix Erviti Barcelona"
    sentence = "Inna is a Romanian singer and songwriter, born in Mangalia and raised in Neptun."
    assert len(sentence.split()) > OWN_ANSWER_WORDS and own_short_answer({"short_answer": sentence}) is None
    echo = "The fewest words that answer the question (a name, number, date, or yes/no); no explanation."
    assert own_short_answer({"short_answer": echo}) is None
    fake = FakeLLM().when(prompt=READER, respond={"answer": "Mangalia"})
    read = read_answer(
        EvalLLM(fake),
        question="Where was Inna born?",
        report_markdown=f"**Answer:** {sentence}\n\nMore of the summary.",
        report_data={"short_answer": sentence},
    )
    assert (read.answer, read.source) == ("Mangalia", "reader")
    assert sentence in request_text(fake.calls[0])  # the reader sees the method's own answer


def test_the_reader_reads_the_report_as_a_person_sees_it_not_its_escapes():
    from engine.safe_text import inline_text

    own = "Simon & Garfunkel, the folk duo of B*tch Money_2015 [single], formed in 1969."
    fake = FakeLLM().when(prompt=READER, respond={"answer": "Simon & Garfunkel"})
    read_answer(
        EvalLLM(fake),
        question="Who sang it?",
        report_data={"short_answer": own},
        report_markdown=f"**Answer:** {inline_text(own)} [[S3]]\n\nThe rest of the summary.",
    )
    prompt = request_text(fake.calls[0])
    assert own in prompt and "&amp;" not in prompt and "\\_" not in prompt and "[[S" not in prompt


def test_a_benchmark_continues_only_on_the_model_it_started_on(services, monkeypatch):
    runner, bench = _create(services)
    real = services.llm_info
    monkeypatch.setattr(services, "llm_info", lambda kind: {**real(kind), "model": "another-model"})
    with pytest.raises(BenchmarkError, match="would mix two models in one table"):
        runner.execute(bench.id)
    assert all(r.status == ItemStatus.PENDING for r in runner.store.list_items(bench.id))  # nothing ran


def test_the_balance_of_a_sample_is_stored_shown_and_carried(services):
    runner, bench = _create(services, methods=["direct"], limit=3, balance="level")
    assert runner.store.get_benchmark(bench.id).balance == "level"
    assert "(seed 13, balanced by level)" in to_markdown(summarize(runner.store, bench.id))
    assert export_benchmark(runner.store, bench.id).benchmark.balance == "level"


def test_a_paired_table_compares_the_methods_on_the_items_all_have_finished(services):
    runner, bench = _create(services, limit=3)
    runner.execute(bench.id)
    rows = runner.store.list_items(bench.id)
    rag_row = next(r for r in rows if r.method == "rag")
    # One rag item not finished yet (a benchmark part-way).
    runner.store._update_item(rag_row.id, status=ItemStatus.PENDING, metrics={}, run_id=None)
    table = summarize(runner.store, bench.id, paired=True)
    assert table.paired == 2 and all(row.finished == 2 for row in table.rows)
    assert "Paired: the 2 items every method has finished." in to_markdown(table)
    assert {row.method: row.finished for row in summarize(runner.store, bench.id).rows} == {"direct": 3, "rag": 2}


def test_a_paired_table_gives_the_difference_item_by_item_with_its_interval(services):
    """Two methods' own intervals overlap; what decides a comparison is the interval of their
    difference on the same items (a paired bootstrap), which the paired table now prints."""
    from engine.evaluate import metrics

    runner, bench = _create(services, limit=4)
    runner.execute(bench.id)
    rows = runner.store.list_items(bench.id)
    f1 = {
        ("direct", 0): 0.0,
        ("direct", 1): 0.5,
        ("direct", 2): 0.0,
        ("direct", 3): 1.0,
        ("rag", 0): 1.0,
        ("rag", 1): 0.5,
        ("rag", 2): 1.0,
        ("rag", 3): 1.0,
    }
    order = sorted({r.item_id for r in rows})
    for row in rows:
        value = f1[(row.method, order.index(row.item_id))]
        runner.store._update_item(row.id, status=ItemStatus.SCORED, metrics={**row.metrics, "f1": value})
    # A failed rag item counts 0 in the difference too, as in the table.
    failed = next(r for r in rows if r.method == "rag" and order.index(r.item_id) == 3)
    runner.store._update_item(failed.id, status=ItemStatus.FAILED)
    table = summarize(runner.store, bench.id, paired=True)
    [difference] = [d for d in table.differences if d.key == "f1"]
    assert (difference.method, difference.baseline, difference.summary.n) == ("rag", "direct", 4)
    expected = metrics.bootstrap_ci([1.0, 0.0, 1.0, -1.0], seed=0)
    assert (difference.summary.mean, difference.summary.low, difference.summary.high) == expected
    text = to_markdown(table)
    assert "| rag − direct | " in text and f"{expected[0]:+.3f} [{expected[1]:+.3f}, {expected[2]:+.3f}]" in text
    # Unpaired or broken down, a table has no differences.
    assert summarize(runner.store, bench.id).differences == []


def test_an_item_the_harness_failed_on_keeps_its_usage_and_is_scored_again_by_a_rescore(services, monkeypatch):
    """A crash while scoring is no failure of the method: the item keeps what its run spent, the
    table says how many such failures it counts, and a rescore scores it."""
    import engine.evaluate.runner as runner_module

    real = runner_module.score_item
    calls = []

    def crash_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise KeyError("a scoring bug")
        return real(*args, **kwargs)

    monkeypatch.setattr(runner_module, "score_item", crash_once)
    # One item at a time: two threads could both append before either counted, and neither crash.
    runner, bench = _create(services, methods=["direct"], limit=2, reader=EvalLLM(FakeLLM()), concurrency=1)
    runner.execute(bench.id)
    [broken] = [r for r in runner.store.list_items(bench.id) if r.status == ItemStatus.FAILED]
    assert broken.metrics["harness_error"] is True and broken.metrics["tokens"] > 0
    assert "the harness failed on this item (KeyError" in broken.error and "--rescore" in broken.error
    assert "1 of the failed items failed in the harness, not in the method" in to_markdown(
        summarize(runner.store, bench.id)
    )

    BenchmarkRunner(services, reader=EvalLLM(FakeLLM())).rescore(bench.id)
    again = runner.store.get_item(broken.id)
    assert again.status == ItemStatus.SCORED and "harness_error" not in again.metrics and not again.error
    assert "failed in the harness" not in to_markdown(summarize(runner.store, bench.id))


def test_a_judge_that_failed_is_said_under_the_table_and_asked_again_by_a_rescore(services):
    """A judge's failure leaves the item without judged scores (not a zero): the table says how many
    items lack them, and a rescore asks the judges again there (and only there)."""
    broken = FakeLLM().when(prompt="judge.rubric_omnithink", respond=LLMConnectionError("the judge went away"))
    runner, bench = _create(
        services, reader=EvalLLM(broken), dataset="freshwiki", methods=["rag"], limit=1, judges=("rubric",)
    )
    runner.execute(bench.id)
    (row,) = runner.store.list_items(bench.id)
    assert row.status == ItemStatus.SCORED and "the judge went away" in row.metrics["judge_error"]
    assert not any(k.startswith("rubric_") for k in row.metrics)
    table = summarize(runner.store, bench.id)
    assert table.judge_errors == 1
    assert "Judged scores are missing for 1 finished items" in to_markdown(table)

    working = FakeLLM()
    BenchmarkRunner(services, reader=EvalLLM(working)).rescore(bench.id)
    again = runner.store.get_item(row.id)
    assert "judge_error" not in again.metrics and {"rubric_relevance", "rubric_novelty"} <= again.metrics.keys()
    assert again.eval_usage["calls"] > row.eval_usage["calls"]  # the judge's calls are counted
    assert "Judged scores are missing" not in to_markdown(summarize(runner.store, bench.id))
    calls = len(working.calls)
    BenchmarkRunner(services, reader=EvalLLM(working)).rescore(bench.id)
    assert len(working.calls) == calls  # judged once: its scores are kept, not asked again


def test_a_harness_failure_before_a_run_finished_is_not_scored(services, monkeypatch):
    """Only a finished run's item becomes a failure the harness owns: one whose run could not be
    created fails for good and says it has no run to score; one whose run was still working is left
    for `--resume`, not turned into the method's failure."""
    from engine.evaluate.results import _values

    # One item at a time: "the first create fails" then means the first item's, whatever the machine's
    # load does to two threads' order (with two, the second item's could come first).
    runner, bench = _create(services, methods=["direct"], limit=2, reader=EvalLLM(FakeLLM()), concurrency=1)
    real_create = services.runner.create_run
    created = []

    def create_once_broken(**kwargs):
        created.append(1)
        if len(created) == 1:
            raise RuntimeError("no run for you")
        return real_create(**kwargs)

    def wait_broken(run_id, timeout=None):
        raise RuntimeError("the wait broke")

    monkeypatch.setattr(services.runner, "create_run", create_once_broken)
    monkeypatch.setattr(services.runner, "start", lambda run_id, **kwargs: None)  # the run stays queued
    monkeypatch.setattr(services.runner, "wait", wait_broken)
    monkeypatch.setattr(runner, "_in_flight", lambda run_id: True)
    runner.execute(bench.id)
    first, second = sorted(runner.store.list_items(bench.id), key=lambda r: r.position)
    assert first.status == ItemStatus.FAILED and first.metrics == {"harness_error": True}
    assert "no run for you" in first.error and "it has no run to score" in first.error
    assert second.status not in ItemStatus.FINISHED and second.run_id  # its run was working: resumed later
    # Not measured by the harness: left out of recall, not counted as having retrieved nothing.
    assert _values([first], "recall_all", "measured") == []


READER_YES_NO = "evaluate.reader_yes_no"


def test_a_yes_no_report_that_starts_with_yes_or_no_is_read_by_that_word_without_the_model():
    """The built-in 0.5B reader said "unknown" of "Yes, Neanderthals used arithmetic.": a report
    whose first word answers is read as the official rule reads an answer, by that word."""
    fake = FakeLLM().when(prompt=READER_YES_NO, respond=AssertionError("no reader call for a first-word answer"))
    for report, expected in (("Yes, Neanderthals used arithmetic.", "yes"), ("**No.** It was founded in 1844.", "no")):
        read = read_answer(
            EvalLLM(fake),
            question="Did Neanderthals use arithmetic?",
            report_markdown=report,
            report_data={},
            yes_no=True,
        )
        assert (read.answer, read.source) == (expected, "report")
    for report, expected in (
        ("**Answer: yes**\n\nThe search found it.", "yes"),
        ("## Answer\n\nNo\u2026 never", "no"),
        ("The answer is no.", "no"),
        ("True.", "yes"),
    ):
        read = read_answer(EvalLLM(fake), question="Did it?", report_markdown=report, report_data={}, yes_no=True)
        assert (read.answer, read.source) == (expected, "report"), report
    assert not fake.calls
    # A yes or no that starts a phrase is no answer: the reader reads those.
    for report in (
        "No relevant source was found for this.",
        "No one knows whether it did.",
        "True to form, the answer is no.",
        "Yes it is",
    ):
        unsure = FakeLLM().when(prompt=READER_YES_NO, respond={"answer": "unknown"})
        read = read_answer(EvalLLM(unsure), question="Did it?", report_markdown=report, report_data={}, yes_no=True)
        assert (read.answer, read.source, len(unsure.calls)) == ("", "reader", 1), report
    # A report that answers in other words is still the reader's to read.
    reader = FakeLLM().when(prompt=READER_YES_NO, respond={"answer": "no"})
    read = read_answer(
        EvalLLM(reader),
        question="Does Paulo Coelho's wife make a living through speech?",
        report_markdown="Paulo Coelho's wife does not make a living through speech.",
        report_data={},
        yes_no=True,
    )
    assert (read.answer, read.source) == ("no", "reader") and len(reader.calls) == 1


def test_strategyqa_tells_the_baselines_to_answer_yes_or_no_and_scores_their_first_word(services, fake_llm):
    """`--param yes_no=true` reaches every method that has it: direct and rag are told the answer's
    form (as FGDIP's yes/no mode is), and their "Yes, ..." is scored without a reader call."""
    services.use_llm("fake", fake_llm)  # this module's `services` runs methods on a fake of its own
    fake_llm.when(prompt="direct.answer", respond={"answer": "Yes, because the record says so.", "confidence": "high"})
    fake_llm.when(prompt="rag.answer", respond={"answer": "No: the sources say otherwise.", "confidence": "low"})
    reader = FakeLLM().when(prompt=READER_YES_NO, respond=AssertionError("no reader call for a first-word answer"))
    runner, bench = _create(services, reader=EvalLLM(reader), dataset="strategyqa", limit=2, values={"yes_no": True})
    runner.execute(bench.id)
    assert bench.params["direct"]["yes_no"] is True and bench.params["rag"]["yes_no"] is True
    rows = runner.store.list_items(bench.id)
    assert {(r.method, r.prediction, r.metrics["answer_source"]) for r in rows} == {
        ("direct", "yes", "report"),
        ("rag", "no", "report"),
    }
    asked = [request_text(call) for call in fake_llm.calls]
    assert len(asked) == 4 and all(
        "the answer's first word is 'Yes' or 'No' (the likelier one" in text for text in asked
    )
    assert not reader.calls

    # A reading the model made before the first word was read (version 1, "unknown") is read again.
    old = next(r for r in rows if r.method == "direct")
    older = {**old.metrics, "answer_source": "reader", "reader_version": 1, "accuracy": 0.0}
    runner.store.finish_item(old.id, status=old.status, prediction="", metrics=older, eval_usage=old.eval_usage)
    BenchmarkRunner(services, reader=EvalLLM(reader)).rescore(bench.id)
    again = runner.store.get_item(old.id)
    assert (again.prediction, again.metrics["answer_source"], again.metrics["accuracy"]) == (
        "yes",
        "report",
        old.metrics["accuracy"],
    )
    assert "reader_version" not in again.metrics and not reader.calls

    # Without it, the baselines' prompts are as they were: nothing about yes or no.
    before = len(fake_llm.calls)
    run_to_end(services, "Is Paris the capital of France?", "direct")
    (plain,) = fake_llm.calls[before:]
    assert plain.messages[0].content.endswith(
        "Answer from your own knowledge. Be concise and specific; if you are unsure, say what is uncertain."
    )
