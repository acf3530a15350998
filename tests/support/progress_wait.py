"""Waiting on progress, not on a clock: a slow, busy machine is not a failure; nothing advancing is.

`wait_on_progress` calls `done` until it is true, and fails only when `progress` (any comparable
snapshot: stored rows, a process's CPU time) has not changed for `stall_s` seconds. `model_cpu`
is such a snapshot for the built-in model: the CPU time of the llama.cpp server processes, which
advances while the model writes an answer whose tokens nothing stores until it ends."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC
from pathlib import Path

from tests import REPO_ROOT

LLAMA_SERVER = b"engine.llm.llama_server_main"


def model_cpu() -> int:
    """Clock ticks of CPU used by every running llama.cpp server of ours (0 when none runs)."""
    total = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if LLAMA_SERVER not in (proc / "cmdline").read_bytes():
                continue
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended between the listing and the read
            continue
        total += int(fields[11]) + int(fields[12])  # utime + stime
    return total


def wait_on_progress(
    done: Callable[[], object],
    progress: Callable[[], object],
    *,
    stall_s: float,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
    interval: float = 1.0,
):
    """`done()`'s first truthy value. Fails when `progress()` stayed the same for `stall_s` seconds."""
    last = progress()
    changed_at = time.monotonic()
    while True:
        try:
            value = done()
        except Exception:  # noqa: BLE001 - a page rerunning under us: asked again
            value = None
        if value:
            return value
        now = progress()
        if now != last:
            last, changed_at = now, time.monotonic()
        elif time.monotonic() - changed_at > stall_s:
            raise AssertionError(f"no progress for {stall_s:g} s while waiting for {what} (last: {last!r})")
        sleep(interval)


def cpu_burners(count: int) -> list:
    """`count` processes that each keep a core busy (the "loaded machine" of the browser tests)."""
    import subprocess
    import sys

    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def stop(processes: list) -> None:
    for process in processes:
        process.kill()
    for process in processes:
        process.wait()


# Nothing stored, printed or computed by the model for this long is a hang, however busy the machine.
STALL_S = 300.0
# The backstop of pytest-timeout for the built-in model's tests: far past any slow-but-advancing run;
# `wait_on_progress` is what fails a stuck one.
BACKSTOP_S = 3600


def run_progress(repo, run_id: str) -> tuple:
    """What advances while a run works: its stored calls, tokens, nodes, events, and the model's CPU."""
    run = repo.get_run(run_id)
    return (
        run.status,
        run.llm_calls,
        run.completion_tokens,
        len(repo.list_nodes(run_id)),
        len(repo.list_events(run_id)),
        model_cpu(),
    )


def wait_for_run(repo, run_id: str, *, what: str = "the run to end", stall_s: float = STALL_S):
    """The run once it is no longer queued or running, however long that takes while it advances."""
    from storage.models import RunStatus

    def ended():
        run = repo.get_run(run_id)
        return run if run.status not in (RunStatus.QUEUED, RunStatus.RUNNING) else None

    return wait_on_progress(ended, lambda: run_progress(repo, run_id), stall_s=stall_s, what=what)


def wait_for_process(process, output_path, *, what: str, stall_s: float = STALL_S) -> int:
    """A subprocess's exit code, once it exits, while its output (a file) grows or the model computes."""

    def progress():
        try:
            size = output_path.stat().st_size
        except OSError:
            size = 0
        return size, model_cpu()

    wait_on_progress(lambda: process.poll() is not None, progress, stall_s=stall_s, what=what)
    return process.returncode


def record_timing(name: str, **values) -> None:
    """Append what a slow test measured to test-artifacts/timings.jsonl (read, never asserted on)."""
    import json
    from datetime import datetime

    artifacts = REPO_ROOT / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    line = {"test": name, "at": datetime.now(UTC).isoformat(timespec="seconds"), **values}
    with (artifacts / "timings.jsonl").open("a") as out:
        out.write(json.dumps(line) + "\n")
