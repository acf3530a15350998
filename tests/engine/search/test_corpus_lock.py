"""The corpus index under contention (issue 41, point 3): another process holding its write lock or
its build lock never crashes a run, and the first build is done once, by whoever gets there first.

The other process is real (a subprocess holding `BEGIN EXCLUSIVE` on the index, or the flock of
its build lock). Runs wait for nothing they do not need: THOUGHTMAP_CORPUS_LOCK_TIMEOUT is set to
1 s, so a run that still took the write lock would fail (or, on the old code, wait 30 s and crash).
Tests wait on what the processes print, never on elapsed time.
"""

from __future__ import annotations

import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from engine import cli
from engine.config import load_settings
from engine.search.bundled import META_KEY, bundled_version, open_default_corpus
from storage.corpus_store import CorpusStore
from tests import REPO_ROOT
from tests.engine.cli.test_cli import cli_run
from tests.pages.test_app_pages import assert_no_exception, joined, open_page, services  # noqa: F401 (a fixture)

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
# `python -m` from the tree these tests are in: the processes run this tree's code, whatever the
# installed `thoughtmap` script points at.
ROOT = REPO_ROOT
THOUGHTMAP = [sys.executable, "-m", "engine.cli"]
# Backstops only: a loaded machine's process start, imports and bundled build fit well inside.
STARTUP_S = 180
RUN_S = 300

# Holds a lock until its stdin closes (or it is killed): `sqlite PATH` takes the index's write lock
# the way any SQLite writer would; `flock PATH` takes the build lock's file lock.
HOLDER = r"""
import fcntl, sqlite3, sys
kind, path = sys.argv[1], sys.argv[2]
if kind == "sqlite":
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
else:
    handle = open(path, "a")
    fcntl.flock(handle, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.readline()
"""


@contextmanager
def lock_holder(kind: str, path: Path) -> Iterator[subprocess.Popen]:
    """A subprocess holding a lock on `path` for the block (it lets go when the block ends)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, kind, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()
        assert lines.get(timeout=STARTUP_S) == "held\n", proc.stderr.read()
        yield proc
    finally:
        if proc.poll() is None:
            proc.stdin.close()
            proc.wait(timeout=60)


def write_lock_is_held(index: Path) -> bool:
    """Whether another connection holds the index's write lock now (asked without waiting)."""
    conn = sqlite3.connect(index, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        return "locked" in str(exc)
    finally:
        conn.close()
    return False


@pytest.fixture
def short_lock_timeout(monkeypatch):
    monkeypatch.setenv("THOUGHTMAP_CORPUS_LOCK_TIMEOUT", "1")


def test_a_run_searches_the_built_index_while_another_process_holds_its_write_lock(
    prebuilt_corpus_home, short_lock_timeout, capsys
):
    index = prebuilt_corpus_home / "corpus.sqlite3"
    with CorpusStore(index) as store:
        documents = store.count_documents()
    with lock_holder("sqlite", index) as holder:
        code, out, err = cli_run(capsys, "run", QUESTION, "--method", "rag", "--llm", "fake", "--search", "local")
        # The lock was held all along: the run needed no write to the index at all.
        assert holder.poll() is None and write_lock_is_held(index)
    assert code == cli.EXIT_OK, err
    assert "Traceback" not in err and "locked" not in err
    assert f"search: local corpus ({documents:,} documents" in err and ": done;" in err


def test_an_out_of_date_index_is_searched_as_it_is_while_its_write_lock_is_held_and_updated_later(
    prebuilt_corpus_home, short_lock_timeout, capsys
):
    index = prebuilt_corpus_home / "corpus.sqlite3"
    with CorpusStore(index) as store:
        store.set_meta(META_KEY, "0/an-earlier-bundled-corpus")  # as after an update of the data files
        documents = store.count_documents()
    with lock_holder("sqlite", index):
        code, out, err = cli_run(capsys, "run", QUESTION, "--method", "rag", "--llm", "fake", "--search", "local")
        assert write_lock_is_held(index)
    assert code == cli.EXIT_OK, err
    assert "Traceback" not in err
    # Said once, in words, with what is searched instead and what happens next.
    assert (
        f"the corpus index could not be brought up to date (another process has been writing to it "
        f"for more than 1 s): searching the {documents:,} documents it holds now; the update is tried "
        f"again at the next start"
    ) in err
    assert "search: local corpus (" in err and "not up to date: another process was writing to it)" in err
    # Once the lock is free, the next start brings it up to date.
    store = open_default_corpus(load_settings()).store
    try:
        assert store.get_meta(META_KEY) == bundled_version()
        assert store.count_documents() == documents
    finally:
        store.close()


def test_ingest_says_clearly_that_the_index_is_locked_then_works_once_it_is_free(
    prebuilt_corpus_home, short_lock_timeout, capsys, tmp_path
):
    notes = tmp_path / "notes.md"
    notes.write_text("# Quokka notes\n\nQuokkas shelter under shrubs on Rottnest Island.", encoding="utf-8")
    with lock_holder("sqlite", prebuilt_corpus_home / "corpus.sqlite3"):
        code, out, err = cli_run(capsys, "ingest", str(notes))
    assert code == cli.EXIT_FAILED
    assert "Traceback" not in err
    [line] = err.splitlines()
    assert line == (
        "thoughtmap: error: could not add to the corpus index: another process has been writing to "
        "it for more than 1 s (THOUGHTMAP_CORPUS_LOCK_TIMEOUT sets this wait). What was added before "
        "stays; run the same ingest again to add the rest (files already indexed are skipped)."
    )
    code, out, err = cli_run(capsys, "ingest", str(notes))
    assert code == cli.EXIT_OK, err
    assert out.startswith("1 document(s) added")


def test_the_settings_page_says_an_upload_waits_for_a_locked_index(short_lock_timeout, services):
    at = open_page("pages/settings.py")
    at.file_uploader(key="settings-upload").upload("notes.txt", b"Quokkas shelter under shrubs.", "text/plain").run()
    with lock_holder("sqlite", services.settings.corpus_index_path):
        at.button(key="settings-ingest").click().run()
    assert_no_exception(at)
    assert not at.success
    # The message's punctuation is escaped for Markdown: read it as the person does.
    assert "could not add to the corpus index: another process has been writing to it for more than 1 s" in joined(
        at.error
    ).replace("\\", "")
    assert "uploads/notes.txt#0" not in [hit.ref for hit in services.corpus().search("quokkas shelter shrubs", 5)]


class Watched:
    """A `thoughtmap` process whose stderr is read as it comes, so a test can wait for a line."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            argv, env=env, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.err: list[str] = []
        self.out: list[str] = []
        self._changed = threading.Condition()
        self._open = 2
        threading.Thread(target=self._read, args=(self.proc.stderr, self.err), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stdout, self.out), daemon=True).start()

    def _read(self, stream, into: list[str]) -> None:
        for line in iter(stream.readline, ""):
            with self._changed:
                into.append(line)
                self._changed.notify_all()
        with self._changed:
            self._open -= 1
            self._changed.notify_all()

    @property
    def stderr(self) -> str:
        with self._changed:
            return "".join(self.err)

    def wait_for(self, text: str) -> None:
        """Until the process says `text` on stderr; fails if it ends without saying it."""
        with self._changed:
            said = self._changed.wait_for(
                lambda: any(text in line for line in self.err) or not self._open, timeout=STARTUP_S
            )
            if not said or not any(text in line for line in self.err):
                raise AssertionError(f"the process never said {text!r}; its stderr:\n{''.join(self.err)}")

    def finish(self) -> int:
        code = self.proc.wait(timeout=RUN_S)
        with self._changed:
            self._changed.wait_for(lambda: not self._open, timeout=60)
        return code


def test_two_first_starts_build_the_index_once_and_a_dead_lock_holder_blocks_nobody(bundled_corpus, _isolated_home):
    home = _isolated_home
    index = home / "corpus.sqlite3"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "THOUGHTMAP_"))}
    env.update(THOUGHTMAP_HOME=str(home), THOUGHTMAP_LLM="fake", PYTHONUNBUFFERED="1")
    argv = [*THOUGHTMAP, "run", QUESTION, "--method", "rag", "--llm", "fake", "--search", "local"]
    with lock_holder("flock", Path(f"{index}.build-lock")) as holder:
        # Both start while "someone" builds: each says it waits for that process, not a traceback.
        runs = [Watched(argv, env), Watched(argv, env)]
        for run in runs:
            run.wait_for("the corpus index is being built by another process")
        assert not index.exists()
        # The builder dies (SIGKILL): the kernel frees its lock; one waiter builds, the other waits again.
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=60)
        codes = [run.finish() for run in runs]
    errs = [run.stderr for run in runs]
    assert codes == [cli.EXIT_OK, cli.EXIT_OK], errs
    assert not any("Traceback" in err for err in errs), errs
    assert all(": done;" in err for err in errs), errs
    builders = [err for err in errs if "indexing the bundled corpus: 0 of " in err]  # said by a builder only
    assert len(builders) == 1, errs  # built once
    with CorpusStore(index) as store:
        assert store.get_meta(META_KEY) == bundled_version()
        assert store.collections() == bundled_corpus.store.collections()  # whole, and nothing twice
    assert not Path(f"{index}.building").exists() and not Path(f"{index}.build-progress").exists()


def test_a_waiting_start_says_how_far_the_builder_got_and_goes_on_when_it_is_done(tmp_path):
    from engine.search.one_builder import build_lock  # new with the build lock: the module still
    from storage.corpus_lock import CorpusBuildLock  # imports on the code before it

    index = tmp_path / "corpus.sqlite3"
    builder = CorpusBuildLock(index)  # another holder: flock locks of two descriptors exclude each other
    assert builder.try_acquire()
    builder.publish(4000, 16000)
    heard: queue.Queue = queue.Queue()
    holding = threading.Event()

    def start() -> None:
        with build_lock(index, lambda message, fraction: heard.put((message, fraction))):
            holding.set()

    waiter = threading.Thread(target=start)
    waiter.start()
    try:
        message, fraction = heard.get(timeout=STARTUP_S)
        assert message == (
            f"the corpus index is being built by another process (pid {os.getpid()}): "
            "4,000 of 16,000 records indexed; waiting for it to finish"
        )
        assert fraction == 0.25
        assert not holding.is_set()
    finally:
        builder.release()
        waiter.join(timeout=STARTUP_S)
    assert holding.is_set()
    assert not Path(f"{index}.build-progress").exists()  # the builder's progress went with its lock
