"""The benchmark runner end to end, offline: the scripted fake LLM, the bundled corpus, a real
database, the real CLI process (killed with SIGKILL half-way and resumed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from engine import cli
from engine.config import load_settings
from engine.evaluate.datasets import load_items
from engine.evaluate.runner import BenchmarkError, BenchmarkRunner, BenchmarkSpec
from engine.search.exclusion import ExcludingSearcher, SearchExclusions
from engine.search.protocol import Hit
from engine.services import build_services
from storage.evaluation import EvaluationStore, ItemStatus
from storage.models import RunStatus
from tests.engine.test_resume_after_kill import THOUGHTMAP, wait_for


@pytest.fixture
def services(prebuilt_corpus_home):
    services = build_services(load_settings())
    yield services
    services.close()


def _bench(services, **overrides):
    spec = BenchmarkSpec(
        **{"dataset": "hotpotqa-autoact", "methods": ["direct", "rag"], "limit": 3, "llm": "fake", **overrides}
    )
    runner = BenchmarkRunner(services)
    bench = runner.create(spec)
    return runner, runner.execute(bench.id)


def test_twenty_hotpotqa_items_by_direct_rag_and_deot_complete_offline(prebuilt_corpus_home, capsys, tmp_path):
    out, out_json = tmp_path / "table.md", tmp_path / "table.json"
    code = cli.main(
        [
            "bench",
            "--dataset",
            "hotpotqa-autoact",
            "--methods",
            "direct,rag,deot",
            "--limit",
            "20",
            "--llm",
            "fake",
            "--concurrency",
            "4",
            "--quiet",
            "--out",
            str(out),
            "--json",
            str(out_json),
        ]
    )
    assert code == cli.EXIT_OK, capsys.readouterr().err
    services = build_services(load_settings())
    try:
        store = EvaluationStore(services.db)
        (bench,) = store.list_benchmarks()
        rows = store.list_items(bench.id)
        assert bench.status == "done" and len(rows) == 60
        assert {r.method for r in rows} == {"direct", "rag", "deot"}
        # Every item is a stored run of its method, on the item's question, and it was scored.
        sample = {i.id: i for i in load_items("hotpotqa-autoact", limit=20)}
        for row in rows:
            run = services.repo.get_run(row.run_id)
            assert run.method == row.method and run.question == sample[row.item_id].question
            assert row.status == ItemStatus.SCORED, (row.method, row.error)
            assert {"em", "f1", "llm_calls", "tokens", "critical_path_s"} <= row.metrics.keys()
            assert row.metrics["llm_calls"] == run.llm_calls > 0
            assert row.eval_usage["calls"] >= 1  # the reader read the answer from the report
        # Retrieval recall is measured where a method retrieves; direct retrieves nothing.
        assert all(r.metrics["recall_any"] == 0.0 for r in rows if r.method == "direct")
        rag_recall = [r.metrics["recall_any"] for r in rows if r.method == "rag"]
        assert sum(rag_recall) >= 10  # BM25 on the question finds a gold paragraph for most items
    finally:
        services.close()
    table = json.loads(out_json.read_text())
    assert [m["method"] for m in table["methods"]] == ["direct", "rag", "deot"]
    assert all(m["finished"] == 20 for m in table["methods"])
    em = table["methods"][1]["metrics"]["em"]
    assert em["low"] <= em["mean"] <= em["high"]
    markdown = out.read_text()
    assert "| rag | 20/20 | 0 |" in markdown and "Recall@10 any-gold" in markdown


def test_a_killed_benchmark_resumes_without_redoing_finished_items(prebuilt_corpus_home):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "THOUGHTMAP_"))}
    # Each fake call takes a little time, so the kill lands with some items scored and some running.
    env.update(THOUGHTMAP_HOME=str(prebuilt_corpus_home), THOUGHTMAP_FAKE_LATENCY="0.2", PYTHONUNBUFFERED="1")
    args = [
        "bench",
        "--dataset",
        "hotpotqa-autoact",
        "--methods",
        "direct,rag",
        "--limit",
        "8",
        "--llm",
        "fake",
        "--concurrency",
        "2",
        "--quiet",
    ]
    proc = subprocess.Popen([*THOUGHTMAP, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    services = build_services(load_settings())
    try:
        store = EvaluationStore(services.db)
        bench = wait_for(lambda: next(iter(store.list_benchmarks()), None), 60, "the benchmark", proc)

        def half_done():
            rows = store.list_items(bench.id)
            scored = [r for r in rows if r.status == ItemStatus.SCORED]
            return len(scored) >= 4 and any(r.status == ItemStatus.RUNNING for r in rows)

        wait_for(half_done, 120, "half of the items scored while others run", proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        before = {r.id: r for r in store.list_items(bench.id)}
        scored = {i: r for i, r in before.items() if r.status == ItemStatus.SCORED}
        started = {i: r for i, r in before.items() if r.status == ItemStatus.RUNNING}
        assert scored and started and len(scored) < len(before)
        calls_before = {r.run_id: services.repo.get_run(r.run_id).llm_calls for r in scored.values()}
    finally:
        services.close()

    resumed = subprocess.run(
        [*THOUGHTMAP, "bench", "--resume", bench.id, "--quiet"], env=env, capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr

    services = build_services(load_settings())
    try:
        store = EvaluationStore(services.db)
        after = {r.id: r for r in store.list_items(bench.id)}
        assert store.get_benchmark(bench.id).status == "done"
        assert all(r.status == ItemStatus.SCORED for r in after.values())
        for row_id, row in scored.items():
            # Finished items were not run again: same run, same calls, same scores.
            assert after[row_id].run_id == row.run_id and after[row_id].metrics == row.metrics
            assert services.repo.get_run(row.run_id).llm_calls == calls_before[row.run_id]
        for row_id, row in started.items():
            assert after[row_id].run_id == row.run_id  # the interrupted run was resumed, not replaced
        # One run per (item, method): nothing was run twice.
        assert len(services.repo.list_runs(limit=1000)) == len(after)
    finally:
        services.close()


def test_a_freshwiki_item_never_retrieves_its_own_article(services, bundled_corpus):
    items = load_items("freshwiki", limit=2)
    for item in items:
        # Without the exclusion the topic's own article is the top hit: the test would mean nothing.
        hits = bundled_corpus.searcher.search(item.question, 5)
        assert any(h.title == item.reference_title for h in hits)
    runner, bench = _bench(services, dataset="freshwiki", methods=["rag", "omnithink"], limit=2)
    rows = runner.store.list_items(bench.id)
    assert len(rows) == 4 and all(r.status == ItemStatus.SCORED for r in rows), [r.error for r in rows]
    by_id = {i.id: i for i in items}
    for row in rows:
        item = by_id[row.item_id]
        run = services.repo.get_run(row.run_id)
        assert run.search_exclusions == {"titles": [item.reference_title], "urls": [item.reference_url]}
        sources = services.repo.list_sources(run.id)
        assert sources, "the run retrieved other documents"
        assert all(s.title != item.reference_title and s.url != item.reference_url for s in sources)
        assert row.metrics["own_article_retrieved"] is False
        assert {"heading_recall", "rouge_l"} <= row.metrics.keys()


def test_the_excluding_searcher_drops_an_article_by_title_or_url_and_still_returns_k_hits():
    def hit(title, url, n):
        return Hit(title=title, ref=f"r{n}", snippet="", text="", kind="web", url=url)

    class Listing:
        description = "test listing"

        def search(self, query, k=5):
            pool = [
                hit("Cyclone Mocha", "https://en.wikipedia.org/wiki/Cyclone_Mocha", 0),
                hit("Cyclone Mocha - Wikipedia", "https://example.org/a", 1),
                hit("Mirror", "https://en.m.wikipedia.org/wiki/Cyclone_Mocha/", 2),
                *(hit(f"Other {n}", f"https://example.org/{n}", n) for n in range(3, 20)),
            ]
            return pool[:k]

    searcher = ExcludingSearcher(
        Listing(), SearchExclusions(titles=["cyclone  mocha"], urls=["http://www.en.wikipedia.org/wiki/Cyclone_Mocha"])
    )
    hits = searcher.search("mocha", 5)
    assert [h.title for h in hits] == ["Other 3", "Other 4", "Other 5", "Other 6", "Other 7"]


def test_bad_benchmark_input_is_refused_before_anything_is_stored(services):
    runner = BenchmarkRunner(services)
    cases = [
        (dict(methods=["direct", "nosuch"]), "nosuch"),
        (dict(methods=[]), "at least one method"),
        (dict(values={"top_k": 0}), "top_k"),
        (dict(values={"no_such_param": 1}), "no_such_param"),
        (dict(values={"deot.max_layers": 2}), "'deot' is not one of the benchmark's methods"),
        (dict(concurrency=0), "--concurrency"),
    ]
    for overrides, words in cases:
        spec = BenchmarkSpec(
            **{"dataset": "hotpotqa-autoact", "methods": ["direct", "rag"], "limit": 2, "llm": "fake", **overrides}
        )
        with pytest.raises(BenchmarkError, match=None) as info:
            runner.create(spec)
        assert words in str(info.value)
    assert runner.store.list_benchmarks() == []


def test_the_cli_says_what_was_wrong(prebuilt_corpus_home, capsys):
    assert cli.main(["bench", "--dataset", "nosuch", "--llm", "fake"]) == cli.EXIT_USAGE
    assert "unknown dataset 'nosuch'. Choose one of: hotpotqa-autoact" in capsys.readouterr().err
    assert cli.main(["bench", "--llm", "fake"]) == cli.EXIT_USAGE
    assert "name a dataset" in capsys.readouterr().err
    assert cli.main(["bench", "--dataset", "nq", "--limit", "0", "--llm", "fake"]) == cli.EXIT_USAGE
    assert "--limit must be at least 1" in capsys.readouterr().err
    assert cli.main(["bench", "--show", "nosuchbench"]) == cli.EXIT_USAGE
    assert "no benchmark with id 'nosuchbench'" in capsys.readouterr().err


def test_a_benchmark_killed_between_an_items_run_id_and_its_run_makes_that_run_once(services):
    # A fresh-clone run once found 17 runs for 16 items: killed after a run was made and before the
    # item recorded it, the resume made another. Now the id is on the item first; here the kill
    # landed right after that, so the item has an id and no run.
    runner = BenchmarkRunner(services)
    bench = runner.create(BenchmarkSpec(dataset="hotpotqa-autoact", methods=["direct"], limit=2, llm="fake"))
    first = runner.store.list_items(bench.id)[0]
    runner.store.attach_run(first.id, "killedbefore")
    runner.execute(bench.id)
    rows = runner.store.list_items(bench.id)
    assert {r.status for r in rows} == {ItemStatus.SCORED}
    assert next(r for r in rows if r.id == first.id).run_id == "killedbefore"
    assert services.repo.get_run("killedbefore").status == RunStatus.DONE
    assert sorted(r.id for r in services.repo.list_runs()) == sorted(r.run_id for r in rows)


def test_a_parameter_goes_to_the_methods_that_have_it(services):
    runner, bench = _bench(services, values={"top_k": 3, "direct.max_answer_tokens": 64}, limit=1)
    assert bench.params["rag"]["top_k"] == 3 and "top_k" not in bench.params["direct"]
    assert bench.params["direct"]["max_answer_tokens"] == 64 and bench.params["rag"]["max_answer_tokens"] == 800
    rows = runner.store.list_items(bench.id)
    for row in rows:
        assert services.repo.get_run(row.run_id).params == bench.params[row.method]
    assert {r.status for r in rows} == {ItemStatus.SCORED}
    assert services.repo.get_run(rows[0].run_id).status == RunStatus.DONE


def test_judges_add_their_scores_to_every_item_and_store_their_verdicts(services):
    runner, bench = _bench(
        services, dataset="freshwiki", methods=["rag"], limit=1, judges=("claims", "density", "rubric")
    )
    (row,) = runner.store.list_items(bench.id)
    assert row.status == ItemStatus.SCORED, row.error
    assert {
        "support_rate",
        "citation_error_rate",
        "knowledge_density",
        "rubric_relevance",
        "rubric_novelty",
    } <= row.metrics.keys(), row.metrics
    assert 0.0 <= row.metrics["citation_error_rate"] <= 1.0 and row.metrics["knowledge_density"] > 0
    verdicts = {j.protocol for j in runner.store.list_judgments(benchmark_id=bench.id)}
    assert verdicts == {"claim_support", "omnithink.knowledge_density", "omnithink.rubric"}
    # Judging is counted apart from the run: the item's evaluation usage holds the judges' calls.
    run = services.repo.get_run(row.run_id)
    assert row.eval_usage["calls"] >= 1 + 4 and row.metrics["llm_calls"] == run.llm_calls
    with pytest.raises(BenchmarkError, match="unknown judge 'vibes'"):
        runner.create(BenchmarkSpec(dataset="nq", methods=["rag"], limit=1, llm="fake", judges=("vibes",)))


def test_pairwise_compares_the_first_method_with_the_others_item_by_item(prebuilt_corpus_home, capsys):
    args = [
        "bench",
        "--dataset",
        "researchy",
        "--methods",
        "direct,rag",
        "--limit",
        "2",
        "--llm",
        "fake",
        "--quiet",
        "--pairwise",
        "deot",
    ]
    assert cli.main(args) == cli.EXIT_OK, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "Pairwise (deot.pairwise): direct vs rag, 2 valid comparisons of 2 (0 invalid)" in out
    assert "| overall |" in out
    services = build_services(load_settings())
    try:
        store = EvaluationStore(services.db)
        (bench,) = store.list_benchmarks()
        judgments = store.list_judgments(benchmark_id=bench.id, protocol="deot.pairwise")
        assert len(judgments) == 2 and all(j.calls == 2 for j in judgments)  # both orders, once each
    finally:
        services.close()
    # Shown again: the stored verdicts are read back, not asked again.
    assert cli.main(["bench", "--show", bench.id, "--pairwise", "deot", "--llm", "fake"]) == cli.EXIT_OK
    services = build_services(load_settings())
    try:
        store = EvaluationStore(services.db)
        assert len(store.list_judgments(benchmark_id=bench.id)) == 2
        # A failed run leaves its item out of the win rates, and the table says how many it left out.
        failed = next(r for r in store.list_items(bench.id) if r.method == "rag")
        store._update_item(failed.id, status=ItemStatus.FAILED)
    finally:
        services.close()
    capsys.readouterr()
    assert cli.main(["bench", "--show", bench.id, "--pairwise", "deot", "--llm", "fake"]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "1 valid comparisons of 1" in out
    assert "1 items both finished are left out: one of the two runs failed" in out


def test_a_stopped_benchmark_resumes_the_run_it_stopped_instead_of_failing_it(prebuilt_corpus_home):
    """Ctrl-C on `bench` stops the runs under way; `--resume` must continue them, not score them as
    failed because a stop meant for the old process was still queued."""
    import threading

    from engine.llm.fake import FakeLLM, default_answer, named

    fake = FakeLLM()
    entered, release = threading.Event(), threading.Event()

    def held(request):
        entered.set()
        release.wait(30)
        return default_answer(request)

    fake.when(named("deot.plan_tasks"), held, times=1)
    services = build_services(load_settings())
    services.use_llm("fake", fake)
    try:
        runner = BenchmarkRunner(services)
        bench = runner.create(
            BenchmarkSpec(
                dataset="hotpotqa-autoact",
                methods=["deot"],
                limit=2,
                llm="fake",
                concurrency=1,
                values={"max_nodes": 1},
            )
        )
        stop = threading.Event()
        first = threading.Thread(target=runner.execute, args=(bench.id,), kwargs={"stop": stop})
        first.start()
        assert entered.wait(30), "the first item's run never asked the model"
        stop.set()
        # The run is inside its call for a while after the stop (several waits of the benchmark).
        threading.Timer(3 * 0.5 + 0.3, release.set).start()
        first.join(60)
        (held_row,) = [r for r in runner.store.list_items(bench.id) if r.run_id]
        assert (
            held_row.status != ItemStatus.FAILED and services.repo.get_run(held_row.run_id).status == RunStatus.STOPPED
        )
        assert runner.store.get_benchmark(bench.id).status == "stopped"
        # The benchmark asked the run to stop once, however long the run took to reach its next step.
        assert [c.kind for c in services.repo.list_commands(held_row.run_id)].count("stop") == 1
        # A stop that arrived after the run's last look at its queue (the process ended in between)
        # is still queued when the benchmark is resumed: resuming overrides it.
        services.repo.enqueue_command(held_row.run_id, "stop")

        resumed = runner.execute(bench.id)
        rows = runner.store.list_items(bench.id)
        assert resumed.status == "done" and {r.status for r in rows} == {ItemStatus.SCORED}, [r.error for r in rows]
        again = next(r for r in rows if r.id == held_row.id)
        assert again.run_id == held_row.run_id  # the stopped run was resumed, not replaced
        assert services.repo.get_run(again.run_id).status == RunStatus.DONE
    finally:
        services.close()


def test_mtqa_knowledge_units_are_scored_as_evidence_recall_beside_the_sources(services):
    """MTQA stores the documents it builds its graph from as sources and chooses knowledge units
    among them: the harness scores both, so the knowledge units' own recall (issue 14's KU recall)
    is measured, and a method that chooses no evidence gets no such column (not a zero)."""
    from engine.evaluate.results import summarize
    from engine.methods.registry import get_method

    runner, bench = _bench(services, methods=["rag", "mtqa"], limit=2)
    rows = runner.store.list_items(bench.id)
    assert all(r.status == ItemStatus.SCORED for r in rows), [r.error for r in rows]
    items = {i.id: i for i in load_items("hotpotqa-autoact", limit=2)}
    for row in (r for r in rows if r.method == "mtqa"):
        titles = get_method("mtqa").evidence_titles(services.repo.list_nodes(row.run_id))
        assert titles, "the knowledge units' titles"
        gold = {t.casefold() for t in items[row.item_id].supporting_titles}
        found = gold & {t.casefold() for t in titles[:10]}
        assert row.metrics["evidence_recall_all"] == float(found == gold)
        assert row.metrics["evidence_recall_fraction"] == len(found) / len(gold)
    assert all("evidence_recall_all" not in r.metrics for r in rows if r.method == "rag")
    table = {row.method: row for row in summarize(runner.store, bench.id).rows}
    assert "evidence_recall_all" in table["mtqa"].metrics and "evidence_recall_all" not in table["rag"].metrics


def test_a_sample_balanced_by_level_holds_each_level_equally_and_the_table_breaks_down_by_it(
    prebuilt_corpus_home, capsys, tmp_path
):
    items = load_items("hotpotqa-autoact", limit=9, balance="level")
    assert sorted(i.meta["level"] for i in items) == ["easy"] * 3 + ["hard"] * 3 + ["medium"] * 3
    # Same seed, same sample; each level's items in the plain sample's order.
    plain = load_items("hotpotqa-autoact")
    assert items == load_items("hotpotqa-autoact", limit=9, balance="level")
    for level in ("easy", "medium", "hard"):
        mine = [i.id for i in items if i.meta["level"] == level]
        assert mine == [i.id for i in plain if i.meta["level"] == level][:3]

    out_json = tmp_path / "table.json"
    code = cli.main(
        [
            "bench",
            "--dataset",
            "hotpotqa-autoact",
            "--methods",
            "direct",
            "--limit",
            "6",
            "--by",
            "level",
            "--llm",
            "fake",
            "--quiet",
            "--json",
            str(out_json),
        ]
    )
    captured = capsys.readouterr()
    assert code == cli.EXIT_OK, captured.err
    # The levels in the dataset's order, not alphabetical.
    lines = [line for line in captured.out.splitlines() if line.startswith("| direct · ")]
    assert [line.split(" | ")[0:2] for line in lines] == [
        ["| direct · easy", "2/2"],
        ["| direct · medium", "2/2"],
        ["| direct · hard", "2/2"],
    ]
    rows = json.loads(out_json.read_text())["methods"]
    assert [(r["method"], r["group"], r["items"]) for r in rows] == [
        ("direct", "easy", 2),
        ("direct", "medium", 2),
        ("direct", "hard", 2),
    ]

    # A key the items do not have is refused, and nothing is stored for it.
    code = cli.main(
        ["bench", "--dataset", "nq", "--methods", "direct", "--limit", "2", "--by", "level", "--llm", "fake", "--quiet"]
    )
    assert code != cli.EXIT_OK and "no 'level'" in capsys.readouterr().err
    services = build_services(load_settings())
    try:
        assert [b.dataset for b in EvaluationStore(services.db).list_benchmarks()] == ["hotpotqa-autoact"]
    finally:
        services.close()


def test_a_failed_run_scores_zero_whatever_its_placeholder_report_says(services):
    """A failed run's report is a placeholder ("nothing was answered"): it is not an article to
    score, its own citation check measured nothing, and the table counts the item as 0 even where
    a number was stored for it."""
    from engine.evaluate.results import ANSWER_METRICS, AS_STORED, MEASURED, ZERO, _values
    from engine.evaluate.scoring import score_item
    from storage.evaluation import BenchmarkItem

    item = load_items("freshwiki", limit=1)[0]
    run = services.repo.create_run(question=item.question, method="research", params={})
    placeholder = f"# {item.question}\n\n## Overview\n\nNothing was answered: the writer failed. " + item.question
    services.repo.save_report(run.id, placeholder, data={"metrics": {"citation_error_rate": 0.0, "support_rate": 1.0}})
    services.repo.set_status(run.id, RunStatus.FAILED, error="the writer failed three times")
    prediction, metrics, error = score_item(services.repo, run.id, item, reader=None)
    assert prediction == "" and error == "the writer failed three times"
    assert metrics["rouge_l"] == 0.0 and metrics["heading_recall"] == 0.0
    assert "citation_error_rate" not in metrics and "support_rate" not in metrics

    failed = BenchmarkItem(
        benchmark_id="b",
        item_id="i1",
        method="rag",
        status=ItemStatus.FAILED,
        metrics={"recall_all": 1.0, "f1": 1.0, "tokens": 50},
    )
    scored = BenchmarkItem(
        benchmark_id="b",
        item_id="i2",
        method="rag",
        status=ItemStatus.SCORED,
        metrics={"recall_all": 1.0, "f1": 1.0, "tokens": 70},
    )
    early = BenchmarkItem(benchmark_id="b", item_id="i3", method="rag", status=ItemStatus.FAILED, metrics={})
    # An answer metric: a failed run answered nothing, whatever number it stored.
    assert _values([failed, scored, early], "f1", ZERO) == [0.0, 1.0, 0.0]
    # Retrieval: what the failed run had retrieved counts; one that failed before retrieving counts 0.
    assert _values([failed, scored, early], "recall_all", MEASURED) == [1.0, 1.0, 0.0]
    # Usage: what each run spent, when it has the number.
    assert _values([failed, scored, early], "tokens", AS_STORED) == [50.0, 70.0]
    assert dict((k, how) for k, _t, how in ANSWER_METRICS)["evidence_recall_all"] == MEASURED


def test_recall_at_10_follows_the_searches_order_not_the_stored_ids(services):
    """A batch of sources is inserted sorted by ref (concurrent batches lock rows in one order), so
    stored ids are alphabetical within a search: with eleven hits, the gold ranked first but spelled
    "Zurich" fell out of the first ten. Recall now follows the order the searches returned them,
    and a later node that cites a source does not move it up."""
    from engine.evaluate.datasets import Item
    from engine.evaluate.scoring import retrieval_order, score_item
    from storage.repository import SourceInput

    ranked = ["Zurich Opera House", *(f"Alpha {n:02d}" for n in range(10)), "Aaron Gold"]
    run = services.repo.create_run(question="Who built the opera house?", method="rag", params={})
    search = services.repo.add_node(run.id, kind="retrieval", label="search", status="done")
    sources = services.repo.add_sources(
        run.id, [SourceInput(ref=f"corpus/{t}#0", title=t) for t in ranked], node_id=search.id
    )
    by_title = {s.title: s for s in sources}
    assert by_title["Zurich Opera House"].id > by_title["Alpha 09"].id  # ids: alphabetical in the batch
    # A later node cites the source ranked last: its link does not lift it into the first ten.
    answer = services.repo.add_node(run.id, kind="answer", label="answer", parent_id=search.id, status="done")
    services.repo.link_sources(answer.id, [by_title["Aaron Gold"].id])
    services.repo.save_report(run.id, "# Q\n\nThe Zurich company built it.", data={"short_answer": "Zurich"})
    services.repo.set_status(run.id, RunStatus.DONE)

    ordered = retrieval_order(services.repo.list_sources(run.id), services.repo.node_source_links(run.id))
    assert [s.title for s in ordered] == ranked
    item = Item(
        dataset="hotpotqa-autoact",
        id="z1",
        question="Who built the opera house?",
        answers=["Zurich"],
        answer_type="short",
        supporting_titles=["Zurich Opera House"],
    )
    _, metrics, _ = score_item(services.repo, run.id, item, reader=None)
    assert metrics["recall_any"] == 1.0
    gold_last = item.model_copy(update={"supporting_titles": ["Aaron Gold"]})
    _, metrics, _ = score_item(services.repo, run.id, gold_last, reader=None)
    assert metrics["recall_any"] == 0.0  # ranked twelfth by its search, cited or not


def test_runs_the_benchmarks_budget_stopped_are_resumed_with_a_raised_budget(prebuilt_corpus_home, capsys):
    """A run the benchmark's budget stopped is not a failure of its method: it is left to finish,
    and `--resume ID --max-tokens N` raises the budget and finishes it (scored, it was a 0 for good,
    and the advice to resume with a larger budget could not be followed). A run stops before the
    call that would pass the budget, so what is left can pay no call: the benchmark says the budget
    was reached (not "resume to finish", which stopped every run again at once), and a resume that
    does not raise it starts nothing."""
    # One item run at a time: DEoT's run comes first and its budget stops it part-way.
    code = cli.main(
        [
            "bench",
            "--dataset",
            "hotpotqa-autoact",
            "--methods",
            "direct,deot",
            "--limit",
            "2",
            "--param",
            "deot.max_nodes=3",
            "--llm",
            "fake",
            "--max-tokens",
            "1500",
            "--concurrency",
            "1",
            "--quiet",
        ]
    )
    assert code == cli.EXIT_STOPPED, capsys.readouterr().err

    def read():
        services = build_services(load_settings())
        try:
            store = EvaluationStore(services.db)
            (bench,) = store.list_benchmarks()
            rows = store.list_items(bench.id)
            runs = {r.id: services.repo.get_run(r.run_id) for r in rows if r.run_id}
            return bench, rows, runs
        finally:
            services.close()

    bench, rows, runs = read()
    stopped = [r for r in rows if r.id in runs and runs[r.id].status == RunStatus.STOPPED]
    assert stopped and all("token budget reached" in runs[r.id].stop_reason for r in stopped)
    assert all(r.status not in ItemStatus.FINISHED for r in stopped)  # not scored 0 for good
    assert not any(r.status == ItemStatus.FAILED for r in rows)
    assert bench.status == "stopped"
    assert bench.note.startswith("the token budget was reached") and f"--resume {bench.id} --max-tokens N" in bench.note
    spent = {row_id: run.prompt_tokens + run.completion_tokens for row_id, run in runs.items()}
    assert spent[stopped[0].id] > 0  # stopped part-way, with tokens of its own

    # Resumed as it is: nothing can run, nothing is spent, the advice stays.
    assert cli.main(["bench", "--resume", bench.id, "--quiet"]) == cli.EXIT_STOPPED
    again, _rows, again_runs = read()
    assert {
        row_id: run.prompt_tokens + run.completion_tokens for row_id, run in again_runs.items() if row_id in spent
    } == spent
    assert again.note == bench.note

    # A "raised" budget that is not more than what is spent would stop it again at once: refused,
    # with the amount to beat, and the stored budget kept.
    capsys.readouterr()
    assert cli.main(["bench", "--resume", bench.id, "--max-tokens", "1000", "--quiet"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "a token budget of 1,000 would stop it again at once; give more than" in err, err
    assert read()[0].max_tokens == 1500

    code = cli.main(["bench", "--resume", bench.id, "--max-tokens", "100000", "--quiet"])
    assert code == cli.EXIT_OK, capsys.readouterr().err
    bench, rows, runs = read()
    assert bench.max_tokens == 100_000 and bench.status == "done"
    assert all(r.status == ItemStatus.SCORED for r in rows), [(r.status, r.error) for r in rows]
    assert all(run.status == RunStatus.DONE for run in runs.values())
    # A resumed run's budget: what it had spent, plus what the benchmark had left when it resumed.
    first = stopped[0]
    total_before = sum(spent.values()) + sum(
        int(r.eval_usage.get("prompt_tokens", 0)) + int(r.eval_usage.get("completion_tokens", 0)) for r in _rows
    )
    assert runs[first.id].max_tokens == spent[first.id] + (100_000 - total_before), (
        runs[first.id].max_tokens,
        spent[first.id],
        total_before,
    )

    # A rescore keeps to the same budget: `--rescore ID --max-tokens N` raises it first, with the
    # same check, and a rescore that needs no LLM call says how many items it scored again.
    capsys.readouterr()
    assert cli.main(["bench", "--rescore", bench.id, "--max-tokens", "1000"]) == cli.EXIT_USAGE
    assert "give more than" in capsys.readouterr().err
    assert cli.main(["bench", "--rescore", bench.id]) == cli.EXIT_OK
    err = capsys.readouterr().err
    assert f"benchmark {bench.id}: {len(rows)} finished items scored again" in err, err
    assert "budget" not in err
