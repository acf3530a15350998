"""A process-wide cap on LLM calls in flight.

One `ConcurrencyLimiter` is created by whoever builds the LLM backends and handed to every adapter,
so parallel runs share the same budget of simultaneous requests (local servers such as Ollama or
llama.cpp serve only a few requests at once; hosted APIs rate limit). It is injected, never a
module global, so tests and benchmarks can use their own.
"""

from __future__ import annotations

import random
import threading
import time
from types import TracebackType


class ConcurrencyLimiter:
    """At most `limit` holders at a time; use as a context manager around one HTTP request.

    Thread-safe. `in_flight` is the number of current holders and `peak_in_flight` the highest
    number seen, both for monitoring and tests.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"the LLM concurrency limit must be at least 1 (got {limit})")
        self._limit = limit
        self._condition = threading.Condition()
        self._in_flight = 0
        self._peak = 0

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def in_flight(self) -> int:
        with self._condition:
            return self._in_flight

    @property
    def peak_in_flight(self) -> int:
        with self._condition:
            return self._peak

    def acquire(self) -> None:
        with self._condition:
            self._condition.wait_for(lambda: self._in_flight < self._limit)
            self._in_flight += 1
            self._peak = max(self._peak, self._in_flight)

    def release(self) -> None:
        with self._condition:
            if self._in_flight == 0:
                raise RuntimeError("ConcurrencyLimiter.release() called more often than acquire()")
            self._in_flight -= 1
            self._condition.notify()

    def __enter__(self) -> ConcurrencyLimiter:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"ConcurrencyLimiter(limit={self._limit}, in_flight={self.in_flight})"


class SharedConcurrencyLimiter(ConcurrencyLimiter):
    """The same cap, held across processes: every worker on the database shares `limit` slots.

    `slots` is storage's `SlotLocks` (PostgreSQL advisory locks, released by the server if a
    process dies). Within the process, at most `limit` threads hold or wait for a slot, so the
    process never opens more than `limit` lock connections. `in_flight`/`peak_in_flight` count this
    process's calls; `slots.in_use()` counts everyone's.
    """

    def __init__(self, limit: int, slots, *, poll_s: float = 0.02) -> None:
        super().__init__(limit)
        self.slots = slots
        self._poll_s = poll_s
        self._held: dict[int, list[int]] = {}  # thread id -> slots it holds (a stack)
        self._held_lock = threading.Lock()

    def acquire(self) -> None:
        super().acquire()  # the local bound first: at most `limit` threads go on
        try:
            delay = self._poll_s
            while (slot := self.slots.try_acquire()) is None:
                # Every slot is taken by some process: wait with jitter, a little longer each miss.
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 1.5, 0.5)
        except BaseException:
            super().release()
            raise
        with self._held_lock:
            self._held.setdefault(threading.get_ident(), []).append(slot)

    def release(self) -> None:
        with self._held_lock:
            stack = self._held.get(threading.get_ident())
            if not stack:
                raise RuntimeError("SharedConcurrencyLimiter.release() from a thread that holds no slot")
            slot = stack.pop()
            if not stack:
                del self._held[threading.get_ident()]
        try:
            self.slots.release(slot)
        finally:
            super().release()
