"""Structured output on the built-in model: the grammar sampled last (ours, `engine/llm/grammar_sampling.py`)
against llama-cpp-python's own order (grammar first, over the whole vocabulary).

A script, not a test: it measures and prints, it never asserts on time.

    .venv/bin/python benchmarks/bench_grammar.py            # prints the table
    .venv/bin/python benchmarks/bench_grammar.py --write    # also replaces its section in docs/benchmarks.md

For each order, a fresh server answers the same schema-constrained requests, as the methods ask them
(a DEoT node summary over sources, a task plan, an MTQA-style extraction), at temperature 0. It
reports generation speed (completion tokens over the request time less the prompt's share at the
measured prompt rate) and whether the two orders wrote the same text: at temperature 0 the grammar
last must pick the very tokens the grammar first picks.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import facts_block, machine_facts, publish, table  # noqa: E402
from engine.config import load_settings  # noqa: E402
from engine.llm.local_server import LocalModelServer  # noqa: E402

SECTION = "bench_grammar"
SOURCES = """[1] Wallace & Gromit
Wallace & Gromit is a British stop-motion comedy franchise created by Nick Park of Aardman Animations.
[2] Creature Comforts
Creature Comforts is a 1989 British animated comedy film created by Nick Park. It matched the voices of
members of the public talking about their homes with animated zoo animals.
[3] Aardman Animations
Aardman Animations is an animation studio based in Bristol, known for stop-motion clay animation."""
QUESTION = (
    "Which animation comedy by the creator of Wallace and Gromit matched zoo animals with "
    "people talking about their homes?"
)
_STRING = {"type": "string"}
REQUESTS = {
    "node summary (DEoT-like)": (
        f"Sources:\n{SOURCES}\n\nQuestion: {QUESTION}\nSummarise what the sources say about the question, "
        "citing them as [n]. Answer in JSON.",
        {
            "type": "object",
            "properties": {
                "key_findings": {"type": "array", "items": _STRING, "minItems": 2, "maxItems": 5},
                "evidence": {"type": "array", "items": _STRING, "maxItems": 5},
                "conclusion": _STRING,
                "confidence": {"type": "number"},
            },
            "required": ["key_findings", "evidence", "conclusion", "confidence"],
        },
        500,
    ),
    "task plan": (
        f"Plan up to 3 research tasks for: {QUESTION} Answer in JSON.",
        {
            "type": "object",
            "properties": {
                "tasks": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 3,
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": _STRING,
                            "tool": {"type": "string", "enum": ["info_search", "direct_reasoning"]},
                            "input": _STRING,
                        },
                        "required": ["id", "tool", "input"],
                    },
                }
            },
            "required": ["tasks"],
        },
        300,
    ),
    "entities and relations (MTQA-like)": (
        f"Text:\n{SOURCES}\n\nList the entities (name, type, description) and the relations between them "
        "(source, target, description, keywords). Answer in JSON.",
        {
            "type": "object",
            "properties": {
                "entities": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"name": _STRING, "type": _STRING, "description": _STRING},
                        "required": ["name", "type", "description"],
                    },
                },
                "relations": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "source": _STRING,
                            "target": _STRING,
                            "description": _STRING,
                            "keywords": _STRING,
                        },
                        "required": ["source", "target", "description", "keywords"],
                    },
                },
            },
            "required": ["entities", "relations"],
        },
        600,
    ),
}


def measure(grammar_first: bool, log_dir: Path) -> dict[str, tuple[float, int, float, str]]:
    """request name -> (generation tokens/s, completion tokens, request seconds, text)."""
    import openai

    if grammar_first:
        os.environ["THOUGHTMAP_LOCAL_GRAMMAR_FIRST"] = "1"
    else:
        os.environ.pop("THOUGHTMAP_LOCAL_GRAMMAR_FIRST", None)
    server = LocalModelServer(load_settings().local, log_dir)
    client = openai.OpenAI(base_url=server.ensure_running(), api_key="local", max_retries=0, timeout=900)
    results = {}
    try:
        client.chat.completions.create(
            model=server.alias, messages=[{"role": "user", "content": "Hi."}], max_tokens=2
        )  # warm-up
        # The prompt rate, to take each request's prompt processing out of its generation speed.
        started = time.monotonic()
        response = client.chat.completions.create(
            model=server.alias, messages=[{"role": "user", "content": SOURCES * 6 + "\nOne word."}], max_tokens=1
        )
        pp_rate = response.usage.prompt_tokens / (time.monotonic() - started)
        for name, (prompt, schema, max_tokens) in REQUESTS.items():
            started = time.monotonic()
            response = client.chat.completions.create(
                model=server.alias,
                messages=[{"role": "user", "content": prompt}],
                max_tokens=max_tokens,
                temperature=0,
                response_format={"type": "json_object", "schema": schema},
            )
            seconds = time.monotonic() - started
            out = response.usage.completion_tokens
            generation_s = max(seconds - response.usage.prompt_tokens / pp_rate, 1e-6)
            results[name] = (out / generation_s, out, seconds, response.choices[0].message.content or "")
    finally:
        server.stop()
        os.environ.pop("THOUGHTMAP_LOCAL_GRAMMAR_FIRST", None)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="replace the section in docs/benchmarks.md")
    args = parser.parse_args(argv)
    log_dir = Path(load_settings().home) / "logs"
    first = measure(True, log_dir)
    last = measure(False, log_dir)
    rows = []
    for name in REQUESTS:
        a, b = first[name], last[name]
        rows.append(
            [name, f"{a[1]}", f"{a[0]:.1f}", f"{b[0]:.1f}", f"{b[0] / a[0]:.2f}×", "yes" if a[3] == b[3] else "no"]
        )
    command = ".venv/bin/python benchmarks/bench_grammar.py --write"
    body = (
        f"## Structured output on the built-in model: grammar last (`bench_grammar.py`)\n\n"
        f"{facts_block(command, machine_facts())}\n"
        "Generation speed of schema-constrained JSON (tokens/s, prompt processing taken out), the same "
        "requests at temperature 0 on a fresh server per order: llama-cpp-python's order (grammar first, "
        "over the whole vocabulary) against ours (`engine/llm/grammar_sampling.py`: the grammar asked "
        "only about the drawn token, the whole vocabulary only when it refuses it, as llama.cpp's own "
        "server does). *Same text*: both orders wrote the same answer.\n\n"
        + table(["request", "tokens", "grammar first tok/s", "grammar last tok/s", "speed-up", "same text"], rows)
    )
    publish(SECTION, body, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
