"""The garbage collector's walks, kept to what runs make: what a process loads once and keeps for
its life is frozen out of them (`gc.freeze`).

Walking such objects again cost each full collection 20-180 ms, and one landed in about one run in
three, inside a retrieval round (docs/benchmarks.md, issue 44). Objects made later are collected as
before."""

from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
_frozen: set[str] = set()


def freeze_loaded(what: str) -> bool:
    """Once per process and `what` (a name for the load, such as "start-up" or "openai SDK"):
    collect, then freeze every object left. Call it right after a load whose objects live as long as
    the process. Returns whether it froze (False: this load's objects were frozen before)."""
    with _lock:
        if what in _frozen:
            return False
        _frozen.add(what)
        gc.collect()
        gc.freeze()
        return True


__all__ = ["freeze_loaded"]
