"""The built-in model's llama.cpp server, for real: start, answer, crash and restart, a port in use,
a file llama.cpp cannot load, a parent that dies. Runs the bundled 0.5B model on the CPU.

Skipped where the local runtime is not installed, except under scripts/test
(THOUGHTMAP_REQUIRE_LOCAL_MODEL=1), where a missing runtime fails these tests.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from engine.config import LLMSettings, LocalModelSettings
from engine.llm import local_server
from engine.llm.local import LocalModelLLM
from engine.llm.local_model import LocalModelError, part_paths, resolve_model_file, runtime_installed
from engine.llm.local_server import LocalModelServer, free_port
from engine.llm.protocol import ChatRequest, Message
from engine.llm.structured import ask_structured
from tests import REPO_ROOT
from tests.support.progress_wait import STALL_S, model_cpu, wait_on_progress

pytestmark = pytest.mark.local_model

ROOT = REPO_ROOT


@pytest.fixture(scope="session")
def local_settings(tmp_path_factory) -> LocalModelSettings:
    if not runtime_installed() or part_paths() is None:
        message = "the built-in model's runtime or packages are not installed (scripts/setup installs them)"
        if os.environ.get("THOUGHTMAP_REQUIRE_LOCAL_MODEL") == "1":
            pytest.fail(message)
        pytest.skip(message)
    settings = LocalModelSettings(context_tokens=2048)
    resolve_model_file(settings)  # assembled once (scripts/setup normally did it already)
    return settings


@pytest.fixture
def server(local_settings, tmp_path):
    started = LocalModelServer(local_settings, tmp_path / "logs")
    yield started
    started.stop()


def gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # A killed child stays a zombie until reaped; a zombie counts as gone.
        try:
            if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.1)
    return False


class Capital(BaseModel):
    country: str = Field(description="The country.")
    capital: str = Field(description="Its capital city.")


def test_server_starts_on_loopback_answers_with_json_and_stops(server, local_settings):
    url = server.ensure_running()
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
    assert server.alive() and server.starts == 1 and server.last_load_s is not None
    assert server.ensure_running() == url and server.starts == 1  # shared: not started twice

    llm = LocalModelLLM(server, local_settings, LLMSettings())
    answer = ask_structured(
        llm, [Message("user", "What is the capital of France? Answer in JSON.")], Capital, max_tokens=60
    )
    assert answer.capital.strip().lower() == "paris"

    pid = server.pid
    server.stop()
    assert not server.alive() and gone(pid)


def test_a_summary_the_cap_cuts_twice_fits_in_the_compact_form_under_llama_cpps_grammar(server, local_settings):
    # The first run's failure on a busy machine (issue 43): DEoT's node summary cut by its cap before
    # the conclusion, again and again. llama.cpp turns the compact schema's maxLength and maxItems
    # into grammar rules, so the third answer cannot run past the cap.
    from engine.llm.compact_schema import COMPACT_ITEMS
    from engine.methods.deot.schemas import NodeSummary

    llm = LocalModelLLM(server, local_settings, LLMSettings())
    seen = []
    # Asked to write at length, the full form cannot fit 120 tokens; with one attempt left after the
    # cut (max_reasks=1), the second is asked in the compact form at once.
    summary = ask_structured(
        llm,
        [
            Message(
                "system",
                "You summarise research results at great length: several long paragraphs of "
                "analysis and at least six detailed data points.",
            ),
            Message(
                "user",
                "Task: What causes the seasons on Earth?\nResults:\n[1] Earth's axis is tilted 23.4 "
                "degrees to its orbit, so each hemisphere gets more direct sunlight in its summer.",
            ),
        ],
        NodeSummary,
        max_tokens=120,
        max_reasks=1,
        on_response=seen.append,
    )
    assert [r.cut_off for r in seen] == [True, False]
    assert summary.conclusion.strip() and 1 <= len(summary.evidence_and_data) <= COMPACT_ITEMS


def test_a_killed_server_is_restarted_and_the_call_in_flight_is_retried(server, local_settings):
    llm = LocalModelLLM(server, local_settings, LLMSettings())
    llm.preflight()
    first_pid = server.pid
    result: dict[str, object] = {}

    def long_call() -> None:
        try:
            result["response"] = llm.chat(
                ChatRequest(
                    messages=(Message("user", "Write a long story about a river, in many paragraphs."),),
                    max_tokens=120,
                    temperature=0,
                )
            )
        except Exception as exc:  # noqa: BLE001 - reported below
            result["error"] = exc

    caller = threading.Thread(target=long_call)
    caller.start()
    wait_on_progress(lambda: llm.in_flight, model_cpu, stall_s=STALL_S, interval=0.05, what="the call in flight")
    time.sleep(1.0)  # the request is now being generated
    os.kill(first_pid, signal.SIGKILL)
    # Restarted and answered, however busy the machine, while the model computes.
    wait_on_progress(lambda: not caller.is_alive(), model_cpu, stall_s=STALL_S, what="the retried call")

    assert "error" not in result, result.get("error")
    assert result["response"].text.strip()
    assert server.starts == 2 and server.pid != first_pid and server.alive()


def test_a_port_in_use_is_avoided(local_settings, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        # The preferred port (THOUGHTMAP_LOCAL_PORT) is in use: another free port is taken instead.
        preferred = LocalModelServer(local_settings.model_copy(update={"port": busy}), tmp_path / "a")
        try:
            assert f":{busy}/" not in preferred.ensure_running()
        finally:
            preferred.stop()
        # The port was free when chosen but taken before the server bound it: it retries elsewhere.
        ports = iter([busy, free_port()])
        raced = LocalModelServer(local_settings, tmp_path / "b", pick_port=lambda: next(ports))
        try:
            url = raced.ensure_running()
            assert f":{busy}/" not in url and raced.starts == 2
            assert "address already in use" in (tmp_path / "b" / "local-model.log.previous").read_text().lower()
        finally:
            raced.stop()


def test_the_servers_own_port_wins_over_port_variables_meant_for_others(local_settings, tmp_path, monkeypatch):
    """scripts/run sets PORT for Streamlit; llama.cpp's server would read it and bind Streamlit's port."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        monkeypatch.setenv("PORT", str(busy))
        monkeypatch.setenv("HOST", "0.0.0.0")
        monkeypatch.setenv("MODEL", str(tmp_path / "not-this.gguf"))
        server = LocalModelServer(local_settings, tmp_path / "logs")
        try:
            url = server.ensure_running()
            assert url.startswith("http://127.0.0.1:") and f":{busy}/" not in url and server.starts == 1
        finally:
            server.stop()


def test_a_file_llama_cannot_load_is_a_clear_error(local_settings, tmp_path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + os.urandom(4096))
    server = LocalModelServer(local_settings.model_copy(update={"model_path": broken}), tmp_path / "logs")
    with pytest.raises(LocalModelError) as caught:
        server.ensure_running()
    message = caught.value.user_message
    assert f"could not load the model file {broken}" in message
    assert "THOUGHTMAP_LOCAL_MODEL" in message and "thoughtmap model prepare --force" in message
    assert not server.alive()


def test_missing_runtime_is_a_clear_error(local_settings, tmp_path, monkeypatch):
    monkeypatch.setattr(local_server, "runtime_installed", lambda: False)
    with pytest.raises(LocalModelError) as caught:
        LocalModelServer(local_settings, tmp_path).ensure_running()
    assert "llama-cpp-python" in str(caught.value) and "scripts/setup" in caught.value.hint


def test_the_server_exits_when_the_process_that_started_it_dies(local_settings, tmp_path):
    """No orphan keeps the model in memory after the app is killed without its exit handlers."""
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from pathlib import Path
        from engine.config import LocalModelSettings
        from engine.llm.local_server import LocalModelServer
        server = LocalModelServer(LocalModelSettings(context_tokens=1024), Path({str(tmp_path)!r}))
        server.ensure_running()
        print(server.pid, flush=True)
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        server_pid = int(parent.stdout.readline())
        os.kill(server_pid, 0)  # running
        parent.kill()  # SIGKILL: no atexit handler runs
        parent.wait(10)
        assert gone(server_pid, within_s=10), "the model server outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()


def test_a_call_refused_by_a_dying_server_waits_for_it_to_be_gone(tmp_path):
    # A killed server's socket closes before its process can be reaped: at that moment `alive()`
    # still says yes, and the call that was refused must not take that as the server's own answer.
    server = LocalModelServer(LocalModelSettings(), tmp_path / "logs")
    assert server.dies_within(0.1)  # never started: nothing to wait for
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    server._process = process
    try:
        assert not server.dies_within(0.1)  # a live server is not gone
        process.send_signal(signal.SIGKILL)
        assert server.dies_within(30.0) and not server.alive()
    finally:
        process.kill()
        process.wait()
