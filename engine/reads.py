"""What the app reads, and the only door it reads through: `components/` and `pages/` import the
stored records' types and the errors a read can raise from here, and ask `Services.reads` (a
`Reads`) for runs, nodes, sources, events and reports. They never import `storage` or touch the
repository (`tests/components/test_app_reads.py`), so storage can be reorganised behind this file.

The records are the stored rows, detached from their session: the app renders them and changes
nothing through them. `Reads` has no method that writes; the app's few writes (starting, steering,
renaming, deleting a run) go through `Services` and the runner.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from engine.contract import MethodContract
from engine.export.document import ReportDocument, build_document
from engine.graph import RunGraph
from engine.report import SOURCE_WORDS, export_json, render_markdown
from storage.evaluation import BenchmarkNotFound, EvaluationStore, ItemStatus
from storage.models import (
    Benchmark,
    BenchmarkItem,
    BenchmarkStatus,
    Command,
    CommandStatus,
    Edge,
    Judgment,
    Node,
    Report,
    Run,
    RunEvent,
    RunState,
    Source,
    utcnow,
)
from storage.repository import GraphSnapshot, Repository, RunNotFound
from storage.statuses import NodeStatus, RunStatus
from storage.unwritable import DatabaseUnwritable

__all__ = [
    "Benchmark",
    "BenchmarkItem",
    "BenchmarkNotFound",
    "BenchmarkStatus",
    "Command",
    "CommandStatus",
    "DatabaseUnwritable",
    "Edge",
    "Judgment",
    "GraphSnapshot",
    "ItemStatus",
    "Node",
    "NodeStatus",
    "Reads",
    "Report",
    "Run",
    "RunEvent",
    "RunNotFound",
    "RunState",
    "RunStatus",
    "Source",
    "utcnow",
]


class Reads:
    """Read-only queries over what the runs stored. Each call reads the database afresh."""

    def __init__(self, repo: Repository, evaluations: EvaluationStore) -> None:
        self._repo = repo
        self._evaluations = evaluations

    # ---------------------------------------------------------------- runs
    def get_run(self, run_id: str) -> Run:
        """The run; RunNotFound when there is none (deleted, or an address typed by hand)."""
        return self._repo.get_run(run_id)

    def list_runs(
        self,
        *,
        text: str | None = None,
        method: str | None = None,
        status: str | None = None,
        since: datetime | None = None,
        limit: int = 200,
        offset: int = 0,
        visible_to: int | None = None,
        owned_by: int | None = None,
        not_owned_by: int | None = None,
    ) -> list[Run]:
        """Newest first, filtered as Sessions filters them, `limit` of them from `offset` on.
        `visible_to`: only the runs that user may read (`Access.visible_to` says when to ask);
        `owned_by` / `not_owned_by`: only that user's / only others'."""
        return self._repo.list_runs(
            text=text,
            method=method,
            status=status,
            since=since,
            limit=limit,
            offset=offset,
            visible_to=visible_to,
            owned_by=owned_by,
            not_owned_by=not_owned_by,
        )

    def count_runs(
        self,
        *,
        text: str | None = None,
        method: str | None = None,
        status: str | None = None,
        since: datetime | None = None,
        visible_to: int | None = None,
        owned_by: int | None = None,
        not_owned_by: int | None = None,
    ) -> int:
        return self._repo.count_runs(
            text=text,
            method=method,
            status=status,
            since=since,
            visible_to=visible_to,
            owned_by=owned_by,
            not_owned_by=not_owned_by,
        )

    def run_version(self, run_id: str) -> int:
        """The run's change counter, for cheap polling: it moves whenever anything of the run does."""
        return self._repo.run_version(run_id)

    # ---------------------------------------------------------------- a run's graph and trace
    def snapshot(self, run_id: str) -> GraphSnapshot:
        """The run with its nodes, edges and sources, read together."""
        return self._repo.snapshot(run_id)

    def list_sources(self, run_id: str) -> list[Source]:
        return self._repo.list_sources(run_id)

    def sources_for_node(self, node_id: int) -> list[Source]:
        return self._repo.sources_for_node(node_id)

    def list_events(
        self,
        run_id: str,
        *,
        after_id: int | None = None,
        limit: int | None = None,
        kinds: Iterable[str] | None = None,
        node_id: int | None = None,
    ) -> list[RunEvent]:
        return self._repo.list_events(run_id, after_id=after_id, limit=limit, kinds=kinds, node_id=node_id)

    def list_commands(self, run_id: str, *, status: str | None = None) -> list[Command]:
        return self._repo.list_commands(run_id, status=status)

    def list_run_states(self, run_id: str, name: str | None = None) -> list[RunState]:
        return self._repo.list_run_states(run_id, name)

    def graph(self, run_id: str, contract: MethodContract) -> RunGraph:
        """The run's graph as its method reads it (for the method's notices). The app only reads it."""
        return RunGraph(self._repo, run_id, contract)

    # ---------------------------------------------------------------- reports and exports
    def latest_report(self, run_id: str) -> Report | None:
        return self._repo.latest_report(run_id)

    def list_reports(self, run_id: str) -> list[Report]:
        return self._repo.list_reports(run_id)

    def markdown(
        self, run_id: str, source_words: tuple[str, ...] = SOURCE_WORDS, *, nodes: Sequence[Node] | None = None
    ) -> str:
        """The run's Markdown report with its numbered, resolving sources (engine/report.py)."""
        return render_markdown(self._repo, run_id, source_words, nodes=nodes)

    def export_json(self, run_id: str) -> dict[str, Any]:
        return export_json(self._repo, run_id)

    def document(self, run_id: str) -> ReportDocument:
        """The report as the PDF and DOCX writers take it."""
        return build_document(self._repo, run_id)

    def judgments(self, run_id: str, protocol: str) -> list[Judgment]:
        """The run's stored judgments by one protocol (the citation check's, say), oldest first."""
        return self._evaluations.list_judgments(run_id=run_id, protocol=protocol)
