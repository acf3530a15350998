"""`thoughtmap judge`: the evaluation judges on stored runs, from the terminal.

- `judge RUN_A RUN_B [--protocol deot|mtqa]`: pairwise, both orders, per-criterion verdicts and win rates;
- `judge RUN [--claims] [--rubric omnithink|deepresearch]`: one run (claim support by default).

Every verdict is stored (judgments table). Stored and model text is printed through
`engine.safe_text`, so it cannot drive the terminal.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from engine.claim_support import JudgedRun
from engine.cli import common
from engine.cli.basics import EXIT_FAILED, EXIT_OK, CLIError
from engine.evaluate.claims import CLAIMS_PURPOSE, ClaimSupportResult, check_and_store
from engine.evaluate.claims import PROTOCOL as CLAIMS_PROTOCOL
from engine.evaluate.judges import (
    PAIRWISE_PURPOSE,
    PairwiseResult,
    get_protocol,
    judge_and_store,
    summarize,
)
from engine.evaluate.rubrics import RUBRIC_PURPOSE, RubricResult, grade_and_store
from engine.evaluate.run_report import JudgeInputError, load_judged_run
from engine.llm.counted import EvalLLM, EvalUsage
from engine.safe_text import one_line

if TYPE_CHECKING:  # only for annotations: imported where first used
    from storage.evaluation import EvaluationStore


def cmd_judge(args: argparse.Namespace) -> int:
    from storage.evaluation import EvaluationStore

    if len(args.runs) > 2:
        raise CLIError("give one run to judge, or two runs to compare")
    pair = len(args.runs) == 2
    if pair and (args.claims or args.rubric):
        raise CLIError("--claims and --rubric judge one run; to compare two runs use --protocol")
    if not pair and args.protocol:
        raise CLIError("--protocol compares two runs: give two run ids")
    services = common.services()
    for run_id in args.runs:  # a verdict is stored with the run: only its owner judges it
        common.run_for(services, args, run_id, change=True)
    try:
        runs = [load_judged_run(services.repo, run_id) for run_id in args.runs]
    except JudgeInputError as exc:
        raise CLIError(str(exc)) from exc
    kind = common.choose_llm(args.llm, services)
    common.prepare_llm(services, kind, args.quiet)
    llm = EvalLLM(services.llm(kind), services.prices, EvalUsage())
    store = EvaluationStore(services.db)
    if pair:
        return _compare(store, llm, args.protocol or "deot", *runs)
    code = EXIT_OK
    if args.claims or not args.rubric:
        code = max(code, _claims(check_and_store(store, llm, runs[0]), llm.model_for(CLAIMS_PURPOSE)))
        _usage(store, runs[0].run_id, CLAIMS_PROTOCOL)
    if args.rubric:
        result = grade_and_store(store, llm, args.rubric, runs[0].question, runs[0])
        code = max(code, _rubric(result, llm.model_for(RUBRIC_PURPOSE)))
        _usage(store, runs[0].run_id, result.protocol)
    return code


def _compare(store: EvaluationStore, llm: EvalLLM, protocol_name: str, run_a: JudgedRun, run_b: JudgedRun) -> int:
    protocol = get_protocol(protocol_name)
    if " ".join(run_a.question.split()).lower() != " ".join(run_b.question.split()).lower():
        raise CLIError(
            f"runs {run_a.run_id} and {run_b.run_id} answer different questions; a pairwise "
            "judge compares two answers to the same question"
        )
    result: PairwiseResult = judge_and_store(store, llm, protocol, run_a.question, run_a, run_b)
    say = common.say
    say(f"{protocol.title} ({protocol.judgment_protocol}); judge {one_line(llm.model_for(PAIRWISE_PURPOSE))}")
    say(f"A = run {run_a.run_id}   B = run {run_b.run_id}")
    say(f"question  {one_line(run_a.question)[:200]}")
    if not result.valid:
        for round_ in result.rounds:
            if not round_.valid:
                common.err(f"order {_order(round_.order)}: {round_.error}")
        common.err(
            "the judge's answers stayed invalid, so this comparison counts for no one. Use a stronger judge "
            "model (THOUGHTMAP_MODEL_JUDGE_PAIRWISE) or THOUGHTMAP_STRUCTURED_MODE=prompted"
        )
        return EXIT_FAILED
    summary = summarize(protocol, [result])
    say(f"{'criterion':<20} {'(A,B)':<6} {'(B,A)':<6} {'verdict':<8} {'win rate A':>10} {'win rate B':>10}")
    for criterion in protocol.criteria:
        key = criterion.key
        first, second = (r.criteria[key].winner for r in result.rounds)
        tally = summary.criteria[key]
        say(
            f"{key:<20} {_side(first):<6} {_side(second):<6} {_side(result.criteria[key].winner):<8} "
            f"{tally.a_win_rate:>10.0%} {tally.b_win_rate:>10.0%}"
        )
    say("reasons")
    for criterion in protocol.criteria:
        for round_ in result.rounds:
            verdict = round_.criteria[criterion.key]
            say(
                f"  {criterion.key} {_order(round_.order)} -> {_side(verdict.winner)}: {one_line(verdict.reason)[:300]}"
            )
    ties = sum(v.winner == "tie" for v in result.criteria.values())
    say(
        f"comparisons: {summary.valid} valid, {summary.invalid} invalid; {ties} of {len(protocol.criteria)} "
        "criteria tied (a verdict that flips with the order is a tie; win rate = points over both orders, "
        "a tie half a point each)"
    )
    _usage(store, run_a.run_id, protocol.judgment_protocol)
    return EXIT_OK


def _claims(result: ClaimSupportResult, model: str) -> int:
    say = common.say
    say(f"claim support of run {result.run_id}; judge {one_line(model)}")
    say(
        f"{len(result.sentences)} cited sentences, {result.markers} citations: {result.supported} supported, "
        f"{result.not_supported} not supported, {result.contradicted} contradicted, {result.dangling} dangling "
        f"(cite no source of the run), {result.invalid} not judged (invalid answers)"
    )
    rate = (
        "n/a (nothing checked)"
        if result.support_rate is None
        else f"{result.support_rate:.1%} ({result.supported} of {result.checked} checked)"
    )
    say(f"support rate {rate}; unsupported-citation rate {result.citation_error_rate:.1%}")
    for sentence in result.sentences:
        marks = ", ".join(f"S{c.source_id} {c.status}" for c in sentence.citations)
        say(f"  #{sentence.number} [{marks}] {one_line(sentence.text)[:160]}")
        for citation in sentence.citations:
            if citation.reason and citation.status != "supported":
                say(f"      S{citation.source_id}: {one_line(citation.reason)[:240]}")
    if result.invalid and not result.checked:
        common.err(
            "every claim check came back invalid: use a stronger judge model (THOUGHTMAP_MODEL_JUDGE_CLAIMS) "
            "or THOUGHTMAP_STRUCTURED_MODE=prompted"
        )
        return EXIT_FAILED
    return EXIT_OK


def _rubric(result: RubricResult, model: str) -> int:
    say = common.say
    low, high = result.scale
    say(f"{result.protocol} of run {result.run_id} ({low}-{high}); judge {one_line(model)}")
    for key, score in result.criteria.items():
        shown = "invalid" if score.score is None else f"{score.score}/{high}"
        say(f"  {key:<16} {shown:<8} {one_line(score.reason or score.error)[:240]}")
    if result.factuality is not None:
        facts = result.factuality
        value = "n/a" if facts.factuality is None else f"{facts.factuality:.0%}"
        say(
            f"  key-point factuality {value}: {facts.supported} supported, {facts.omitted} omitted, "
            f"{facts.contradicted} contradicted, {facts.invalid} invalid (key points from: {facts.reference})"
        )
    if result.valid == 0:
        common.err("every rubric answer stayed invalid: use a stronger judge model (THOUGHTMAP_MODEL_JUDGE_RUBRIC)")
        return EXIT_FAILED
    return EXIT_OK


def _usage(store: EvaluationStore, run_id: str, protocol: str) -> None:
    """What the judgment just stored cost (counted with it, not with the judged runs)."""
    row = store.list_judgments(run_id=run_id, protocol=protocol)[-1]
    common.err(
        f"judge calls: {row.calls}, {row.prompt_tokens}+{row.completion_tokens} tokens, ${row.cost:.4f}; "
        f"stored as judgment {row.id}"
    )


def _order(order: str) -> str:
    return "(A,B)" if order == "ab" else "(B,A)"


def _side(side: str) -> str:
    return {"a": "A", "b": "B"}.get(side, "tie")


__all__ = ["cmd_judge"]
