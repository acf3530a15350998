"""Multi-user lists at scale: what the team filter (`visible_to`: a person's own runs, or those shared
with them) costs the Sessions page's two queries at 10,000 runs, against the same queries unfiltered
(single-user mode, an admin).

A script, not a test: it measures and prints (`--write` replaces its section in docs/benchmarks.md).

    .venv/bin/python benchmarks/bench_access.py [--runs 10000] [--people 20] [--shares 500] [--repeat 50]
    .venv/bin/python benchmarks/bench_access.py --database-url postgresql+psycopg://...   # PostgreSQL

A fresh database gets `--runs` runs spread over `--people` people, and `--shares` shares (one in ten
with everyone signed in). Each query is timed `--repeat` times; the table gives the median and p95
in milliseconds. The queries are Sessions' count and first page (20 runs, newest first), and a
search of the questions' text (the Search box).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import facts_block, machine_facts, publish, table  # noqa: E402

SECTION = "bench_access"


def fill(url: str, runs: int, people: int, shares: int) -> tuple[object, list[int]]:
    from storage import Repository, open_database
    from storage.users import UserStore

    db = open_database(url)
    users = UserStore(db)
    ids = []
    for i in range(people):
        user = users.sign_in(
            issuer="https://id.example.org",
            subject=f"p{i}",
            email=f"p{i}@example.org",
            name=f"Person {i}",
            is_admin=i == 0,
        )
        assert user.id is not None
        ids.append(user.id)
    repo = Repository(db)
    rng = random.Random(7)
    run_ids = []
    for i in range(runs):
        run = repo.create_run(
            question=f"Stored question {i:05d} about the history of research?",
            method="rag",
            params={},
            user_id=ids[i % people],
        )
        run_ids.append(run.id)
    for i in range(shares):
        users.share_run(rng.choice(run_ids), None if i % 10 == 0 else rng.choice(ids))
    return db, ids


def timed(call: Callable[[], object], repeat: int) -> tuple[float, float]:
    call()  # warm: the first read of a table pays for the page cache
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.95))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--people", type=int, default=20)
    parser.add_argument("--shares", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--database-url", default=None, help="default: a new SQLite file")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()

    from storage import Repository

    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite:///{Path(tmp) / 'access.sqlite3'}"
        db, ids = fill(url, args.runs, args.people, args.shares)
        repo = Repository(db)  # type: ignore[arg-type]
        person = ids[3]
        rows = []
        for who, visible_to in (("everyone's (single-user, admin)", None), ("one person's (theirs + shared)", person)):
            count = timed(lambda v=visible_to: repo.count_runs(visible_to=v), args.repeat)
            page = timed(lambda v=visible_to: repo.list_runs(limit=20, visible_to=v), args.repeat)
            search = timed(
                lambda v=visible_to: repo.list_runs(text="question 0042", limit=20, visible_to=v), args.repeat
            )
            rows.append(
                [
                    who,
                    f"{repo.count_runs(visible_to=visible_to):,}",
                    f"{count[0]:.2f} / {count[1]:.2f}",
                    f"{page[0]:.2f} / {page[1]:.2f}",
                    f"{search[0]:.2f} / {search[1]:.2f}",
                ]
            )
        dialect = db.engine.dialect.name  # type: ignore[attr-defined]
        db.dispose()  # type: ignore[attr-defined]
    command = ".venv/bin/python benchmarks/bench_access.py --write" + (
        " --database-url URL" if args.database_url else ""
    )
    body = "\n".join(
        [
            "## Team filters at scale (`bench_access.py`)",
            "",
            facts_block(command, machine_facts()),
            "",
            f"{args.runs:,} runs of {args.people} people, {args.shares} shares (one in ten with everyone), {dialect}. "
            f"Milliseconds, median / p95 of {args.repeat}. No LLM.",
            "",
            table(["runs listed", "visible", "count", "first page (20)", "text search"], rows),
            "",
            "- The filter is `runs.user_id = ? OR EXISTS (a share of the run with them or with everyone)`:",
            "  `ix_runs_user_id` and `ix_run_shares_run_id` serve it.",
        ]
    )
    publish(SECTION, body, args.write)


if __name__ == "__main__":
    main()
