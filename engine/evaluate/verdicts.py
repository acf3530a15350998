"""A judge's result stored as a judgment, with what judging it cost (its own `EvalUsage`, never
the judged run's totals)."""

from __future__ import annotations

from pydantic import BaseModel

from engine.llm.counted import EvalUsage
from storage.evaluation import EvaluationStore
from storage.models import Judgment


def save_verdict(
    store: EvaluationStore,
    usage: EvalUsage,
    result: BaseModel,
    *,
    run_a: str,
    run_b: str | None,
    protocol: str,
    model: str,
    benchmark_id: str | None = None,
) -> Judgment:
    counted = usage.as_dict()
    return store.save_judgment(
        run_a=run_a,
        run_b=run_b,
        protocol=protocol,
        model=model,
        verdict=result.model_dump(mode="json"),
        calls=int(counted["calls"]),
        prompt_tokens=int(counted["prompt_tokens"]),
        completion_tokens=int(counted["completion_tokens"]),
        cost=float(counted["cost"]),
        benchmark_id=benchmark_id,
    )


__all__ = ["save_verdict"]
