"""What the live view reads of a run, read once per version of the run.

Every stored change to a run bumps its `version` (`Repository.run_version`: one SELECT of one
column). The Explore page's live view refreshes every second while a run is active; it asks for the
version, and only when it changed reads the snapshot again. Everything derived from a version (the
map's data, a node's sources, the run states, the notices) is memoised with it, so an idle active run
(paused, or waiting on a slow LLM) costs one query per refresh. Kept in `st.session_state`, one run
at a time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import streamlit as st

from engine.reads import GraphSnapshot, Node, Run, Source
from engine.services import Services

T = TypeVar("T")
SLOT = "live-run-reads"


@dataclass
class RunReads:
    run_id: str
    version: int
    snapshot: GraphSnapshot
    _memo: dict[Any, Any] = field(default_factory=dict)

    @property
    def run(self) -> Run:
        return self.snapshot.run

    @property
    def nodes(self) -> list[Node]:
        return self.snapshot.nodes

    def memo(self, key: Any, compute: Callable[[], T]) -> T:
        """`compute()` once for this version of the run."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]


def run_reads(services: Services, run_id: str, *, slot: str = SLOT) -> RunReads:
    """The run as last read, re-read only when its version changed (RunNotFound if it is gone).
    A page showing several runs at once (Compare) keeps each in a `slot` of its own."""
    version = services.reads.run_version(run_id)
    cached = st.session_state.get(slot)
    if isinstance(cached, RunReads) and cached.run_id == run_id and cached.version == version:
        return cached
    snapshot = services.reads.snapshot(run_id)
    # The snapshot's own version: a change between the two reads is in it, so no read is wasted.
    reads = RunReads(run_id, snapshot.run.version, snapshot)
    st.session_state[slot] = reads
    return reads


def last_reads(run_id: str, *, slot: str = SLOT) -> RunReads | None:
    """What `run_reads` last read of the run in this session, without asking the database: for the
    parts of a page drawn after the live view, in the same rerun."""
    cached = st.session_state.get(slot)
    return cached if isinstance(cached, RunReads) and cached.run_id == run_id else None


def node_sources(services: Services, reads: RunReads | None, node: Node) -> tuple[list[Source], list[Source]]:
    """The node's own sources and all the run's sources (for its citations), per version and node."""

    def read() -> tuple[list[Source], list[Source]]:
        return services.reads.sources_for_node(node.id), run_sources(services, reads, node.run_id)

    return reads.memo(("node-sources", node.id), read) if reads is not None else read()


def run_sources(services: Services, reads: RunReads | None, run_id: str) -> list[Source]:
    def read() -> list[Source]:
        return services.reads.list_sources(run_id)

    return reads.memo("run-sources", read) if reads is not None else read()
