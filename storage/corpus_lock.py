"""Who builds a corpus index: an exclusive lock beside the index file, and the builder's progress.

The lock is `fcntl.flock` on `<index>.build-lock`. The kernel drops it when its holder exits for any
reason (SIGKILL included), so a build that died never blocks the next start; the next one to take
the lock builds again. The lock file itself is never deleted: a process waiting on the old file
while a new one is created would take a lock nobody else sees.

The holder writes how far it got to `<index>.build-progress` (JSON, replaced atomically), so the
processes waiting can say what they are waiting for.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path


def build_lock_path(index_path: Path | str) -> Path:
    return Path(f"{index_path}.build-lock")


def build_progress_path(index_path: Path | str) -> Path:
    return Path(f"{index_path}.build-progress")


@dataclass(frozen=True)
class BuildProgress:
    """What the process building an index last said about itself."""

    pid: int
    done: int
    total: int


class CorpusBuildLock:
    """The build lock of one index file. Not re-entrant: take it once per build."""

    def __init__(self, index_path: Path | str) -> None:
        self.path = build_lock_path(index_path)
        self.progress_path = build_progress_path(index_path)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it; False (at once) if another process or thread does."""
        if self._fd is not None:
            raise RuntimeError("the corpus build lock is already held by this object")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is None:
            return
        # The progress file describes this build only: a waiter must not read it as another's.
        self.progress_path.unlink(missing_ok=True)
        fd, self._fd = self._fd, None
        os.close(fd)  # closing the descriptor releases the flock

    def publish(self, done: int, total: int) -> None:
        """Say how far the build got (the holder only); a failure to say so never stops the build."""
        if self._fd is None:
            raise RuntimeError("only the holder of the corpus build lock publishes progress")
        scratch = self.progress_path.with_name(self.progress_path.name + f".{os.getpid()}")
        try:
            scratch.write_text(json.dumps({"pid": os.getpid(), "done": done, "total": total}), encoding="utf-8")
            os.replace(scratch, self.progress_path)
        except OSError:
            with contextlib.suppress(OSError):
                scratch.unlink(missing_ok=True)

    def progress(self) -> BuildProgress | None:
        """What the current holder last published, or None (nothing yet, or not readable)."""
        try:
            data = json.loads(self.progress_path.read_text(encoding="utf-8"))
            return BuildProgress(pid=int(data["pid"]), done=int(data["done"]), total=int(data["total"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None
