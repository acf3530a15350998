"""A process-wide cap on LLM calls in flight.

One `ConcurrencyLimiter` is created by whoever builds the LLM backends and handed to every adapter,
so parallel runs share the same budget of simultaneous requests (local servers such as Ollama or
llama.cpp serve only a few requests at once; hosted APIs rate limit). It is injected, never a
module global, so tests and benchmarks can use their own.
"""

from __future__ import annotations

import collections
import random
import threading
import time
from types import TracebackType
from typing import Protocol


class ConcurrencyLimiter:
    """At most `limit` holders at a time; use as a context manager around one HTTP request.

    Thread-safe and first come, first served: a freed slot goes to the call that has waited
    longest. A plain condition let a thread that had just released a slot take it straight back
    for its next call before the woken waiter ran, so under a full limit one call could wait
    several rounds of calls while its node's whole chain waited behind it (a DEoT planner waited
    two, 1 s at 0.5 s a call).

    `in_flight` is the number of current holders, `peak_in_flight` the highest number seen and
    `waiting` the number of calls in line, for monitoring and tests.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"the LLM concurrency limit must be at least 1 (got {limit})")
        self._limit = limit
        self._lock = threading.Lock()
        self._in_flight = 0
        self._peak = 0
        # The calls in line, in arrival order, each waiting on a condition of its own (on the same
        # lock): a freed slot wakes the first in line only, not every thread that waits.
        self._waiting: collections.deque[threading.Condition] = collections.deque()
        self._cool_until = 0.0  # time.monotonic() before which no call starts (an endpoint's 429)

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    @property
    def waiting(self) -> int:
        """Calls waiting for a slot."""
        with self._lock:
            return len(self._waiting)

    @property
    def peak_in_flight(self) -> int:
        with self._lock:
            return self._peak

    def cool_down(self, seconds: float) -> None:
        """The endpoint answered HTTP 429 and asked for `seconds` of quiet: no call that shares this
        limiter starts before they have passed, so its other calls do not hit the limit as well (one
        429 would otherwise become as many as there are calls in flight)."""
        if seconds > 0:
            with self._lock:
                self._cool_until = max(self._cool_until, time.monotonic() + seconds)

    def cooling_for(self) -> float:
        """Seconds left of the endpoint's asked-for quiet (0 when none)."""
        with self._lock:
            return max(0.0, self._cool_until - time.monotonic())

    def _wait_until_cool(self) -> None:
        while (left := self.cooling_for()) > 0:
            time.sleep(min(left, 1.0))

    def acquire(self, *, wait_cool: bool = True) -> None:
        if wait_cool:
            self._wait_until_cool()
        with self._lock:
            turn = threading.Condition(self._lock)
            self._waiting.append(turn)
            try:
                while self._waiting[0] is not turn or self._in_flight >= self._limit:
                    turn.wait()
            except BaseException:  # interrupted in line: the calls behind it must not wait for it
                self._waiting.remove(turn)
                self._wake_first()
                raise
            self._waiting.popleft()
            self._in_flight += 1
            self._peak = max(self._peak, self._in_flight)
            self._wake_first()  # the next in line may fit too (several slots freed meanwhile)

    def _wake_first(self) -> None:
        """Under the lock: wake the first call in line if a slot is free for it."""
        if self._waiting and self._in_flight < self._limit:
            self._waiting[0].notify()

    def release(self) -> None:
        with self._lock:
            if self._in_flight == 0:
                raise RuntimeError("ConcurrencyLimiter.release() called more often than acquire()")
            self._in_flight -= 1
            self._wake_first()

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


COOLDOWN_READ_EVERY_S = 0.25


class Slots(Protocol):
    """Numbered slots shared by every process (storage's `SlotLocks`)."""

    def try_acquire(self) -> int | None: ...

    def release(self, slot: int) -> None: ...


class Cooldown(Protocol):
    """A cooldown shared by every process (storage's `SharedCooldown`)."""

    def extend(self, seconds: float) -> None: ...

    def seconds_left(self) -> float: ...


class SharedConcurrencyLimiter(ConcurrencyLimiter):
    """The same cap, held across processes: every worker on the database shares `limit` slots.

    `slots` is storage's `SlotLocks` (PostgreSQL advisory locks, released by the server if a
    process dies). Within the process, at most `limit` threads hold or wait for a slot, so the
    process never opens more than `limit` lock connections. `in_flight`/`peak_in_flight` count this
    process's calls; `slots.in_use()` counts everyone's.
    """

    def __init__(self, limit: int, slots: Slots, *, cooldown: Cooldown | None = None, poll_s: float = 0.02) -> None:
        super().__init__(limit)
        self.slots = slots
        # storage's `SharedCooldown`: an endpoint's 429 quiets every worker, not only this one.
        self.cooldown = cooldown
        self._cooldown_checked = 0.0
        self._cooldown_left = 0.0
        self._poll_s = poll_s
        self._held: dict[int, list[int]] = {}  # thread id -> slots it holds (a stack)
        self._held_lock = threading.Lock()

    def cool_down(self, seconds: float) -> None:
        super().cool_down(seconds)
        if self.cooldown is not None and seconds > 0:
            self.cooldown.extend(seconds)

    def cooling_for(self) -> float:
        local = super().cooling_for()
        if self.cooldown is None:
            return local
        now = time.monotonic()
        # One read of the database per quarter second at most, whatever the number of threads.
        if now - self._cooldown_checked >= COOLDOWN_READ_EVERY_S:
            self._cooldown_left = self.cooldown.seconds_left()
            self._cooldown_checked = now
        return max(local, self._cooldown_left - (now - self._cooldown_checked))

    def acquire(self, *, wait_cool: bool = True) -> None:
        super().acquire(wait_cool=wait_cool)  # the local bound first: at most `limit` threads go on
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
