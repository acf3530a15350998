"""Issue 17's before/after script (benchmarks/bench_fidelity.py), offline with the scripted fake: it
measures a new benchmark, or continues and measures a stored one (so a killed hours-long measurement
on the built-in model is not started again, and issue 16's larger Researchy DEoT benchmark serves as
the "after" sample)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from engine.config import load_settings
from engine.evaluate.datasets import load_items
from engine.services import build_services
from storage.evaluation import EvaluationStore
from tests import REPO_ROOT

SCRIPT = REPO_ROOT / "benchmarks" / "bench_fidelity.py"


def _script():
    spec = importlib.util.spec_from_file_location("bench_fidelity", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_stored_benchmark_is_continued_and_its_sample_prefix_measured(prebuilt_corpus_home, tmp_path, capsys):
    fidelity = _script()
    first = tmp_path / "first.json"
    assert fidelity.main(["--llm", "fake", "--deot-items", "3", "--omnithink-items", "1", "--out", str(first)]) == 0
    measured = json.loads(first.read_text())
    deot_bench = measured["deot"]["benchmark"]
    assert f"--deot-bench {deot_bench}" in capsys.readouterr().err
    assert [i["item"] for i in measured["deot"]["items"]] == [i.id for i in load_items("researchy", limit=3)]
    assert all(i["status"] == "scored" and i["nodes"] >= 1 for i in measured["deot"]["items"])
    assert measured["omnithink"]["means"]["citations_per_section"] is not None

    # Half-finished on purpose: one item's row set back to pending, as a kill leaves it.
    services = build_services(load_settings())
    try:
        store = EvaluationStore(services.db)
        rows = store.list_items(deot_bench)
        store._update_item(rows[-1].id, status="pending", run_id=None, metrics={})
        runs_before = len(services.repo.list_runs(limit=100))
    finally:
        services.close()

    second = tmp_path / "second.json"
    assert (
        fidelity.main(
            [
                "--llm",
                "fake",
                "--deot-items",
                "2",
                "--omnithink-items",
                "0",
                "--deot-bench",
                deot_bench,
                "--out",
                str(second),
            ]
        )
        == 0
    )
    again = json.loads(second.read_text())
    assert again["deot"]["benchmark"] == deot_bench and "omnithink" not in again
    # The first two items of the sample, from the stored runs, and the pending third was finished.
    assert again["deot"]["items"] == measured["deot"]["items"][:2]
    services = build_services(load_settings())
    try:
        assert len(services.repo.list_runs(limit=100)) == runs_before + 1
        assert all(r.status == "scored" for r in EvaluationStore(services.db).list_items(deot_bench))
    finally:
        services.close()

    with pytest.raises(SystemExit, match="lacks 1 of the first 4 items"):
        fidelity.main(["--llm", "fake", "--deot-items", "4", "--omnithink-items", "0", "--deot-bench", deot_bench])
    with pytest.raises(SystemExit, match="deot needs researchy"):
        fidelity.main(
            [
                "--llm",
                "fake",
                "--deot-items",
                "1",
                "--omnithink-items",
                "0",
                "--deot-bench",
                measured["omnithink"]["benchmark"],
            ]
        )
