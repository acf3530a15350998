"""Benchmark of the built-in local model (llama.cpp, Qwen2.5-Coder-0.5B Q4_K_M) on this machine.

A script, not a test: it measures and prints, it never asserts on time.

    .venv/bin/python benchmarks/bench_local.py                  # model, speed, quick DEoT run
    .venv/bin/python benchmarks/bench_local.py --install        # also time a from-scratch runtime build (~5 min)
    .venv/bin/python benchmarks/bench_local.py --write          # replace the section in docs/benchmarks.md
    .venv/bin/python benchmarks/bench_local.py --deot-only      # only the quick DEoT run (prints, never writes)

Measures: assembling the bundled model from its packages (with the sha256 check); the server's
start (process start to a passing health check, model loaded); prompt processing and generation
speed through the real `openai` client (a long prompt with one output token, then a short prompt
with a long free-text answer, then a schema-constrained JSON answer as the methods ask); and a
quick-profile DEoT run through the runner, as the app starts it: time to the first stored node,
to the first answered node, answered question nodes after 6 minutes (the Explore issue's bar: at
least 4), and to the end, with a timeline of every node and every LLM call. `--install` builds llama-cpp-python into a throwaway
venv with an empty wheel cache, exactly as scripts/setup does on a fresh machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import facts_block, machine_facts, publish, table  # noqa: E402
from engine.config import LocalModelSettings, load_settings  # noqa: E402
from engine.llm.local_model import BUNDLED_MODEL, assemble_bundled  # noqa: E402
from engine.llm.local_server import LocalModelServer  # noqa: E402

SECTION = "bench_local"
SIX_MINUTES = 360.0
QUESTION = (
    "Which animation comedy by the creator of Wallace and Gromit matched zoo animals with "
    "people talking about their homes?"
)  # HotpotQA dev; its passages are in the bundled corpus
FILLER = (
    "The Seine is a 777-kilometre-long river in northern France. It rises at Source-Seine and flows "
    "through Paris into the English Channel at Le Havre. "
) * 40


def runtime_variant() -> str:
    """The instruction set scripts/setup-llama-cpp built this venv's llama.cpp for."""
    marker = Path(sys.prefix) / ".thoughtmap-llama-cpp-variant"
    variant = marker.read_text().strip() if marker.exists() else "portable"
    return "GGML_NATIVE=OFF, AVX2" + ("" if variant == "portable" else f", {variant}")


def time_install() -> float:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "venv", f"{tmp}/venv"], check=True)
        env = {**os.environ, "XDG_CACHE_HOME": f"{tmp}/cache"}
        started = time.monotonic()
        subprocess.run([str(ROOT / "scripts" / "setup-llama-cpp"), f"{tmp}/venv/bin/python"], check=True, env=env)
        return time.monotonic() - started


def time_assembly() -> float:
    with tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        assemble_bundled(LocalModelSettings(models_dir=Path(tmp)))
        return time.monotonic() - started


def time_starts(settings: LocalModelSettings, log_dir: Path, repeat: int) -> list[float]:
    loads = []
    for _ in range(repeat):
        server = LocalModelServer(settings, log_dir)
        server.ensure_running()
        loads.append(server.last_load_s)
        server.stop()
    return loads


def speeds(settings: LocalModelSettings, log_dir: Path) -> dict[str, tuple[float, int, float]]:
    """name -> (tokens per second, tokens, seconds) through the real openai client."""
    import openai

    server = LocalModelServer(settings, log_dir)
    client = openai.OpenAI(base_url=server.ensure_running(), api_key="local", max_retries=0, timeout=600)
    results = {}
    try:

        def call(**kwargs):
            started = time.monotonic()
            response = client.chat.completions.create(model=server.alias, **kwargs)
            return response, time.monotonic() - started

        call(messages=[{"role": "user", "content": "Say hello."}], max_tokens=4)  # warm-up
        response, seconds = call(
            messages=[{"role": "user", "content": FILLER + "\nSummarize in one word."}], max_tokens=1
        )
        prompt = response.usage.prompt_tokens
        results["prompt processing"] = (prompt / seconds, prompt, seconds)
        pp_rate = prompt / seconds
        response, seconds = call(
            messages=[{"role": "user", "content": "Write a long essay about rivers of Europe."}],
            max_tokens=300,
            temperature=0,
        )
        out = response.usage.completion_tokens
        gen_seconds = seconds - response.usage.prompt_tokens / pp_rate
        results["generation, free text"] = (out / gen_seconds, out, seconds)
        schema = {
            "type": "object",
            "properties": {
                "tasks": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 3,
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string"},
                            "tool": {"type": "string", "enum": ["info_search", "direct_reasoning"]},
                            "input": {"type": "string"},
                        },
                        "required": ["id", "tool", "input"],
                    },
                }
            },
            "required": ["tasks"],
        }
        response, seconds = call(
            messages=[{"role": "user", "content": f"Plan up to 3 research tasks for: {QUESTION} Answer in JSON."}],
            max_tokens=300,
            temperature=0,
            response_format={"type": "json_object", "schema": schema},
        )
        out = response.usage.completion_tokens
        gen_seconds = seconds - response.usage.prompt_tokens / pp_rate
        results["generation, JSON with a schema"] = (out / gen_seconds, out, seconds)
    finally:
        server.stop()
    return results


def quick_deot(home: Path) -> dict[str, float | int | str]:
    from engine.methods.deot.params import DeotParams
    from engine.methods.params import build_params_with_profile
    from engine.services import build_services

    os.environ["THOUGHTMAP_HOME"] = str(home)
    services = build_services(load_settings())
    try:
        params = build_params_with_profile(DeotParams, {}, method="deot", profile="quick")
        started = time.monotonic()
        services.llm("local").preflight()  # as the app does before its first local run
        run = services.runner.create_run(
            question=QUESTION, method="deot", params=params, llm_info=services.llm_info("local"), search_mode="local"
        )
        services.runner.start(run.id)
        first_stored = first_done = None
        answered_at: dict[int, float] = {}
        seen: dict[int, str] = {}
        while True:
            snap = services.repo.snapshot(run.id)
            now = time.monotonic() - started
            if first_stored is None and snap.nodes:
                first_stored = now
            for node in snap.nodes:
                if seen.get(node.id) != node.status:
                    seen[node.id] = node.status
                    print(
                        f"  {now:6.1f} s  node {node.id} (depth {node.depth}) {node.status}: {node.label[:80]}",
                        file=sys.stderr,
                        flush=True,
                    )
                if node.status == "done" and node.content:
                    answered_at.setdefault(node.id, now)
            if first_done is None and answered_at:
                first_done = min(answered_at.values())
            if snap.run.status not in ("queued", "running"):
                break
            time.sleep(0.2)
        total = time.monotonic() - started
        for call in services.repo.list_llm_calls(run.id):
            print(
                f"  call: node {call.node_id} {call.purpose:<11} {call.latency_s:5.1f} s  "
                f"{call.prompt_tokens} in / {call.completion_tokens} out  ok={call.ok}",
                file=sys.stderr,
            )
        report = services.repo.latest_report(run.id) if hasattr(services.repo, "latest_report") else None
        return {
            "status": snap.run.status,
            "nodes": len(snap.nodes),
            "calls": snap.run.llm_calls,
            "tokens": snap.run.prompt_tokens + snap.run.completion_tokens,
            "first_stored": first_stored or total,
            "first_done": first_done or total,
            "total": total,
            "report": bool(report),
            "answered_6min": sum(1 for at in answered_at.values() if at <= SIX_MINUTES),
            "answered": len(answered_at),
        }
    finally:
        services.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--install", action="store_true", help="also time a from-scratch runtime build")
    parser.add_argument("--starts", type=int, default=3, help="server starts to time")
    parser.add_argument("--write", action="store_true", help="replace the section in docs/benchmarks.md")
    parser.add_argument("--deot-only", action="store_true", help="only the quick DEoT run, printed")
    args = parser.parse_args(argv)
    if args.deot_only:
        with tempfile.TemporaryDirectory() as tmp:
            print(quick_deot(Path(tmp) / "home"))
        return 0

    settings = load_settings().local
    with tempfile.TemporaryDirectory() as tmp:
        log_dir = Path(tmp) / "logs"
        install = time_install() if args.install else None
        assembly = time_assembly()
        loads = time_starts(settings, log_dir, args.starts)
        rates = speeds(settings, log_dir)
        deot = quick_deot(Path(tmp) / "home")

    facts = machine_facts()
    if install is not None:
        # Its own section: re-running the speed part must not drop the (slow) install measurement.
        publish(
            f"{SECTION}_install",
            (
                "### Installing the built-in model's runtime (`bench_local.py --install`)\n\n"
                + facts_block("benchmarks/bench_local.py --install" + (" --write" if args.write else ""), facts)
                + "\n"
                + table(
                    ["step", "time"],
                    [
                        [
                            f"build llama-cpp-python 0.3.36 ({runtime_variant()}) into a fresh venv with an empty wheel cache, "
                            "as scripts/setup does on a new machine",
                            f"{install / 60:.1f} min",
                        ]
                    ],
                )
                + "\nLater set-ups on the same machine reuse the wheel from ~/.cache/thoughtmap/wheels "
                "(seconds).\n"
            ),
            args.write,
        )
    command = "benchmarks/bench_local.py" + (" --write" if args.write else "")
    rows = [
        [
            f"assemble the bundled model from its 6 packages + sha256 ({BUNDLED_MODEL.size / 2**20:.0f} MiB)",
            f"{assembly:.1f} s",
        ],
        [f"server start to healthy, model loaded (median of {len(loads)})", f"{statistics.median(loads):.2f} s"],
    ]
    speed_rows = [[name, f"{rate:.1f}", tokens, f"{seconds:.1f} s"] for name, (rate, tokens, seconds) in rates.items()]
    deot_rows = [
        ["time to the first stored node (server start included)", f"{deot['first_stored']:.1f} s"],
        ["time to the first answered node", f"{deot['first_done']:.1f} s"],
        ["answered question nodes after 6 minutes", str(deot["answered_6min"])],
        ["answered question nodes at the end", str(deot["answered"])],
        ["wall time of the whole run", f"{deot['total'] / 60:.1f} min"],
        [
            "status / nodes / LLM calls / tokens",
            f"{deot['status']} / {deot['nodes']} / {deot['calls']} / {deot['tokens']}",
        ],
    ]
    body = (
        "## Built-in local model (`bench_local.py`)\n\n"
        + facts_block(command, facts)
        + f"\nModel: {BUNDLED_MODEL.name}, llama-cpp-python 0.3.36 built by scripts/setup-llama-cpp ({runtime_variant()}), "
        f"{settings.threads} threads, context {settings.context_tokens} tokens. The runtime's install time is "
        "the next section.\n\n"
        + table(["step", "time"], rows)
        + "\n### Speed through the server (real `openai` client)\n\n"
        + table(["what", "tokens/s", "tokens", "request time"], speed_rows)
        + "\n### Quick-profile DEoT run (as the app starts it: server start, then the run)\n\n"
        + f'Question: "{QUESTION}"; search: the bundled local corpus.\n\n'
        + table(["measure", "value"], deot_rows)
    )
    publish(SECTION, body, args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
