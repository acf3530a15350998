"""Which structured-output mode each endpoint and model accepts, as learned in auto mode.

Auto mode starts from `json_schema` and steps down (`json_object`, then prompted JSON) only when a
server's answer proves that a mode is unsupported: a client error (or llama.cpp's 500) whose
message names the response format. A rate limit, an overloaded server or a time-out says nothing
about formats, so it never moves the mode: once, one transient HTTP 500 moved a whole web-app
process to prompted JSON for good, and every later run's structured calls degraded.

What is learned is kept per (endpoint, model): another model behind the same URL, or another
endpoint, starts again from the top. The memory belongs to `Services` (one per process), is shown in
Settings and can be reset there.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from datetime import UTC, datetime

from engine.llm.protocol import ResponseFormat

# Structured modes from the most to the least constrained; auto mode walks down this ladder.
MODE_LADDER = (ResponseFormat.JSON_SCHEMA, ResponseFormat.JSON_OBJECT, ResponseFormat.PROMPTED)

# Statuses with which servers refuse a response_format they do not support: 400/422 (OpenAI-style
# validation), 404/501 (no such feature), and 500 (llama.cpp's server, for json_schema).
_REJECTION_STATUSES = frozenset({400, 404, 415, 422, 500, 501})
# ...and only when the message is about the format, e.g. llama.cpp: 'response_format type must be
# one of "text" or "json_object"', vLLM: 'json_schema is not supported', OpenAI: 'Invalid parameter:
# response_format'.
_ABOUT_THE_FORMAT = re.compile(
    r"response[_ ]?format|json[_ ]?schema|json[_ ]?object|structured[_ ]output|guided[_ ]json|grammar",
    re.IGNORECASE,
)


def proves_mode_unsupported(status: int, message: str) -> bool:
    """Whether an error answer shows that the server does not support the requested format."""
    return status in _REJECTION_STATUSES and bool(_ABOUT_THE_FORMAT.search(message or ""))


@dataclass(frozen=True)
class LearnedMode:
    endpoint: str
    model: str
    mode: ResponseFormat
    reason: str  # the server's own words, so Settings can show why
    learned_at: datetime


class StructuredModeMemory:
    """Thread-safe map (endpoint, model) -> the structured mode auto mode settled on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._learned: dict[tuple[str, str], LearnedMode] = {}

    def mode_for(self, endpoint: str, model: str) -> ResponseFormat | None:
        with self._lock:
            learned = self._learned.get((endpoint, model))
            return learned.mode if learned else None

    def remember(self, endpoint: str, model: str, mode: ResponseFormat, reason: str) -> None:
        """Keep the lowest mode that worked after a proven rejection (never climbs back by itself)."""
        with self._lock:
            current = self._learned.get((endpoint, model))
            if current is None or MODE_LADDER.index(mode) > MODE_LADDER.index(current.mode):
                self._learned[(endpoint, model)] = LearnedMode(endpoint, model, mode, reason[:300], datetime.now(UTC))

    def forget(self, endpoint: str | None = None, model: str | None = None) -> int:
        """Start again from json_schema: for one endpoint (and model), or for all. Returns how many."""
        with self._lock:
            keys = [
                key
                for key in self._learned
                if (endpoint is None or key[0] == endpoint) and (model is None or key[1] == model)
            ]
            for key in keys:
                del self._learned[key]
            return len(keys)

    def all(self) -> list[LearnedMode]:
        with self._lock:
            return sorted(self._learned.values(), key=lambda m: (m.endpoint, m.model))
