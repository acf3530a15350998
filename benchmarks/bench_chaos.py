"""Chaos benchmark: ten DEoT runs at once, in one process, against a flaky OpenAI-compatible endpoint
(our test server on 127.0.0.1: 20 % HTTP 429, 10 % HTTP 500, 10 % malformed JSON, 2 % hangs past the
client's timeout). Records how every run ended and the structured mode at the start and the end.

A script, not a test: it measures and prints (tests/engine/test_chaos.py asserts the same properties on a
smaller mix of methods).

    .venv/bin/python benchmarks/bench_chaos.py            # print the Markdown section
    .venv/bin/python benchmarks/bench_chaos.py --write    # also replace it in docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import facts_block, machine_facts, publish, table  # noqa: E402
from benchmarks.chaos_runs import QUESTIONS, run_under_chaos  # noqa: E402
from engine.llm.fake_server import Chaos  # noqa: E402

SECTION = "bench_chaos"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="replace this section in docs/benchmarks.md")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--timeout", type=float, default=1.0, help="client timeout per call, seconds")
    args = parser.parse_args(argv)
    command = " ".join([".venv/bin/python benchmarks/bench_chaos.py", *(sys.argv[1:] if argv is None else argv)])

    rows = []
    previous_home = os.environ.get("THOUGHTMAP_HOME")
    for seed in args.seeds:
        home = Path(tempfile.mkdtemp(prefix="thoughtmap-chaos-"))
        os.environ["THOUGHTMAP_HOME"] = str(home)
        try:
            chaos = Chaos(rate_limited=0.2, server_error=0.1, malformed=0.1, hang=0.02, hang_s=3.0, seed=seed)
            jobs = [("deot", QUESTIONS[i % len(QUESTIONS)], {}) for i in range(args.runs)]  # the paper's defaults
            started = time.monotonic()
            outcome = run_under_chaos(chaos, jobs, timeout_s=args.timeout, max_retries=6, wait_s=1200)
            wall = time.monotonic() - started
        finally:
            shutil.rmtree(home, ignore_errors=True)
        statuses = Counter(r.status for r in outcome.results)
        empty = sum(not r.truthful for r in outcome.results)
        requests = sum(outcome.injected.values())
        rows.append(
            [
                seed,
                len(outcome.results),
                statuses.get("done", 0),
                statuses.get("failed", 0),
                empty,
                sum(r.failed_nodes for r in outcome.results),
                sum(r.answered for r in outcome.results),
                outcome.mode_before or "json_schema (auto, nothing learned)",
                outcome.mode_after or "json_schema (auto, nothing learned)",
                outcome.formats_sent.get("json_object", 0),
                requests,
                ", ".join(f"{k} {v}" for k, v in sorted(outcome.injected.items()) if k != "ok"),
                f"{wall:.0f} s",
            ]
        )
    if previous_home is None:
        os.environ.pop("THOUGHTMAP_HOME", None)
    else:
        os.environ["THOUGHTMAP_HOME"] = previous_home

    body = "\n".join(
        [
            "## Chaos: ten concurrent DEoT runs against a flaky endpoint",
            "",
            facts_block(command, machine_facts()),
            "",
            "One process, one runner, ten DEoT runs with the paper's defaults (15 nodes at most) started together, "
            "through the real `openai` client, against the test server answering 20 % HTTP 429, 10 % HTTP 500, "
            "10 % malformed JSON and 2 % hangs (3 s, past the 1 s client timeout), seeded. The LLM is the scripted "
            "fake behind the server: these numbers are about the plumbing, not answer quality. *Silently empty*: "
            "a run `done` without an answered node or a report, or `failed` without a reason (must be 0). "
            "*json_object requests*: requests sent in a downgraded mode (must be 0: a transient error is not "
            "proof that json_schema is unsupported).",
            "",
            table(
                [
                    "seed",
                    "runs",
                    "done",
                    "failed",
                    "silently empty",
                    "failed nodes",
                    "answered nodes",
                    "mode at start",
                    "mode at end",
                    "json_object requests",
                    "requests",
                    "faults injected",
                    "wall",
                ],
                rows,
            ),
            "",
        ]
    )
    publish(SECTION, body, args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
