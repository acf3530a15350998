"""The LLM-judged scores a benchmark adds to an item when asked (`thoughtmap bench --judges ...`):

- `claims`: every cited sentence of the report checked against its source (`claims.py`): the deep
  research paper's citation error rate and the support rate;
- `density`: OmniThink's knowledge density: the report split into atomic knowledge units by the
  judge (FActScore-style, in chunks), duplicates removed, over the report's length in tokens;
- `rubric`: OmniThink's 1-5 rubric on article datasets, the deep research paper's clarity,
  insightfulness and key-point factuality on the others (with the item's reference article as the
  key points' source when it has one).

Each verdict is stored as a judgment of the benchmark with its own usage; the numbers go into the
item's metrics, the cost into its evaluation usage.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

from engine.evaluate import metrics
from engine.evaluate.claims import check_and_store
from engine.evaluate.datasets import Item
from engine.evaluate.judge_prompts import KNOWLEDGE_UNITS, quoted
from engine.evaluate.rubrics import grade_and_store
from engine.evaluate.run_report import JudgedRun
from engine.evaluate.verdicts import save_verdict
from engine.llm.counted import EvalLLM, EvalUsage
from engine.llm.protocol import StructuredOutputError
from engine.llm.schema_tools import at_most
from storage.evaluation import EvaluationStore

ITEM_JUDGES = ("claims", "density", "rubric")
DENSITY_PURPOSE = "judge_density"
CHUNK_CHARS = 3000  # one call per chunk of the report: a small judge's context stays small
MAX_CHUNKS = 8
UNITS_PER_CHUNK = 40
TOKENS_PER_WORD = 4 / 3


class KnowledgeUnits(BaseModel):
    units: Annotated[list[str], at_most(UNITS_PER_CHUNK)] = Field(description="Atomic facts, one short sentence each.")


class DensityResult(BaseModel):
    run_id: str
    units: list[str] = Field(default_factory=list)
    unique_units: int = 0
    tokens: int = 0
    knowledge_density: float = 0.0
    chunks: int = 0
    invalid_chunks: int = 0


def _chunks(text: str) -> list[str]:
    paragraphs = [p.strip() for p in text.split("\n\n") if p.strip()]
    chunks, current = [], ""
    for paragraph in paragraphs:
        if current and len(current) + len(paragraph) > CHUNK_CHARS:
            chunks.append(current)
            current = ""
        current = f"{current}\n\n{paragraph}".strip()
    if current:
        chunks.append(current)
    return chunks[:MAX_CHUNKS]


def knowledge_density(llm: EvalLLM, run: JudgedRun) -> DensityResult:
    text = run.answer_text()
    result = DensityResult(run_id=run.run_id, tokens=round(len(text.split()) * TOKENS_PER_WORD))
    for chunk in _chunks(text):
        result.chunks += 1
        try:
            found = llm.ask(
                KNOWLEDGE_UNITS.render(text=quoted("TEXT", chunk), limit=UNITS_PER_CHUNK),
                KnowledgeUnits,
                purpose=DENSITY_PURPOSE,
            )
        except StructuredOutputError:
            result.invalid_chunks += 1
            continue
        result.units += [u.strip() for u in found.units if u.strip()]
    result.unique_units = len({metrics.normalize_answer(u) for u in result.units})
    result.knowledge_density = metrics.knowledge_density(result.units, result.tokens) if result.tokens else 0.0
    return result


def judge_item(
    store: EvaluationStore, llm: EvalLLM, run: JudgedRun, item: Item, judges: tuple[str, ...], *, benchmark_id: str
) -> tuple[dict[str, Any], EvalUsage]:
    """The asked judges' numbers for one item's run, and what judging it cost."""
    scores: dict[str, Any] = {}
    total = EvalUsage()
    counted = llm.with_usage(total)
    if "claims" in judges:
        claims = check_and_store(store, counted, run, benchmark_id=benchmark_id)
        scores.update(
            support_rate=claims.support_rate,
            citation_error_rate=claims.citation_error_rate,
            claims_checked=claims.checked,
        )
    if "density" in judges:
        usage = EvalUsage()
        density = knowledge_density(counted.with_usage(usage), run)
        save_verdict(
            store,
            usage,
            density,
            run_a=run.run_id,
            run_b=None,
            protocol="omnithink.knowledge_density",
            model=llm.model_for(DENSITY_PURPOSE),
            benchmark_id=benchmark_id,
        )
        scores.update(knowledge_density=density.knowledge_density, knowledge_units=density.unique_units)
    if "rubric" in judges:
        if item.answer_type == "article":
            grade = grade_and_store(store, counted, "omnithink", item.question, run, benchmark_id=benchmark_id)
        else:
            reference = [(item.reference_title, item.reference_text)] if item.reference_text else None
            grade = grade_and_store(
                store,
                counted,
                "deepresearch",
                item.question,
                run,
                benchmark_id=benchmark_id,
                reference_documents=reference,
            )
            if grade.factuality is not None and grade.factuality.factuality is not None:
                scores["factuality"] = grade.factuality.factuality
        for key, score in grade.criteria.items():
            if score.score is not None:
                scores[f"rubric_{key}"] = score.score
    return scores, total


__all__ = ["ITEM_JUDGES", "DensityResult", "judge_item", "knowledge_density"]
