"""The cost estimate (`Method.estimate`) against measured runs: every registered method and the
test-only grid method, on the paper's defaults and the quick profile, run on the scripted fake LLM
over the bundled corpus. Per run: estimated calls (and range) against the calls made, estimated
prompt tokens against the tokens sent, and the prompt tokens per call of each prompt (the source of
the formulas' prompt-token constants). The fake's completions are shorter than a real model's and
its plans and engines differ (see each method's estimate module), so completion tokens are not
compared. `tests/engine/methods/test_cost_estimate.py` asserts the calls are within ±30 %.

    .venv/bin/python benchmarks/bench_estimate.py            # print the Markdown section
    .venv/bin/python benchmarks/bench_estimate.py --write    # also replace it in docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import collections
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import facts_block, machine_facts, publish, table  # noqa: E402
from engine.config import load_settings  # noqa: E402
from engine.llm.fake import FakeLLM  # noqa: E402
from engine.llm.limits import ConcurrencyLimiter  # noqa: E402
from engine.llm.pricing import PriceTable  # noqa: E402
from engine.methods.params import PROFILES, build_params_with_profile  # noqa: E402
from engine.methods.registry import load_methods  # noqa: E402
from engine.services import Services  # noqa: E402
from storage import Repository, open_database  # noqa: E402

SECTION = "bench_estimate"
PLUGIN = "tests.support.grid_method:GridMethod"
QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="replace this section in docs/benchmarks.md")
    args = parser.parse_args(argv)
    command = " ".join([".venv/bin/python benchmarks/bench_estimate.py", *(sys.argv[1:] if argv is None else argv)])

    home = Path(tempfile.mkdtemp(prefix="thoughtmap-estimate-"))
    methods = load_methods(PLUGIN)
    settings = load_settings({"THOUGHTMAP_HOME": str(home), "THOUGHTMAP_LLM": "fake"})
    db = open_database(settings.database_url)
    services = Services(
        settings=settings,
        db=db,
        repo=Repository(db),
        limiter=ConcurrencyLimiter(8),
        prices=PriceTable(),
        methods=methods,
    )
    fake = FakeLLM()
    services.use_llm("fake", fake)
    rows, prompts = [], collections.defaultdict(list)
    try:
        for name, cls in methods.items():
            for profile in PROFILES:
                params = build_params_with_profile(cls.Params, {}, method=name, profile=profile)
                estimate = cls.estimate(params)
                first = len(fake.calls)
                run = services.runner.create_run(
                    question=QUESTION,
                    method=name,
                    params=params,
                    llm_info=services.llm_info("fake"),
                    search_mode="local",
                )
                services.runner.start(run.id)
                final = services.runner.wait(run.id, timeout=600)
                for request in fake.calls[first:]:
                    if profile == "paper":
                        prompts[request.prompt].append(sum(len(m.content) for m in request.messages) // 4)
                error = (estimate.calls - final.llm_calls) / final.llm_calls * 100
                rows.append(
                    [
                        name,
                        profile,
                        final.status,
                        f"{estimate.calls} ({estimate.low}-{estimate.high})",
                        final.llm_calls,
                        f"{error:+.0f} %",
                        f"{estimate.prompt_tokens:,}",
                        f"{final.prompt_tokens:,}",
                    ]
                )
    finally:
        services.close()
        shutil.rmtree(home, ignore_errors=True)

    body = "## Cost estimate against measured runs\n\n" + facts_block(command, machine_facts()) + "\n"
    body += (
        "Each method's default run (the paper's values, then the quick profile) on the scripted fake "
        "LLM over the bundled corpus, question: \u201c" + QUESTION + "\u201d. Estimated calls (low-high) "
        "against the calls the run made; estimated prompt tokens against those sent (the fake counts "
        "characters / 4). A capable endpoint is not available here: the formulas keep a real model's "
        "rates where the fake behaves otherwise (DEoT: the fake's plans hold one News Search task, no "
        "tool call, and its engines repeat questions; OmniThink: the fake writes 3 sections, not "
        "`max_sections`).\n\n"
    )
    body += table(
        [
            "method",
            "profile",
            "status",
            "estimated calls",
            "measured calls",
            "error",
            "estimated prompt tokens",
            "measured prompt tokens",
        ],
        rows,
    )
    body += "\nPrompt tokens per call on the paper defaults (the constants of the formulas):\n\n"
    body += table(
        ["prompt", "calls", "mean prompt tokens"],
        [[name, len(sizes), sum(sizes) // len(sizes)] for name, sizes in sorted(prompts.items())],
    )
    publish(SECTION, body, args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
