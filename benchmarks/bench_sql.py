"""SQL statements per run, by type, on SQLite and PostgreSQL, with the scripted fake LLM.

A script, not a test: it counts and prints, it never asserts. Scenarios:

* `deot`: a 10-node DEoT run (`max_nodes` 10), `runner.create_run` + `start` + `wait`;
* `omnithink`: a 13-node OmniThink run (depth 2, 3 sub-nodes: 1 + 3 + 9);
* `mtqa`, `fgdip`, `research`, `react`, `rag`, `direct`: a run of each with its default parameters;
* `explore (deot)`, `explore (omnithink)`: the Explore page (`pages/explore.py`, under
  Streamlit's AppTest, through `app.py` as a browser opens it) for that finished run: the
  statements of ONE rerun after the first render. That is the whole page; the live view's
  one-second refresh of an active run reruns only its fragment, a subset of it.

Each run scenario gets a fresh database (a file in a temporary folder; a new database on the
PostgreSQL server). Statements are counted with SQLAlchemy's `before_cursor_execute` event (one per
round trip; an executemany counts once) and COMMITs with the `commit` event, on the database's
engine only (the corpus index is a separate SQLite file and is not counted).

    .venv/bin/python benchmarks/bench_sql.py                          # SQLite, + PostgreSQL if
    .venv/bin/python benchmarks/bench_sql.py --postgres-url URL       # THOUGHTMAP_TEST_POSTGRES_URL is set
    .venv/bin/python benchmarks/bench_sql.py --json                   # machine-readable
    .venv/bin/python benchmarks/bench_sql.py --repeat 5               # median of 5 (default 3)
    .venv/bin/python benchmarks/bench_sql.py --by-caller deot         # one run on SQLite, by the
                                                                      # repository method that sent each

Only public APIs that exist before and after "method contract v2" are used, so the same script
measures both (run it with PYTHONPATH pointing at the tree to measure).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import threading
import traceback
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sqlalchemy import create_engine, event, text  # noqa: E402

KINDS = ("SELECT", "INSERT", "UPDATE", "DELETE", "COMMIT", "other")
SCENARIOS = {
    "deot": ("deot", {"max_nodes": 10}),
    "omnithink": ("omnithink", {"max_depth": 2, "subnodes": 3}),
    # The other methods with their default parameters (issue 44: every method measured).
    "mtqa": ("mtqa", {}),
    "fgdip": ("fgdip", {}),
    "research": ("research", {}),
    "react": ("react", {}),
    "rag": ("rag", {}),
    "direct": ("direct", {}),
}
SEA = "How will rising sea levels affect coastal cities over the next fifty years?"
MULTI_HOP = "Which magazine was started first, Arthur's Magazine or First for Women?"
QUESTIONS = {
    "deot": SEA,
    "omnithink": "2022 AFL Grand Final",
    "mtqa": MULTI_HOP,
    "fgdip": MULTI_HOP,
    "research": SEA,
    "react": MULTI_HOP,
    "rag": SEA,
    "direct": SEA,
}
# The scenarios the Explore page is measured for (a rerun's statements do not depend on the method much).
EXPLORED = ("deot", "omnithink")


def _repository_caller() -> str:
    """The `storage` method (module.function) that sent the statement being executed."""
    for frame in reversed(traceback.extract_stack()):
        name = Path(frame.filename)
        if name.parent.name == "storage" and name.stem not in ("repository_base", "unwritable"):
            return f"{name.stem}.{frame.name}"
    return "(elsewhere)"


class StatementCounter:
    """Counts statements by their first keyword while `active` (worker threads run in parallel)."""

    def __init__(self, engine) -> None:
        self.counts: Counter[str] = Counter()
        self.active = False
        self._lock = threading.Lock()
        event.listen(engine, "before_cursor_execute", self._statement)
        event.listen(engine, "commit", self._commit)

    by_caller = False  # count by the repository method that sent each statement instead

    def _add(self, kind: str) -> None:
        if self.active:
            key = _repository_caller() if self.by_caller else kind
            with self._lock:
                self.counts[key] += 1

    def _statement(self, conn, cursor, statement, parameters, context, executemany) -> None:  # noqa: ANN001
        word = statement.lstrip().split(None, 1)[0].upper() if statement.strip() else ""
        self._add(word if word in KINDS else "other")

    def _commit(self, conn) -> None:  # noqa: ANN001
        self._add("COMMIT")

    def start(self) -> None:
        with self._lock:
            self.counts = Counter()
            self.active = True

    def stop(self) -> dict[str, int]:
        with self._lock:
            self.active = False
            row = {k: self.counts.get(k, 0) for k in KINDS}
        row["total"] = sum(row.values())
        return row


def fresh_database(backend: str, folder: Path, postgres_url: str | None) -> str:
    if backend == "sqlite":
        return f"sqlite:///{folder / f'bench-{uuid.uuid4().hex[:8]}.sqlite3'}"
    name = f"tm_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return postgres_url.rsplit("/", 1)[0] + "/" + name


def drop_database(url: str, postgres_url: str) -> None:
    name = url.rsplit("/", 1)[1]
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def explore_rerun(counter: StatementCounter, run_id: str) -> dict[str, int]:
    """Statements of one rerun of the Explore page for `run_id`, after its first render."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["run"] = run_id
    at.run()
    if at.exception:
        raise RuntimeError(f"the Explore page failed: {[e.value for e in at.exception]}")
    counter.start()
    at.run()
    row = counter.stop()
    if at.exception:
        raise RuntimeError(f"the Explore page failed: {[e.value for e in at.exception]}")
    return row


def by_caller(scenario: str, home: Path) -> None:
    """One run of `scenario` on SQLite: its statements (COMMITs included) by repository method."""
    from components import app_state

    method, params = SCENARIOS[scenario]
    os.environ.update(
        {
            "THOUGHTMAP_HOME": str(home),
            "THOUGHTMAP_LLM": "fake",
            "THOUGHTMAP_DATABASE_URL": fresh_database("sqlite", home, None),
        }
    )
    app_state.get_services.clear()
    services = app_state.get_services()
    try:
        services.searcher("local")
        services.repo.local_user_id()
        counter = StatementCounter(services.db.engine)
        counter.by_caller = True
        counter.start()
        run = services.runner.create_run(
            question=QUESTIONS[scenario],
            method=method,
            params=params,
            llm_info=services.llm_info("fake"),
            search_mode="local",
        )
        services.runner.start(run.id)
        services.runner.wait(run.id, timeout=600)
        counter.active = False
        nodes = len(services.repo.snapshot(run.id).nodes)
        total = sum(counter.counts.values())
        print(f"{scenario} on SQLite: {total} statements, {nodes} nodes, {total / max(nodes, 1):.1f} per node\n")
        print("| statements | repository method |\n|---|---|")
        for caller, count in counter.counts.most_common():
            print(f"| {count} | `{caller}` |")
    finally:
        services.close()
        app_state.get_services.clear()


def measure(backend: str, scenario: str, home: Path, postgres_url: str | None, explore: bool) -> list[dict]:
    """One run scenario on a fresh database, then (optionally) the Explore page for that run."""
    from components import app_state  # the app's own Services, which AppTest's pages use too

    method, params = SCENARIOS[scenario]
    url = fresh_database(backend, home, postgres_url)
    os.environ.update({"THOUGHTMAP_HOME": str(home), "THOUGHTMAP_DATABASE_URL": url, "THOUGHTMAP_LLM": "fake"})
    app_state.get_services.clear()
    services = app_state.get_services()
    rows = []
    try:
        services.searcher("local")  # the bundled corpus index, built once per home, not counted
        services.repo.local_user_id()  # read once per process, not per run: not counted either
        counter = StatementCounter(services.db.engine)
        counter.start()
        run = services.runner.create_run(
            question=QUESTIONS[scenario],
            method=method,
            params=params,
            llm_info=services.llm_info("fake"),
            search_mode="local",
        )
        services.runner.start(run.id)
        final = services.runner.wait(run.id, timeout=600)
        row = counter.stop()
        nodes = len(services.repo.snapshot(run.id).nodes)
        rows.append({"scenario": scenario, "backend": backend, **row, "nodes": nodes, "status": final.status})
        if explore and scenario in EXPLORED:
            row = explore_rerun(counter, run.id)
            rows.append(
                {
                    "scenario": f"explore ({scenario})",
                    "backend": backend,
                    **row,
                    "nodes": nodes,
                    "status": services.repo.get_run(run.id).status,
                }
            )
    finally:
        services.close()
        app_state.get_services.clear()
        if backend == "postgres":
            drop_database(url, postgres_url)
    return rows


def markdown(rows: list[dict]) -> str:
    header = ["scenario", "backend", *KINDS, "total", "nodes", "per node"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        per_node = "" if r["scenario"].startswith("explore") else f"{r['total'] / max(r['nodes'], 1):.1f}"
        lines.append("| " + " | ".join(str(r[h]) for h in header[:-1]) + f" | {per_node} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("THOUGHTMAP_TEST_POSTGRES_URL"),
        help="a PostgreSQL server URL (a database is created per measurement); default THOUGHTMAP_TEST_POSTGRES_URL",
    )
    parser.add_argument("--sqlite-only", action="store_true", help="skip PostgreSQL")
    parser.add_argument("--no-explore", action="store_true", help="skip the Explore page scenarios")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a Markdown table")
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="measurements per row; the row with the median total is shown (worker threads "
        "race, so a run's count varies by a few statements)",
    )
    parser.add_argument(
        "--by-caller",
        choices=list(SCENARIOS),
        help="one run of this scenario on SQLite, its statements by the repository method that sent them",
    )
    args = parser.parse_args()

    # AppTest and the runner log through `logging`; keep stdout for the table.
    logging.basicConfig(level=logging.ERROR)
    for key in list(os.environ):
        if key.startswith(("OPENAI_", "THOUGHTMAP_")) and key != "THOUGHTMAP_TEST_POSTGRES_URL":
            os.environ.pop(key)
    if args.by_caller:
        with tempfile.TemporaryDirectory() as folder:
            by_caller(args.by_caller, Path(folder))
        return
    backends = ["sqlite"] + ([] if args.sqlite_only or not args.postgres_url else ["postgres"])
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        for backend in backends:
            for scenario in SCENARIOS:
                repeats = [
                    measure(backend, scenario, home, args.postgres_url, not args.no_explore)
                    for _ in range(max(1, args.repeat))
                ]
                for i in range(len(repeats[0])):  # per row (the run, its Explore page): the median
                    rows.append(sorted((r[i] for r in repeats), key=lambda r: r["total"])[len(repeats) // 2])
                print(f"  measured {scenario} on {backend}", file=sys.stderr)
    order = {name: i for i, name in enumerate([*SCENARIOS, *(f"explore ({name})" for name in EXPLORED)])}
    rows.sort(key=lambda r: (order[r["scenario"]], backends.index(r["backend"])))
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
    else:
        print(markdown(rows))


if __name__ == "__main__":
    main()
