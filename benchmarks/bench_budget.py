"""Budget benchmark: how far past its budget each method's run goes when its LLM calls run in parallel.

Every method runs once with a cost budget and once with a token budget through the real CLI
(`thoughtmap run … --llm openai`) against our OpenAI-compatible test server on 127.0.0.1, which
answers each call after `--latency` seconds so that a method's parallel calls really overlap. A
price file makes every token cost $100 per million, in and out, so `--max-cost 0.2` is 2,000
tokens' worth. It reads what each run spent back from the database and prints spent / limit.

A script, not a test: it measures and prints (tests/engine/test_budget_reservation.py asserts the bound).

    .venv/bin/python benchmarks/bench_budget.py            # print the Markdown section
    .venv/bin/python benchmarks/bench_budget.py --write    # also replace it in docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import facts_block, machine_facts, publish, table  # noqa: E402
from engine.llm.fake_server import FakeOpenAIServer  # noqa: E402

SECTION = "bench_budget"
QUESTION = "What drives inflation after a supply shock?"
METHODS = ("deot", "omnithink", "fgdip", "research", "mtqa", "rag", "direct")
PRICE_PER_MILLION = 100.0  # dollars, in and out: a token costs $0.0001
MODEL = "gpt-4o-mini"


def spent(home: Path, run_id: str) -> dict:
    """The run's stored usage, read in a child process so this one never opens the run's database."""
    code = (
        "import json, sys; from engine.services import build_services; s = build_services(); "
        "r = s.repo.get_run(sys.argv[1]); "
        "print(json.dumps({'status': str(r.status.value if hasattr(r.status, 'value') else r.status), "
        "'tokens': r.prompt_tokens + r.completion_tokens, 'cost': r.cost, 'calls': r.llm_calls}))"
    )
    env = {**os.environ, "THOUGHTMAP_HOME": str(home), "THOUGHTMAP_LLM": "fake"}
    out = subprocess.run(
        [sys.executable, "-c", code, run_id], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def one_run(home: Path, base_url: str, prices: Path, method: str, budget: tuple[str, str]) -> dict:
    env = {
        **os.environ,
        "THOUGHTMAP_HOME": str(home),
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "bench",
        "THOUGHTMAP_MODEL": MODEL,
        "THOUGHTMAP_PRICES": str(prices),
    }
    flag, value = budget
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine.cli",
            "run",
            QUESTION,
            "--method",
            method,
            "--llm",
            "openai",
            "--search",
            "local",
            flag,
            value,
            "--quiet",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    run_id = done.stdout.strip().splitlines()[0] if done.stdout.strip() else ""
    if not run_id:
        raise SystemExit(f"{method} {flag} {value}: no run id (exit {done.returncode}): {done.stderr[-2000:]}")
    return {"exit": done.returncode, **spent(home, run_id)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="replace this section in docs/benchmarks.md")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--max-cost", default="0.2")
    parser.add_argument("--max-tokens", default="2000")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds each answer takes at least")
    parser.add_argument("--label", default="", help="a heading for this table (e.g. 'before')")
    args = parser.parse_args(argv)
    command = " ".join([".venv/bin/python benchmarks/bench_budget.py", *(sys.argv[1:] if argv is None else argv)])

    home = Path(tempfile.mkdtemp(prefix="thoughtmap-budget-"))
    prices = home / "prices.json"
    prices.write_text(json.dumps({MODEL: {"input": PRICE_PER_MILLION, "output": PRICE_PER_MILLION}}))
    rows = []
    with FakeOpenAIServer(latency_s=args.latency) as server:
        for method in args.methods.split(","):
            cost = one_run(home, server.base_url, prices, method, ("--max-cost", args.max_cost))
            tokens = one_run(home, server.base_url, prices, method, ("--max-tokens", args.max_tokens))
            rows.append(
                [
                    method,
                    f"${cost['cost']:.3f} ({cost['cost'] / float(args.max_cost):.2f}×), {cost['calls']} calls, exit {cost['exit']}",
                    f"{tokens['tokens']:,} ({tokens['tokens'] / int(args.max_tokens):.2f}×), {tokens['calls']} calls, exit {tokens['exit']}",
                ]
            )
    body = (
        f"### LLM budgets under parallel calls{(' — ' + args.label) if args.label else ''}\n\n"
        + facts_block(command, machine_facts())
        + "\n"
        + f'Each method ran "{QUESTION}" once with `--max-cost {args.max_cost}` and once with '
        f"`--max-tokens {args.max_tokens}` against the test server on 127.0.0.1 "
        f"({args.latency} s per answer, ${PRICE_PER_MILLION:g} per million tokens in and out), "
        "local search. Spent / limit, as stored:\n\n"
        + table(["method", f"--max-cost {args.max_cost}", f"--max-tokens {args.max_tokens}"], rows)
    )
    publish(SECTION, body, args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
