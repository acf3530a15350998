"""Benchmark: time to the first answered node on the built-in model, idle and on a busy machine.

What a newcomer waits for: the default method (DEoT) with its default profile for the built-in
model (the quick profile), from Start to the first node that answers, and to the end of the run.
Measured on two questions: one the bundled corpus does not cover (the node says so without asking
the model: `RunContext.sources_only`) and one it does (HotpotQA dev: the node's summary is
written by the model). "Busy": `--burners` other processes each keep a core busy, as the browser
test of this path does (tests/e2e/test_local_model_browser.py).

The model server is started (and its start timed) before the runs, as the app starts it when Start
is pressed on the built-in model; the runs are the model's work alone.

    .venv/bin/python benchmarks/bench_first_answer.py            # print the Markdown section
    .venv/bin/python benchmarks/bench_first_answer.py --write    # also replace it in docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import facts_block, machine_facts, publish, table  # noqa: E402

SECTION = "bench_first_answer"
UNCOVERED = "How does the Rust borrow checker prevent data races?"
COVERED = (
    "Which animation comedy by the creator of Wallace and Gromit matched zoo animals with "
    "people talking about their homes?"
)
POLL_S = 0.2


def burners(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def one_run(services, question: str) -> dict:
    from engine.methods.deot.params import DeotParams
    from engine.methods.params import build_params_with_profile
    from storage.models import NodeStatus, RunStatus

    params = build_params_with_profile(DeotParams, {}, method="deot", profile="quick")
    run = services.runner.create_run(
        question=question, method="deot", params=params, llm_info=services.llm_info("local"), search_mode="local"
    )
    started = time.monotonic()
    services.runner.start(run.id)
    first = None
    while True:
        stored = services.repo.get_run(run.id)
        if first is None and any(n.status == NodeStatus.DONE for n in services.repo.list_nodes(run.id)):
            first = time.monotonic() - started
        if stored.status not in (RunStatus.QUEUED, RunStatus.RUNNING):
            break
        time.sleep(POLL_S)
    total = time.monotonic() - started
    nodes = services.repo.list_nodes(run.id)
    if stored.status != RunStatus.DONE:
        print(f"run {run.id} ended {stored.status}: {stored.error}", file=sys.stderr)
        for node in nodes:
            print(f"  node {node.id} {node.kind} {node.status}: {node.error}", file=sys.stderr)
        for event in services.repo.list_events(run.id)[-15:]:
            print(f"  event {event.kind}: {event.text[:300]} {str(event.data)[:300]}", file=sys.stderr)
    return {
        "status": stored.status,
        "first": first,
        "total": total,
        "calls": stored.llm_calls,
        "tokens": stored.prompt_tokens + stored.completion_tokens,
        "nodes": len(nodes),
        "not_covered": sum(bool(n.data.get("not_covered")) for n in nodes),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="replace this section in docs/benchmarks.md")
    parser.add_argument("--burners", type=int, default=2, help="busy processes for the loaded runs (default 2)")
    parser.add_argument(
        "--loads",
        nargs="+",
        choices=("idle", "busy"),
        default=["idle", "busy"],
        help="which machines to measure (default both)",
    )
    args = parser.parse_args(argv)
    command = " ".join([".venv/bin/python benchmarks/bench_first_answer.py", *(sys.argv[1:] if argv is None else argv)])

    from engine.config import load_settings
    from engine.services import build_services

    rows = []
    with tempfile.TemporaryDirectory() as home:
        services = build_services(load_settings({"THOUGHTMAP_HOME": home}))
        try:
            services.searcher("local")  # the bundled index, built once, outside the timings
            llm = services.llm("local")
            began = time.monotonic()
            llm.preflight()
            server_start = time.monotonic() - began
            for load in args.loads:
                busy = burners(args.burners) if load == "busy" else []
                try:
                    for name, question in (("not covered", UNCOVERED), ("covered", COVERED)):
                        result = one_run(services, question)
                        speed = llm.speed.tokens_per_s
                        rows.append(
                            [
                                load,
                                name,
                                result["status"],
                                f"{result['first']:.0f} s" if result["first"] is not None else "–",
                                f"{result['total']:.0f} s",
                                str(result["nodes"]),
                                str(result["not_covered"]),
                                str(result["calls"]),
                                f"{result['tokens']:,}",
                                f"{speed:.1f}" if speed else "–",
                            ]
                        )
                        print(" | ".join(rows[-1]), file=sys.stderr)
                finally:
                    for process in busy:
                        process.kill()
                        process.wait()
        finally:
            services.close()

    body = "\n".join(
        [
            "## Time to the first answered node (built-in model)",
            "",
            facts_block(command, machine_facts()),
            "",
            "DEoT with the built-in model's default (quick) profile, as the app starts it; the model server "
            f"started before the runs, in {server_start:.0f} s. *Busy*: {args.burners} other processes each keep a "
            'core busy. *Not covered*: nodes answered "the sources at hand do not cover this" without asking '
            "the model. *Tokens/s*: the model's measured writing speed after the run "
            "(`engine/llm/decode_speed.py`), which sets the next calls' caps and timeouts. Model: "
            "Qwen2.5-Coder-0.5B-Instruct Q4_K_M (the built-in one).",
            "",
            table(
                [
                    "machine",
                    "question",
                    "status",
                    "first answered node",
                    "whole run",
                    "nodes",
                    "not covered",
                    "LLM calls",
                    "tokens",
                    "tokens/s",
                ],
                rows,
            ),
            "",
            f"Questions: not covered: *{UNCOVERED}*; covered (HotpotQA dev): *{COVERED}*",
            "",
        ]
    )
    publish(SECTION, body, args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
