"""One builder per corpus index: take its build lock, waiting (and saying so) while another process
builds it.

Whoever gets the lock first builds; the others wait, telling their user how far the builder got,
then find the index built. A builder that dies releases the lock with its process (flock), so a
waiter takes over instead of waiting forever.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from storage.corpus_lock import BuildProgress, CorpusBuildLock

Progress = Callable[[str, float], None]

# How often a waiter looks at the lock and the builder's progress.
POLL_S = 0.2
# A waiter repeats an unchanged message this often, so a long wait never looks like a hang.
REPEAT_S = 10.0


def waiting_message(progress: BuildProgress | None, waited_s: float) -> str:
    """What a process waiting for another's build tells its user."""
    text = "the corpus index is being built by another process"
    if progress is None:
        return f"{text}; waiting for it to finish ({waited_s:.0f} s so far)"
    return (
        f"{text} (pid {progress.pid}): {progress.done:,} of {progress.total:,} records indexed; "
        f"waiting for it to finish"
    )


@contextmanager
def build_lock(index_path: Path, progress: Progress | None = None) -> Iterator[CorpusBuildLock]:
    """Hold `index_path`'s build lock for the block, first waiting for another holder to finish.

    The caller checks again, holding it, whether the index still needs building: the process
    waited for has usually built it.
    """
    lock = CorpusBuildLock(index_path)
    started = time.monotonic()
    said, said_at = "", 0.0
    while not lock.try_acquire():
        now = time.monotonic()
        builder = lock.progress()
        message = waiting_message(builder, now - started)
        # The "so far" count changes every second: only a change in the builder's progress (or a
        # long silence) is worth another line.
        changed = builder is not None and message != said
        if progress is not None and (not said or changed or now - said_at >= REPEAT_S):
            progress(message, builder.done / builder.total if builder and builder.total else 0.0)
            said, said_at = message, now
        time.sleep(POLL_S)
    try:
        yield lock
    finally:
        lock.release()
