"""A benchmark carried between machines (`thoughtmap bench --export/--import`): exported half done
from one database, imported into another, continued there without redoing what was scored, and
merged back. Real databases (two THOUGHTMAP_HOMEs), the real CLI, the scripted fake LLM."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from engine import cli
from engine.config import load_settings
from engine.evaluate.runner import BenchmarkRunner, BenchmarkSpec
from engine.services import build_services
from storage.evaluation import EvaluationStore, ItemStatus
from tests.support.db_backends import _fresh_postgres_database, _postgres_url, database_url  # noqa: F401 - a fixture


def _open(home: Path, monkeypatch):
    monkeypatch.setenv("THOUGHTMAP_HOME", str(home))
    return build_services(load_settings())


def _rows(services, bench_id):
    return {(r.item_id, r.method): r for r in EvaluationStore(services.db).list_items(bench_id)}


def _half_done_benchmark(services) -> str:
    """4 items × direct,rag, stopped once 3 item runs were scored (concurrency 1)."""
    runner = BenchmarkRunner(services)
    bench = runner.create(
        BenchmarkSpec(dataset="hotpotqa-autoact", methods=["direct", "rag"], limit=4, llm="fake", concurrency=1)
    )
    stop = threading.Event()
    finished = []

    def progress(row):
        finished.append(row)
        if len(finished) == 3:
            stop.set()

    runner.execute(bench.id, progress=progress, stop=stop)
    return bench.id


@pytest.fixture
def second_home(tmp_path, bundled_corpus):
    home = tmp_path / "machine-b"
    home.mkdir()
    bundled_corpus.store.backup_to(home / "corpus.sqlite3")
    return home


def test_a_benchmark_exported_half_done_continues_on_another_machine_and_merges_back(
    prebuilt_corpus_home, second_home, tmp_path, monkeypatch, capsys
):
    a = _open(prebuilt_corpus_home, monkeypatch)
    try:
        bench_id = _half_done_benchmark(a)
        before = _rows(a, bench_id)
    finally:
        a.close()
    scored_a = {k for k, r in before.items() if r.status in ItemStatus.FINISHED}
    assert len(scored_a) == 3 and len(before) == 8

    archive = tmp_path / "bench.json"
    assert cli.main(["bench", "--export", bench_id, str(archive)]) == cli.EXIT_OK
    assert f"benchmark {bench_id}: 3 of 8 item runs finished" in capsys.readouterr().out
    data = json.loads(archive.read_text())
    assert data["format"] == "thoughtmap-benchmark" and data["benchmark"]["id"] == bench_id
    assert sum(i["status"] == "pending" for i in data["items"]) == 5

    # Machine B: import, then continue with the ordinary --resume.
    monkeypatch.setenv("THOUGHTMAP_HOME", str(second_home))
    assert cli.main(["bench", "--import", str(archive)]) == cli.EXIT_OK
    assert (
        f"3 finished item runs imported, 5 left; continue it with: thoughtmap bench --resume {bench_id}"
        in capsys.readouterr().out
    )
    assert cli.main(["bench", "--resume", bench_id, "--quiet"]) == cli.EXIT_OK
    assert "| direct | 4/4 | 0 |" in capsys.readouterr().out
    b = _open(second_home, monkeypatch)
    try:
        after = _rows(b, bench_id)
        assert EvaluationStore(b.db).get_benchmark(bench_id).status == "done"
    finally:
        b.close()
    for key in scored_a:
        # What machine A scored was not run again on B: same scores, no run there.
        assert after[key].run_id is None
        assert after[key].metrics == before[key].metrics and after[key].prediction == before[key].prediction
    for key in set(after) - scored_a:
        assert after[key].status == ItemStatus.SCORED and after[key].run_id is not None

    # Back on machine A: B's results fill what A had not finished; A's own scored rows are kept.
    assert cli.main(["bench", "--export", bench_id, str(archive)]) == cli.EXIT_OK
    monkeypatch.setenv("THOUGHTMAP_HOME", str(prebuilt_corpus_home))
    capsys.readouterr()
    assert cli.main(["bench", "--import", str(archive)]) == cli.EXIT_OK
    out = capsys.readouterr().out
    a = _open(prebuilt_corpus_home, monkeypatch)
    try:
        merged = _rows(a, bench_id)
    finally:
        a.close()
    for key in scored_a:
        assert merged[key].run_id == before[key].run_id  # A's own row, with its run
    # A row that A had under way (its run stopped, not finished) is left to its own run.
    under_way = {k for k, r in before.items() if r.run_id is not None and k not in scored_a}
    for key in set(merged) - scored_a - under_way:
        assert merged[key].status == ItemStatus.SCORED and merged[key].metrics == after[key].metrics
    assert f"{8 - 3 - len(under_way)} finished item runs imported" in out


def _archive(tmp_path: Path, services) -> dict:
    bench_id = _half_done_benchmark(services)
    assert cli.main(["bench", "--export", bench_id, str(tmp_path / "good.json")]) == cli.EXIT_OK
    return json.loads((tmp_path / "good.json").read_text())


@pytest.mark.parametrize(
    "spoil, words",
    [
        (lambda d: "not json {", "is not a JSON benchmark file"),
        (lambda d: {**d, "format": "other"}, "is not a Thoughtmap benchmark file"),
        (lambda d: {**d, "version": 9}, "version 9 of the benchmark file"),
        (lambda d: {**d, "benchmark": {**d["benchmark"], "methods": ["direct", "nosuch"]}}, "the method 'nosuch'"),
        (lambda d: {**d, "benchmark": {**d["benchmark"], "dataset": "nosuch"}}, "unknown dataset 'nosuch'"),
        (lambda d: {**d, "items": d["items"][:-1]}, "need 8, one per pair"),
        (
            lambda d: {**d, "items": [{**i, "item_id": "made-up"} if n == 0 else i for n, i in enumerate(d["items"])]},
            "share position 0",
        ),
        (
            lambda d: {
                **d,
                "items": [{**i, "metrics": {"em": {"$x": 1}}} if n == 0 else i for n, i in enumerate(d["items"])],
            },
            "metric 'em' must be a number",
        ),
        (lambda d: {**d, "benchmark": {**d["benchmark"], "id": "../../etc"}}, "benchmark.id"),
    ],
)
def test_a_bad_benchmark_file_is_refused_with_what_is_wrong_and_nothing_stored(
    spoil, words, prebuilt_corpus_home, second_home, tmp_path, monkeypatch, capsys
):
    services = _open(prebuilt_corpus_home, monkeypatch)
    try:
        good = _archive(tmp_path, services)
    finally:
        services.close()
    bad = spoil(good)
    path = tmp_path / "bad.json"
    path.write_text(bad if isinstance(bad, str) else json.dumps(bad))
    monkeypatch.setenv("THOUGHTMAP_HOME", str(second_home))
    capsys.readouterr()
    assert cli.main(["bench", "--import", str(path)]) == cli.EXIT_USAGE
    assert words in capsys.readouterr().err
    services = _open(second_home, monkeypatch)
    try:
        assert EvaluationStore(services.db).list_benchmarks() == []
    finally:
        services.close()


def test_items_not_in_the_bundled_dataset_are_refused(prebuilt_corpus_home, second_home, tmp_path, monkeypatch, capsys):
    services = _open(prebuilt_corpus_home, monkeypatch)
    try:
        good = _archive(tmp_path, services)
    finally:
        services.close()
    first = good["items"][0]["item_id"]
    for item in good["items"]:
        if item["item_id"] == first:
            item["item_id"] = "not-a-hotpotqa-item"
    (tmp_path / "bad.json").write_text(json.dumps(good))
    monkeypatch.setenv("THOUGHTMAP_HOME", str(second_home))
    capsys.readouterr()
    assert cli.main(["bench", "--import", str(tmp_path / "bad.json")]) == cli.EXIT_USAGE
    assert (
        "1 item(s) are not in the bundled hotpotqa-autoact dataset (e.g. not-a-hotpotqa-item)"
        in capsys.readouterr().err
    )


def test_a_different_benchmark_under_the_same_id_is_not_merged_into(
    prebuilt_corpus_home, tmp_path, monkeypatch, capsys
):
    services = _open(prebuilt_corpus_home, monkeypatch)
    try:
        good = _archive(tmp_path, services)
        before = _rows(services, good["benchmark"]["id"])
    finally:
        services.close()
    capsys.readouterr()
    # Another seed: not the sample the header would claim (checked before anything is stored).
    other_seed = json.loads(json.dumps(good))
    other_seed["benchmark"]["seed"] = 99
    (tmp_path / "other.json").write_text(json.dumps(other_seed))
    assert cli.main(["bench", "--import", str(tmp_path / "other.json")]) == cli.EXIT_USAGE
    assert "its items are not the 4 items of seed 99" in capsys.readouterr().err
    # The same items run with other parameters, on another model or another search: one table
    # would mix two setups.
    for field, value, word in (
        ("params", {"direct": {"max_answer_tokens": 7}, "rag": {}}, "parameters"),
        ("llm_info", {"kind": "openai", "model": "gpt-4o", "base_url": "https://x"}, "model"),
        ("search_mode", "web", "search"),
    ):
        changed = json.loads(json.dumps(good))
        changed["benchmark"][field] = value
        (tmp_path / "other.json").write_text(json.dumps(changed))
        assert cli.main(["bench", "--import", str(tmp_path / "other.json")]) == cli.EXIT_USAGE
        assert f"stored here with another {word}" in capsys.readouterr().err
    services = _open(prebuilt_corpus_home, monkeypatch)
    try:
        after = _rows(services, good["benchmark"]["id"])
    finally:
        services.close()
    assert {k: (r.status, r.metrics) for k, r in after.items()} == {k: (r.status, r.metrics) for k, r in before.items()}


def _second_database(database_url: str, tmp_path: Path) -> str:
    if database_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'other.sqlite3'}"
    return _fresh_postgres_database(_postgres_url())


def test_export_and_import_keep_every_field_on_each_database(database_url, tmp_path):
    """The storage round trip on SQLite and PostgreSQL: JSON metrics, texts, times and the merge."""
    from engine.evaluate.archive import export_benchmark, import_benchmark, read_archive, write_archive
    from engine.evaluate.datasets import load_items
    from storage import open_database

    items = [i.id for i in load_items("hotpotqa-autoact", limit=3)]
    source_db = open_database(database_url)
    target_db = open_database(_second_database(database_url, tmp_path))
    try:
        source = EvaluationStore(source_db)
        bench = source.create_benchmark(
            dataset="hotpotqa-autoact",
            methods=["direct", "rag"],
            items=items,
            limit=3,
            seed=13,
            params={"rag": {"top_k": 10}},
            llm_info={"kind": "local"},
            search_mode="local",
            max_tokens=5000,
        )
        rows = source.list_items(bench.id)
        source.finish_item(
            rows[0].id,
            status=ItemStatus.SCORED,
            prediction="Arthur's Magazine ünïcode",
            metrics={"em": 1.0, "f1": 1.0, "recall_all": True, "judge_error": None},
            eval_usage={"calls": 1, "prompt_tokens": 12},
        )
        source.finish_item(
            rows[1].id,
            status=ItemStatus.FAILED,
            prediction="",
            metrics={"em": 0.0},
            eval_usage={},
            error="nothing was answered",
        )
        source.attach_run(rows[2].id, "someRunId")  # under way: travels as not started
        path = tmp_path / "bench.json"
        write_archive(export_benchmark(source, bench.id), path)

        target = EvaluationStore(target_db)
        imported, filled = import_benchmark(target, read_archive(path))
        assert filled == 2 and imported.id == bench.id and imported.status == "stopped"
        assert (imported.params, imported.llm_info, imported.max_tokens) == (
            {"rag": {"top_k": 10}},
            {"kind": "local"},
            5000,
        )
        got = target.list_items(bench.id)
        assert [(r.item_id, r.method, r.status) for r in got] == [
            (r.item_id, r.method, r.status if r.status in ItemStatus.FINISHED else ItemStatus.PENDING)
            for r in source.list_items(bench.id)
        ]
        assert got[0].prediction == "Arthur's Magazine ünïcode" and got[0].metrics["recall_all"] is True
        assert got[0].eval_usage == {"calls": 1, "prompt_tokens": 12} and got[0].finished_at is not None
        assert got[1].error == "nothing was answered" and all(r.run_id is None for r in got)

        # The target finishes the rest; the source takes it back without touching its own rows.
        for row in got[2:]:
            target.finish_item(row.id, status=ItemStatus.SCORED, prediction="x", metrics={"em": 0.0}, eval_usage={})
        write_archive(export_benchmark(target, bench.id), path)
        merged, filled = import_benchmark(source, read_archive(path))
        after = source.list_items(bench.id)
        assert after[0].prediction == "Arthur's Magazine ünïcode"
        assert after[2].run_id == "someRunId" and after[2].status == ItemStatus.RUNNING  # its own run decides
        assert filled == len(after) - 3 and all(r.status == ItemStatus.SCORED for r in after[3:])
        assert merged.status != "done"  # one row is still under way here
    finally:
        source_db.dispose()
        target_db.dispose()
