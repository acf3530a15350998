"""The step log's vocabulary and the arithmetic over it, with no storage and no Streamlit.

A run narrates itself as `run_events` rows (`RunGraph.narrate`): what the model is doing for a node
(`step`), what was searched and how much came back (`search`), what was dropped and why
(`dropped`), what failed and why (`failed`), a steering command's progress (`steer`) and the
run's lifecycle (`run`). The text is plain words a reader understands; technical detail goes in
`data`. Active time is computed from the lifecycle events, so idle time (paused, interrupted,
finished and reopened later) is not counted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime

from storage.models import RunEvent

STEP = "step"
SEARCH = "search"
DROPPED = "dropped"
FAILED = "failed"
STEER = "steer"
RUN = "run"
KINDS = (STEP, SEARCH, DROPPED, FAILED, STEER, RUN)


class Phase:
    """`data["phase"]` of a `run` event: where the run's active segments start and end."""

    STARTED = "started"
    RESUMED = "resumed"
    PAUSED = "paused"
    STOPPED = "stopped"
    FINISHED = "finished"
    FAILED = "failed"

    OPENS = (STARTED, RESUMED)
    CLOSES = (PAUSED, STOPPED, FINISHED, FAILED)


# `data["phase"]` of a `steer` event: a command's way from the queue to its outcome.
QUEUED, APPLYING, APPLIED, REFUSED = "queued", "applying", "applied", "refused"


def search_text(query: str, where: str, found: int) -> str:
    sources = "1 source" if found == 1 else f"{found} sources"
    return f"searched {_place(where)} for “{_quoted(query)}”: {sources} came back"


def search_failed_text(query: str, where: str, reason: str) -> str:
    return f"the search of {_place(where)} for “{_quoted(query)}” failed: {reason}"


def _place(description: str) -> str:
    # A searcher's description names its place first, then details in parentheses ("local
    # corpus (16,239 documents: ...)"): a log line needs the place.
    return description.split(" (", 1)[0].strip() or description


def unrelated_text(query: str, dropped: int, found: int) -> str:
    return f"left out {dropped} of {found} sources for “{_quoted(query)}” as unrelated to it"


def _quoted(text: str, limit: int = 120) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 1] + "…"


# Technical failure texts and what they mean to a reader. The first match wins; the original
# text stays in the event's data.
_PLAIN_FAILURES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"did not match \w+ after (\d+) attempts", re.I),
        "the model's answer did not have the expected form, even after {0} tries",
    ),
    (
        re.compile(r"field required|validation error|input should be|extra inputs", re.I),
        "the model's answer did not have the expected form",
    ),
    (re.compile(r"every task of the plan failed", re.I), "every task of its plan failed"),
    (re.compile(r"every search failed", re.I), "every search failed"),
    (re.compile(r"timed? ?out|timeout", re.I), "the model took too long to answer"),
    (re.compile(r"connect|unreachable|refused", re.I), "the model's server could not be reached"),
    (re.compile(r"budget", re.I), "the run's budget was reached"),
    (re.compile(r"empty", re.I), "the model gave an empty answer"),
)


def plain_failure(error: str) -> str:
    """Why a node failed, in words a reader understands (never a schema's or a class's name)."""
    for pattern, words in _PLAIN_FAILURES:
        match = pattern.search(error)
        if match:
            return words.format(*match.groups())
    return "something went wrong while working on it (the details are in the node's data)"


def minutes(seconds: float) -> str:
    """3:12, or 1:02:03 past an hour."""
    whole = max(0, int(seconds))
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def active_seconds(events: Iterable[RunEvent], *, now: datetime | None = None) -> float:
    """The time a run was working: segments from `started`/`resumed` to `paused`/`stopped`/
    `finished`/`failed`. A segment still open ends at `now` when given (the run is executing),
    else at the run's last event (its process died: nothing happened after that)."""
    ordered = sorted(events, key=lambda e: (e.created_at, e.id or 0))
    total = 0.0
    opened: datetime | None = None
    for event in ordered:
        phase = (event.data or {}).get("phase") if event.kind == RUN else None
        if phase in Phase.OPENS and opened is None:
            opened = event.created_at
        elif phase in Phase.CLOSES and opened is not None:
            total += (event.created_at - opened).total_seconds()
            opened = None
    if opened is not None and ordered:
        end = now if now is not None else ordered[-1].created_at
        total += max(0.0, (_aware_like(end, opened) - opened).total_seconds())
    return total


def _aware_like(moment: datetime, like: datetime) -> datetime:
    # SQLite returns naive datetimes (stored as UTC); `now` is aware: compare like with like.
    if (moment.tzinfo is None) == (like.tzinfo is None):
        return moment
    return moment.replace(tzinfo=None) if like.tzinfo is None else moment.replace(tzinfo=like.tzinfo)
