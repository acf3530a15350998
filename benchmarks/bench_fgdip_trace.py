"""Where FGDIP's answers were won or lost, read from a benchmark's stored search trees.

EM says how often FGDIP's reported answer was right; this says why it was not, from what each run
stored (no LLM call, nothing run again):

- **gold in an observation**: the gold answer (normalised as EM normalises) appears in what a Search
  or Lookup returned, so retrieval reached it;
- **a candidate matched**: one of the run's answer candidates, accepted or not, is an exact match;
- **reported matched**: the answer the report gives is (the benchmark's EM, before the reader);
- **accepted**: the Answer Evaluator's verdicts on the candidates; **sure / maybe / impossible**:
  the Step Evaluator's on the search nodes (its ordering only works if it tells them apart);
- **backtracks** per run, and the reported short answer's length in words.

    THOUGHTMAP_HOME=... .venv/bin/python benchmarks/bench_fgdip_trace.py BENCHMARK_ID [--by level] [--json OUT]

It reads the benchmark's FGDIP items only (`thoughtmap bench --show ID` has the scores). A yes/no
dataset (StrategyQA) leaves "gold in an observation" out: "yes" is in most pages. Items imported
from an archive (`bench --import`, as `bench_queue.py` does on a fresh machine) carry their scores but
not their runs: they are counted, said under the table and left out of the shares, unless a file
of kept traces has them (`--keep FILE`: each call adds the runs it reads; `bench_queue.py` keeps one
for each FGDIP archive, `benchmarks/results/traces/<archive's name>`, so a benchmark continued across
machines is read whole).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

METHOD = "fgdip"


def run_trace(nodes: Iterable[Any], golds: Sequence[str], *, yes_no: bool) -> dict[str, Any]:
    """One run's numbers from its stored nodes (storage.models.Node rows of an FGDIP run)."""
    from engine.evaluate.metrics import exact_match, normalize_answer
    from engine.methods.fgdip.kinds import ANSWER, ENTITY, STEP, AnswerData, EntityData, StepData

    steps, answers = [], []
    for node in nodes:
        if node.kind in (ENTITY, STEP):  # an entity's node is its branch's first step
            steps.append((EntityData if node.kind == ENTITY else StepData).model_validate(node.data or {}))
        elif node.kind == ANSWER:
            answers.append(AnswerData.model_validate(node.data or {}))
    observed = normalize_answer(" ".join(s.observation or "" for s in steps))
    wanted = [g for g in (normalize_answer(g) for g in golds) if g]
    reported = next((a for a in answers if a.reported), None)
    return {
        "gold_observed": None if yes_no else any(f" {g} " in f" {observed} " for g in wanted),
        "candidate_em": any(exact_match(a.short_answer, golds) for a in answers),
        "reported_em": bool(reported and exact_match(reported.short_answer, golds)),
        "candidates": len(answers),
        "accepted": sum(a.verdict == "accepted" for a in answers),
        "judged": sum(a.verdict in ("accepted", "rejected") for a in answers),
        "steps": len(steps),
        "sure": sum(s.verdict == "sure" for s in steps),
        "maybe": sum(s.verdict == "maybe" for s in steps),
        "impossible": sum(s.verdict == "impossible" for s in steps),
        "backtracks": sum(s.backtrack_from is not None for s in steps),
        "answer_words": len(reported.short_answer.split()) if reported else None,
    }


def summarise(traces: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The runs' shares and means (a share of runs, of candidates or of judged steps)."""

    def share(part: float, whole: float) -> float | None:
        return round(part / whole, 3) if whole else None

    observed = [t["gold_observed"] for t in traces if t["gold_observed"] is not None]
    judged_steps = sum(t["sure"] + t["maybe"] + t["impossible"] for t in traces)
    words = [t["answer_words"] for t in traces if t["answer_words"] is not None]
    return {
        "runs": len(traces),
        "gold_observed": share(sum(observed), len(observed)),
        "candidate_em": share(sum(t["candidate_em"] for t in traces), len(traces)),
        "reported_em": share(sum(t["reported_em"] for t in traces), len(traces)),
        "candidates_per_run": round(statistics.fmean(t["candidates"] for t in traces), 2) if traces else None,
        "accepted": share(sum(t["accepted"] for t in traces), sum(t["judged"] for t in traces)),
        "sure": share(sum(t["sure"] for t in traces), judged_steps),
        "maybe": share(sum(t["maybe"] for t in traces), judged_steps),
        "impossible": share(sum(t["impossible"] for t in traces), judged_steps),
        "backtracks_per_run": round(statistics.fmean(t["backtracks"] for t in traces), 2) if traces else None,
        "median_answer_words": statistics.median(words) if words else None,
    }


def _stored(repo: Any, run_id: str) -> bool:
    from storage.repository import RunNotFound

    try:
        repo.get_run(run_id)
    except RunNotFound:
        return False
    return True


def read_kept(path: Path, benchmark_id: str) -> dict[str, dict[str, Any]]:
    """The per-run traces a `--keep` file holds for this benchmark (none when it does not exist)."""
    if not path.exists():
        return {}
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        runs = kept["runs"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"{path} is not a file of kept FGDIP traces ({exc}); move it away") from exc
    if kept.get("benchmark") != benchmark_id:
        raise SystemExit(f"{path} keeps the traces of benchmark {kept.get('benchmark')}, not {benchmark_id}")
    return dict(runs)


def write_kept(path: Path, benchmark_id: str, runs: dict[str, dict[str, Any]]) -> None:
    """Written whole or not at all: a stop half-way through must not leave a file every later call refuses."""
    body = {"benchmark": benchmark_id, "method": METHOD, "runs": dict(sorted(runs.items()))}
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")
    os.replace(partial, path)


def measure(benchmark_id: str, by: str = "", keep: Path | None = None) -> dict[str, Any]:
    """Every finished FGDIP item of the benchmark, grouped by the item field `by` (or all together).
    With `keep`, a file of per-run traces that outlives the database: the traces read here are added
    to it, and the runs it holds that are not stored here (a benchmark continued on another
    machine from its archive) are counted as read from it."""
    from engine.config import load_settings
    from engine.evaluate.datasets import get_dataset, items_by_id
    from engine.evaluate.results import item_groups
    from engine.services import build_services

    services = build_services(load_settings())
    try:
        bench = services.benchmarks.store.get_benchmark(benchmark_id)
        if METHOD not in bench.methods:
            raise SystemExit(f"benchmark {benchmark_id} ran {', '.join(bench.methods)}, not {METHOD}")
        yes_no = get_dataset(bench.dataset).answer_type == "yesno"
        finished = [
            row
            for row in services.benchmarks.store.list_items(benchmark_id, method=METHOD)
            if row.status in ("scored", "failed")
        ]
        # An item imported from an archive carries its scores, not its run (the search tree stays in
        # the database that ran it): those are counted, said, and left out of the shares.
        stored = [row for row in finished if row.run_id is not None and _stored(services.repo, row.run_id)]
        items = items_by_id(bench.dataset, [row.item_id for row in stored])
        traces = {
            row.item_id: run_trace(services.repo.list_nodes(row.run_id), items[row.item_id].answers, yes_no=yes_no)
            for row in stored
        }
        if keep is not None:
            finished_ids = {row.item_id for row in finished}
            # A run read here wins over the kept reading of it; an item no longer finished is left out.
            traces = {
                item: trace
                for item, trace in {**read_kept(keep, benchmark_id), **traces}.items()
                if item in finished_ids
            }
            write_kept(keep, benchmark_id, traces)
        rows = [row for row in finished if row.item_id in traces]
        groups: dict[
            str, list[dict[str, Any]]
        ] = {}  # as `bench --show` groups them: the values in the dataset's order (easy, medium, hard)
        for value, ids in item_groups(bench, rows, by or None).items():
            groups[value or "all"] = [traces[row.item_id] for row in rows if ids is None or row.item_id in ids]
        return {
            "benchmark": benchmark_id,
            "dataset": bench.dataset,
            "llm": bench.llm_info.get("model", ""),
            "finished": len(finished),
            "read": len(rows),
            "from_kept": len(rows) - len(stored),
            "groups": {key: summarise(traces) for key, traces in groups.items()},
        }
    finally:
        services.close()


_COLUMNS = (
    ("runs", "Runs"),
    ("gold_observed", "Gold in an observation"),
    ("candidate_em", "A candidate matched"),
    ("reported_em", "Reported matched"),
    ("candidates_per_run", "Candidates per run"),
    ("accepted", "Accepted"),
    ("sure", "Sure"),
    ("maybe", "Maybe"),
    ("impossible", "Impossible"),
    ("backtracks_per_run", "Backtracks per run"),
    ("median_answer_words", "Answer words (median)"),
)


_COUNTS = ("runs", "candidates_per_run", "backtracks_per_run", "median_answer_words")


def _cell(name: str, value: Any) -> str:
    if value is None:
        return "—"
    return f"{value:g}" if name in _COUNTS else f"{value:.3f}".replace("0.", ".", 1)  # a share: .530


def markdown(result: dict[str, Any]) -> str:
    lines = ["| Group | " + " | ".join(title for _, title in _COLUMNS) + " |", "| --- |" + " ---: |" * len(_COLUMNS)]
    for key, row in result["groups"].items():
        lines.append(f"| {key} | " + " | ".join(_cell(name, row[name]) for name, _ in _COLUMNS) + " |")
    missing = result.get("finished", 0) - result.get("read", 0)
    kept = result.get("from_kept", 0)
    if kept > 0:
        lines += [
            "",
            f"{kept} of the {result['read']} runs read come from the kept traces (`--keep`), read where they ran.",
        ]
    if missing > 0:
        lines += [
            "",
            f"Read {result['read']} of {result['finished']} finished {METHOD} item runs: the other {missing} "
            "have no run stored in this database (an item imported from an archive carries its scores, not its "
            "search tree; a deleted run is gone). Run this where the benchmark ran, or keep the traces as it "
            "runs (`--keep`).",
        ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("benchmark", help="a stored benchmark that ran fgdip (thoughtmap bench --list)")
    parser.add_argument("--by", default="", help="an item field to group by, such as level")
    parser.add_argument("--json", dest="json_out", help="also write the numbers to this file")
    parser.add_argument(
        "--keep",
        type=Path,
        help="a file of per-run traces kept beside the benchmark's archive: "
        "the runs read here are added to it, and its runs not stored here are counted",
    )
    args = parser.parse_args(argv)
    result = measure(args.benchmark, args.by, args.keep)
    print(markdown(result))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
