"""Benchmark of the sanitisers in engine/safe_text.py on pathological input.

Model output, web pages and uploaded documents are long and may be adversarial, so every
sanitiser must stay linear in its input: no regex that backtracks quadratically on a run of `{`,
`](`, `<` or an unterminated escape sequence. This script times `markdown_block`, `inline_text` and
`terminal_text` on each pathological shape at 10k, 100k and 1M characters and reports how the time
grows with the size (10 times the input should cost about 10 times the time, not 100).

A script, not a test: it measures and prints (tests/engine/test_safe_text.py checks the same inputs come
out inert, without timing them).

    .venv/bin/python benchmarks/bench_safe_text.py            # print the Markdown section
    .venv/bin/python benchmarks/bench_safe_text.py --write    # also replace it in docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import facts_block, machine_facts, publish, table  # noqa: E402
from engine.safe_text import inline_text, markdown_block, terminal_text  # noqa: E402

SECTION = "bench_safe_text"
SIZES = (10_000, 100_000, 1_000_000)

# Each shape, as a function of the input size: the patterns that make a naive regex backtrack.
SHAPES: dict[str, Callable[[int], str]] = {
    "unclosed braces `{{{…=`": lambda n: "{" * (n - 1) + "=",
    "nested brackets `[[[…]]]:`": lambda n: "[" * (n // 2) + "]" * (n // 2) + ":" * 10,
    "link openers `](](…`": lambda n: "](" * (n // 2),
    "reference colons `]:]:…[1`": lambda n: "]:" * (n // 2) + "[1",
    "unterminated OSC `ESC ]xxx…`": lambda n: "\x1b]" + "x" * n,
    "tag openers `<<<…`": lambda n: "<" * n,
}
SANITISERS: dict[str, Callable[[str], str]] = {
    "markdown_block": markdown_block,
    "inline_text": inline_text,
    "terminal_text": terminal_text,
}


def best_of(repeat: int, work: Callable[[], object]) -> float:
    """The fastest of `repeat` timings: the least disturbed by whatever else shares the CPU."""
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        timings.append(time.perf_counter() - started)
    return min(timings)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="replace this section in docs/benchmarks.md")
    parser.add_argument("--repeat", type=int, default=3, help="timings per cell; the best is kept (default 3)")
    args = parser.parse_args(argv)
    command = " ".join([".venv/bin/python benchmarks/bench_safe_text.py", *(sys.argv[1:] if argv is None else argv)])

    rows = []
    worst_growth = 0.0
    for shape_name, shape in SHAPES.items():
        for sanitiser_name, sanitiser in SANITISERS.items():
            seconds = [best_of(args.repeat, lambda text=shape(size): sanitiser(text)) for size in SIZES]  # noqa: B008,B023 (each size's text, now)
            # Growth per 10x of input between the two largest sizes (the smallest is noise-bound).
            growth = seconds[-1] / seconds[-2] if seconds[-2] > 0 else float("nan")
            worst_growth = max(worst_growth, growth)
            rows.append([shape_name, f"`{sanitiser_name}`", *(f"{s * 1000:.1f}" for s in seconds), f"{growth:.1f}x"])

    body = (
        "## Sanitisers on pathological input (`bench_safe_text.py`)\n\n"
        + facts_block(command, machine_facts())
        + "\nMilliseconds per call (best of "
        + f'{args.repeat}); "growth" is the 1M-character time over the 100k one: linear is about 10x, '
        "quadratic about 100x.\n\n"
        + table(["input", "sanitiser", *(f"{size:,} chars ms" for size in SIZES), "growth 100k → 1M"], rows)
        + f"\nWorst growth: {worst_growth:.1f}x.\n"
    )
    publish(SECTION, body, args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
