"""Single-run judges: a score per criterion, and key-point factuality.

- `omnithink` (OmniThink paper, Appendix B, Figure 10): relevance, breadth, depth and novelty on
  1-5, each graded in its own call with the paper's score descriptions (in our words).
- `deepresearch` (deep research paper §3.1 and Appendix A, Figures 7-8): clarity and
  insightfulness on the paper's 0-10 scale (its prompts ask for 0, poor, to 10, excellent), each in
  its own call; and key-point factuality (Figure 6, KPR): up to 10 key points extracted from
  reference documents (the item's reference text, else the documents the run retrieved), each judged
  supported / omitted / contradicted by the report in its own call; factuality is the share of
  key points supported, out of those validly judged.

A criterion whose answer stays invalid after the bounded re-asks has no score and is counted
invalid; it never counts as a zero (that would be the judge's failure charged to the run).
Calls use the purpose `judge_rubric` (THOUGHTMAP_MODEL_JUDGE_RUBRIC, else THOUGHTMAP_MODEL_JUDGE).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, Field, computed_field

from engine.citations import strip_markers
from engine.evaluate.judge_prompts import KEY_POINT_CHECK, KEY_POINTS, RUBRIC_OMNITHINK, SCORE_DEEPRESEARCH, quoted
from engine.evaluate.run_report import JudgedRun
from engine.evaluate.verdicts import save_verdict
from engine.llm.counted import EvalLLM, EvalUsage
from engine.llm.protocol import StructuredOutputError
from engine.llm.schema_tools import at_most
from engine.safe_text import shown_text
from storage.evaluation import EvaluationStore

RUBRIC_PURPOSE = "judge_rubric"
KEY_POINT_LIMIT = 10  # the paper samples 10 key points per question
DOCUMENT_CHARS = 3000  # of each reference document shown to the key-point extractor
MAX_DOCUMENTS = 8


class OmniThinkGrade(BaseModel):
    feedback: str = Field(min_length=1, description="How the article meets the criterion, briefly.")
    score: int = Field(ge=1, le=5, description="The score (1-5) whose description fits best.")


class DeepResearchRating(BaseModel):
    reason: str = Field(min_length=1, description="The main strengths and weaknesses on this criterion, briefly.")
    rating: int = Field(ge=0, le=10, description="0 (poor) to 10 (excellent).")


class KeyPoints(BaseModel):
    key_points: Annotated[list[str], at_most(KEY_POINT_LIMIT)] = Field(
        description="Self-contained factual statements from the documents that bear on the question."
    )


class KeyPointLabel(BaseModel):
    label: Literal["supported", "omitted", "contradicted"]


@dataclass(frozen=True)
class ScaleCriterion:
    key: str
    title: str
    question: str
    levels: tuple[str, ...]  # the description of each score, lowest first (omnithink)


OMNITHINK_CRITERIA = (
    ScaleCriterion(
        "relevance",
        "Relevance and focus",
        "Does the article stay relevant and focused on the topic?",
        (
            "Very poor focus: wanders far from the topic, with many irrelevant detours.",
            "Poor focus: some relevant material, but many sections drift away from the topic.",
            "Moderate focus: mostly on topic, with occasional digressions that are still of some use.",
            "Good focus: relevant throughout, its few digressions add value.",
            "Excellent focus: consistently relevant, even where it explores related but pertinent aspects.",
        ),
    ),
    ScaleCriterion(
        "breadth",
        "Breadth",
        "Does the article cover the topic broadly?",
        (
            "Severely lacking: covers little or none of the topic's main aspects; a very narrow view.",
            "Partial: covers some main aspects and misses others; an incomplete picture.",
            "Acceptable: covers most main aspects, with some unneeded detail or a few relevant gaps.",
            "Good: covers every major point, with little that is off the subject.",
            "Exemplary: covers all crucial aspects thoroughly, with nothing irrelevant.",
        ),
    ),
    ScaleCriterion(
        "depth",
        "Depth",
        "How thoroughly does the article explore the topic and related areas?",
        (
            "Very superficial: a basic overview with large gaps.",
            "Superficial: some detail, but many important aspects are not explored.",
            "Moderate: covers the key aspects, some of them without detailed exploration.",
            "Good: explores most aspects in detail, with minor gaps.",
            "Excellent: explores every relevant aspect thoroughly and in detail.",
        ),
    ),
    ScaleCriterion(
        "novelty",
        "Novelty",
        "Does the article bring in aspects related to the topic that a reader would not directly expect?",
        (
            "None: sticks strictly to the obvious reading of the topic, no further insight.",
            "Minimal: a few new aspects, loosely related to the topic.",
            "Moderate: some new aspects that are somewhat related to the topic.",
            "Good: several new aspects that deepen the understanding of the topic.",
            "Excellent: many new, highly relevant aspects that clearly enrich the topic.",
        ),
    ),
)

DEEPRESEARCH_CRITERIA = (
    ScaleCriterion(
        "clarity",
        "Clarity",
        "How clear, rigorous and analytically distinct is the answer? It should read as an in-depth "
        "report that addresses the question directly, in clearly marked sections or paragraphs with a "
        "strong logical flow. Every point must be a distinct, self-contained idea: penalise each overlap, "
        "repetition or point that is a subset or rephrasing of another, however it is titled or worded; "
        "the more such points, the lower the score. Variety of form does not make up for repeated "
        "substance. No ambiguity, padding or conversational filler.",
        (),
    ),
    ScaleCriterion(
        "insightfulness",
        "Insightfulness",
        "How insightful is the answer? Excellent answers go beyond common knowledge: original synthesis, "
        "less obvious but relevant connections, a reframing that makes the reader think. Recommendations "
        "must be concrete, actionable and realistic, ideally backed by real examples (who did it, what "
        "they did, what came of it, how). Vague, idealistic or non-operational suggestions cannot score "
        "above 8. Practical applicability comes first.",
        (),
    ),
)


class CriterionScore(BaseModel):
    score: int | None = Field(description="None when the judge's answer stayed invalid.")
    reason: str = ""
    error: str = ""


class RubricResult(BaseModel):
    protocol: str
    run_id: str
    scale: tuple[int, int]
    criteria: dict[str, CriterionScore]
    valid: int
    invalid: int
    factuality: KeyPointResult | None = None


class KeyPointCheck(BaseModel):
    key_point: str
    label: Literal["supported", "omitted", "contradicted"] | None = Field(description="None: invalid answer.")


class KeyPointResult(BaseModel):
    """Key-point factuality: `factuality` is supported / validly judged key points (None without any)."""

    reference: Literal["item", "sources", "none"]
    checks: list[KeyPointCheck] = Field(default_factory=list)
    supported: int = 0
    omitted: int = 0
    contradicted: int = 0
    invalid: int = 0
    extraction_error: str = ""

    @computed_field  # type: ignore[prop-decorator]  # mypy cannot type a decorated property (mypy#1362)
    @property
    def factuality(self) -> float | None:
        judged = self.supported + self.omitted + self.contradicted
        return self.supported / judged if judged else None


RubricResult.model_rebuild()


def _report_for_judge(run: JudgedRun) -> str:
    return run.answer_text()


def grade_omnithink(llm: EvalLLM, question: str, run: JudgedRun) -> RubricResult:
    """The OmniThink rubric: one call per criterion, 1-5."""
    article = quoted("ARTICLE", _report_for_judge(run))
    scores = {}
    for criterion in OMNITHINK_CRITERIA:
        scale = "\n".join(f"{n}: {text}" for n, text in enumerate(criterion.levels, start=1))
        messages = RUBRIC_OMNITHINK.render(
            question=" ".join(question.split()),
            article=article,
            criterion=f"{criterion.title}. {criterion.question}",
            scale=scale,
        )
        try:
            grade = llm.ask(messages, OmniThinkGrade, purpose=RUBRIC_PURPOSE)
            scores[criterion.key] = CriterionScore(score=grade.score, reason=grade.feedback)
        except StructuredOutputError as exc:
            scores[criterion.key] = CriterionScore(score=None, error=str(exc))
    return _result("omnithink.rubric", run, (1, 5), scores)


def grade_deepresearch(
    llm: EvalLLM, question: str, run: JudgedRun, *, reference_documents: Sequence[tuple[str, str]] | None = None
) -> RubricResult:
    """Clarity and insightfulness (0-10, one call each) and key-point factuality. The key points come
    from `reference_documents` ((title, text) pairs: the item's reference) when given, else from the
    run's own sources (weaker: it measures what the run kept of what it read, not of the truth)."""
    answer = quoted("ANSWER", _report_for_judge(run))
    scores = {}
    for criterion in DEEPRESEARCH_CRITERIA:
        messages = SCORE_DEEPRESEARCH.render(
            question=" ".join(question.split()),
            answer=answer,
            criterion=criterion.title,
            description=criterion.question,
        )
        try:
            rating = llm.ask(messages, DeepResearchRating, purpose=RUBRIC_PURPOSE)
            scores[criterion.key] = CriterionScore(score=rating.rating, reason=rating.reason)
        except StructuredOutputError as exc:
            scores[criterion.key] = CriterionScore(score=None, error=str(exc))
    reference: Literal["item", "sources", "none"]
    if reference_documents:
        documents, reference = list(reference_documents), "item"
    else:
        documents = [(s.title, s.text or s.snippet) for s in run.sources.values() if (s.text or s.snippet).strip()]
        reference = "sources" if documents else "none"
    result = _result("deepresearch.rubric", run, (0, 10), scores)
    result.factuality = key_point_factuality(llm, question, run, documents, reference)
    return result


def key_point_factuality(
    llm: EvalLLM,
    question: str,
    run: JudgedRun,
    documents: Sequence[tuple[str, str]],
    reference: Literal["item", "sources", "none"],
) -> KeyPointResult:
    if not documents:
        return KeyPointResult(reference="none")
    shown = "\n\n".join(
        quoted(f"DOCUMENT {n}", f"{title}\n{text[:DOCUMENT_CHARS]}")
        for n, (title, text) in enumerate(documents[:MAX_DOCUMENTS], start=1)
    )
    try:
        extracted = llm.ask(
            KEY_POINTS.render(question=" ".join(question.split()), documents=shown, limit=KEY_POINT_LIMIT),
            KeyPoints,
            purpose=RUBRIC_PURPOSE,
        )
    except StructuredOutputError as exc:
        return KeyPointResult(reference=reference, extraction_error=str(exc))
    # The report without its citation markers: the check is about content, not about citing.
    report = quoted("REPORT", shown_text(strip_markers(run.report)))
    result = KeyPointResult(reference=reference)
    for point in dict.fromkeys(p.strip() for p in extracted.key_points if p.strip()):
        try:
            label = llm.ask(
                KEY_POINT_CHECK.render(key_point=quoted("KEY POINT", point), report=report),
                KeyPointLabel,
                purpose=RUBRIC_PURPOSE,
            ).label
        except StructuredOutputError:
            label = None
        result.checks.append(KeyPointCheck(key_point=point, label=label))
        if label is None:
            result.invalid += 1
        else:
            setattr(result, label, getattr(result, label) + 1)
    return result


def _result(protocol: str, run: JudgedRun, scale: tuple[int, int], scores: dict[str, CriterionScore]) -> RubricResult:
    invalid = sum(s.score is None for s in scores.values())
    return RubricResult(
        protocol=protocol, run_id=run.run_id, scale=scale, criteria=scores, valid=len(scores) - invalid, invalid=invalid
    )


RUBRICS = {"omnithink": grade_omnithink, "deepresearch": grade_deepresearch}


def grade_and_store(
    store: EvaluationStore,
    llm: EvalLLM,
    rubric: str,
    question: str,
    run: JudgedRun,
    *,
    benchmark_id: str | None = None,
    **options: object,
) -> RubricResult:
    """Grade one run with a rubric (`omnithink` or `deepresearch`) and store it as a judgment."""
    if rubric not in RUBRICS:
        raise ValueError(f"unknown rubric '{rubric}'. Choose one of: {', '.join(RUBRICS)}")
    usage = EvalUsage()
    result = RUBRICS[rubric](llm.with_usage(usage), question, run, **options)
    save_verdict(
        store,
        usage,
        result,
        run_a=run.run_id,
        run_b=None,
        protocol=result.protocol,
        model=llm.model_for(RUBRIC_PURPOSE),
        benchmark_id=benchmark_id,
    )
    return result


__all__ = [
    "DEEPRESEARCH_CRITERIA",
    "OMNITHINK_CRITERIA",
    "RUBRICS",
    "RUBRIC_PURPOSE",
    "CriterionScore",
    "KeyPointResult",
    "RubricResult",
    "grade_and_store",
    "grade_deepresearch",
    "grade_omnithink",
    "key_point_factuality",
]
