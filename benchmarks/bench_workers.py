"""Throughput of distributed execution: DEoT runs on 1, 2, 4 worker processes vs embedded mode.

Every mode runs the same DEoT runs against the OpenAI-compatible test server
(`engine/llm/fake_server.py`) with injected latency, and the server counts the calls in flight
(the most it ever served at once), which must never exceed THOUGHTMAP_LLM_CONCURRENCY: in
embedded mode the process's limiter holds it, with workers the limit is shared through the
database (advisory-lock slots, storage/leases.py).

- embedded: one process, SQLite, every run started at once in its threads (today's default);
- queue, k workers: a fresh PostgreSQL database, k `thoughtmap worker --concurrency C` processes
  started and ready before the clock starts, the runs enqueued through the app's services.

Needs a PostgreSQL server: `source scripts/postgres.sh; start_test_postgres` sets
THOUGHTMAP_TEST_POSTGRES_URL (or pass --postgres-url). Reproduce (the documented scale):
    source scripts/postgres.sh; start_test_postgres
    .venv/bin/python benchmarks/bench_workers.py --runs 40 --workers 1,2,4 --write
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import facts_block, machine_facts, publish, table  # noqa: E402
from benchmarks.bench_sql import fresh_database  # noqa: E402
from engine.config import load_settings  # noqa: E402
from engine.llm.fake_server import FakeOpenAIServer  # noqa: E402
from engine.services import build_services  # noqa: E402
from storage.models import RunStatus  # noqa: E402

SECTION = "bench_workers"
QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
_SCRIPT = Path(sys.executable).with_name("thoughtmap")
THOUGHTMAP = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "engine.cli"]


def base_env(server: FakeOpenAIServer, home: Path, args) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "THOUGHTMAP_"))}
    env.update(
        THOUGHTMAP_HOME=str(home),
        OPENAI_BASE_URL=server.base_url,
        OPENAI_API_KEY="bench",
        THOUGHTMAP_LLM="openai",
        THOUGHTMAP_LLM_CONCURRENCY=str(args.llm_concurrency),
        PYTHONUNBUFFERED="1",
        PYTHONPATH=str(Path(__file__).resolve().parents[1]),
    )
    return env


def run_all(services, args) -> tuple[float, list]:
    """Create and start `args.runs` DEoT runs; wait for all; (wall seconds, final runs)."""
    started = time.monotonic()
    ids = []
    for _ in range(args.runs):
        run = services.runner.create_run(
            question=QUESTION,
            method="deot",
            params={"max_nodes": args.nodes},
            llm_info=services.llm_info("openai"),
            search_mode="none",
        )
        services.runner.start(run.id)
        ids.append(run.id)
    while True:
        runs = [services.repo.get_run(i) for i in ids]
        if all(r.status not in RunStatus.ACTIVE for r in runs):
            return time.monotonic() - started, runs
        time.sleep(0.2)


def measure(mode: str, workers: int, args) -> dict:
    with FakeOpenAIServer(latency_s=args.latency) as server, tempfile.TemporaryDirectory() as home:
        env = base_env(server, Path(home), args)
        procs: list[subprocess.Popen] = []
        logs = []
        if mode == "queue":
            env.update(
                THOUGHTMAP_DATABASE_URL=fresh_database("postgres", Path(home), args.postgres_url),
                THOUGHTMAP_EXECUTION="queue",
            )
        services = build_services(load_settings(env))
        try:
            for i in range(workers):
                log = open(Path(home) / f"worker-{i}.log", "w+")
                logs.append(log)
                procs.append(
                    subprocess.Popen(
                        [*THOUGHTMAP, "worker", "--concurrency", str(args.per_worker)],
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
            deadline = time.monotonic() + 300
            while procs and not all("executing up to" in Path(log.name).read_text() for log in logs):
                if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                    raise RuntimeError("a worker did not start: " + Path(logs[0].name).read_text()[-2000:])
                time.sleep(0.2)
            wall, runs = run_all(services, args)
        finally:
            for proc in procs:
                proc.kill()  # the workers this benchmark started, by their own handles
                proc.wait()
            for log in logs:
                log.close()
            services.close()
        return {
            "mode": "embedded (threads, SQLite)"
            if mode == "embedded"
            else f"queue, {workers} worker(s) × {args.per_worker}",
            "done": sum(r.status == RunStatus.DONE for r in runs),
            "runs": len(runs),
            "wall": wall,
            "calls": sum(r.llm_calls for r in runs),
            "max_in_flight": server.max_in_flight,
        }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--workers", default="1,2,4", help="worker process counts to measure (comma-separated)")
    parser.add_argument("--per-worker", type=int, default=4, help="runs each worker executes at a time")
    parser.add_argument("--nodes", type=int, default=5, help="DEoT max_nodes per run")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds each LLM answer takes at the test server")
    parser.add_argument("--llm-concurrency", type=int, default=8, help="THOUGHTMAP_LLM_CONCURRENCY: the shared limit")
    parser.add_argument("--postgres-url", default=os.environ.get("THOUGHTMAP_TEST_POSTGRES_URL"))
    parser.add_argument("--no-embedded", action="store_true", help="skip the embedded baseline")
    parser.add_argument("--write", action="store_true", help="write the section into docs/benchmarks.md")
    args = parser.parse_args(argv)
    if not args.postgres_url:
        parser.error("needs PostgreSQL: source scripts/postgres.sh; start_test_postgres (or --postgres-url)")
    plan = ([] if args.no_embedded else [("embedded", 0)]) + [
        ("queue", int(k)) for k in args.workers.split(",") if k.strip()
    ]
    results = []
    for mode, workers in plan:
        result = measure(mode, workers, args)
        print(
            f"{result['mode']}: {result['done']}/{result['runs']} done in {result['wall']:.1f} s, "
            f"max {result['max_in_flight']} calls in flight (limit {args.llm_concurrency})",
            file=sys.stderr,
        )
        results.append(result)
    rows = [
        [
            r["mode"],
            f"{r['done']}/{r['runs']}",
            f"{r['wall']:.1f}",
            f"{r['runs'] / r['wall'] * 60:.1f}",
            r["calls"],
            f"{r['calls'] / r['wall']:.1f}",
            f"{r['max_in_flight']} / {args.llm_concurrency}",
        ]
        for r in results
    ]
    command = "python benchmarks/bench_workers.py " + " ".join(argv if argv is not None else sys.argv[1:])
    body = (
        "## Distributed execution: DEoT runs on worker processes (`bench_workers.py`)\n\n"
        + facts_block(command.strip(), machine_facts())
        + f"\n{args.runs} DEoT runs (max_nodes={args.nodes}, search none) per mode against the OpenAI-compatible "
        f"test server answering each call in {args.latency} s; THOUGHTMAP_LLM_CONCURRENCY={args.llm_concurrency}. "
        "Wall time from the first run created to the last one finished (workers started and ready before). "
        "*Max in flight* is the most calls the server ever served at once, across every process.\n\n"
        + table(["mode", "done", "wall s", "runs/min", "LLM calls", "calls/s", "max in flight / limit"], rows)
    )
    publish("bench_workers", body, args.write)
    return 0 if all(r["max_in_flight"] <= args.llm_concurrency and r["done"] == r["runs"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
