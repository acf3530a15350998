"""CLI start-up: how long `thoughtmap --help` and a command's first import take, in fresh processes.

A script, not a test: it measures and prints (`--write` replaces its section in docs/benchmarks.md).
Run it on a quiet machine: wall time is what a person waits, CPU time (user + system) is steadier when
other work shares the cores.

    .venv/bin/python benchmarks/bench_startup.py [--repeat 15] [--write]

Rows: the interpreter alone (the floor); `thoughtmap --help` (the grammar only); `thoughtmap run
--help`; the imports a real run adds (`engine.cli.runs`, every method and the database layer) and
`engine.services`, what a command builds before its first call; and a whole one-call run: `thoughtmap
run --method direct --search none` against an OpenAI-compatible test server on 127.0.0.1 that takes
`--latency` seconds per answer (issue 44's goal: at most 1 s over that call). Each run has its own
fresh home (a new database), as a first run on a new machine does.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import ROOT, facts_block, machine_facts, percentile, publish, table  # noqa: E402

PYTHON = sys.executable
THOUGHTMAP = str(Path(PYTHON).with_name("thoughtmap"))
CASES = [
    ("the interpreter alone (`python -c pass`)", [PYTHON, "-c", "pass"]),
    ("`thoughtmap --help`", [THOUGHTMAP, "--help"]),
    ("`thoughtmap run --help`", [THOUGHTMAP, "run", "--help"]),
    ("import `engine.cli.runs` (a run's command module)", [PYTHON, "-c", "import engine.cli.runs"]),
    ("import `engine.services` (what a command builds)", [PYTHON, "-c", "import engine.services"]),
]


def once(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall and CPU (user + system of the child) seconds of one fresh process. Bytecode is written
    (the warm-up writes it, as an installed copy has it): with PYTHONDONTWRITEBYTECODE every module
    changed since the last compile was compiled again in every process, which charged an edit of
    the runner to start-up (0.2 s)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        argv,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
        env={**os.environ, **(env or {})},
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def one_call_runs(repeat: int, latency: float) -> tuple[list[float], list[float]]:
    """Walls and CPUs of `repeat` whole one-call runs (after a warm-up), each in a fresh home."""
    from engine.llm.fake_server import FakeOpenAIServer

    argv = [
        THOUGHTMAP,
        "run",
        "What is the capital of France?",
        "--method",
        "direct",
        "--search",
        "none",
        "--llm",
        "openai",
        "--quiet",
    ]
    results = []
    with FakeOpenAIServer(latency_s=latency) as server:
        for i in range(repeat + 1):
            with tempfile.TemporaryDirectory() as home:
                env = {
                    "THOUGHTMAP_HOME": home,
                    "OPENAI_BASE_URL": server.base_url,
                    "OPENAI_API_KEY": "bench",
                    "THOUGHTMAP_DATABASE_URL": f"sqlite:///{home}/thoughtmap.db",
                }
                result = once(argv, env)
                if i:  # the first warms the file cache and the bytecode
                    results.append(result)
    return [w for w, _ in results], [c for _, c in results]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="fresh processes per row (after one warm-up)")
    parser.add_argument("--latency", type=float, default=0.5, help="seconds the test server takes per answer")
    parser.add_argument("--write", action="store_true", help="replace the section in docs/benchmarks.md")
    args = parser.parse_args()
    rows = []
    for label, argv in CASES:
        once(argv)  # warm the file cache and the bytecode
        walls, cpus = zip(*(once(argv) for _ in range(args.repeat)))
        rows.append(
            [label, f"{percentile(walls, 50):.3f}", f"{percentile(walls, 95):.3f}", f"{percentile(cpus, 50):.3f}"]
        )
    walls, cpus = one_call_runs(args.repeat, args.latency)
    rows.append(
        [
            f"a one-call `direct` run, fresh home, the call taking {args.latency} s",
            f"{percentile(walls, 50):.3f}",
            f"{percentile(walls, 95):.3f}",
            f"{percentile(cpus, 50):.3f}",
        ]
    )
    over = percentile(walls, 50) - args.latency
    command = f".venv/bin/python benchmarks/bench_startup.py --repeat {args.repeat} --write"
    load = os.getloadavg()[0]
    body = (
        "## CLI start-up (`bench_startup.py`)\n\n"
        + facts_block(command, machine_facts())
        + f"Load average when it started: {load:.2f}. {args.repeat} fresh processes per row, after one warm-up.\n\n"
        + table(["What", "wall p50 s", "wall p95 s", "CPU p50 s"], rows)
        + f"\nThe one-call run takes **{over:.2f} s** over its call (median; issue 44's goal: ≤ 1 s).\n"
        + "\nIssue 44's goal is `thoughtmap --help` ≤ 0.3 s. Before the CLI became a package whose grammar "
        "loads no method and no database layer (commit bead9ec and earlier), `--help` imported every "
        "command module: 2.15 s of CPU, 4.5 s wall on a machine shared with a test suite.\n"
    )
    publish("bench_startup", body, args.write)


if __name__ == "__main__":
    main()
