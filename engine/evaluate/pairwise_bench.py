"""Methods compared head to head on a benchmark's items: for every item, the first method's run
against each other method's run on the same question, judged in both orders (judges.py), then win
rates per criterion over the items, as the DEoT paper reports them. Verdicts already stored for a
pair of runs are read back, not asked again, so a comparison interrupted half-way continues."""

from __future__ import annotations

from dataclasses import dataclass

from engine.evaluate.judges import PairwiseResult, PairwiseSummary, get_protocol, judge_and_store, summarize
from engine.evaluate.run_report import load_judged_run
from engine.llm.counted import EvalLLM
from engine.safe_text import inline_text
from storage.evaluation import EvaluationStore, ItemStatus
from storage.repository import Repository


@dataclass
class PairComparison:
    method_a: str
    method_b: str
    summary: PairwiseSummary
    # Items finished by both where either run failed: no report to judge, so left out (said under
    # the table: a method that fails often is judged on the items it could do).
    skipped_failed: int = 0


def compare_methods(
    store: EvaluationStore, repo: Repository, llm: EvalLLM, benchmark_id: str, protocol_name: str = "deot"
) -> list[PairComparison]:
    bench = store.get_benchmark(benchmark_id)
    protocol = get_protocol(protocol_name)
    if len(bench.methods) < 2:
        raise ValueError(f"benchmark {bench.id} has one method ({bench.methods[0]}); a comparison needs two")
    rows = store.list_items(bench.id)
    answered = {(r.item_id, r.method): r.run_id for r in rows if r.status == ItemStatus.SCORED and r.run_id}
    finished = {(r.item_id, r.method) for r in rows if r.status in ItemStatus.FINISHED}
    stored = {
        (j.run_a, j.run_b): j for j in store.list_judgments(benchmark_id=bench.id, protocol=protocol.judgment_protocol)
    }
    baseline, *others = bench.methods
    comparisons = []
    for other in others:
        results, skipped = [], 0
        for item_id in dict.fromkeys(r.item_id for r in rows):
            run_a, run_b = answered.get((item_id, baseline)), answered.get((item_id, other))
            if not (run_a and run_b):
                # A method that answered nothing has no report to compare.
                skipped += (item_id, baseline) in finished and (item_id, other) in finished
                continue
            if (run_a, run_b) in stored:
                results.append(PairwiseResult.model_validate(stored[(run_a, run_b)].verdict))
                continue
            judged_a, judged_b = load_judged_run(repo, run_a), load_judged_run(repo, run_b)
            results.append(
                judge_and_store(store, llm, protocol, judged_a.question, judged_a, judged_b, benchmark_id=bench.id)
            )
        comparisons.append(PairComparison(baseline, other, summarize(protocol, results), skipped_failed=skipped))
    return comparisons


def comparisons_markdown(comparisons: list[PairComparison]) -> str:
    lines = []
    for pair in comparisons:
        s = pair.summary
        a, b = inline_text(pair.method_a), inline_text(pair.method_b)
        lines += [
            f"Pairwise ({inline_text(s.protocol)}): {a} vs {b}, {s.valid} valid comparisons of "
            f"{s.comparisons} ({s.invalid} invalid), both orders each.",
            "",
            f"| Criterion | {a} win rate | {b} win rate | {a} wins | {b} wins | ties |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for key, t in s.criteria.items():
            lines.append(
                f"| {inline_text(key)} | {t.a_win_rate:.3f} | {t.b_win_rate:.3f} | {t.a_wins} | {t.b_wins} | {t.ties} |"
            )
        if pair.skipped_failed:
            lines += [
                "",
                f"{pair.skipped_failed} items both finished are left out: one of the two runs failed, "
                "so there was no report to judge.",
            ]
        lines.append("")
    return "\n".join(lines)


__all__ = ["PairComparison", "compare_methods", "comparisons_markdown"]
