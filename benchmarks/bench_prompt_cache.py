"""Does llama-cpp-python's prompt cache pay off for the built-in model on our methods' prompts?

A script, not a test: it measures and prints, it never asserts on time.

    .venv/bin/python benchmarks/bench_prompt_cache.py record --method fgdip   # one quick run, its requests kept
    .venv/bin/python benchmarks/bench_prompt_cache.py replay --cache-mb 0 1024 2048 [--write]

The built-in server already skips the part of a prompt it shares with the request just before it.
Our methods interleave prompts of different kinds (FGDIP: generate a step, judge it, judge an
answer; MTQA: extract, then think, then summarise), so the prompt that shares most with the next
one is often not the last. The prompt cache keeps the model's state after each request (up to its
size in RAM) and starts a new prompt from the state that shares the longest beginning with it.

`record` runs one quick-profile run of the method on the built-in model, in process, and keeps every
chat request it sends (the messages as the server received them). `replay` sends the same requests
in the same order to a fresh server per cache size, with one output token each (the cache changes
what a prompt costs, not what generation costs), and reads from the server's log how many prompt
tokens it evaluated and how long that took; the token counts do not depend on the machine's load,
the seconds do. Peak memory is the server's VmHWM.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import facts_block, machine_facts, publish, table  # noqa: E402
from engine.config import LocalModelSettings, load_settings  # noqa: E402
from engine.llm.local_server import LocalModelServer  # noqa: E402

SECTION = "bench_prompt_cache"
WORK = Path(tempfile.gettempdir()) / "thoughtmap-prompt-cache"
QUESTIONS = {  # HotpotQA dev questions whose passages are in the bundled corpus
    "fgdip": "Which magazine was started first, Arthur's Magazine or First for Women?",
    "mtqa": "Which magazine was started first, Arthur's Magazine or First for Women?",
    "deot": (
        "Which animation comedy by the creator of Wallace and Gromit matched zoo animals with "
        "people talking about their homes?"
    ),
}
EVALUATED = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")
PROMPT_TIME = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")


def record(method: str, work: Path) -> Path:
    """One quick-profile run on the built-in model; every chat request it sends, as JSON lines."""
    import openai.resources.chat.completions as chat

    from engine.methods.params import build_params_with_profile
    from engine.services import build_services

    out = work / f"{method}.jsonl"
    work.mkdir(parents=True, exist_ok=True)
    requests: list[dict] = []
    original = chat.Completions.create

    def recording(self, *args, **kwargs):
        requests.append({"messages": kwargs.get("messages"), "max_tokens": kwargs.get("max_tokens")})
        return original(self, *args, **kwargs)

    chat.Completions.create = recording
    home = Path(tempfile.mkdtemp(prefix="prompt-cache-home-"))
    os.environ["THOUGHTMAP_HOME"] = str(home)
    services = build_services(load_settings())
    try:
        params = build_params_with_profile(services.method(method).Params, {}, method=method, profile="quick")
        services.llm("local").preflight()
        run = services.runner.create_run(
            question=QUESTIONS[method],
            method=method,
            params=params,
            llm_info=services.llm_info("local"),
            search_mode="local",
        )
        started = time.monotonic()
        services.runner.start(run.id)
        while services.repo.get_run(run.id).status in ("queued", "running"):
            time.sleep(1)
        run = services.repo.get_run(run.id)
        print(
            f"{method}: run {run.id} {run.status} in {time.monotonic() - started:.0f} s, "
            f"{run.llm_calls} calls, {len(requests)} requests",
            file=sys.stderr,
        )
    finally:
        services.close()
        chat.Completions.create = original
    out.write_text("".join(json.dumps(r) + "\n" for r in requests), encoding="utf-8")
    return out


def replay(requests: list[dict], cache_mb: int, log_dir: Path) -> dict[str, float]:
    import openai

    settings = LocalModelSettings(**{**load_settings().local.model_dump(), "prompt_cache_mb": cache_mb, "port": 0})
    log_dir.mkdir(parents=True, exist_ok=True)
    server = LocalModelServer(settings, log_dir)
    client = openai.OpenAI(base_url=server.ensure_running(), api_key="local", max_retries=0, timeout=900)
    log = log_dir / "local-model.log"
    try:
        client.chat.completions.create(model=server.alias, messages=[{"role": "user", "content": "Hi."}], max_tokens=1)
        offset = log.stat().st_size
        started = time.monotonic()
        prompt_tokens = 0
        for request in requests:
            response = client.chat.completions.create(
                model=server.alias, messages=request["messages"], max_tokens=1, temperature=0
            )
            prompt_tokens += response.usage.prompt_tokens
        seconds = time.monotonic() - started
        peak_mb = _peak_rss_mb(server.pid)
    finally:
        server.stop()
    text = log.read_bytes()[offset:].decode("utf-8", "replace")
    evaluated = sum(int(m.group(2)) for m in EVALUATED.finditer(text))
    eval_ms = sum(float(m.group(1)) for m in PROMPT_TIME.finditer(text))
    return {
        "requests": len(requests),
        "prompt_tokens": prompt_tokens,
        "evaluated": evaluated,
        "eval_s": eval_ms / 1000,
        "seconds": seconds,
        "peak_mb": peak_mb,
    }


def _peak_rss_mb(pid: int | None) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (OSError, TypeError):
        return float("nan")
    match = re.search(r"VmHWM:\s+(\d+) kB", status)
    return int(match.group(1)) / 1024 if match else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="one quick run on the built-in model, its requests kept")
    rec.add_argument("--method", choices=sorted(QUESTIONS), default="fgdip")
    rep = sub.add_parser("replay", help="the recorded requests against servers with each cache size")
    rep.add_argument("--method", choices=sorted(QUESTIONS), nargs="+", default=["fgdip"])
    rep.add_argument("--cache-mb", type=int, nargs="+", default=[0, 1024, 2048])
    rep.add_argument("--write", action="store_true", help="replace the section in docs/benchmarks.md")
    parser.add_argument("--work", type=Path, default=WORK)
    args = parser.parse_args(argv)
    if args.command == "record":
        print(record(args.method, args.work))
        return 0
    rows = []
    for method in args.method:
        requests = [json.loads(line) for line in (args.work / f"{method}.jsonl").read_text().splitlines()]
        for cache_mb in args.cache_mb:
            result = replay(requests, cache_mb, args.work / f"logs-{method}-{cache_mb}")
            print(method, cache_mb, result, file=sys.stderr, flush=True)
            rows.append(
                [
                    method,
                    f"{cache_mb} MiB" if cache_mb else "off",
                    result["requests"],
                    f"{result['prompt_tokens']:,}",
                    f"{result['evaluated']:,}",
                    f"{result['evaluated'] / max(result['prompt_tokens'], 1):.0%}",
                    f"{result['eval_s']:.0f}",
                    f"{result['seconds']:.0f}",
                    f"{result['peak_mb']:,.0f}",
                ]
            )
    command = (
        "benchmarks/bench_prompt_cache.py replay --method "
        + " ".join(args.method)
        + " --cache-mb "
        + " ".join(map(str, args.cache_mb))
    )
    body = (
        facts_block(command, machine_facts())
        + "\n"
        + table(
            [
                "method",
                "prompt cache",
                "requests",
                "prompt tokens",
                "tokens evaluated",
                "evaluated share",
                "prompt eval s",
                "replay wall s",
                "server peak MiB",
            ],
            rows,
        )
    )
    publish(SECTION, body, args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
