"""A benchmark as a file: its definition and every scored item, to carry it to another machine.

A benchmark on the built-in model takes CPU-hours (MTQA 2–4 minutes an item on two cores), more than
one machine or one sitting may have. `export_benchmark` writes what a benchmark is (dataset, sample,
methods, parameters, LLM, search, budget) and what it has scored so far (each item's status,
prediction, metrics and scoring usage); `import_benchmark` stores it again under the same id, so
`thoughtmap bench --resume ID` on any machine continues with the items that are left, and the table
covers them all. The runs themselves do not travel (an imported item keeps its scores, without its
run, as after a run is deleted); items that had not finished are imported as not started.

Importing into a database that already holds the benchmark merges: a finished item of the file fills
an item that is not finished here; an item finished here is never replaced. So two machines can each
continue the same exported benchmark and their results can be brought together.

The file is untrusted input (it may come from anyone): it is validated whole before anything is
stored, and an item that does not belong to the benchmark's sample is an error, not a silent drop.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal, cast

from pydantic import BaseModel, Field, ValidationError, field_validator

from engine.evaluate.datasets import DatasetError, get_dataset, items_by_id, load_items
from engine.methods.registry import UnknownMethod, get_method
from storage.evaluation import EvaluationStore, ItemStatus
from storage.models import Benchmark, BenchmarkItem, BenchmarkStatus

FORMAT: Final = "thoughtmap-benchmark"
VERSION: Final = 1
# A file is read whole into memory: a benchmark of 10,000 items with long predictions fits well within.
MAX_FILE_BYTES = 64 * 1024 * 1024


class ArchiveError(ValueError):
    """A benchmark file that cannot be imported: says what is wrong with it and what to do."""


ArchivedStatus = Literal["pending", "running", "scored", "failed"]  # ItemStatus's values


class ArchivedItem(BaseModel):
    position: int = Field(ge=0)
    item_id: str = Field(min_length=1, max_length=200)
    method: str = Field(min_length=1, max_length=64)
    status: ArchivedStatus
    prediction: str = ""
    metrics: dict[str, Any] = Field(default_factory=dict)
    eval_usage: dict[str, Any] = Field(default_factory=dict)
    error: str = Field(default="", max_length=2000)
    finished_at: datetime | None = None
    run_id: str | None = Field(default=None, description="The run on the machine it was exported from (not carried).")

    @field_validator("metrics")
    @classmethod
    def _plain_metrics(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key, metric in value.items():
            if not isinstance(metric, (int, float, bool, str, type(None))):
                raise ValueError(f"metric '{key}' must be a number, a boolean or a text")
        return value


class ArchivedBenchmark(BaseModel):
    id: str = Field(pattern=r"^[0-9a-f]{6,32}$")
    dataset: str
    methods: list[str] = Field(min_length=1)
    limit: int = Field(ge=0)
    seed: int
    params: dict[str, dict[str, Any]] = Field(default_factory=dict)
    llm_info: dict[str, Any] = Field(default_factory=dict)
    search_mode: str = Field(default="local", max_length=16)
    max_cost: float | None = None
    max_tokens: int | None = None
    concurrency: int = Field(default=2, ge=1, le=16)
    judges: list[str] = Field(default_factory=list)
    balance: str = Field(default="", max_length=64, description="The item field the sample is balanced on (--by).")
    note: str = ""
    created_at: datetime | None = None


class BenchmarkArchive(BaseModel):
    """The file: `format` and `version` first, so a reader knows what it holds."""

    format: Literal["thoughtmap-benchmark"] = FORMAT
    version: Literal[1] = VERSION
    exported_at: datetime | None = None
    benchmark: ArchivedBenchmark
    items: list[ArchivedItem]


def export_benchmark(store: EvaluationStore, benchmark_id: str) -> BenchmarkArchive:
    bench = store.get_benchmark(benchmark_id)
    rows = store.list_items(bench.id)
    return BenchmarkArchive(
        exported_at=datetime.now().astimezone(),
        benchmark=ArchivedBenchmark(
            id=bench.id,
            dataset=bench.dataset,
            methods=list(bench.methods),
            limit=bench.limit,
            seed=bench.seed,
            params=bench.params,
            llm_info=bench.llm_info,
            search_mode=bench.search_mode,
            max_cost=bench.max_cost,
            max_tokens=bench.max_tokens,
            concurrency=bench.concurrency,
            judges=list(bench.judges),
            balance=bench.balance or "",
            note=bench.note,
            created_at=bench.created_at,
        ),
        items=[_archived(row) for row in rows],
    )


def _archived(row: BenchmarkItem) -> ArchivedItem:
    finished = row.status in ItemStatus.FINISHED
    return ArchivedItem(
        position=row.position,
        item_id=row.item_id,
        method=row.method,
        # cast: the stored status is a plain str, here one of ItemStatus.FINISHED or pending.
        status=cast(ArchivedStatus, row.status if finished else ItemStatus.PENDING),
        prediction=row.prediction if finished else "",
        metrics=row.metrics if finished else {},
        eval_usage=row.eval_usage if finished else {},
        error=row.error if finished else "",
        finished_at=row.finished_at if finished else None,
        run_id=row.run_id if finished else None,
    )


def write_archive(archive: BenchmarkArchive, path: Path) -> None:
    path.write_text(archive.model_dump_json(indent=1) + "\n", encoding="utf-8")


def read_archive(path: Path) -> BenchmarkArchive:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ArchiveError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if size > MAX_FILE_BYTES:
        raise ArchiveError(f"{path} is {size:,} bytes; a benchmark file is at most {MAX_FILE_BYTES:,}")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArchiveError(
            f"{path} is not a JSON benchmark file ({exc}); write one with thoughtmap bench --export ID FILE"
        ) from exc
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise ArchiveError(f"{path} is not a Thoughtmap benchmark file (its 'format' is not '{FORMAT}')")
    if raw.get("version") != VERSION:
        raise ArchiveError(
            f"{path} is version {raw.get('version')!r} of the benchmark file; this Thoughtmap reads version {VERSION}"
        )
    try:
        return BenchmarkArchive.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ArchiveError(f"{path}: {where}: {first['msg']} ({exc.error_count()} problem(s) in all)") from exc


def _check(archive: BenchmarkArchive) -> None:
    """Everything an import needs to be true, before anything is stored."""
    bench = archive.benchmark
    try:
        get_dataset(bench.dataset)
    except DatasetError as exc:
        raise ArchiveError(f"benchmark {bench.id}: {exc}") from exc
    for method in bench.methods:
        try:
            get_method(method)
        except UnknownMethod as exc:
            raise ArchiveError(
                f"benchmark {bench.id} uses the method '{method}', which this Thoughtmap does not have"
            ) from exc
    if len(set(bench.methods)) != len(bench.methods):
        raise ArchiveError(f"benchmark {bench.id} names a method twice: {', '.join(bench.methods)}")
    positions: dict[int, str] = {}
    seen: set[tuple[str, str]] = set()
    for item in archive.items:
        if item.method not in bench.methods:
            raise ArchiveError(
                f"item {item.item_id} is run by '{item.method}', not one of the benchmark's "
                f"methods ({', '.join(bench.methods)})"
            )
        if (item.item_id, item.method) in seen:
            raise ArchiveError(f"item {item.item_id} appears twice for {item.method}")
        seen.add((item.item_id, item.method))
        if positions.setdefault(item.position, item.item_id) != item.item_id:
            raise ArchiveError(f"items {positions[item.position]} and {item.item_id} share position {item.position}")
    expected = {(i, m) for i in positions.values() for m in bench.methods}
    if seen != expected or len(positions) != bench.limit:
        raise ArchiveError(
            f"benchmark {bench.id} holds {len(seen)} item rows; its {bench.limit} items × "
            f"{len(bench.methods)} methods need {bench.limit * len(bench.methods)}, one per pair"
        )
    known = items_by_id(bench.dataset, sorted(positions.values()))
    unknown = sorted(set(positions.values()) - set(known))
    if unknown:
        raise ArchiveError(
            f"benchmark {bench.id}: {len(unknown)} item(s) are not in the bundled {bench.dataset} "
            f"dataset (e.g. {unknown[0]}); the file and this Thoughtmap's data differ"
        )
    # The sample its header claims: the seed's first `limit` items (balanced on `balance`).
    sample = {
        i.id for i in load_items(bench.dataset, limit=bench.limit, seed=bench.seed, balance=bench.balance or None)
    }
    if sample != set(positions.values()):
        raise ArchiveError(
            f"benchmark {bench.id}: its items are not the {bench.limit} items of seed {bench.seed}"
            + (f" balanced by {bench.balance}" if bench.balance else "")
            + f" of the bundled {bench.dataset} dataset; the file and this Thoughtmap's data differ"
        )


def import_benchmark(
    store: EvaluationStore, archive: BenchmarkArchive, *, user_id: int | None = None
) -> tuple[Benchmark, int]:
    """Stores the archived benchmark (or merges it into the stored one of the same id); returns the
    stored benchmark and how many finished items came from the file. `user_id`: whose a new one is."""
    _check(archive)
    a = archive.benchmark
    bench = Benchmark(
        id=a.id,
        dataset=a.dataset,
        methods=a.methods,
        limit=a.limit,
        seed=a.seed,
        params=a.params,
        llm_info=a.llm_info,
        search_mode=a.search_mode,
        max_cost=a.max_cost,
        max_tokens=a.max_tokens,
        concurrency=a.concurrency,
        judges=a.judges,
        balance=a.balance,
        status=BenchmarkStatus.STOPPED,
        note=a.note,
        user_id=user_id,
    )
    if a.created_at:
        bench.created_at = a.created_at
    rows = [
        BenchmarkItem(
            benchmark_id=a.id,
            position=i.position,
            item_id=i.item_id,
            method=i.method,
            status=i.status if i.status in ItemStatus.FINISHED else ItemStatus.PENDING,
            prediction=i.prediction[:20000],
            metrics=i.metrics,
            eval_usage=i.eval_usage,
            error=i.error,
            finished_at=i.finished_at,
        )
        for i in archive.items
    ]
    try:
        filled = store.import_benchmark(bench, rows)
    except ValueError as exc:
        raise ArchiveError(str(exc)) from exc
    return store.get_benchmark(a.id), filled


__all__ = ["ArchiveError", "BenchmarkArchive", "export_benchmark", "import_benchmark", "read_archive", "write_archive"]
