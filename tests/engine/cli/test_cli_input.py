"""`thoughtmap` refuses bad input before anything is stored (issue 10, finding 7).

Budgets that are not positive finite numbers, argv bytes that are not UTF-8 and `--out` paths that
cannot be written all give exit code 2 and a message saying what was wrong, before a run starts. A
report that still cannot be written at the end says the run is saved and how to export it again.
Commands run in-process through `engine.cli.main`, except one real subprocess for raw argv bytes.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from engine import cli
from engine.config import load_settings
from engine.services import build_services
from tests import REPO_ROOT

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
# What Python makes of the argv bytes b"\xff\xfe" (surrogateescape).
NOT_UTF8 = b"\xff\xfe".decode("utf-8", "surrogateescape")


def cli_run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def stored_runs() -> list:
    services = build_services(load_settings())
    try:
        return services.repo.list_runs()
    finally:
        services.close()


def assert_no_traceback(err: str) -> None:
    assert "Traceback" not in err, err


@pytest.fixture
def finished_run(capsys) -> str:
    """A small finished run (direct method, fake LLM, no search): its id."""
    code, out, err = cli_run(
        capsys, "run", QUESTION, "--method", "direct", "--llm", "fake", "--search", "none", "--quiet"
    )
    assert code == cli.EXIT_OK, err
    return out.strip()


# ====================================================================== budgets


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--max-cost", "nan"),
        ("--max-cost", "NaN"),
        ("--max-cost", "inf"),
        ("--max-cost", "-inf"),
        ("--max-cost", "1e999"),
        ("--max-cost", "-0.5"),
        ("--max-cost", "0"),
        ("--max-tokens", "0"),
        ("--max-tokens", "-3"),
    ],
)
def test_run_refuses_a_budget_that_is_not_a_positive_finite_number(capsys, flag, value):
    code, out, err = cli_run(capsys, "run", QUESTION, "--llm", "fake", "--search", "none", f"{flag}={value}")
    assert code == cli.EXIT_USAGE and out == ""
    assert flag in err and "positive" in err and value in err
    assert_no_traceback(err)
    assert stored_runs() == [], "nothing is stored for a refused budget"


@pytest.mark.parametrize("flag, value", [("--max-cost", "nan"), ("--max-cost", "inf"), ("--max-tokens", "0")])
def test_resume_refuses_a_bad_budget_and_keeps_the_stored_one(finished_run, capsys, flag, value):
    services = build_services(load_settings())
    try:
        services.repo.set_budget(finished_run, max_tokens=5000, max_cost=1.5)
    finally:
        services.close()

    code, out, err = cli_run(capsys, "resume", finished_run, f"{flag}={value}", "--quiet")

    assert code == cli.EXIT_USAGE and out == ""
    assert flag in err and "positive" in err
    run = next(r for r in stored_runs() if r.id == finished_run)
    assert (run.max_tokens, run.max_cost) == (5000, 1.5)


# ====================================================================== argv that is not UTF-8


@pytest.mark.parametrize(
    "argv",
    [
        ["run", NOT_UTF8, "--llm", "fake"],
        ["run", f"Why {NOT_UTF8}?", "--llm", "fake"],
        ["run", QUESTION, "--llm", "fake", "--param", f"top_k={NOT_UTF8}"],
        ["run", QUESTION, "--llm", "fake", "--out", f"report-{NOT_UTF8}.md"],
        ["export", f"run{NOT_UTF8}"],
        ["ingest", f"notes-{NOT_UTF8}.txt"],
    ],
)
def test_arguments_that_are_not_utf8_are_refused(capsys, argv):
    code, out, err = cli_run(capsys, *argv)
    assert code == cli.EXIT_USAGE and out == ""
    assert "not valid UTF-8" in err and r"\xff\xfe" in err
    assert_no_traceback(err)
    assert stored_runs() == []


def test_raw_argv_bytes_from_a_shell(tmp_path):
    """The real thing: `thoughtmap run $'\\xff\\xfe'` as a process."""
    env = {**os.environ, "THOUGHTMAP_HOME": str(tmp_path), "THOUGHTMAP_LLM": "fake"}
    result = subprocess.run(
        [sys.executable, "-m", "engine.cli", "run", b"\xff\xfe"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        timeout=120,
    )
    err = result.stderr.decode("utf-8", "replace")
    assert result.returncode == cli.EXIT_USAGE, err
    assert result.stdout == b""
    assert "not valid UTF-8" in err
    assert_no_traceback(err)


# ====================================================================== --out checked before the run


@pytest.mark.parametrize(
    "make_target, expected",
    [
        (lambda tmp: tmp, "is a folder"),
        (lambda tmp: tmp / "missing" / "x.md", "does not exist"),
        (lambda tmp: tmp / "file.txt" / "x.md", "is not a folder"),
    ],
)
def test_run_out_is_checked_before_the_run_starts(capsys, tmp_path, make_target, expected):
    (tmp_path / "file.txt").write_text("a file, not a folder", encoding="utf-8")
    target = make_target(tmp_path)
    code, out, err = cli_run(
        capsys,
        "run",
        QUESTION,
        "--method",
        "direct",
        "--llm",
        "fake",
        "--search",
        "none",
        "--quiet",
        "--out",
        str(target),
    )
    assert code == cli.EXIT_USAGE and out == ""
    assert "--out" in err and expected in err and str(target) in err
    assert_no_traceback(err)
    assert stored_runs() == [], "no run is started when the report could not be written"


def test_resume_out_is_checked_before_resuming(finished_run, capsys, tmp_path):
    target = tmp_path / "missing" / "x.md"
    code, out, err = cli_run(capsys, "resume", finished_run, "--quiet", "--out", str(target))
    assert code == cli.EXIT_USAGE and out == ""
    assert "--out" in err and "does not exist" in err


@pytest.mark.parametrize("fmt", ["md", "json"])
@pytest.mark.parametrize(
    "make_target, expected",
    [
        (lambda tmp: tmp, "is a folder"),
        (lambda tmp: tmp / "missing" / "x.md", "does not exist"),
    ],
)
def test_export_out_is_checked(finished_run, capsys, tmp_path, fmt, make_target, expected):
    target = make_target(tmp_path)
    code, out, err = cli_run(capsys, "export", finished_run, "--format", fmt, "--out", str(target))
    assert code == cli.EXIT_USAGE and out == ""
    assert "--out" in err and expected in err and str(target) in err
    assert_no_traceback(err)
    assert target.is_dir() or not target.exists()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full to simulate a full disk")
def test_run_whose_report_cannot_be_written_at_the_end_says_the_run_is_saved(capsys):
    # /dev/full passes every check up front and fails the write with ENOSPC, like a full disk.
    code, out, err = cli_run(
        capsys,
        "run",
        QUESTION,
        "--method",
        "direct",
        "--llm",
        "fake",
        "--search",
        "none",
        "--quiet",
        "--out",
        "/dev/full",
    )
    run_id = out.strip()
    assert code == cli.EXIT_FAILED
    assert_no_traceback(err)
    assert "/dev/full" in err and "saved" in err
    assert f"thoughtmap export {run_id} --out" in err
    assert [r.id for r in stored_runs()] == [run_id]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full to simulate a full disk")
def test_export_whose_write_fails_gives_a_message_not_a_traceback(finished_run, capsys):
    code, out, err = cli_run(capsys, "export", finished_run, "--out", "/dev/full")
    assert code == cli.EXIT_FAILED and out == ""
    assert "/dev/full" in err and "No space left" in err
    assert_no_traceback(err)
