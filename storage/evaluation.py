"""The evaluation harness's storage: benchmarks, their items (one per dataset item and method, each
pointing at its stored run) and judges' verdicts. The harness (`engine/evaluate/`) reaches these
tables only through `EvaluationStore`."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import update
from sqlmodel import col, select

from storage.db import Store
from storage.models import Benchmark, BenchmarkItem, BenchmarkStatus, Judgment, utcnow
from storage.users import local_user_id


class BenchmarkNotFound(LookupError):
    def __init__(self, benchmark_id: str) -> None:
        super().__init__(f"no benchmark with id '{benchmark_id}'. List them with: thoughtmap bench --list")
        self.benchmark_id = benchmark_id


class ItemStatus:
    PENDING = "pending"  # not started
    RUNNING = "running"  # its run exists and has not finished (interrupted, or stopped by you or the budget)
    SCORED = "scored"  # its run finished and was scored
    FAILED = "failed"  # its run did not end done (or the harness failed on it): answer metrics 0, kept for reading

    FINISHED = (SCORED, FAILED)


def llm_identity(llm_info: dict[str, Any]) -> tuple[str, str, str]:
    """What decides the answers of an LLM as a benchmark stores it: kind, model and endpoint."""
    return (str(llm_info.get("kind", "")), str(llm_info.get("model", "")), str(llm_info.get("base_url", "")))


def setup_differences(a: Benchmark, b: Benchmark) -> list[str]:
    """What two records of the same benchmark disagree on, beyond its items: each a reader's word."""
    checks = (
        ("parameters", a.params, b.params),
        ("model", llm_identity(a.llm_info), llm_identity(b.llm_info)),
        ("search", a.search_mode, b.search_mode),
        ("judges", sorted(a.judges), sorted(b.judges)),
        ("balance", a.balance or "", b.balance or ""),
    )
    return [name for name, mine, theirs in checks if mine != theirs]


class EvaluationStore(Store):
    # ------------------------------------------------------------ benchmarks

    def create_benchmark(
        self,
        *,
        dataset: str,
        methods: Sequence[str],
        items: Sequence[str],
        limit: int,
        seed: int,
        params: dict[str, Any],
        llm_info: dict[str, Any],
        search_mode: str,
        max_cost: float | None = None,
        max_tokens: int | None = None,
        concurrency: int = 2,
        judges: Sequence[str] = (),
        balance: str = "",
        user_id: int | None = None,
    ) -> Benchmark:
        """The benchmark and all its (item, method) rows, in one transaction: a benchmark killed at
        any later moment knows every item it has still to do. `user_id`: whose (the local user by default)."""
        bench = Benchmark(
            id=uuid.uuid4().hex[:12],
            dataset=dataset,
            methods=list(methods),
            limit=limit,
            seed=seed,
            params=params,
            llm_info=llm_info,
            search_mode=search_mode,
            max_cost=max_cost,
            max_tokens=max_tokens,
            concurrency=concurrency,
            judges=list(judges),
            balance=balance,
        )
        rows = [
            BenchmarkItem(benchmark_id=bench.id, position=position, item_id=item_id, method=method)
            for position, item_id in enumerate(items)
            for method in methods
        ]
        with self._session() as s:
            bench.user_id = user_id if user_id is not None else local_user_id(s)
            s.add(bench)
            s.flush()  # the benchmark row first: the items' foreign key refers to it
            s.add_all(rows)
            s.commit()
        return bench

    def get_benchmark(self, benchmark_id: str) -> Benchmark:
        with self._session() as s:
            bench = s.get(Benchmark, benchmark_id)
            if bench is None and len(benchmark_id) >= 4:
                matches = s.exec(select(Benchmark).where(col(Benchmark.id).startswith(benchmark_id)).limit(2)).all()
                bench = matches[0] if len(matches) == 1 else None
        if bench is None:
            raise BenchmarkNotFound(benchmark_id)
        return bench

    def list_benchmarks(self, limit: int = 100, *, user_id: int | None = None) -> list[Benchmark]:
        """Newest first; `user_id`: only that person's."""
        stmt = select(Benchmark)
        if user_id is not None:
            stmt = stmt.where(Benchmark.user_id == user_id)
        with self._session() as s:
            return list(s.exec(stmt.order_by(col(Benchmark.created_at).desc()).limit(limit)).all())

    def set_budget(self, benchmark_id: str, *, max_cost: float | None = None, max_tokens: int | None = None) -> None:
        """A new budget for the whole benchmark (each given value replaces the stored one)."""
        values = {k: v for k, v in (("max_cost", max_cost), ("max_tokens", max_tokens)) if v is not None}
        if not values:
            return
        with self._session() as s:
            s.exec(update(Benchmark).where(col(Benchmark.id) == benchmark_id).values(**values))
            s.commit()

    def set_benchmark_status(self, benchmark_id: str, status: str, note: str = "") -> None:
        finished = utcnow() if status in (BenchmarkStatus.DONE, BenchmarkStatus.FAILED) else None
        with self._session() as s:
            s.exec(
                update(Benchmark)
                .where(col(Benchmark.id) == benchmark_id)
                .values(status=status, note=note, finished_at=finished)
            )
            s.commit()

    def import_benchmark(self, bench: Benchmark, rows: Sequence[BenchmarkItem]) -> int:
        """Stores a benchmark carried from another database (`engine/evaluate/archive.py`) with its
        rows, in one transaction; returns how many finished rows it brought. When the id is stored
        already (the same benchmark, continued elsewhere), a finished row fills a row that is not
        finished here, and nothing finished here is replaced. A stored benchmark of the same id that
        is a different benchmark (dataset, methods, seed or sample) is refused: ValueError."""
        finished = [r for r in rows if r.status in ItemStatus.FINISHED]
        with self._session() as s:
            stored = s.get(Benchmark, bench.id)
            if stored is None:
                if bench.user_id is None:
                    bench.user_id = local_user_id(s)
                s.add(bench)
                s.flush()  # the benchmark row first: the items' foreign key refers to it
                s.add_all(rows)
                filled = len(finished)
            else:
                here = {
                    (r.item_id, r.method): r
                    for r in s.exec(select(BenchmarkItem).where(BenchmarkItem.benchmark_id == bench.id)).all()
                }
                if (stored.dataset, list(stored.methods), stored.seed) != (
                    bench.dataset,
                    list(bench.methods),
                    bench.seed,
                ) or set(here) != {(r.item_id, r.method) for r in rows}:
                    raise ValueError(
                        f"a different benchmark with the id {bench.id} is stored here "
                        f"({stored.dataset}, {', '.join(stored.methods)}, seed {stored.seed}, "
                        f"{stored.limit} items); the file's cannot be merged into it"
                    )
                differs = setup_differences(stored, bench)
                if differs:
                    # The same items run another way: merged, one table would mix two setups unseen.
                    raise ValueError(
                        f"benchmark {bench.id} is stored here with another {' and '.join(differs)} "
                        "than the file's; its results cannot be merged into it"
                    )
                filled = 0
                for row in finished:
                    mine = here[(row.item_id, row.method)]
                    if mine.status in ItemStatus.FINISHED:
                        continue
                    if mine.run_id is not None:
                        continue  # under way (or interrupted) here: its own run finishes it
                    for key in ("status", "prediction", "metrics", "eval_usage", "error", "finished_at"):
                        setattr(mine, key, getattr(row, key))
                    s.add(mine)
                    filled += 1
                if stored.status != BenchmarkStatus.DONE and all(
                    r.status in ItemStatus.FINISHED for r in here.values()
                ):
                    stored.status, stored.finished_at = BenchmarkStatus.DONE, utcnow()
                    s.add(stored)
            if stored is None and len(finished) == len(rows):
                bench.status, bench.finished_at = BenchmarkStatus.DONE, utcnow()
                s.add(bench)
            s.commit()
        return filled

    # ----------------------------------------------------------------- items

    def list_items(self, benchmark_id: str, *, method: str | None = None) -> list[BenchmarkItem]:
        stmt = select(BenchmarkItem).where(BenchmarkItem.benchmark_id == benchmark_id)
        if method:
            stmt = stmt.where(BenchmarkItem.method == method)
        with self._session() as s:
            return list(s.exec(stmt.order_by(col(BenchmarkItem.position), col(BenchmarkItem.method))).all())

    def get_item(self, item_row_id: int) -> BenchmarkItem:
        with self._session() as s:
            row = s.get(BenchmarkItem, item_row_id)
        if row is None:
            raise LookupError(f"no benchmark item {item_row_id}")
        return row

    def attach_run(self, item_row_id: int, run_id: str) -> None:
        self._update_item(item_row_id, run_id=run_id, status=ItemStatus.RUNNING)

    def finish_item(
        self,
        item_row_id: int,
        *,
        status: str,
        prediction: str,
        metrics: dict[str, Any],
        eval_usage: dict[str, Any],
        error: str = "",
    ) -> None:
        self._update_item(
            item_row_id,
            status=status,
            prediction=prediction,
            metrics=metrics,
            eval_usage=eval_usage,
            error=error[:2000],
            finished_at=utcnow(),
        )

    def _update_item(self, item_row_id: int, **values: Any) -> None:
        with self._session() as s:
            s.exec(update(BenchmarkItem).where(col(BenchmarkItem.id) == item_row_id).values(**values))
            s.commit()

    # -------------------------------------------------------------- verdicts

    def save_judgment(
        self,
        *,
        run_a: str,
        run_b: str | None,
        protocol: str,
        model: str,
        verdict: dict[str, Any],
        calls: int,
        prompt_tokens: int,
        completion_tokens: int,
        cost: float,
        benchmark_id: str | None = None,
    ) -> Judgment:
        row = Judgment(
            run_a=run_a,
            run_b=run_b,
            benchmark_id=benchmark_id,
            protocol=protocol,
            model=model,
            verdict=verdict,
            calls=calls,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost=cost,
        )
        with self._session() as s:
            s.add(row)
            s.commit()
            s.refresh(row)
        return row

    def list_judgments(
        self, *, run_id: str | None = None, benchmark_id: str | None = None, protocol: str | None = None
    ) -> list[Judgment]:
        stmt = select(Judgment)
        if run_id:
            stmt = stmt.where((col(Judgment.run_a) == run_id) | (col(Judgment.run_b) == run_id))
        if benchmark_id:
            stmt = stmt.where(Judgment.benchmark_id == benchmark_id)
        if protocol:
            stmt = stmt.where(Judgment.protocol == protocol)
        with self._session() as s:
            return list(s.exec(stmt.order_by(col(Judgment.id))).all())


__all__ = ["BenchmarkNotFound", "EvaluationStore", "ItemStatus"]
