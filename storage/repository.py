"""The repository API: every read and write of runs, graphs, sources, usage, commands, reports.

Objects returned are detached snapshots (safe to hand to other threads). Counters are updated with
atomic `UPDATE ... SET x = x + n` statements, so concurrent workers never lose an increment.

Round trips: a write is as few statements as the dialect allows, each with RETURNING instead of a
re-read. On PostgreSQL the run's version bump rides in the same statement as the write (a
data-modifying CTE); SQLite has no such CTEs and sends it as a second statement of the same
transaction. A node's usage totals are not updated per LLM call: every UPDATE of a node row
recomputes them from its `llm_calls` in the same statement, and a run reaching a terminal status
recomputes them for all its nodes (`node_usage` gives the exact live numbers of one node).

The repository is put together here from one class per aggregate, each in its own module
(`storage/rows_runs.py`, `rows_nodes.py`, `rows_sources.py`, `rows_usage.py`, `rows_commands.py`,
`rows_events.py`, `rows_reports.py`, `rows_run_states.py`, and `rows_batch.py`: a running run's
calls, events and node updates written together); the benchmarks' rows are
`storage/evaluation.py`'s and the knowledge graphs' `storage/knowledge.py`'s.
"""

from __future__ import annotations

from storage.repository_base import (
    GraphSnapshot,
    NodeInput,
    NodeNotFound,
    RunNotFound,
    SourceInput,
    new_run_id,
)
from storage.rows_batch import BatchRows
from storage.rows_commands import CommandRows
from storage.rows_events import EventRows
from storage.rows_nodes import NodeRows
from storage.rows_reports import ReportRows
from storage.rows_run_states import RunStateRows
from storage.rows_runs import RunRows
from storage.rows_sources import SourceRows
from storage.rows_usage import UsageRows

__all__ = ["GraphSnapshot", "NodeInput", "NodeNotFound", "Repository", "RunNotFound", "SourceInput", "new_run_id"]


class Repository(RunRows, NodeRows, SourceRows, UsageRows, CommandRows, EventRows, ReportRows, RunStateRows, BatchRows):
    """Every read and write of runs, graphs, sources, usage, commands, events, reports and run states."""
