"""`thoughtmap judge`: the evaluation judges on stored runs, from the terminal.

- `judge RUN_A RUN_B [--protocol deot|mtqa]`: pairwise, both orders, per-criterion verdicts and win rates;
- `judge RUN [--claims] [--rubric omnithink|deepresearch]`: one run (claim support by default).

Every verdict is stored (judgments table). Stored and model text is printed through
`engine.safe_text`, so it cannot drive the terminal.
"""

from __future__ import annotations

from engine.evaluate.accounting import EvalLLM, EvalUsage
from engine.evaluate.claims import CLAIMS_PURPOSE, ClaimSupportResult, check_and_store
from engine.evaluate.claims import PROTOCOL as CLAIMS_PROTOCOL
from engine.evaluate.judges import PAIRWISE_PROTOCOLS, PAIRWISE_PURPOSE, PairwiseResult, get_protocol, judge_and_store, summarize
from engine.evaluate.rubrics import RUBRIC_PURPOSE, RUBRICS, RubricResult, grade_and_store
from engine.evaluate.run_report import JudgeInputError, load_judged_run
from engine.safe_text import one_line

JUDGE_HELP = (
    "Judge models: THOUGHTMAP_MODEL_JUDGE_PAIRWISE, THOUGHTMAP_MODEL_JUDGE_RUBRIC and THOUGHTMAP_MODEL_JUDGE_CLAIMS "
    "pick the model of each judge role; a role without one uses THOUGHTMAP_MODEL_JUDGE, else THOUGHTMAP_MODEL. "
    "Judge calls are counted with the verdict, never in the judged runs' own cost. Exit codes: 0 judged, "
    "1 the judge's answers stayed invalid or the endpoint failed, 2 bad input (unknown run, no report, "
    "runs of different questions)."
)


def add_judge_parser(sub) -> None:
    judge = sub.add_parser("judge", help="judge stored runs: compare two, or check one's claims and scores",
                           description="Compare two runs of the same question (pairwise, both orders), or "
                           "judge one run: claim support of its citations (default) and/or a rubric.",
                           epilog=JUDGE_HELP)
    judge.add_argument("runs", nargs="+", metavar="RUN", help="one run id (or prefix), or two to compare")
    judge.add_argument("--protocol", choices=sorted(PAIRWISE_PROTOCOLS), default=None,
                       help="two runs: deot (DEoT's five criteria + overall, default) or mtqa "
                       "(comprehensiveness, accuracy, empowerment, overall)")
    judge.add_argument("--claims", action="store_true",
                       help="one run: check every cited sentence against its source (the default without --rubric)")
    judge.add_argument("--rubric", choices=sorted(RUBRICS), default=None,
                       help="one run: omnithink (relevance, breadth, depth, novelty 1-5) or deepresearch "
                       "(clarity, insightfulness 0-10, key-point factuality)")
    judge.add_argument("--llm", choices=["auto", "local", "openai", "fake"], default=None,
                       help="the judge's LLM (default: THOUGHTMAP_LLM or auto); fake is deterministic")
    judge.add_argument("--quiet", action="store_true", help="no LLM notes on stderr")


def cmd_judge(args) -> int:
    from engine import cli  # the shared CLI helpers (imported here: cli imports this module)
    from storage.evaluation import EvaluationStore

    if len(args.runs) > 2:
        raise cli.CLIError("give one run to judge, or two runs to compare")
    pair = len(args.runs) == 2
    if pair and (args.claims or args.rubric):
        raise cli.CLIError("--claims and --rubric judge one run; to compare two runs use --protocol")
    if not pair and args.protocol:
        raise cli.CLIError("--protocol compares two runs: give two run ids")
    services = cli._services()
    try:
        runs = [load_judged_run(services.repo, run_id) for run_id in args.runs]
    except JudgeInputError as exc:
        raise cli.CLIError(str(exc)) from exc
    kind = cli._choose_llm(args.llm, services)
    cli._prepare_llm(services, kind, args.quiet)
    llm = EvalLLM(services.llm(kind), services.prices, EvalUsage())
    store = EvaluationStore(services.db)
    if pair:
        return _compare(cli, store, llm, args.protocol or "deot", *runs)
    code = cli.EXIT_OK
    if args.claims or not args.rubric:
        code = max(code, _claims(cli, check_and_store(store, llm, runs[0]), llm.model_for(CLAIMS_PURPOSE)))
        _usage(cli, store, runs[0].run_id, CLAIMS_PROTOCOL)
    if args.rubric:
        result = grade_and_store(store, llm, args.rubric, runs[0].question, runs[0])
        code = max(code, _rubric(cli, result, llm.model_for(RUBRIC_PURPOSE)))
        _usage(cli, store, runs[0].run_id, result.protocol)
    return code


def _compare(cli, store, llm: EvalLLM, protocol_name: str, run_a, run_b) -> int:
    protocol = get_protocol(protocol_name)
    if " ".join(run_a.question.split()).lower() != " ".join(run_b.question.split()).lower():
        raise cli.CLIError(f"runs {run_a.run_id} and {run_b.run_id} answer different questions; a pairwise "
                           "judge compares two answers to the same question")
    result: PairwiseResult = judge_and_store(store, llm, protocol, run_a.question, run_a, run_b)
    say = cli._say
    say(f"{protocol.title} ({protocol.judgment_protocol}); judge {one_line(llm.model_for(PAIRWISE_PURPOSE))}")
    say(f"A = run {run_a.run_id}   B = run {run_b.run_id}")
    say(f"question  {one_line(run_a.question)[:200]}")
    if not result.valid:
        for round_ in result.rounds:
            if not round_.valid:
                cli._err(f"order {_order(round_.order)}: {round_.error}")
        cli._err("the judge's answers stayed invalid, so this comparison counts for no one. Use a stronger judge "
                 "model (THOUGHTMAP_MODEL_JUDGE_PAIRWISE) or THOUGHTMAP_STRUCTURED_MODE=prompted")
        return cli.EXIT_FAILED
    summary = summarize(protocol, [result])
    say(f"{'criterion':<20} {'(A,B)':<6} {'(B,A)':<6} {'verdict':<8} {'win rate A':>10} {'win rate B':>10}")
    for criterion in protocol.criteria:
        key = criterion.key
        first, second = (r.criteria[key].winner for r in result.rounds)
        tally = summary.criteria[key]
        say(f"{key:<20} {_side(first):<6} {_side(second):<6} {_side(result.criteria[key].winner):<8} "
            f"{tally.a_win_rate:>10.0%} {tally.b_win_rate:>10.0%}")
    say("reasons")
    for criterion in protocol.criteria:
        for round_ in result.rounds:
            verdict = round_.criteria[criterion.key]
            say(f"  {criterion.key} {_order(round_.order)} -> {_side(verdict.winner)}: {one_line(verdict.reason)[:300]}")
    ties = sum(v.winner == "tie" for v in result.criteria.values())
    say(f"comparisons: {summary.valid} valid, {summary.invalid} invalid; {ties} of {len(protocol.criteria)} "
        "criteria tied (a verdict that flips with the order is a tie; win rate = points over both orders, "
        "a tie half a point each)")
    _usage(cli, store, run_a.run_id, protocol.judgment_protocol)
    return cli.EXIT_OK


def _claims(cli, result: ClaimSupportResult, model: str) -> int:
    say = cli._say
    say(f"claim support of run {result.run_id}; judge {one_line(model)}")
    say(f"{len(result.sentences)} cited sentences, {result.markers} citations: {result.supported} supported, "
        f"{result.not_supported} not supported, {result.contradicted} contradicted, {result.dangling} dangling "
        f"(cite no source of the run), {result.invalid} not judged (invalid answers)")
    rate = "n/a (nothing checked)" if result.support_rate is None else \
        f"{result.support_rate:.1%} ({result.supported} of {result.checked} checked)"
    say(f"support rate {rate}; unsupported-citation rate {result.citation_error_rate:.1%}")
    for sentence in result.sentences:
        marks = ", ".join(f"S{c.source_id} {c.status}" for c in sentence.citations)
        say(f"  #{sentence.number} [{marks}] {one_line(sentence.text)[:160]}")
        for citation in sentence.citations:
            if citation.reason and citation.status != "supported":
                say(f"      S{citation.source_id}: {one_line(citation.reason)[:240]}")
    if result.invalid and not result.checked:
        cli._err("every claim check came back invalid: use a stronger judge model (THOUGHTMAP_MODEL_JUDGE_CLAIMS) "
                 "or THOUGHTMAP_STRUCTURED_MODE=prompted")
        return cli.EXIT_FAILED
    return cli.EXIT_OK


def _rubric(cli, result: RubricResult, model: str) -> int:
    say = cli._say
    low, high = result.scale
    say(f"{result.protocol} of run {result.run_id} ({low}-{high}); judge {one_line(model)}")
    for key, score in result.criteria.items():
        shown = "invalid" if score.score is None else f"{score.score}/{high}"
        say(f"  {key:<16} {shown:<8} {one_line(score.reason or score.error)[:240]}")
    if result.factuality is not None:
        facts = result.factuality
        value = "n/a" if facts.factuality is None else f"{facts.factuality:.0%}"
        say(f"  key-point factuality {value}: {facts.supported} supported, {facts.omitted} omitted, "
            f"{facts.contradicted} contradicted, {facts.invalid} invalid (key points from: {facts.reference})")
    if result.valid == 0:
        cli._err("every rubric answer stayed invalid: use a stronger judge model (THOUGHTMAP_MODEL_JUDGE_RUBRIC)")
        return cli.EXIT_FAILED
    return cli.EXIT_OK


def _usage(cli, store, run_id: str, protocol: str) -> None:
    """What the judgment just stored cost (counted with it, not with the judged runs)."""
    row = store.list_judgments(run_id=run_id, protocol=protocol)[-1]
    cli._err(f"judge calls: {row.calls}, {row.prompt_tokens}+{row.completion_tokens} tokens, ${row.cost:.4f}; "
             f"stored as judgment {row.id}")


def _order(order: str) -> str:
    return "(A,B)" if order == "ab" else "(B,A)"


def _side(side: str) -> str:
    return {"a": "A", "b": "B"}.get(side, "tie")


__all__ = ["add_judge_parser", "cmd_judge"]
