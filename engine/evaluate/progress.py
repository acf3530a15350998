"""How far a benchmark has got, per method: pending, running, scored and failed items.

Read from the stored rows alone, so any process (the app's live view, the CLI) tells the same."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from storage.evaluation import ItemStatus
from storage.models import BenchmarkItem


@dataclass(frozen=True)
class MethodProgress:
    method: str
    total: int
    pending: int
    running: int
    scored: int
    failed: int

    @property
    def finished(self) -> int:
        return self.scored + self.failed


def method_progress(methods: Sequence[str], rows: Sequence[BenchmarkItem]) -> list[MethodProgress]:
    """One line per method, in the benchmark's order."""
    lines = []
    for method in methods:
        statuses = [r.status for r in rows if r.method == method]
        lines.append(
            MethodProgress(
                method=method,
                total=len(statuses),
                pending=statuses.count(ItemStatus.PENDING),
                running=statuses.count(ItemStatus.RUNNING),
                scored=statuses.count(ItemStatus.SCORED),
                failed=statuses.count(ItemStatus.FAILED),
            )
        )
    return lines


def finished_share(lines: Sequence[MethodProgress]) -> float:
    """Finished items over all items, 0.0 to 1.0 (1.0 for an empty benchmark: nothing is left)."""
    total = sum(line.total for line in lines)
    return sum(line.finished for line in lines) / total if total else 1.0


__all__ = ["MethodProgress", "finished_share", "method_progress"]
