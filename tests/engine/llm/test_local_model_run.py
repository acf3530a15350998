"""Whole runs on the real built-in model (llama.cpp, the bundled 0.5B model, this CPU): the CLI end
to end as a user runs it, and a run that goes on when the model server is killed under it.

Slow (minutes); CI runs them through scripts/test, which requires the local runtime."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.config import load_settings
from engine.methods.deot.params import DeotParams
from engine.methods.params import build_params_with_profile
from engine.services import build_services
from storage.models import NodeStatus, RunStatus
from tests import REPO_ROOT
from tests.engine.llm.test_local_model_server import local_settings  # noqa: F401  (fixture: skips without the runtime)
from tests.support.progress_wait import (
    BACKSTOP_S,
    STALL_S,
    run_progress,
    wait_for_process,
    wait_for_run,
    wait_on_progress,
)

pytestmark = [pytest.mark.slow, pytest.mark.local_model, pytest.mark.timeout(BACKSTOP_S)]

ROOT = REPO_ROOT
THOUGHTMAP = [sys.executable, "-m", "engine.cli"]
QUESTION = (
    "Which animation comedy by the creator of Wallace and Gromit matched zoo animals with "
    "people talking about their homes?"
)  # HotpotQA dev; its passages are in the bundled corpus
TINY = {"max_nodes": 2, "max_layers": 2, "max_aspects": 1}


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "THOUGHTMAP_"))}
    env.update(THOUGHTMAP_HOME=str(home), PYTHONPATH=str(ROOT))
    return env


def test_cli_deot_run_on_the_built_in_model_stores_a_tree_and_a_cited_report(local_settings, prebuilt_corpus_home):  # noqa: F811
    """`thoughtmap run` with no LLM configured picks the built-in model (auto) and its quick profile."""
    home = prebuilt_corpus_home
    params = [arg for key, value in TINY.items() for arg in ("--param", f"{key}={value}")]
    # Waited on while it advances (its progress lines, the model's CPU), not against a clock: on a
    # busy machine the same run takes several times as long.
    out, err = home / "run.out", home / "run.err"
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen(
            [*THOUGHTMAP, "run", QUESTION, "--method", "deot", *params],
            cwd=ROOT,
            env=_env(home),
            stdout=stdout,
            stderr=stderr,
            text=True,
        )
        try:
            code = wait_for_process(process, err, what="thoughtmap run to end")
        finally:
            process.kill()
    stderr_text = err.read_text()
    assert code == 0, stderr_text[-3000:]
    assert "running on the built-in local model" in stderr_text and "quick profile:" in stderr_text
    run_id = out.read_text().strip().splitlines()[-1]

    services = build_services(load_settings({"THOUGHTMAP_HOME": str(home)}))
    try:
        run = services.repo.get_run(run_id)
        assert run.status == RunStatus.DONE, run.error
        assert run.llm_info["kind"] == "local" and "Qwen2.5-Coder-0.5B" in run.llm_info["model"]
        assert run.params["summary_words"] == DeotParams.quick_profile["summary_words"]
        nodes = services.repo.list_nodes(run_id)
        assert 1 <= len(nodes) <= TINY["max_nodes"]
        assert any(n.status == NodeStatus.DONE and n.content.strip() for n in nodes), "no answered node stored"
        assert run.llm_calls > 0 and run.completion_tokens > 0
    finally:
        services.close()

    exported = subprocess.run(
        [*THOUGHTMAP, "export", run_id, "--format", "md"],
        cwd=ROOT,
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert exported.returncode == 0, exported.stderr
    body, sep, sources = exported.stdout.partition("\n## Sources\n")
    assert sep, "the report has a Sources section"
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", body)}
    listed = [int(n) for n in re.findall(r"^\[(\d+)\] ", sources, flags=re.MULTILINE)]
    assert cited, "the report cites its sources inline"
    assert set(listed) == cited, (cited, listed)  # every citation resolves to a listed source


def test_a_run_goes_on_when_the_model_server_is_killed_mid_call(local_settings, prebuilt_corpus_home, monkeypatch):  # noqa: F811
    # The 0.5B model's answer depends on the sources it reads; this test is about recovering from a
    # killed server, on the sources it was written against (BM25's), not about retrieval.
    monkeypatch.setenv("THOUGHTMAP_RETRIEVER", "bm25")
    services = build_services(load_settings())
    try:
        llm = services.llm("local")
        llm.preflight()
        server = llm.server
        first_pid = server.pid
        params = build_params_with_profile(
            DeotParams, {"max_nodes": 1, "max_layers": 1}, method="deot", profile="quick"
        )
        run = services.runner.create_run(
            question=QUESTION, method="deot", params=params, llm_info=services.llm_info("local"), search_mode="local"
        )
        services.runner.start(run.id)
        # Wait for the second LLM call to be in flight (one finished, one being generated), then kill.
        wait_on_progress(
            lambda: services.repo.get_run(run.id).llm_calls >= 1 and llm.in_flight == 1,
            lambda: run_progress(services.repo, run.id),
            stall_s=STALL_S,
            interval=0.05,
            what="a second LLM call in flight",
        )
        time.sleep(0.5)
        os.kill(first_pid, signal.SIGKILL)

        final = wait_for_run(services.repo, run.id)
        assert final.status == RunStatus.DONE, final.error
        assert server.starts == 2 and server.pid != first_pid
        assert services.repo.latest_report(run.id) is not None
        root = services.repo.list_nodes(run.id)[0]
        assert root.status == NodeStatus.DONE, root.error
    finally:
        services.close()
