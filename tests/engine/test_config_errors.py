"""A bad environment is said in one line with exit code 2, never a traceback, never a password
(issue 41, points 4 and 5, and its CLI argument checks).

The environment cases run the real `thoughtmap` as a process, as a user meets them: the message
must name the variable, say the fix, and hold no password, on stdout or stderr. A database on a
read-only mount is still read (list, show, export) and refuses writes, and nothing stored changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from engine import cli
from engine.config import load_settings
from engine.services import build_services
from tests import REPO_ROOT
from tests.support.db_backends import _fresh_postgres_database, _postgres_url

SECRET = "SECRET-pw-41"
QUESTION = "Why is the sky blue?"


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A loopback port that refuses connections for the whole test: bound, never listening, so
    nothing else can take it meanwhile."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def thoughtmap(*argv: str, **env: str) -> subprocess.CompletedProcess:
    """The real CLI as a process, with `env` over this test's environment (its own home)."""
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *argv],
        cwd=REPO_ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def assert_clear_refusal(result: subprocess.CompletedProcess, variable: str) -> str:
    """Exit code 2 and one line on stderr naming `variable`; no traceback and no password anywhere."""
    shown = result.stdout + result.stderr
    assert "Traceback" not in shown, shown
    assert SECRET not in shown, shown
    assert result.returncode == cli.EXIT_USAGE, shown
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and variable in lines[0], result.stderr
    return lines[0]


def stored_run_ids() -> list[str]:
    services = build_services(load_settings())
    try:
        return [run.id for run in services.repo.list_runs()]
    finally:
        services.close()


# ====================================================================== the LLM endpoint


@pytest.mark.parametrize(
    "base_url, problem",
    [
        ("http://127.0.0.1:99999/v1", "port"),
        ("http://127.0.0.1:abc/v1", "port"),
        (f"http://user:{SECRET}@127.0.0.1:abc/v1", "port"),
        (f"user:{SECRET}@127.0.0.1:8080/v1", "http://"),
        ("ftp://127.0.0.1/v1", "http://"),
        ("http:///v1", "host"),
    ],
)
def test_a_malformed_base_url_is_refused_before_anything_runs(base_url, problem):
    result = thoughtmap(
        "run", QUESTION, "--llm", "openai", "--method", "direct", "--search", "none", OPENAI_BASE_URL=base_url
    )
    line = assert_clear_refusal(result, "OPENAI_BASE_URL")
    assert problem in line
    assert stored_run_ids() == [], "nothing is stored for a refused configuration"


# ====================================================================== the database URL


@pytest.mark.parametrize(
    "database_url, problem",
    [
        (f"postgresql+psycopg://user:{SECRET}@127.0.0.1:99999/db", "port must be a number from 1 to 65535"),
        (f"postgresql+psycopg://user:{SECRET}@127.0.0.1:abc/db", "port must be a number from 1 to 65535"),
        (f"mysql://user:{SECRET}@127.0.0.1/db", "SQLite or PostgreSQL"),
        (f"nosuchdb://user:{SECRET}@127.0.0.1/db", "SQLite or PostgreSQL"),
        # Point 5: without a scheme this is no URL at all, and its password was echoed.
        (f"user:{SECRET}@127.0.0.1/db", "not a database URL"),
    ],
)
def test_a_malformed_database_url_is_refused_without_its_password(database_url, problem):
    line = assert_clear_refusal(thoughtmap("list", THOUGHTMAP_DATABASE_URL=database_url), "THOUGHTMAP_DATABASE_URL")
    assert problem in line


@pytest.mark.parametrize("scheme", ["postgres", "postgresql", "postgresql+psycopg"])
def test_an_unreachable_database_server_is_said_plainly(refusing_port, scheme):
    """`postgres://` is taken (PostgreSQL's usual spelling), reaches the driver, and the refused
    connection is said as such."""
    url = f"{scheme}://user:{SECRET}@127.0.0.1:{refusing_port}/thoughtmap"
    line = assert_clear_refusal(thoughtmap("list", THOUGHTMAP_DATABASE_URL=url), "THOUGHTMAP_DATABASE_URL")
    assert "connection refused" in line.lower() and f"127.0.0.1:{refusing_port}" in line


def test_postgres_is_postgresqls_usual_spelling():
    from storage.db import POSTGRES_DRIVERNAME, parse_database_url

    for url in ("postgres://u:pw@db.example:5432/runs", "postgresql://u:pw@db.example/runs"):
        parsed = parse_database_url(url)
        assert parsed.drivername == POSTGRES_DRIVERNAME
        assert (parsed.host, parsed.database, parsed.password) == ("db.example", "runs", "pw")


def test_a_postgres_url_opens_the_test_server():
    base = _postgres_url()
    if not base:
        pytest.skip("no PostgreSQL test server (run the tests through scripts/test)")
    url = _fresh_postgres_database(base).replace("postgresql+psycopg://", "postgres://", 1)
    result = thoughtmap("list", THOUGHTMAP_DATABASE_URL=url)
    assert result.returncode == cli.EXIT_OK, result.stderr
    assert "no runs stored yet" in result.stderr


# ====================================================================== other variables


@pytest.mark.parametrize(
    "variable, value",
    [
        ("THOUGHTMAP_WORKERS", "many"),
        ("THOUGHTMAP_WORKERS", "0"),
        ("THOUGHTMAP_LLM_TIMEOUT", "nan"),
        ("THOUGHTMAP_LLM_CONCURRENCY", "-2"),
        ("THOUGHTMAP_LOCAL_PORT", "70000"),
        ("THOUGHTMAP_SEARCH", "everywhere"),
        ("THOUGHTMAP_EXECUTION", "cluster"),
        ("THOUGHTMAP_LLM", "gpt"),
        ("THOUGHTMAP_STRUCTURED_MODE", "xml"),
        ("THOUGHTMAP_EMBEDDINGS_URL", "localhost:8000"),
        ("THOUGHTMAP_RERANK_URL", "http://127.0.0.1:99999"),
    ],
)
def test_every_variable_with_a_value_that_cannot_work_is_named(capsys, monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    code = cli.main(["list"])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_USAGE and out == ""
    assert len(err.strip().splitlines()) == 1 and variable in err and value in err, err


# ====================================================================== a read-only database


@contextmanager
def read_only_mount(path: Path) -> Iterator[None]:
    """`path` (a folder or a file) read-only for every process, root included: a bind mount
    remounted read-only (file modes do not stop root)."""
    if os.geteuid() != 0:
        pytest.skip("making a read-only mount needs root (the tests run as root in CI)")
    mounted = subprocess.run(["mount", "--bind", str(path), str(path)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {mounted.stderr.strip()}")
    try:
        remounted = subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], capture_output=True, text=True)
        if remounted.returncode != 0:
            pytest.skip(f"cannot remount read-only here: {remounted.stderr.strip()}")
        yield
    finally:
        subprocess.run(["umount", str(path)], check=True)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def store_a_run() -> str:
    """One finished run, written by a process that ended (its WAL folded back into the file, as
    in a database someone copied or mounted): its id."""
    result = thoughtmap("run", QUESTION, "--method", "direct", "--llm", "fake", "--search", "none", "--quiet")
    assert result.returncode == cli.EXIT_OK, result.stderr
    return result.stdout.strip()


@pytest.fixture
def stored_run(tmp_path, monkeypatch) -> tuple[Path, str]:
    """A home holding one finished run: the home and the run's id."""
    home = tmp_path / "home"
    monkeypatch.setenv("THOUGHTMAP_HOME", str(home))
    return home, store_a_run()


def test_a_database_on_a_read_only_mount_is_read_and_refuses_writes(stored_run):
    home, run_id = stored_run
    database = home / "thoughtmap.sqlite3"
    before = digest(database)
    with read_only_mount(home):
        listed = thoughtmap("list")
        assert listed.returncode == cli.EXIT_OK, listed.stderr
        assert run_id in listed.stdout and "Traceback" not in listed.stderr
        shown = thoughtmap("show", run_id)
        assert shown.returncode == cli.EXIT_OK and QUESTION in shown.stdout, shown.stderr
        exported = thoughtmap("export", run_id, "--format", "json")
        assert exported.returncode == cli.EXIT_OK, exported.stderr
        assert json.loads(exported.stdout)["run"]["question"] == QUESTION

        refused = thoughtmap("run", "Why is the sea blue?", "--method", "direct", "--llm", "fake", "--search", "none")
        line = assert_clear_refusal(refused, "THOUGHTMAP_HOME")
        assert "cannot be written" in line and str(database) in line
        resumed = thoughtmap("resume", run_id)
        assert_clear_refusal(resumed, "THOUGHTMAP_HOME")
    assert digest(database) == before, "nothing stored changed"
    assert stored_run_ids() == [run_id]


def test_a_read_only_database_file_named_by_its_url_refuses_writes(tmp_path, monkeypatch):
    """Only the file is read-only (its folder is not): SQLite's -wal and -shm can be made, and
    the writes are refused all the same."""
    database = tmp_path / "shared" / "runs.sqlite3"
    monkeypatch.setenv("THOUGHTMAP_DATABASE_URL", f"sqlite:///{database}")
    run_id = store_a_run()
    before = digest(database)
    with read_only_mount(database):
        listed = thoughtmap("list")
        assert listed.returncode == cli.EXIT_OK and run_id in listed.stdout, listed.stderr
        refused = thoughtmap("run", "Why is the sea blue?", "--method", "direct", "--llm", "fake", "--search", "none")
        assert "cannot be written" in assert_clear_refusal(refused, "THOUGHTMAP_DATABASE_URL")
    assert digest(database) == before
    assert stored_run_ids() == [run_id]


# ====================================================================== CLI arguments


def cli_code(capsys, *argv: str) -> tuple[int, str]:
    """`thoughtmap argv` in this process: its exit code (argparse's own refusals included) and stderr."""
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse refuses a choice by exiting
        code = exc.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, named",
    [
        (["list", "--limit", "-1"], "--limit"),
        (["list", "--limit", "0"], "--limit"),
        (["list", "--status", "bogus"], "--status"),
        (["list", "--method", "bogus"], "--method"),
        (["worker", "--concurrency", "0"], "--concurrency"),
        (["worker", "--stalled-after", "-1"], "--stalled-after"),
        (["worker", "--heartbeat", "nan"], "--heartbeat"),
        (["kg", "stop", "--collection", "hotpotqa", "--chunk-tokens", "0"], "--chunk-tokens"),
    ],
)
def test_a_bad_argument_value_is_refused_with_exit_code_2(capsys, argv, named):
    code, err = cli_code(capsys, *argv)
    assert code == cli.EXIT_USAGE and named in err and "Traceback" not in err, err


def test_list_filters_that_match_nothing_say_so(capsys):
    code, err = cli_code(capsys, "list", "--status", "failed", "--method", "direct")
    assert code == cli.EXIT_OK and "no stored run matches" in err


# ====================================================================== the app


def test_the_app_shows_the_same_message_instead_of_a_traceback(monkeypatch):
    from streamlit.testing.v1 import AppTest

    from components import app_state

    monkeypatch.setenv("THOUGHTMAP_DATABASE_URL", f"user:{SECRET}@127.0.0.1/db")
    app_state.get_services.clear()
    try:
        at = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=60).run()
    finally:
        app_state.get_services.clear()
    assert not at.exception, [e.value for e in at.exception]
    [error] = at.error
    shown = error.value.replace("\\", "")  # as the page reads: without the Markdown escapes
    assert "cannot start" in shown and "THOUGHTMAP_DATABASE_URL=***@127.0.0.1/db is not a database URL" in shown
    assert all(SECRET not in str(element.value) for element in [*at.error, *at.markdown, *at.caption])


def test_a_url_typed_in_the_apps_settings_is_checked_as_the_variable_is():
    """The Settings page's "Test connection" builds the adapter from what was typed: a bad port is
    an LLMError it shows, not the HTTP client's exception."""
    from engine.config import LLMSettings
    from engine.llm.limits import ConcurrencyLimiter
    from engine.llm.openai_compat import OpenAICompatibleLLM
    from engine.llm.protocol import LLMError

    with pytest.raises(LLMError) as refused:
        OpenAICompatibleLLM(LLMSettings(base_url=f"http://user:{SECRET}@127.0.0.1:abc/v1"), ConcurrencyLimiter(1))
    assert "port must be a number" in refused.value.user_message and SECRET not in refused.value.user_message


def test_an_ingest_into_a_read_only_home_is_one_clear_line(tmp_path, monkeypatch):
    """The corpus index cannot be opened in a read-only folder (its write-ahead log needs one it can
    write): said in one line naming the folder to fix, never a traceback."""
    home = tmp_path / "home"
    monkeypatch.setenv("THOUGHTMAP_HOME", str(home))
    note = tmp_path / "note.md"
    note.write_text("# Zorblax\n\nThe Zorblax protocol is a handshake.\n", encoding="utf-8")
    assert thoughtmap("ingest", str(note)).returncode == cli.EXIT_OK  # the index is built, writable
    index = home / "corpus.sqlite3"
    before = digest(index)
    with read_only_mount(home):
        refused = thoughtmap("ingest", str(note))
    assert refused.returncode == cli.EXIT_FAILED and refused.stdout == ""
    assert "Traceback" not in refused.stderr and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert f"the corpus index {index} cannot be used" in refused.stderr and f"make {home} writable" in refused.stderr
    assert digest(index) == before


def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(tmp_path, monkeypatch):
    """`thoughtmap list | head -1`: stdout's reader goes away; no BrokenPipeError traceback."""
    monkeypatch.setenv("THOUGHTMAP_HOME", str(tmp_path / "home"))
    for _ in range(3):
        store_a_run()
    process = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "list"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=os.environ.copy(),
    )
    process.stdout.close()  # the reader is gone before the first line is written
    err = process.stderr.read().decode()
    assert process.wait(timeout=120) == cli.EXIT_FAILED
    assert "Traceback" not in err and "BrokenPipe" not in err, err


@pytest.mark.parametrize(
    "variable, template",
    [
        ("THOUGHTMAP_DATABASE_URL", "postgresql://u:{pw}@127.0.0.1:99999/db"),
        ("THOUGHTMAP_DATABASE_URL", "mysql://u:{pw}@127.0.0.1/db"),
        ("OPENAI_BASE_URL", "http://user:{pw}@127.0.0.1:abc/v1"),
    ],
)
@pytest.mark.parametrize("password", ["pa/ss-41", "se?cret-41", "p#ss-41"])
def test_a_password_holding_url_punctuation_is_not_echoed(variable, template, password):
    """SQLAlchemy reads a password up to the URL's last `@`, so it may hold `/`, `?` or `#`, which
    end a URL's host part for urlsplit: none of it may show."""
    result = thoughtmap("list", **{variable: template.format(pw=password)})
    assert result.returncode == cli.EXIT_USAGE, result.stderr
    shown = result.stdout + result.stderr
    assert variable in shown and "Traceback" not in shown
    assert password not in shown and password.split("/")[-1].split("?")[-1].split("#")[-1] not in shown, shown
