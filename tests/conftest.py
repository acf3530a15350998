"""Test-wide guards: no internet, no real API keys, a private THOUGHTMAP_HOME per test session."""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
from collections import deque
from pathlib import Path

import pytest

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


def _is_local(address) -> bool:
    if isinstance(address, (str, bytes)):  # AF_UNIX path
        return True
    host = address[0]
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host in {"localhost"}


class NetworkBlocked(RuntimeError):
    pass


def _guarded_connect(self, address):
    if not _is_local(address):
        raise NetworkBlocked(f"tests may not reach the network (tried {address!r})")
    return _real_connect(self, address)


def _guarded_connect_ex(self, address):
    if not _is_local(address):
        raise NetworkBlocked(f"tests may not reach the network (tried {address!r})")
    return _real_connect_ex(self, address)


def _guarded_getaddrinfo(host, *args, **kwargs):
    if host not in (None, "localhost") and not _looks_loopback(host):
        raise NetworkBlocked(f"tests may not resolve remote hosts (tried {host!r})")
    return _real_getaddrinfo(host, *args, **kwargs)


def _looks_loopback(host) -> bool:
    try:
        return ipaddress.ip_address(host if isinstance(host, str) else host.decode()).is_loopback
    except ValueError:
        return False


def pytest_configure(config):
    socket.socket.connect = _guarded_connect
    socket.socket.connect_ex = _guarded_connect_ex
    socket.getaddrinfo = _guarded_getaddrinfo
    for key in list(os.environ):
        if key.startswith(("OPENAI_", "THOUGHTMAP_")) and key != "THOUGHTMAP_TEST_POSTGRES_URL":
            os.environ.pop(key)


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch, request):
    """Every test gets its own THOUGHTMAP_HOME (database, corpus index) unless it sets one, and
    the scripted fake as the default LLM: `auto` would otherwise pick the built-in model where it is
    installed. Tests of the built-in model or of `auto` set THOUGHTMAP_LLM themselves.
    Likewise the built-in embedding model is off (BM25 ranks), so a test does not depend on whether
    this machine prepared it, nor pay seconds of CPU per run for it; tests of embeddings ask for it
    with the `builtin_embeddings` fixture (tests/support/fixtures_embedder.py)."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("THOUGHTMAP_HOME", str(home))
    monkeypatch.setenv("THOUGHTMAP_LLM", "fake")
    monkeypatch.setenv("THOUGHTMAP_BUILTIN_EMBEDDINGS", "0")
    yield home
    # pytest's retention policy ("failed", pyproject.toml) removes a passed test's tmp_path, but
    # not folders made by tmp_path_factory: without this, the whole suite's homes (databases,
    # copies of the bundled index and its vectors) pile up under /tmp until the run ends, and CI
    # ran out of disk. A failed test's home is kept to look at. A passed one is removed a few
    # tests later, not at once: a run thread the test left finishing still writes to its database
    # for a moment, and would fail to open a removed one.
    if _passed(request):
        _PASSED_HOMES.append(home)
        while len(_PASSED_HOMES) > KEPT_PASSED_HOMES:
            shutil.rmtree(_PASSED_HOMES.popleft(), ignore_errors=True)


# Passed tests' homes kept until this many later tests have passed (at 43 MB for a home with the
# bundled index, at most about 1.3 GB).
KEPT_PASSED_HOMES = 30
_PASSED_HOMES: deque = deque()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the test item (`item.rep_setup`, `rep_call`, `rep_teardown`),
    for fixtures that act on the outcome."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


def _passed(request) -> bool:
    report = getattr(request.node, "rep_call", None)
    return report is not None and report.passed


pytest_plugins = ["tests.support.fixtures_corpus", "tests.support.fixtures_embedder", "tests.support.fixtures_engine"]


# The files that take minutes start first: with two test processes (scripts/test), a long file
# started last keeps one process busy alone while the other has finished (the built-in model's CLI
# run alone takes 6-8 minutes). The rest keep their order. The list is the slowest files of a
# fresh-clone run (`scripts/test --durations=60`); it only orders, every test still runs.
SLOW_FILES_FIRST = (
    "tests/engine/llm/test_local_model_run.py",
    "tests/engine/evaluate/test_eval_bench.py",
    "tests/engine/llm/test_local_model_server.py",
    "tests/e2e/test_evaluate_browser.py",
    "tests/engine/test_config_errors.py",
    "tests/engine/llm/test_grammar_sampling.py",
    "tests/project/test_type_check.py",  # mypy over engine/ and storage/: 30 s of one core, from a fresh clone
)


def pytest_collection_modifyitems(session, config, items):
    root = Path(str(config.rootpath))

    def rank(item) -> int:
        where = Path(str(item.path)).relative_to(root).as_posix()
        return SLOW_FILES_FIRST.index(where) if where in SLOW_FILES_FIRST else len(SLOW_FILES_FIRST)

    items.sort(key=rank)  # stable: within a file, and among the rest, the collected order stays
