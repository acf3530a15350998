"""A run whose end cannot be recorded still ends: the CLI says why in one line and exits non-zero.

Ways an execution loses its database under it:
- the disk holding the database fills up (a small tmpfs, filled by a file): the CLI used to poll
  for ever while the run's thread had died unable to write its final status; now it exits,
  nothing stored is lost, and once the filler is deleted `thoughtmap resume` finishes the run;
- the database turns read-only mid-run: the same, and the app's run view says it too
  (`Runner.execution_died`, which both read) and resumes the run once it is writable;
- another process deletes the run's rows while it executes (bypassing `Runner.delete`, which
  refuses): the run used to print IntegrityError tracebacks; now it stops with one line.
"""

from __future__ import annotations

import logging
import os
import queue
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
from psycopg import errors as psycopg_errors
from sqlalchemy import event
from sqlalchemy.exc import DBAPIError

from engine import cli
from engine.cli import common
from engine.config import load_settings
from engine.llm.fake import FakeLLM
from engine.services import Services, build_services
from storage.db import open_database
from storage.models import NodeStatus, RunStatus
from storage.repository import Repository
from storage.unwritable import DatabaseUnwritable, refused_writes
from tests import REPO_ROOT
from tests.engine.methods.deot.deot_scripts import Gate
from tests.engine.methods.fgdip.test_app_fgdip import app_services
from tests.pages.test_app_pages import assert_no_exception, joined, open_page, wait_until_idle

QUESTION = "What drives inflation after a supply shock?"
# The CLI of this checkout (an installed `thoughtmap` script may belong to another one).
THOUGHTMAP = [sys.executable, "-m", "engine.cli"]
CHECKOUT = REPO_ROOT
# Safety timeouts only (a hang fails the test instead of blocking the suite); nothing is timed.
START_TIMEOUT_S = 60  # process start-up and imports, on a loaded machine
END_TIMEOUT_S = 30  # from the run's start to the CLI's exit on a full disk
RESUME_TIMEOUT_S = 300  # a whole DEoT run on the fake
# The tmpfs: a whole DEoT run on the fake writes about 5 MB of SQLite WAL before a checkpoint can
# reuse it, so the resume needs that much once the filler is gone; the run before it gets this
# little room, which its first few writes fill.
DISK_SIZE = "16m"
FREE_BYTES = 120 * 1024


@pytest.fixture
def small_disk(tmp_path) -> Path:
    """A 16 MB tmpfs mounted for this test (root only)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill its disk needs root")
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE}", "tmpfs", str(mount_point)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {mounted.stderr.strip()}")
    yield mount_point
    subprocess.run(["umount", "--lazy", str(mount_point)], check=False)


def fill_disk(folder: Path, leave: int) -> Path:
    """A filler file that leaves `leave` bytes free on `folder`'s file system."""
    stats = os.statvfs(folder)
    size = stats.f_bavail * stats.f_frsize - leave
    assert size > 0, f"{folder} has less than {leave} bytes free already"
    filler = folder / "filler"
    chunk = b"\0" * (64 * 1024)
    with filler.open("wb") as out:
        while size > 0:
            size -= out.write(chunk[:size])
    return filler


def read_lines(stream, into: queue.Queue) -> None:
    for line in iter(stream.readline, ""):
        into.put(line)
    into.put(None)


def done_nodes(url: str, run_id: str) -> dict[int, tuple[str, str]]:
    """The run's finished nodes, read in a connection closed before returning (an open reader
    would keep SQLite from reusing its WAL file)."""
    db = open_database(url, run_migrations=False)
    try:
        return {n.id: (n.kind, n.content) for n in Repository(db).list_nodes(run_id) if n.status == NodeStatus.DONE}
    finally:
        db.dispose()


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "error" in line.lower()]


def test_full_disk_ends_the_cli_with_one_line_and_resume_finishes_after_space_is_freed(
    prebuilt_corpus_home, small_disk
):
    url = f"sqlite:///{small_disk / 'thoughtmap.sqlite3'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "THOUGHTMAP_"))}
    env.update(THOUGHTMAP_HOME=str(prebuilt_corpus_home), THOUGHTMAP_DATABASE_URL=url, PYTHONUNBUFFERED="1")
    created = subprocess.run(
        [*THOUGHTMAP, "list"], env=env, cwd=CHECKOUT, capture_output=True, text=True, timeout=START_TIMEOUT_S
    )
    assert created.returncode == 0, created.stderr  # the database exists, migrated, before the disk fills
    filler = fill_disk(small_disk, FREE_BYTES)

    proc = subprocess.Popen(
        [*THOUGHTMAP, "run", QUESTION, "--method", "deot", "--llm", "fake", "--search", "local", "--quiet"],
        env=env,
        cwd=CHECKOUT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=read_lines, args=(proc.stdout, lines), daemon=True).start()
        run_id = (lines.get(timeout=START_TIMEOUT_S) or "").strip()
        try:
            proc.wait(timeout=END_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"the CLI still waited on run {run_id} {END_TIMEOUT_S} s after it started, on a full disk"
            ) from None
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            stream.close()

    assert run_id, f"no run id: {err}"
    assert proc.returncode == cli.EXIT_FAILED, err
    assert "Traceback" not in err and "OperationalError" not in err, err
    [line] = error_lines(err)
    assert "is full" in line and "free space" in line.lower() and f"thoughtmap resume {run_id}" in line, line
    kept = done_nodes(url, run_id)

    filler.unlink()  # space is back
    resumed = subprocess.run(
        [*THOUGHTMAP, "resume", run_id, "--quiet"],
        env=env,
        cwd=CHECKOUT,
        capture_output=True,
        text=True,
        timeout=RESUME_TIMEOUT_S,
    )
    assert resumed.returncode == cli.EXIT_OK, resumed.stderr
    assert "Traceback" not in resumed.stderr
    db = open_database(url, run_migrations=False)
    try:
        repo = Repository(db)
        assert repo.get_run(run_id).status == RunStatus.DONE
        after = {n.id: n for n in repo.list_nodes(run_id)}
    finally:
        db.dispose()
    # Nothing stored before the disk filled was lost or redone: the same nodes, as they were.
    assert all(
        node_id in after
        and (after[node_id].kind, after[node_id].content) == kind_content
        and after[node_id].status == NodeStatus.DONE
        for node_id, kind_content in kept.items()
    )
    assert all(n.status == NodeStatus.DONE for n in after.values() if n.kind == "question")


@dataclass
class GatedCLI:
    gate: Gate
    built: list[Services]  # the services each in-process CLI command built, in order


@pytest.fixture
def gated_cli(monkeypatch) -> GatedCLI:
    """The in-process CLI's "fake" LLM holds RAG's first answer call until the test opens the gate."""
    gated = GatedCLI(Gate(), [])
    fake = FakeLLM().when("Question:", gated.gate, times=1)
    build = common.services

    def services_with_gated_fake():
        services = build()
        services.use_llm("fake", fake)
        gated.built.append(services)
        return services

    monkeypatch.setattr(common, "services", services_with_gated_fake)
    return gated


def test_a_run_deleted_while_it_executes_stops_with_one_line(
    prebuilt_corpus_home, gated_cli, capsys, caplog, monkeypatch
):
    thread_errors: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: thread_errors.append(args.exc_value))
    other = build_services(load_settings())  # another process's view of the database
    deleted: list[str] = []

    def delete_while_answering() -> None:
        try:
            gated_cli.gate.wait_reached()
            [run] = other.repo.list_runs()
            other.repo.delete_run(run.id)  # the rows go, as a DELETE in SQL would take them
            deleted.append(run.id)
        finally:
            gated_cli.gate.opened.set()

    deleter = threading.Thread(target=delete_while_answering)
    deleter.start()
    try:
        with caplog.at_level(logging.INFO):
            code = cli.main(["run", QUESTION, "--method", "rag", "--llm", "fake", "--search", "local", "--quiet"])
    finally:
        deleter.join(timeout=30)
        other.close()
    out, err = capsys.readouterr()
    assert deleted == [out.strip()]
    run_id = deleted[0]
    assert code == cli.EXIT_FAILED, err
    [line] = error_lines(err)
    assert f"run {run_id} stopped: the run was deleted while it executed" in line, err
    assert "Traceback" not in err and "IntegrityError" not in err
    assert not thread_errors
    assert not [r for r in caplog.records if r.exc_info], "no traceback is logged for a run deleted under it"


def test_a_database_turned_read_only_mid_run_stops_it_and_resume_finishes_it(prebuilt_corpus_home, gated_cli, capsys):
    """Read-only from the moment the answer call is under way: SQLite refuses every write as a
    read-only mount would (`query_only`), on every connection the CLI's services take from then on."""
    read_only = threading.Event()

    def turn_read_only() -> None:
        try:
            gated_cli.gate.wait_reached()
            engine = gated_cli.built[0].db.engine
            event.listen(
                engine,
                "checkout",
                lambda connection, _record, _proxy: connection.execute(
                    f"PRAGMA query_only={'ON' if read_only.is_set() else 'OFF'}"
                ),
            )
            read_only.set()
        finally:
            gated_cli.gate.opened.set()

    switch = threading.Thread(target=turn_read_only)
    switch.start()
    try:
        code = cli.main(["run", QUESTION, "--method", "rag", "--llm", "fake", "--search", "local", "--quiet"])
    finally:
        switch.join(timeout=30)
    out, err = capsys.readouterr()
    run_id = out.strip()
    assert read_only.is_set()
    assert code == cli.EXIT_FAILED, err
    [line] = error_lines(err)
    assert "is read-only" in line and f"thoughtmap resume {run_id}" in line and "Traceback" not in err, err
    kept = {n.id for n in gated_cli.built[0].repo.list_nodes(run_id) if n.status == NodeStatus.DONE}
    assert kept  # the retrieval, stored before the database turned read-only

    read_only.clear()  # writable again
    # The process that executed it still stands (the app's, here the first command's): the next
    # look at the dead execution stores the run `interrupted`, resumable from anywhere.
    first = gated_cli.built[0]
    died = first.runner.execution_died(run_id)
    assert died is not None and "read-only" in died.what
    stored = first.repo.get_run(run_id)
    assert stored.status == RunStatus.INTERRUPTED and "read-only" in stored.stop_reason
    code = cli.main(["resume", run_id, "--quiet"])
    assert code == cli.EXIT_OK, capsys.readouterr().err
    repo = gated_cli.built[-1].repo
    assert repo.get_run(run_id).status == RunStatus.DONE
    assert kept <= {n.id for n in repo.list_nodes(run_id) if n.status == NodeStatus.DONE}


def test_the_app_says_why_a_run_stopped_unrecorded_and_resumes_it(prebuilt_corpus_home):
    """The app's run view reads the same `Runner.execution_died` as the CLI: the stored status still
    says running (the database took no write), the page says why the run stopped and offers Resume
    (not Pause or Stop), and Resume continues it once the database takes writes again."""
    gate, read_only = Gate(), threading.Event()
    app = app_services(FakeLLM().when("Question:", gate, times=1))
    services = next(app)
    try:
        event.listen(
            services.db.engine,
            "checkout",
            lambda connection, _record, _proxy: connection.execute(
                f"PRAGMA query_only={'ON' if read_only.is_set() else 'OFF'}"
            ),
        )
        run = services.runner.create_run(question=QUESTION, method="rag", llm_info=services.llm_info("fake"))
        services.runner.start(run.id)
        gate.wait_reached()
        read_only.set()
        gate.opened.set()
        services.runner.wait(run.id, timeout=30)  # until its execution ended (a safety timeout)
        assert services.runner.execution_died(run.id) is not None
        assert services.repo.get_run(run.id).status == RunStatus.RUNNING  # what storage still says

        at = open_page(run_id=run.id)
        shown = joined(at.error)
        assert "The run stopped: the database" in shown and "is read-only" in shown, shown
        assert "Make the database writable again, then press Resume" in shown
        labels = {b.label for b in at.button}
        assert "Resume" in labels and not {"Pause", "Stop"} & labels

        read_only.clear()
        at.button(key=f"resume-{run.id}").click().run()
        assert_no_exception(at)
        assert wait_until_idle(services, run.id).status == RunStatus.DONE
    finally:
        read_only.clear()
        gate.opened.set()
        next(app, None)  # the fixture's end: its runs ended, its services closed


@pytest.mark.parametrize(
    "driver_error, kind",
    [
        (psycopg_errors.DiskFull("could not extend file"), DatabaseUnwritable.FULL),
        (
            psycopg_errors.ReadOnlySqlTransaction("cannot execute UPDATE in a read-only transaction"),
            DatabaseUnwritable.READ_ONLY,
        ),
        (psycopg_errors.UniqueViolation("duplicate key"), None),
    ],
)
def test_postgresql_refusals_are_told_from_other_errors(driver_error, kind):
    """PostgreSQL says a full disk and a read-only server by SQLSTATE (53100, 25006), as SQLAlchemy
    hands the driver's error on; every other error passes as it is."""
    error = DBAPIError.instance("UPDATE runs SET status = 'done'", {}, driver_error, psycopg_errors.Error)
    with pytest.raises(DatabaseUnwritable if kind else type(error)) as raised:
        with refused_writes("postgresql+psycopg://thoughtmap:***@db.example/thoughtmap"):
            raise error
    if kind:
        assert raised.value.kind == kind and "db.example" in str(raised.value) and raised.value.fix


def test_a_full_disk_during_the_corpus_index_build_is_one_line_and_leaves_no_half_index(small_disk):
    """The first start builds the bundled corpus index (about 20 MB): on a disk with 1 MB free the
    build fails, said in one line with what to do, and its scratch file is removed, not left to
    hold the little space there is."""
    home = small_disk / "home"
    home.mkdir()
    fill_disk(small_disk, leave=1024 * 1024)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "THOUGHTMAP_"))}
    env.update(THOUGHTMAP_HOME=str(home))
    ended = subprocess.run(
        [*THOUGHTMAP, "run", "Who wrote Hamlet?", "--method", "rag", "--llm", "fake"],
        env=env,
        cwd=CHECKOUT,
        capture_output=True,
        text=True,
        timeout=RESUME_TIMEOUT_S,
    )
    assert ended.returncode == 1 and "Traceback" not in ended.stderr, ended.stderr
    errors = error_lines(ended.stderr)
    assert len(errors) == 1, ended.stderr
    assert "cannot be used (database or disk is full)" in errors[0] and "Free space on its disk" in errors[0]
    assert not [
        p.name for p in home.iterdir() if p.name.startswith("corpus.sqlite3") and p.name != "corpus.sqlite3.build-lock"
    ]
