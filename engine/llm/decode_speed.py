"""How fast the built-in model writes on this machine now, and what that allows a call.

The same 0.5B model wrote 8-12 tokens/s on this 2-core machine when idle and 1.9 tokens/s while
other work shared the cores. A fixed output cap and a fixed timeout fit one of those: at 1.9
tokens/s a 1,000-token node summary takes nine minutes, past the call's timeout, and the first run
of a newcomer failed for want of speed. So the speed is measured on every answered call (tokens
written over the call's seconds: prompt reading included, which makes it a lower bound) and each
call gets:

- an output cap no longer than `CALL_SECONDS` of writing at the measured speed (never below
  `MIN_CAP`, never above what the step asked): a slow machine gets shorter answers, not failed
  ones. A structured answer cut off is asked again in its compact form (`compact_schema.py`);
- a timeout long enough to write its cap at half the measured speed: a call still writing is
  never timed out because the machine got busier.

Until a call has been measured, the step's own cap and the configured timeout apply.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

CALL_SECONDS = 240.0  # what one call may spend writing, at the measured speed
MIN_CAP = 256  # tokens: below this a node summary cannot say anything
SMOOTHING = 0.5  # weight of the newest measurement (the load changes within minutes)
MIN_TOKENS_MEASURED = 16  # a shorter answer measures the prompt's reading, not the writing
TIMEOUT_SLACK = 2.0  # the timeout allows writing at half the measured speed
TIMEOUT_FLOOR_S = 600.0
TIMEOUT_CEILING_S = 3600.0


@dataclass(frozen=True)
class CallLimits:
    max_tokens: int
    timeout_s: float | None  # None: the configured timeout


class DecodeSpeed:
    """The measured tokens per second, smoothed; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rate: float | None = None

    @property
    def tokens_per_s(self) -> float | None:
        with self._lock:
            return self._rate

    def record(self, completion_tokens: int, seconds: float) -> None:
        """One answered call: `completion_tokens` written in `seconds`."""
        if completion_tokens < MIN_TOKENS_MEASURED or seconds <= 0:
            return
        rate = completion_tokens / seconds
        with self._lock:
            self._rate = rate if self._rate is None else SMOOTHING * rate + (1 - SMOOTHING) * self._rate

    def limits(self, asked: int) -> CallLimits:
        """The cap and timeout for a call whose step asked for `asked` tokens at most."""
        rate = self.tokens_per_s
        if rate is None:
            return CallLimits(asked, None)
        cap = min(asked, max(MIN_CAP, int(rate * CALL_SECONDS)))
        timeout = min(TIMEOUT_CEILING_S, max(TIMEOUT_FLOOR_S, TIMEOUT_SLACK * cap / rate))
        return CallLimits(cap, timeout)
