"""Nested parallelism without deadlock, on one process-wide pool.

The rule: no method creates a thread pool. Every piece of parallel work (the nodes of a layer, the
tasks of a node's plan, the sections of an article) goes through `run_parallel` on the runner's one
executor, however deeply nested. The thread that asks for parallel work runs the calls itself
while it waits, taking them from the same list as the pool's threads. A call is therefore always
either not started (and the waiter may run it) or running in a thread that makes progress, so a
full pool can make things slower, never stuck. LLM calls are bounded separately, across every run,
by the `ConcurrencyLimiter` that the LLM adapters share.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import TypeVar

T = TypeVar("T")


class _Calls:
    def __init__(self, calls: Sequence[Callable[[], T]]) -> None:
        self.calls = list(calls)
        self.results: list[object] = [None] * len(self.calls)
        self.errors: list[BaseException | None] = [None] * len(self.calls)
        self._next = 0
        self._lock = threading.Lock()
        self._finished = threading.Semaphore(0)

    def _claim(self) -> int | None:
        with self._lock:
            if self._next >= len(self.calls):
                return None
            self._next += 1
            return self._next - 1

    def work(self) -> None:
        """Run calls not started yet until none is left (the pool's threads and the waiter)."""
        while (index := self._claim()) is not None:
            try:
                self.results[index] = self.calls[index]()
            except BaseException as exc:  # noqa: BLE001 - handed to the waiter
                self.errors[index] = exc
            finally:
                self._finished.release()

    def wait(self) -> None:
        for _ in self.calls:
            self._finished.acquire()


def run_parallel_settled(
    executor: Executor | None, calls: Sequence[Callable[[], T]]
) -> list[tuple[T | None, BaseException | None]]:
    """Run `calls` concurrently; every outcome in order, (result, None) or (None, error). Every
    call has ended when this returns."""
    batch = _Calls(calls)
    for _ in range(max(0, len(batch.calls) - 1)):  # the caller works too
        if executor is None:
            break
        try:
            executor.submit(batch.work)
        except RuntimeError:  # the pool is shutting down: the caller does the rest
            break
    batch.work()
    batch.wait()
    return list(zip(batch.results, batch.errors))  # type: ignore[arg-type]


def run_parallel(executor: Executor | None, calls: Sequence[Callable[[], T]]) -> list[T]:
    """Run `calls` concurrently; their results in order. Every call ends first, then the first
    error (a stop, the budget, an unreachable endpoint) is raised, so no node is left half-written
    when a run ends."""
    outcomes = run_parallel_settled(executor, calls)
    first = next((error for _, error in outcomes if error is not None), None)
    if first is not None:
        raise first
    return [result for result, _ in outcomes]  # type: ignore[misc]
