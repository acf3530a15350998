"""benchmarks/bench_fgdip_trace.py: where FGDIP's answers were won or lost, read from stored runs."""

from __future__ import annotations

import json

import pytest

from benchmarks import bench_fgdip_trace
from engine import cli
from engine.config import load_settings
from engine.evaluate.datasets import load_items
from engine.services import build_services
from storage.models import Node


def _tree() -> list[Node]:
    return [
        Node(run_id="r", kind="question", data={"entities": ["Arthur's Magazine"]}),
        Node(
            run_id="r",
            kind="entity",
            data={
                "entity": "Arthur's Magazine",
                "action": "search",
                "argument": "Arthur's Magazine",
                "verdict": "maybe",
                "observation": "Arthur's Magazine was an American literary periodical.",
            },
        ),
        Node(
            run_id="r",
            kind="step",
            data={
                "action": "lookup",
                "argument": "founded",
                "verdict": "sure",
                "observation": "It was founded in 1844 in Philadelphia.",
            },
        ),
        Node(
            run_id="r",
            kind="step",
            data={
                "action": "search",
                "argument": "First for Women",
                "verdict": "impossible",
                "backtrack_from": 3,
                "observation": "First for Women started in 1989.",
            },
        ),
        Node(run_id="r", kind="answer", data={"short_answer": "First for Women", "verdict": "rejected"}),
        Node(
            run_id="r", kind="answer", data={"short_answer": "the year 1844", "verdict": "accepted", "reported": True}
        ),
        Node(run_id="r", kind="answer", data={"short_answer": "1844", "verdict": "unjudged"}),
    ]


def test_one_runs_trace_says_what_retrieval_reached_and_what_the_evaluators_did():
    trace = bench_fgdip_trace.run_trace(_tree(), ["1844"], yes_no=False)
    assert trace == {
        "gold_observed": True,
        "candidate_em": True,
        "reported_em": False,
        "candidates": 3,
        "accepted": 1,
        "judged": 2,
        "steps": 3,
        "sure": 1,
        "maybe": 1,
        "impossible": 1,
        "backtracks": 1,
        "answer_words": 3,
    }
    # A gold answer counts as observed as a whole word only ("184" is not in "1844").
    assert bench_fgdip_trace.run_trace(_tree(), ["184"], yes_no=False)["gold_observed"] is False
    # "yes" is in most pages: a yes/no dataset leaves the column out.
    assert bench_fgdip_trace.run_trace(_tree(), ["yes"], yes_no=True)["gold_observed"] is None


def test_the_shares_are_of_runs_of_judged_candidates_and_of_judged_steps():
    script = bench_fgdip_trace
    first = script.run_trace(_tree(), ["1844"], yes_no=False)
    second = script.run_trace(_tree()[:2], ["Philadelphia"], yes_no=False)  # a run that answered nothing
    summary = script.summarise([first, second])
    assert summary == {
        "runs": 2,
        "gold_observed": 0.5,
        "candidate_em": 0.5,
        "reported_em": 0.0,
        "candidates_per_run": 1.5,
        "accepted": 0.5,
        "sure": 0.25,
        "maybe": 0.5,
        "impossible": 0.25,
        "backtracks_per_run": 0.5,
        "median_answer_words": 3,
    }
    table = script.markdown({"groups": {"easy": summary}})
    assert table.splitlines()[2] == "| easy | 2 | .500 | .500 | .000 | 1.5 | .500 | .250 | .500 | .250 | 0.5 | 3 |"


def _newest_benchmark(services) -> str:
    return services.benchmarks.store.list_benchmarks(limit=1)[0].id


def _bench_on_the_fake(*arguments: str) -> str:
    """Runs `thoughtmap bench` with the scripted fake LLM on the local corpus; the new benchmark's id."""
    assert (
        cli.main(
            ["bench", "--dataset", "hotpotqa-autoact", *arguments, "--llm", "fake", "--search", "local", "--quiet"]
        )
        == cli.EXIT_OK
    )
    services = build_services(load_settings())
    try:
        return _newest_benchmark(services)
    finally:
        services.close()


def test_the_command_reads_a_stored_fgdip_benchmark(prebuilt_corpus_home, capsys, tmp_path):
    bench_id = _bench_on_the_fake("--methods", "direct,fgdip", "--limit", "2", "--by", "level")
    capsys.readouterr()
    services = build_services(load_settings())
    try:
        rows = services.benchmarks.store.list_items(bench_id, method="fgdip")
        answers = sum(len(services.repo.list_nodes(r.run_id, kind="answer")) for r in rows)
    finally:
        services.close()

    out = tmp_path / "trace.json"
    script = bench_fgdip_trace
    assert script.main([bench_id, "--by", "level", "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert table.startswith("| Group | Runs | Gold in an observation |")
    result = json.loads(out.read_text())
    assert result["benchmark"] == bench_id and result["dataset"] == "hotpotqa-autoact"
    groups = result["groups"]
    levels = {i.meta["level"] for i in load_items("hotpotqa-autoact", limit=2, balance="level")}
    assert list(groups) == [level for level in ("easy", "medium", "hard") if level in levels]  # the dataset's order
    assert sum(g["runs"] for g in groups.values()) == len(rows) == 2
    assert sum(g["candidates_per_run"] * g["runs"] for g in groups.values()) == answers
    assert result["finished"] == result["read"] == 2 and "Read " not in table

    plain = _bench_on_the_fake("--methods", "direct", "--limit", "1")
    with pytest.raises(SystemExit, match=f"benchmark {plain} ran direct, not fgdip"):
        script.main([plain])


def test_items_imported_without_their_runs_are_counted_and_said_not_read(
    prebuilt_corpus_home, capsys, tmp_path, monkeypatch
):
    # A fresh machine continues a benchmark from its archive: the imported items carry scores, not
    # search trees, so a table of "Runs 1" for 90 finished items must say why.
    bench_id = _bench_on_the_fake("--methods", "fgdip", "--limit", "2")
    archive = tmp_path / "archive.json"
    assert cli.main(["bench", "--export", bench_id, str(archive)]) == cli.EXIT_OK
    kept = tmp_path / "kept.json"
    assert bench_fgdip_trace.main([bench_id, "--json", str(tmp_path / "there.json"), "--keep", str(kept)]) == 0
    there = json.loads((tmp_path / "there.json").read_text())
    assert there["read"] == 2 and there["from_kept"] == 0 and len(json.loads(kept.read_text())["runs"]) == 2

    monkeypatch.setenv("THOUGHTMAP_DATABASE_URL", f"sqlite:///{tmp_path / 'other.sqlite3'}")
    assert cli.main(["bench", "--import", str(archive)]) == cli.EXIT_OK
    capsys.readouterr()
    assert bench_fgdip_trace.main([bench_id]) == 0
    out = capsys.readouterr().out
    assert "Read 0 of 2 finished fgdip item runs: the other 2 have no run stored in this database" in out

    # With the traces kept where the runs ran, the benchmark is read whole, with the same numbers.
    assert bench_fgdip_trace.main([bench_id, "--json", str(tmp_path / "here.json"), "--keep", str(kept)]) == 0
    out = capsys.readouterr().out
    assert "2 of the 2 runs read come from the kept traces" in out and "Read " not in out
    assert json.loads((tmp_path / "here.json").read_text())["groups"] == there["groups"]
    # A file kept for another benchmark is refused, not mixed in.
    other = _bench_on_the_fake("--methods", "fgdip", "--limit", "1")
    with pytest.raises(SystemExit, match=f"keeps the traces of benchmark {bench_id}, not {other}"):
        bench_fgdip_trace.main([other, "--keep", str(kept)])


def test_the_queue_keeps_an_fgdip_benchmarks_traces_beside_its_archive(prebuilt_corpus_home, tmp_path):
    from benchmarks import bench_queue

    bench_id = _bench_on_the_fake("--methods", "direct,fgdip", "--limit", "1")
    archive = tmp_path / f"issue15-example-{bench_id}.json"
    bench_queue.export(bench_id, archive, bench_queue.Entry("issue15-example", 15, (), fgdip_traces=True))
    kept = json.loads(bench_queue.traces_of(archive).read_text())
    assert json.loads(archive.read_text())["benchmark"]["id"] == bench_id
    assert kept["benchmark"] == bench_id and len(kept["runs"]) == 1  # the FGDIP run only
    assert bench_queue.traces_of(archive).parent.name == "traces"  # out of the archives' glob
