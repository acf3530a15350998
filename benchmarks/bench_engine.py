"""Benchmark of the engine's own overhead per node, with a zero-latency fake LLM.

A script, not a test: it measures and prints, it never asserts on time.

    .venv/bin/python benchmarks/bench_engine.py                     # SQLite (the default database)
    .venv/bin/python benchmarks/bench_engine.py --postgres URL      # also on PostgreSQL
    .venv/bin/python benchmarks/bench_engine.py --write             # replace the section in docs/benchmarks.md

In-process runs go through `services.runner.create_run` + `start` + `wait`, as the web app does.
The search and LLM calls are timed by thin wrappers and SQL statements by SQLAlchemy cursor
events, so "engine overhead" = wall time - search - LLM, split per node. A second part times the
CLI end to end (`thoughtmap run ... --llm fake --search local`) in fresh processes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sqlalchemy import event  # noqa: E402

from engine.config import load_settings  # noqa: E402
from engine.llm.fake import FakeLLM  # noqa: E402
from engine.llm.protocol import ChatRequest, ChatResponse  # noqa: E402
from engine.search.protocol import Hit, Searcher  # noqa: E402
from engine.services import Services, build_services  # noqa: E402

SECTION = "bench_engine"
DATA = ROOT / "data" / "datasets"
HOTPOT_DEV = DATA / "hotpotqa" / "hotpotqa_dev_fullwiki_500.jsonl"
NQ = DATA / "nq" / "nq_open_oracle_first500.jsonl"
METHODS = ("rag", "direct")
WARMUP_RUNS = 2


from benchmarks._common import (  # noqa: E402,F401
    DOCS_FILE,
    facts_block,
    jsonl,
    machine_facts,
    ms,
    percentile,
    publish,
    table,
    write_section,
)

# ------------------------------------------------------------------ timing wrappers


@dataclass
class Meter:
    """Accumulated seconds and counts of the timed parts of one run (runs are sequential)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    search_s: float = 0.0
    searches: int = 0
    describe_s: float = 0.0
    llm_s: float = 0.0
    llm_calls: int = 0
    sql_s: float = 0.0
    sql_statements: int = 0
    repo_s: float = 0.0
    repo_calls: dict[str, list[float]] = field(default_factory=dict)  # name -> [calls, seconds]

    def reset(self) -> None:
        with self.lock:
            self.search_s = self.describe_s = self.llm_s = self.sql_s = self.repo_s = 0.0
            self.searches = self.llm_calls = self.sql_statements = 0
            self.repo_calls = {}

    def add_repo(self, name: str, seconds: float) -> None:
        with self.lock:
            self.repo_s += seconds
            entry = self.repo_calls.setdefault(name, [0, 0.0])
            entry[0] += 1
            entry[1] += seconds

    def add(self, what: str, seconds: float) -> None:
        with self.lock:
            if what == "search":
                self.search_s += seconds
                self.searches += 1
            elif what == "describe":
                self.describe_s += seconds
            elif what == "llm":
                self.llm_s += seconds
                self.llm_calls += 1
            elif what == "sql":
                self.sql_s += seconds
                self.sql_statements += 1


class TimedLLM:
    """The LLM protocol around an inner LLM, timing `chat`."""

    def __init__(self, inner, meter: Meter) -> None:
        self.inner = inner
        self.meter = meter

    @property
    def description(self) -> str:
        return self.inner.description

    def model_for(self, purpose: str) -> str:
        return self.inner.model_for(purpose)

    def chat(self, request: ChatRequest) -> ChatResponse:
        started = time.perf_counter()
        try:
            return self.inner.chat(request)
        finally:
            self.meter.add("llm", time.perf_counter() - started)


class TimedSearcher:
    """The Searcher protocol around an inner searcher, timing `search` (and `description`,
    which the local corpus computes with a COUNT over its documents)."""

    def __init__(self, inner: Searcher, meter: Meter) -> None:
        self.inner = inner
        self.meter = meter

    @property
    def description(self) -> str:
        started = time.perf_counter()
        try:
            return self.inner.description
        finally:
            self.meter.add("describe", time.perf_counter() - started)

    def search(self, query: str, k: int = 5) -> list[Hit]:
        started = time.perf_counter()
        try:
            return self.inner.search(query, k)
        finally:
            self.meter.add("search", time.perf_counter() - started)


def time_sql(services: Services, meter: Meter) -> None:
    engine = services.db.engine

    @event.listens_for(engine, "before_cursor_execute")
    def _before(conn, cursor, statement, parameters, context, executemany):  # noqa: ANN001
        conn.info.setdefault("bench_started", []).append(time.perf_counter())

    @event.listens_for(engine, "after_cursor_execute")
    def _after(conn, cursor, statement, parameters, context, executemany):  # noqa: ANN001
        started = conn.info["bench_started"].pop()
        meter.add("sql", time.perf_counter() - started)


def time_repository(repo, meter: Meter) -> None:
    """Time every public Repository method on this instance (outermost call only: a method
    calling another is counted once). The runner, the run graph and the LLM accounting all hold
    this same instance."""
    local = threading.local()

    def timed(name: str, bound):
        def wrapper(*args, **kwargs):
            if getattr(local, "inside", False):
                return bound(*args, **kwargs)
            local.inside = True
            started = time.perf_counter()
            try:
                return bound(*args, **kwargs)
            finally:
                local.inside = False
                meter.add_repo(name, time.perf_counter() - started)

        return wrapper

    for name in dir(type(repo)):
        if name.startswith("_") or not callable(getattr(type(repo), name)):
            continue
        setattr(repo, name, timed(name, getattr(repo, name)))


# ------------------------------------------------------------------ in-process runs


def questions(n: int, offset: int = 0) -> list[str]:
    """n distinct questions alternating HotpotQA dev and NQ-open, starting at `offset` of each."""
    half = (n + 1) // 2
    hotpot = [i["question"] for i in jsonl(HOTPOT_DEV, offset + half)][offset:]
    nq = [i["question"] for i in jsonl(NQ, offset + half)][offset:]
    mixed = [q for pair in zip(hotpot, nq) for q in pair]
    return mixed[:n]


@dataclass
class RunSample:
    method: str
    wall_s: float
    nodes: int
    llm_calls: int
    searches: int
    search_s: float
    describe_s: float
    llm_s: float
    sql_s: float
    sql_statements: int
    repo_s: float
    repo_calls: dict[str, list[float]]
    status: str

    @property
    def overhead_s(self) -> float:
        return self.wall_s - self.search_s - self.llm_s


def one_run(services: Services, meter: Meter, method: str, question: str) -> RunSample:
    meter.reset()
    started = time.perf_counter()
    run = services.runner.create_run(
        question=question, method=method, params={}, llm_info=services.llm_info("fake"), search_mode="local"
    )
    services.runner.start(run.id)
    final = services.runner.wait(run.id, timeout=120)
    wall = time.perf_counter() - started
    with meter.lock:
        return RunSample(
            method=method,
            wall_s=wall,
            nodes=final.node_count,
            llm_calls=meter.llm_calls,
            searches=meter.searches,
            search_s=meter.search_s,
            describe_s=meter.describe_s,
            llm_s=meter.llm_s,
            sql_s=meter.sql_s,
            sql_statements=meter.sql_statements,
            repo_s=meter.repo_s,
            repo_calls={k: list(v) for k, v in meter.repo_calls.items()},
            status=str(final.status),
        )


def bench_in_process(home: Path, database_url: str | None, runs: int) -> dict:
    os.environ["THOUGHTMAP_HOME"] = str(home)
    if database_url:
        os.environ["THOUGHTMAP_DATABASE_URL"] = database_url
    else:
        os.environ.pop("THOUGHTMAP_DATABASE_URL", None)
    meter = Meter()
    started = time.perf_counter()
    services = build_services(load_settings())
    build_s = time.perf_counter() - started
    started = time.perf_counter()
    searcher = services.searcher("local")  # builds the bundled index if this home has none
    searcher_s = time.perf_counter() - started
    timed = TimedSearcher(searcher, meter)
    services.runner.searcher_for = lambda run: timed
    services.use_llm("fake", TimedLLM(FakeLLM(latency_s=0.0), meter))
    time_sql(services, meter)
    time_repository(services.repo, meter)
    try:
        cold = {m: one_run(services, meter, m, q) for m, q in zip(METHODS, questions(len(METHODS), offset=400))}
        for method in METHODS:
            for q in questions(WARMUP_RUNS, offset=450):
                one_run(services, meter, method, q)
        samples: dict[str, list[RunSample]] = {m: [] for m in METHODS}
        qs = questions(runs)
        for i, q in enumerate(qs):
            for method in METHODS:  # interleaved, so drift hits both methods alike
                samples[method].append(one_run(services, meter, method, q))
            if (i + 1) % 10 == 0:
                print(f"  {i + 1}/{len(qs)} questions", file=sys.stderr)
        dialect = services.db.engine.dialect
        version = ".".join(str(v) for v in (dialect.server_version_info or ())[:2])
        db_name = f"{dialect.name} {version}".strip()
        host = services.db.engine.url.host
        if host:
            db_name += f" at {host}"
    finally:
        services.close()
    return {"db": db_name, "build_s": build_s, "searcher_s": searcher_s, "cold": cold, "samples": samples}


# ------------------------------------------------------------------ CLI end to end


def cli_env(home: Path, database_url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "THOUGHTMAP_"))}
    env["THOUGHTMAP_HOME"] = str(home)
    if database_url:
        env["THOUGHTMAP_DATABASE_URL"] = database_url
    return env


def time_process(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}")
    return seconds


def bench_cli(home: Path, fresh_home: Path, database_url: str | None, repeats: int) -> list[tuple[str, list[float]]]:
    python = sys.executable
    thoughtmap = str(Path(sys.executable).parent / "thoughtmap")
    if not Path(thoughtmap).exists():
        thoughtmap = None
    cli = [thoughtmap] if thoughtmap else [python, "-m", "engine.cli"]
    env = cli_env(home, database_url)
    qs = questions(repeats, offset=200)
    rows: list[tuple[str, list[float]]] = []

    def repeat(label: str, make_argv, times: int = repeats) -> None:
        time_process(make_argv(0), env)  # warm the OS page cache and .pyc files
        rows.append((label, [time_process(make_argv(i), env) for i in range(times)]))

    repeat("`python -c pass` (interpreter start-up)", lambda i: [python, "-c", "pass"])
    repeat("`python -c 'import engine.services'` (imports)", lambda i: [python, "-c", "import engine.services"])
    repeat("`python -c 'import openai'` (the OpenAI SDK alone)", lambda i: [python, "-c", "import openai"])
    repeat("`thoughtmap methods` (start-up, no database)", lambda i: [*cli, "methods"])
    for method in METHODS:
        repeat(
            f"`thoughtmap run Q --method {method} --llm fake --search local --quiet`",
            lambda i, m=method: [*cli, "run", qs[i], "--method", m, "--llm", "fake", "--search", "local", "--quiet"],
        )
    # First run in an empty home: creates the database and builds the bundled index.
    fresh_env = cli_env(fresh_home, database_url)
    first = time_process(
        [*cli, "run", qs[0], "--method", "rag", "--llm", "fake", "--search", "local", "--quiet"], fresh_env
    )
    rows.append(("the same `rag` run, first in an empty THOUGHTMAP_HOME (builds the index)", [first]))
    return rows


# ------------------------------------------------------------------ report


def render_in_process(result: dict, runs: int) -> str:
    out = [f"\n### In-process runs on {result['db']} (`runner.create_run` + `start` + `wait`)\n\n"]
    out.append(
        f"{runs} runs per method on different questions (HotpotQA dev and NQ-open alternating), "
        f"after {WARMUP_RUNS} warm-up runs each; `FakeLLM(latency_s=0)`, local search. "
        "Times in ms.\n\n"
    )
    summary, split = [], []
    for method, samples in result["samples"].items():
        wall = [s.wall_s for s in samples]
        nodes = statistics.fmean(s.nodes for s in samples)

        def mean(attr: str) -> float:
            return statistics.fmean(getattr(s, attr) for s in samples)

        overhead = statistics.fmean(s.overhead_s for s in samples)
        repo_calls = statistics.fmean(sum(c for c, _ in s.repo_calls.values()) for s in samples)
        summary.append(
            [
                method,
                f"{nodes:.1f}",
                f"{mean('llm_calls'):.1f}",
                ms(percentile(wall, 50)),
                ms(percentile(wall, 95)),
                ms(max(wall)),
                ms(statistics.fmean(s.wall_s / s.nodes for s in samples)),
                ms(overhead / nodes),
            ]
        )
        split.append(
            [
                method,
                ms(mean("wall_s")),
                ms(mean("search_s")),
                ms(mean("llm_s")),
                ms(overhead),
                f"{repo_calls:.0f}",
                ms(mean("repo_s")),
                f"{mean('sql_statements'):.0f}",
                ms(mean("sql_s")),
                ms(overhead - mean("repo_s")),
            ]
        )
    out.append(
        table(
            [
                "method",
                "nodes/run",
                "LLM calls/run",
                "wall p50",
                "wall p95",
                "wall max",
                "wall/node",
                "**overhead/node**",
            ],
            summary,
        )
    )
    out.append(
        "\nWhere a run's time goes (means per run, ms). search = `Searcher.search`; LLM = the "
        "fake's `chat` (building its canned answer); overhead = wall - search - LLM; repository = "
        "time inside `Repository` calls (SQLAlchemy ORM + SQL + commit), part of the overhead; "
        "SQL execute = time inside the driver's `execute`, part of repository; rest = overhead - "
        "repository (method code, prompt rendering, structured-output parsing, thread hand-offs).\n\n"
    )
    out.append(
        table(
            [
                "method",
                "wall",
                "search",
                "LLM",
                "overhead",
                "repo calls",
                "repository",
                "SQL stmts",
                "SQL execute",
                "rest",
            ],
            split,
        )
    )
    # The repository calls that cost the most, per rag run.
    totals: dict[str, list[float]] = {}
    samples = result["samples"]["rag"]
    for s in samples:
        for name, (calls, seconds) in s.repo_calls.items():
            entry = totals.setdefault(name, [0, 0.0])
            entry[0] += calls
            entry[1] += seconds
    top = sorted(totals.items(), key=lambda kv: kv[1][1], reverse=True)[:8]
    out.append(
        "\nCostliest `Repository` calls in a `rag` run (per run: calls, ms): "
        + ", ".join(
            f"`{name}` {calls / len(samples):.0f}x {ms(seconds / len(samples))}" for name, (calls, seconds) in top
        )
        + ".\n"
    )
    describe = statistics.fmean(s.describe_s for s in result["samples"]["rag"])
    statuses = {s.status for ss in result["samples"].values() for s in ss}
    cold = ", ".join(f"{m} {ms(s.wall_s)} ms" for m, s in result["cold"].items())
    out.append(
        f"\nFirst run of each method in the process (cold: lazy imports, first connections): {cold}. "
        f"Set-up before any run: `build_services` {ms(result['build_s'])} ms (opens and migrates "
        f"the database), `services.searcher('local')` {ms(result['searcher_s'])} ms "
        f"({'builds the bundled index' if result['searcher_s'] > 0.5 else 'index already built'}). "
        f"`rag` also reads `searcher.description` (a COUNT per collection over the corpus): "
        f"{ms(describe)} ms per run, inside the overhead. Final statuses: {', '.join(sorted(statuses))}.\n"
    )
    return "".join(out)


def render_cli(rows: list[tuple[str, list[float]]], db: str) -> str:
    out = [f"\n### CLI end to end on {db} (fresh process each time)\n\n"]
    body = []
    for label, times in rows:
        if len(times) > 1:
            body.append([label, len(times), ms(min(times)), ms(statistics.median(times)), ms(max(times))])
        else:
            body.append([label, 1, ms(times[0]), "", ""])
    out.append(table(["command", "n", "min", "median", "max"], body))
    out.append("\nTimes in ms, wall clock of `subprocess.run`, one warm-up call first (not counted).\n")
    return "".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="replace this section in docs/benchmarks.md")
    parser.add_argument("--runs", type=int, default=30, help="runs per method (default 30)")
    parser.add_argument("--cli-runs", type=int, default=5, help="CLI runs per command (default 5)")
    parser.add_argument(
        "--postgres",
        metavar="URL",
        help="also measure on this PostgreSQL database (postgresql+psycopg://...); "
        "use a throwaway one: the benchmark's runs are left in it",
    )
    args = parser.parse_args(argv)
    shown = [a if a != args.postgres else "URL" for a in (sys.argv[1:] if argv is None else argv)]
    command = " ".join([".venv/bin/python benchmarks/bench_engine.py", *shown])

    facts = machine_facts()
    tmp = Path(tempfile.mkdtemp(prefix="thoughtmap-bench-"))
    saved = {k: os.environ.get(k) for k in ("THOUGHTMAP_HOME", "THOUGHTMAP_DATABASE_URL")}
    parts = ["## Engine overhead (`bench_engine.py`)\n\n", facts_block(command, facts)]
    try:
        home = tmp / "home"
        home.mkdir()
        targets: list[str | None] = [None] + ([args.postgres] if args.postgres else [])
        for url in targets:
            label = "PostgreSQL" if url else "SQLite"
            print(f"in-process runs on {label}...", file=sys.stderr)
            result = bench_in_process(home, url, args.runs)
            parts.append(render_in_process(result, args.runs))
            print(f"CLI runs on {label}...", file=sys.stderr)
            fresh = tmp / f"fresh-{label}"
            fresh.mkdir()
            parts.append(render_cli(bench_cli(home, fresh, url, args.cli_runs), result["db"]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    body = "".join(parts)
    publish(SECTION, body, args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
