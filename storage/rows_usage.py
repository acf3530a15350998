"""LLM calls: recorded one by one, summed per run and per node. (Mixed into `storage.repository.Repository`.)"""

from __future__ import annotations

from sqlalchemy import insert
from sqlmodel import col, select

from storage.models import (
    LLMCall,
    Run,
    utcnow,
)
from storage.repository_base import (
    RepositoryBase,
    RunNotFound,
    _calls,
    _runs,
)


class UsageRows(RepositoryBase):
    def record_llm_call(
        self,
        run_id: str,
        *,
        node_id: int | None,
        purpose: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        cost: float,
        latency_s: float,
        attempts: int = 1,
        ok: bool = True,
        error: str = "",
    ) -> None:
        """Store one call and add it to the run's totals atomically: INSERT + UPDATE of the run (one
        statement on PostgreSQL) + COMMIT. The node's totals are recomputed from its calls by its
        next update (and when the run ends); `node_usage` reads them live."""
        call = LLMCall(
            run_id=run_id,
            node_id=node_id,
            purpose=purpose,
            model=model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost=cost,
            latency_s=latency_s,
            attempts=attempts,
            ok=ok,
            error=error[:2000],
        )
        with self._session() as s:
            self._write_with_bump(
                s,
                insert(_calls).values(**call.model_dump(exclude={"id"})),
                run_id,
                prompt_tokens=_runs.c.prompt_tokens + prompt_tokens,
                completion_tokens=_runs.c.completion_tokens + completion_tokens,
                cost=_runs.c.cost + cost,
                llm_calls=_runs.c.llm_calls + 1,
                updated_at=utcnow(),
            )
            s.commit()

    def run_usage(self, run_id: str) -> tuple[int, float]:
        """(total tokens, total cost) of a run so far."""
        with self._session() as s:
            row = s.exec(select(Run.prompt_tokens, Run.completion_tokens, Run.cost).where(Run.id == run_id)).first()
        if row is None:
            raise RunNotFound(run_id)
        return row[0] + row[1], row[2]

    def list_llm_calls(self, run_id: str) -> list[LLMCall]:
        with self._session() as s:
            return list(s.exec(select(LLMCall).where(LLMCall.run_id == run_id).order_by(col(LLMCall.id))).all())
