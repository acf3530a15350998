"""Helpers shared by the benchmark scripts: machine facts, percentiles, docs/benchmarks.md sections."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS_FILE = ROOT / "docs" / "benchmarks.md"


def machine_facts() -> dict[str, str]:
    """Cores, RAM, CPU model, OS, Python and SQLite versions, git commit."""
    ram = ""
    try:
        ram = f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f} GiB"
    except (ValueError, OSError, AttributeError):
        pass
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    if git("status", "--porcelain", "--untracked-files=no"):
        commit += " (+ uncommitted changes)"
    return {
        "date": dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "commit": commit,
        "cores": str(os.cpu_count()),
        "ram": ram or "unknown",
        "cpu": cpu or "unknown",
        "os": platform.platform(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "sqlite": sqlite3.sqlite_version,
    }


def facts_block(command: str, facts: dict[str, str]) -> str:
    return (
        f"Command: `{command}`  \n"
        f"Date: {facts['date']}; commit {facts['commit']}  \n"
        f"Machine: {facts['cores']} cores ({facts['cpu']}), {facts['ram']} RAM, {facts['os']}; "
        f"{facts['python']}, SQLite {facts['sqlite']}\n"
    )


DOCS_INTRO = "# Benchmarks\n\n(see benchmarks/README.md)\n"


def write_section(name: str, body: str, path: Path = DOCS_FILE) -> None:
    """Replace the block between this section's markers in docs/benchmarks.md (append if absent)."""
    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    block = f"{begin}\n{body.rstrip()}\n{end}\n"
    text = path.read_text(encoding="utf-8") if path.exists() else DOCS_INTRO
    if begin in text and end in text:
        head, _, rest = text.partition(begin)
        _, _, tail = rest.partition(end)
        text = head + block.rstrip("\n") + tail
    else:
        text = text.rstrip("\n") + "\n\n" + block
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100), as numpy's default."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def git_commit() -> str:
    return machine_facts()["commit"]


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def jsonl(path: Path, limit: int | None = None) -> list[dict]:
    items = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                items.append(json.loads(line))
                if limit is not None and len(items) >= limit:
                    break
    return items


def publish(section: str, body: str, write: bool) -> None:
    """Print a benchmark's Markdown section; with `write`, also replace it in docs/benchmarks.md."""
    import sys

    print(body)
    if write:
        write_section(section, body)
        print(f"wrote the {section} section of {DOCS_FILE.relative_to(ROOT)}", file=sys.stderr)


def wait_until_serving(url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 90.0) -> None:
    """Return once the Streamlit server `proc` answers its health check at `url`; raise with the end of
    its `log` when it exits or does not answer within `timeout_s`."""
    import time
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            urllib.request.urlopen(f"{url}/_stcore/health", timeout=1)
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the app did not start:\n{log.read_text()[-3000:]}") from None
            time.sleep(0.1)


def stop_server(proc: subprocess.Popen) -> None:
    """Terminate a started app server; kill it when it has not exited within 10 s."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class EndpointProcess:
    """The fake OpenAI-compatible endpoint (`engine/llm/fake_server.py`) in a process of its own, as a
    real endpoint is: the time it spends writing answers is not taken from the process measured.
    `loads`: modules whose prompts' offline answers it must know (the method's). `stats()` stops it
    and returns what it served: {"chat_requests": n, "max_in_flight": m}."""

    def __init__(self, latency_s: float, loads: Sequence[str] = ()) -> None:
        command = [
            sys.executable,
            "-m",
            "engine.llm.fake_server",
            "--port",
            "0",
            "--latency",
            str(latency_s),
            "--stats",
            "--keep-alive",  # as a real endpoint: a connection is reused, not opened per call
            *(arg for module in loads for arg in ("--load", module)),
        ]
        self._process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        assert self._process.stdout is not None
        self.base_url = self._process.stdout.readline().strip()
        if not self.base_url.startswith("http://127.0.0.1:"):
            self._process.kill()
            raise RuntimeError(f"the fake endpoint did not start (it printed {self.base_url!r})")
        self._stats: dict[str, int] | None = None

    def stats(self) -> dict[str, int]:
        if self._stats is None:
            self._process.terminate()
            out, _ = self._process.communicate(timeout=60)
            self._stats = json.loads(out.strip().splitlines()[-1])
        return self._stats

    def __enter__(self) -> EndpointProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._process.poll() is None:
            stop_server(self._process)
