"""Pairwise judges: two runs' answers to one question compared criterion by criterion.

Protocols (criteria in our words, from the papers):
- `deot` (DEoT paper §4.4, Figure 29): analytical depth, specific arguments, innovation,
  practicality, logical coherence, and the overall winner (its "total win rate").
- `mtqa` (MTQA paper §4.3, Figure 10): comprehensiveness, accuracy, empowerment, and overall.

Both orders (DEoT's "Dual Comparison Test"): the judge sees (A, B), then (B, A). Each round gives, per
criterion, 1 point to the run it prefers and 0 to the other, as the DEoT paper scores; a round that
says "tie" gives each run half a point. A run's **win rate** on a criterion is its points divided by
the valid rounds (two per comparison), which is the paper's definition; the combined verdict of a
comparison is the run with more points over its two rounds, so a verdict that flips with the order
(1 point each) is a tie. A comparison whose either round stayed invalid after the bounded re-asks
is counted as invalid and left out of the win rates (half a comparison would bring position bias
back); it is never a win.

Judge calls use the purpose `judge_pairwise` (THOUGHTMAP_MODEL_JUDGE_PAIRWISE, else
THOUGHTMAP_MODEL_JUDGE, else THOUGHTMAP_MODEL) and are counted in the verdict's own `EvalUsage`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, Field, computed_field, create_model

from engine.evaluate.judge_prompts import PAIRWISE_DEOT, PAIRWISE_MTQA, quoted
from engine.evaluate.run_report import JudgedRun
from engine.evaluate.verdicts import save_verdict
from engine.llm.counted import EvalLLM, EvalUsage
from engine.llm.protocol import StructuredOutputError
from engine.prompting import Prompt
from storage.evaluation import EvaluationStore

PAIRWISE_PURPOSE = "judge_pairwise"

Position = Literal["A", "B", "tie"]  # what the judge says: a position in the prompt
Side = Literal["a", "b", "tie"]  # what it means: run A, run B (as given to `judge_pair`), or neither


class CriterionVerdict(BaseModel):
    """One criterion of one round, as the judge answers it."""

    winner: Position = Field(
        description="The better answer on this criterion: A, B, or tie only when they cannot be told apart."
    )
    reason: str = Field(min_length=1, description="Why, pointing at what the answers say.")


@dataclass(frozen=True)
class Criterion:
    key: str
    title: str
    description: str


@dataclass(frozen=True)
class PairwiseProtocol:
    name: str
    title: str
    prompt: Prompt
    criteria: tuple[Criterion, ...]  # the last one is the overall verdict

    @property
    def judgment_protocol(self) -> str:
        return f"{self.name}.pairwise"

    @property
    def overall(self) -> str:
        return self.criteria[-1].key

    @cached_property
    def verdict_model(self) -> type[BaseModel]:
        """The judge's answer for one round: one `CriterionVerdict` per criterion, by key."""
        # Any: mypy would check a spread dict of fields against create_model's own keyword parameters too.
        fields: dict[str, Any] = {
            c.key: (CriterionVerdict, Field(description=f"{c.title}: {c.description}")) for c in self.criteria
        }
        return create_model(f"{self.name.capitalize()}PairwiseVerdict", **fields)

    def criteria_text(self) -> str:
        return "\n".join(f"- {c.key} ({c.title}): {c.description}" for c in self.criteria)


DEOT = PairwiseProtocol(
    "deot",
    "DEoT dual comparison",
    PAIRWISE_DEOT,
    (
        Criterion(
            "analytical_depth",
            "Analytical depth",
            "how well the answer grasps the underlying logic, implications and relationships of the problem "
            "and brings them to a coherent conclusion",
        ),
        Criterion(
            "specific_arguments",
            "Specific arguments",
            "how well claims are backed by relevant data, examples, evidence or historical analogies",
        ),
        Criterion(
            "innovation",
            "Innovation",
            "original, creative insights and approaches that still matter in practice, not theory for its own sake",
        ),
        Criterion(
            "practicality",
            "Practicality",
            "whether the conclusions and proposals could be applied to real decisions, given real constraints "
            "such as resources and context",
        ),
        Criterion(
            "logical_coherence",
            "Logical coherence",
            "clear structure and sound, consistent reasoning, with its parts integrated into one analysis",
        ),
        Criterion("overall", "Overall", "which answer is better on the whole, all criteria considered"),
    ),
)

MTQA = PairwiseProtocol(
    "mtqa",
    "MTQA multidimensional win rate",
    PAIRWISE_MTQA,
    (
        Criterion(
            "comprehensiveness",
            "Comprehensiveness",
            "how much detail the answer gives to cover every aspect of the question",
        ),
        Criterion(
            "accuracy",
            "Accuracy",
            "factual correctness, reliable data and consistent logic across the perspectives it presents",
        ),
        Criterion(
            "empowerment",
            "Empowerment",
            "how well the answer helps the reader understand the topic and make informed judgements",
        ),
        Criterion("overall", "Overall", "the best answer overall, weighing the three criteria above"),
    ),
)

PAIRWISE_PROTOCOLS: dict[str, PairwiseProtocol] = {p.name: p for p in (DEOT, MTQA)}


def get_protocol(name: str) -> PairwiseProtocol:
    try:
        return PAIRWISE_PROTOCOLS[name]
    except KeyError:
        raise ValueError(
            f"unknown pairwise protocol '{name}'. Choose one of: {', '.join(PAIRWISE_PROTOCOLS)}"
        ) from None


# ------------------------------------------------------------------ results


class RoundCriterion(BaseModel):
    winner: Side
    reason: str


class PairwiseRound(BaseModel):
    """One order: `order` "ab" showed run A first, "ba" showed run B first. Verdicts are in runs'
    terms (a, b, tie) whatever the order; `error` says why an invalid round has none."""

    order: Literal["ab", "ba"]
    valid: bool
    criteria: dict[str, RoundCriterion] = Field(default_factory=dict)
    error: str = ""


class CombinedCriterion(BaseModel):
    winner: Side
    a_points: float
    b_points: float


class PairwiseResult(BaseModel):
    """One comparison of run A and run B on one question, both orders."""

    protocol: str
    run_a: str
    run_b: str
    rounds: list[PairwiseRound]
    criteria: dict[str, CombinedCriterion] = Field(default_factory=dict, description="Empty when invalid.")

    @computed_field  # type: ignore[prop-decorator]  # mypy cannot type a decorated property (mypy#1362)
    @property
    def valid(self) -> bool:
        return all(r.valid for r in self.rounds)


_POINTS: dict[str, tuple[float, float]] = {"a": (1.0, 0.0), "b": (0.0, 1.0), "tie": (0.5, 0.5)}


def combine(rounds: Sequence[PairwiseRound], criteria: Sequence[str]) -> dict[str, CombinedCriterion]:
    """Per criterion: the points of each run over the rounds and the combined winner (more points;
    equal points, as when the verdict flips with the order, is a tie)."""
    combined = {}
    for key in criteria:
        a = sum(_POINTS[r.criteria[key].winner][0] for r in rounds)
        b = sum(_POINTS[r.criteria[key].winner][1] for r in rounds)
        combined[key] = CombinedCriterion(winner="a" if a > b else "b" if b > a else "tie", a_points=a, b_points=b)
    return combined


def _ask_round(
    llm: EvalLLM, protocol: PairwiseProtocol, question: str, first: str, second: str, order: Literal["ab", "ba"]
) -> PairwiseRound:
    messages = protocol.prompt.render(
        question=" ".join(question.split()),
        answer_a=quoted("ANSWER A", first),
        answer_b=quoted("ANSWER B", second),
        criteria=protocol.criteria_text(),
    )
    try:
        verdict = llm.ask(messages, protocol.verdict_model, purpose=PAIRWISE_PURPOSE)
    except StructuredOutputError as exc:
        return PairwiseRound(order=order, valid=False, error=str(exc))
    # Position A is run A in the first order and run B in the second.
    as_side: dict[Position, Side] = (
        {"A": "a", "B": "b", "tie": "tie"} if order == "ab" else {"A": "b", "B": "a", "tie": "tie"}
    )
    criteria = {
        c.key: RoundCriterion(winner=as_side[getattr(verdict, c.key).winner], reason=getattr(verdict, c.key).reason)
        for c in protocol.criteria
    }
    return PairwiseRound(order=order, valid=True, criteria=criteria)


def judge_pair(
    llm: EvalLLM, protocol: PairwiseProtocol, question: str, run_a: JudgedRun, run_b: JudgedRun
) -> PairwiseResult:
    """Compare two runs' reports in both orders. Invalid output is a result, not an exception;
    LLMError other than StructuredOutputError (endpoint down, budget) propagates."""
    answer_a, answer_b = run_a.answer_text(), run_b.answer_text()
    rounds = [
        _ask_round(llm, protocol, question, answer_a, answer_b, "ab"),
        _ask_round(llm, protocol, question, answer_b, answer_a, "ba"),
    ]
    result = PairwiseResult(protocol=protocol.judgment_protocol, run_a=run_a.run_id, run_b=run_b.run_id, rounds=rounds)
    if result.valid:
        result.criteria = combine(rounds, [c.key for c in protocol.criteria])
    return result


def judge_and_store(
    store: EvaluationStore,
    llm: EvalLLM,
    protocol: PairwiseProtocol,
    question: str,
    run_a: JudgedRun,
    run_b: JudgedRun,
    *,
    benchmark_id: str | None = None,
) -> PairwiseResult:
    """`judge_pair`, stored as one judgment with what it cost (its own EvalUsage)."""
    usage = EvalUsage()
    result = judge_pair(llm.with_usage(usage), protocol, question, run_a, run_b)
    save_verdict(
        store,
        usage,
        result,
        run_a=run_a.run_id,
        run_b=run_b.run_id,
        protocol=protocol.judgment_protocol,
        model=llm.model_for(PAIRWISE_PURPOSE),
        benchmark_id=benchmark_id,
    )
    return result


# ------------------------------------------------------------------ win rates


class CriterionTally(BaseModel):
    """One criterion over the valid comparisons. Win rates are the DEoT paper's: points over valid
    rounds, a round's tie half a point each; `a_wins`, `b_wins` and `ties` count combined verdicts."""

    a_wins: int = 0
    b_wins: int = 0
    ties: int = 0
    a_points: float = 0.0
    b_points: float = 0.0
    rounds: int = 0

    @computed_field  # type: ignore[prop-decorator]  # mypy cannot type a decorated property (mypy#1362)
    @property
    def a_win_rate(self) -> float:
        return self.a_points / self.rounds if self.rounds else 0.0

    @computed_field  # type: ignore[prop-decorator]  # mypy cannot type a decorated property (mypy#1362)
    @property
    def b_win_rate(self) -> float:
        return self.b_points / self.rounds if self.rounds else 0.0


class PairwiseSummary(BaseModel):
    protocol: str
    comparisons: int
    valid: int
    invalid: int
    criteria: dict[str, CriterionTally]

    @computed_field  # type: ignore[prop-decorator]  # mypy cannot type a decorated property (mypy#1362)
    @property
    def ties(self) -> dict[str, int]:
        return {key: tally.ties for key, tally in self.criteria.items()}


def summarize(protocol: PairwiseProtocol, results: Sequence[PairwiseResult]) -> PairwiseSummary:
    """Win rates of run A's side against run B's side over many comparisons (a benchmark)."""
    tallies = {c.key: CriterionTally() for c in protocol.criteria}
    valid = [r for r in results if r.valid]
    for result in valid:
        for key, tally in tallies.items():
            verdict = result.criteria[key]
            tally.a_points += verdict.a_points
            tally.b_points += verdict.b_points
            tally.rounds += len(result.rounds)
            tally.a_wins += verdict.winner == "a"
            tally.b_wins += verdict.winner == "b"
            tally.ties += verdict.winner == "tie"
    return PairwiseSummary(
        protocol=protocol.judgment_protocol,
        comparisons=len(results),
        valid=len(valid),
        invalid=len(results) - len(valid),
        criteria=tallies,
    )


__all__ = [
    "DEOT",
    "MTQA",
    "PAIRWISE_PROTOCOLS",
    "PAIRWISE_PURPOSE",
    "CombinedCriterion",
    "Criterion",
    "CriterionTally",
    "CriterionVerdict",
    "PairwiseProtocol",
    "PairwiseResult",
    "PairwiseRound",
    "PairwiseSummary",
    "combine",
    "get_protocol",
    "judge_and_store",
    "judge_pair",
    "summarize",
]
