"""Issue 10, finding 7 (the question): one validation of a research question, used by the runner,
the repository (as a last guard), the CLI and the app (tests/pages/test_app_questions.py).

A question is text, holds no NUL, loses invisible control characters and is at most
MAX_QUESTION_CHARS long; every refusal is a QuestionError (a ValueError) saying what to do.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from engine import cli
from engine.questions import MAX_QUESTION_CHARS, QuestionError, clean_question
from tests import REPO_ROOT
from tests.support.db_backends import database_url, repo  # noqa: F401  (fixtures)

ROOT = REPO_ROOT
QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
TOO_LONG = "Why? " + "x" * MAX_QUESTION_CHARS


# ---------------------------------------------------------------------- the validation itself


def test_a_plain_question_is_kept_trimmed():
    assert clean_question(f"  {QUESTION}\n") == QUESTION


def test_control_characters_and_terminal_escapes_are_removed_line_breaks_kept():
    pasted = (
        "\x1b[31mWhy\x1b[0m is the\tsky\x07 blue?\r\n\x1b]8;;http://evil\x1b\\Explain\x1b]8;;\x1b\\ \u202eit.\x7f\x9b"
    )
    assert clean_question(pasted) == "Why is the sky blue?\nExplain it."


def test_a_question_at_the_limit_is_accepted_one_more_character_is_not():
    assert len(clean_question("q" * MAX_QUESTION_CHARS)) == MAX_QUESTION_CHARS
    with pytest.raises(QuestionError):
        clean_question("q" * (MAX_QUESTION_CHARS + 1))


def test_the_limit_counts_what_is_left_after_cleaning():
    # Padding of spaces or escape sequences does not make a short question too long.
    assert clean_question(" " * 5000 + QUESTION + "\x1b[0m" * 2000) == QUESTION


# ---------------------------------------------------------------------- Runner.create_run


def _create(services, question):
    return services.runner.create_run(question=question, method="rag", llm_info=services.llm_info("fake"))


def test_runner_refuses_a_nul_question_and_stores_nothing(services):
    with pytest.raises(QuestionError, match="NUL") as caught:
        _create(services, "Why is the sky\x00 blue?")
    assert isinstance(caught.value, ValueError)
    assert "plain text" in str(caught.value)
    assert services.repo.list_runs() == []


@pytest.mark.parametrize("question", [42, b"Why is the sky blue?", ["Why?"], {"q": "Why?"}])
def test_runner_refuses_a_question_that_is_not_text(services, question):
    with pytest.raises(QuestionError, match=f"must be text, not {type(question).__name__}"):
        _create(services, question)
    assert services.repo.list_runs() == []


def test_runner_refuses_a_too_long_question_and_says_where_documents_go(services):
    with pytest.raises(QuestionError) as caught:
        _create(services, TOO_LONG)
    message = str(caught.value)
    assert f"{len(TOO_LONG):,} characters" in message and f"{MAX_QUESTION_CHARS:,}" in message
    assert "corpus" in message and "thoughtmap ingest" in message
    assert services.repo.list_runs() == []


def test_runner_refuses_a_lone_surrogate(services):
    with pytest.raises(QuestionError, match="not valid UTF-8"):
        _create(services, "Why is the sky \udcff blue?")
    assert services.repo.list_runs() == []


def test_runner_stores_the_cleaned_question(services):
    run = _create(services, "\x1b[1mWhy is the sky blue?\x1b[0m\x07 ")
    stored = services.repo.get_run(run.id)
    assert stored.question == "Why is the sky blue?"
    assert stored.title == "Why is the sky blue?"


# ---------------------------------------------------------------------- Repository.create_run


@pytest.mark.parametrize("question", [None, 7, b"bytes", "with\x00nul", "x" * 5_000])
def test_repository_refuses_what_cannot_be_stored(repo, question):
    with pytest.raises(QuestionError):
        repo.create_run(question=question, method="rag", params={})
    assert repo.list_runs() == []


# ---------------------------------------------------------------------- a follow-up "Ask" on a node


def _ask_spec():
    from engine.methods.deot.kinds import COMMANDS

    return next(spec for spec in COMMANDS if spec.name == "ask")


def test_a_follow_up_ask_is_refused_when_too_long_with_the_same_message():
    from engine.contract import CommandRejected

    with pytest.raises(CommandRejected, match=f"the limit is {MAX_QUESTION_CHARS:,}.*documents belong in the corpus"):
        _ask_spec().parse({"node_id": 1, "question": "Why? " + "x" * 5_000})


def test_a_follow_up_ask_is_cleaned_like_the_run_question():
    assert _ask_spec().parse({"node_id": 1, "question": " \x1b[31mWhy\x1b[0m?\x07 "}).question == "Why?"


# ---------------------------------------------------------------------- thoughtmap run


def _cli(capsys, *argv):
    capsys.readouterr()
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "question, expected",
    [
        (TOO_LONG, f"the limit is {MAX_QUESTION_CHARS:,}"),
        ("Why is the sky\x00 blue?", "NUL character"),  # argv cannot hold NUL; main() can be given one
    ],
)
def test_cli_run_refuses_the_question_with_exit_2_and_one_line(capsys, question, expected):
    code, out, err = _cli(capsys, "run", question, "--llm", "fake", "--quiet")
    assert code == 2
    assert out == ""  # no run id: no run was created
    assert err.count("\n") == 1 and err.startswith("thoughtmap: error: the question")
    assert expected in err and "Traceback" not in err
    code, out, err = _cli(capsys, "list")
    assert code == 0 and "no runs stored yet" in err


def test_cli_run_too_long_question_in_a_real_process(tmp_path):
    env = {**os.environ, "THOUGHTMAP_HOME": str(tmp_path), "THOUGHTMAP_LLM": "fake", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "engine.cli", "run", TOO_LONG, "--quiet"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "documents belong in the corpus" in result.stderr
