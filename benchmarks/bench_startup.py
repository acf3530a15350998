"""CLI start-up: how long `thoughtmap --help` and a command's first import take, in fresh processes.

A script, not a test: it measures and prints (`--write` replaces its section in docs/benchmarks.md).
Run it on a quiet machine: wall time is what a person waits, CPU time (user + system) is steadier when
other work shares the cores.

    .venv/bin/python benchmarks/bench_startup.py [--repeat 15] [--write]

Rows: the interpreter alone (the floor); `thoughtmap --help` (the grammar only); `thoughtmap run
--help`; the imports a real run adds (`engine.cli.runs`, every method and the database layer) and
`engine.services`, what a command builds before its first call.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
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


def once(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU (user + system of the child) seconds of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                   env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="fresh processes per row (after one warm-up)")
    parser.add_argument("--write", action="store_true", help="replace the section in docs/benchmarks.md")
    args = parser.parse_args()
    rows = []
    for label, argv in CASES:
        once(argv)  # warm the file cache and the bytecode
        walls, cpus = zip(*(once(argv) for _ in range(args.repeat)))
        rows.append([label, f"{percentile(walls, 50):.3f}", f"{percentile(walls, 95):.3f}",
                     f"{percentile(cpus, 50):.3f}"])
    command = f".venv/bin/python benchmarks/bench_startup.py --repeat {args.repeat} --write"
    load = os.getloadavg()[0]
    body = ("## CLI start-up (`bench_startup.py`)\n\n" + facts_block(command, machine_facts())
            + f"Load average when it started: {load:.2f}. {args.repeat} fresh processes per row, after one warm-up.\n\n"
            + table(["What", "wall p50 s", "wall p95 s", "CPU p50 s"], rows)
            + "\nIssue 44's goal is `thoughtmap --help` ≤ 0.3 s. Before the CLI became a package whose grammar "
              "loads no method and no database layer (commit bead9ec and earlier), `--help` imported every "
              "command module: 2.15 s of CPU, 4.5 s wall on a machine shared with a test suite.\n")
    publish("bench_startup", body, args.write)


if __name__ == "__main__":
    main()
