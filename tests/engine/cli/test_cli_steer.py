"""`thoughtmap steer | pause | stop | delete`: the Python API's steering and control from the
terminal. A finished run reopened by a command is executed by the command's process to its end."""

from __future__ import annotations

from engine.config import load_settings
from engine.services import build_services
from tests.engine.cli.test_cli import cli_run, run_id_of
from tests.support.fixtures_corpus import bundled_corpus, prebuilt_corpus_home  # noqa: F401

QUESTION = "What caused the decline of the Roman Empire?"


def _labels(run_id: str) -> list[str]:
    services = build_services(load_settings())
    try:
        return [node.label for node in services.repo.list_nodes(run_id)]
    finally:
        services.close()


def test_steer_reopens_a_finished_run_and_grows_the_asked_question(prebuilt_corpus_home, capsys) -> None:
    code, out, _ = cli_run(
        capsys, "run", QUESTION, "--method", "deot", "--param", "max_nodes=3", "--llm", "fake", "--quiet"
    )
    assert code == 0
    run_id = run_id_of(out)
    code, _, err = cli_run(
        capsys, "steer", run_id, "ask", "--node", "1", "--set", "question=How did the plague of 165 matter?"
    )
    assert code == 0, err
    assert "ask queued" in err and f"run {run_id}: done" in err
    assert "How did the plague of 165 matter?" in _labels(run_id)


def test_steer_and_control_refuse_what_cannot_be_done(prebuilt_corpus_home, capsys) -> None:
    code, out, _ = cli_run(capsys, "run", QUESTION, "--method", "rag", "--llm", "fake", "--quiet")
    run_id = run_id_of(out)
    code, _, err = cli_run(capsys, "steer", run_id, "fly")
    assert code == 2 and "has no command 'fly'" in err
    code, _, err = cli_run(capsys, "steer", "nope", "ask")
    assert code == 2 and "no run with id 'nope'" in err
    code, _, err = cli_run(capsys, "steer", run_id, "regenerate_report", "--set", "oops")
    assert code == 2 and "'oops' is not key=value" in err
    code, _, err = cli_run(capsys, "stop", run_id)
    assert code == 1 and "already done" in err
    code, _, err = cli_run(capsys, "pause", run_id)
    assert code == 1 and "only a queued or running run can be paused" in err
    code, _, err = cli_run(capsys, "delete", run_id)
    assert code == 0 and f"deleted run {run_id}" in err
    code, _, err = cli_run(capsys, "delete", run_id)
    assert code == 2 and "no run with id" in err
