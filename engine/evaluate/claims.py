"""The harness's claim-support judge: `engine/claim_support.py`'s check, its calls counted into an
`EvalUsage` and its result stored as a judgment with protocol `claim_support`."""

from __future__ import annotations

from engine.claim_support import CLAIMS_PURPOSE, PROTOCOL, ClaimSupportResult, JudgedRun, check_claims
from engine.evaluate.verdicts import save_verdict
from engine.llm.counted import EvalLLM, EvalUsage
from storage.evaluation import EvaluationStore


def check_and_store(
    store: EvaluationStore, llm: EvalLLM, run: JudgedRun, *, benchmark_id: str | None = None
) -> ClaimSupportResult:
    usage = EvalUsage()
    result = check_claims(llm.with_usage(usage), run)
    save_verdict(
        store,
        usage,
        result,
        run_a=run.run_id,
        run_b=None,
        protocol=PROTOCOL,
        model=llm.model_for(CLAIMS_PURPOSE),
        benchmark_id=benchmark_id,
    )
    return result


__all__ = ["CLAIMS_PURPOSE", "PROTOCOL", "ClaimSupportResult", "check_and_store", "check_claims"]
