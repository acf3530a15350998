"""The repository API: every read and write of runs, graphs, sources, usage, commands, reports.

Objects returned are detached snapshots (safe to hand to other threads). Counters are updated with
atomic `UPDATE ... SET x = x + n` statements, so concurrent workers never lose an increment.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, or_, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from engine.questions import check_storable
from storage.db import Database
from storage.models import (
    Command,
    CommandStatus,
    Edge,
    LLMCall,
    Node,
    NodeSource,
    NodeStatus,
    Report,
    Run,
    RunStatus,
    Source,
    utcnow,
)


class RunNotFound(LookupError):
    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run with id '{run_id}'. List runs with: thoughtmap list")
        self.run_id = run_id


class NodeNotFound(LookupError):
    def __init__(self, node_id: int) -> None:
        super().__init__(f"no node with id {node_id}")
        self.node_id = node_id


@dataclass(frozen=True)
class SourceInput:
    """What a searcher hands to storage (mirrors engine.search.Hit without importing engine)."""

    ref: str
    title: str
    snippet: str = ""
    text: str = ""
    kind: str = "corpus"
    url: str | None = None
    score: float = 0.0


@dataclass(frozen=True)
class GraphSnapshot:
    run: Run
    nodes: list[Node]
    edges: list[Edge]


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


class Repository:
    def __init__(self, db: Database) -> None:
        self.db = db

    @contextmanager
    def _session(self):
        with Session(self.db.engine, expire_on_commit=False) as session:
            yield session

    # ------------------------------------------------------------------ runs

    def create_run(
        self,
        *,
        question: str,
        method: str,
        params: dict[str, Any],
        llm_info: dict[str, Any] | None = None,
        search_mode: str = "local",
        max_tokens: int | None = None,
        max_cost: float | None = None,
        title: str = "",
    ) -> Run:
        # The last guard for callers that skip the runner: a NUL or a non-string would be stored
        # as given by SQLite and fail later, or fail with a driver error on PostgreSQL.
        check_storable(question)
        run = Run(
            id=new_run_id(),
            question=question,
            title=title or question[:300],
            method=method,
            params=params,
            llm_info=llm_info or {},
            search_mode=search_mode,
            max_tokens=max_tokens,
            max_cost=max_cost,
        )
        with self._session() as s:
            s.add(run)
            s.commit()
            s.refresh(run)
        return run

    def get_run(self, run_id: str) -> Run:
        with self._session() as s:
            run = s.get(Run, run_id)
        if run is None:
            raise RunNotFound(run_id)
        return run

    def find_run(self, run_id_or_prefix: str) -> Run:
        """Exact id, or a unique id prefix (at least 4 characters), as users type them."""
        with self._session() as s:
            run = s.get(Run, run_id_or_prefix)
            if run is None and len(run_id_or_prefix) >= 4:
                matches = s.exec(
                    select(Run).where(col(Run.id).startswith(run_id_or_prefix)).limit(2)
                ).all()
                run = matches[0] if len(matches) == 1 else None
        if run is None:
            raise RunNotFound(run_id_or_prefix)
        return run

    def list_runs(
        self,
        *,
        text: str | None = None,
        method: str | None = None,
        status: str | None = None,
        since: datetime | None = None,
        limit: int = 200,
    ) -> list[Run]:
        stmt = select(Run)
        if text:
            like = f"%{text}%"
            stmt = stmt.where(or_(col(Run.question).ilike(like), col(Run.title).ilike(like)))
        if method:
            stmt = stmt.where(Run.method == method)
        if status:
            stmt = stmt.where(Run.status == status)
        if since:
            stmt = stmt.where(Run.created_at >= since)
        stmt = stmt.order_by(col(Run.created_at).desc()).limit(limit)
        with self._session() as s:
            return list(s.exec(stmt).all())

    def _update_run(self, run_id: str, **values: Any) -> None:
        values.setdefault("updated_at", utcnow())
        with self._session() as s:
            result = s.exec(
                update(Run)
                .where(col(Run.id) == run_id)
                .values(version=Run.version + 1, **values)
            )
            s.commit()
        if result.rowcount == 0:
            raise RunNotFound(run_id)

    def claim_run(self, run_id: str, owner: str) -> None:
        """Mark a run running in this process (for crash detection by other processes)."""
        now = utcnow()
        run = self.get_run(run_id)
        self._update_run(
            run_id,
            status=RunStatus.RUNNING,
            owner=owner,
            heartbeat_at=now,
            started_at=run.started_at or now,
            finished_at=None,
            stop_reason="",
            error="",
            warning="",
        )

    def set_budget(self, run_id: str, *, max_tokens: int | None, max_cost: float | None) -> None:
        self._update_run(run_id, max_tokens=max_tokens, max_cost=max_cost)

    def update_llm_info(self, run_id: str, llm_info: dict[str, Any]) -> None:
        self._update_run(run_id, llm_info=llm_info)

    def heartbeat(self, run_id: str) -> None:
        with self._session() as s:
            s.exec(update(Run).where(col(Run.id) == run_id).values(heartbeat_at=utcnow()))
            s.commit()

    def set_status(
        self,
        run_id: str,
        status: str,
        *,
        stop_reason: str | None = None,
        error: str | None = None,
        warning: str | None = None,
    ) -> None:
        values: dict[str, Any] = {"status": status}
        if stop_reason is not None:
            values["stop_reason"] = stop_reason
        if error is not None:
            values["error"] = error
        if warning is not None:
            values["warning"] = warning
        if status in (RunStatus.DONE, RunStatus.FAILED, RunStatus.STOPPED, RunStatus.INTERRUPTED):
            values["finished_at"] = utcnow()
            values["owner"] = ""
        self._update_run(run_id, **values)

    def rename_run(self, run_id: str, title: str) -> None:
        title = title.strip()
        if not title:
            raise ValueError("the new name is empty; type a name for the run")
        self._update_run(run_id, title=title[:300])

    def delete_run(self, run_id: str) -> None:
        self.get_run(run_id)
        with self._session() as s:
            node_ids = select(Node.id).where(Node.run_id == run_id)
            s.exec(delete(NodeSource).where(col(NodeSource.node_id).in_(node_ids)))
            for table in (Edge, Source, LLMCall, Command, Report, Node):
                s.exec(delete(table).where(col(table.run_id) == run_id))
            s.exec(delete(Run).where(col(Run.id) == run_id))
            s.commit()

    def mark_dead_runs_interrupted(self, is_owner_alive: Callable[[Run], bool]) -> list[str]:
        """Runs left running/paused by a process that no longer exists become `interrupted`."""
        with self._session() as s:
            candidates = s.exec(
                select(Run).where(col(Run.status).in_([RunStatus.RUNNING, RunStatus.PAUSED]))
            ).all()
        dead = [run.id for run in candidates if not is_owner_alive(run)]
        for run_id in dead:
            with self._session() as s:
                # Only if still owned by the same dead owner: never clobber a live claim.
                run = s.get(Run, run_id)
                stale_owner = run.owner if run else ""
                s.exec(
                    update(Run)
                    .where(col(Run.id) == run_id, col(Run.owner) == stale_owner)
                    .where(col(Run.status).in_([RunStatus.RUNNING, RunStatus.PAUSED]))
                    .values(
                        status=RunStatus.INTERRUPTED,
                        stop_reason="the process running it ended; resume to continue",
                        owner="",
                        version=Run.version + 1,
                        updated_at=utcnow(),
                    )
                )
                s.commit()
        return dead

    def run_version(self, run_id: str) -> int:
        with self._session() as s:
            version = s.exec(select(Run.version).where(Run.id == run_id)).first()
        if version is None:
            raise RunNotFound(run_id)
        return version

    # ----------------------------------------------------------------- nodes

    def add_node(
        self,
        run_id: str,
        *,
        kind: str,
        label: str,
        content: str = "",
        parent_id: int | None = None,
        status: str = NodeStatus.PENDING,
        depth: int = 0,
        order: int | None = None,
        priority: float = 0.0,
        data: dict[str, Any] | None = None,
        edge_kind: str = "child",
    ) -> Node:
        with self._session() as s:
            if order is None:
                order = s.exec(
                    select(func.count()).select_from(Node).where(Node.run_id == run_id)
                ).one()
            node = Node(
                run_id=run_id,
                parent_id=parent_id,
                kind=kind,
                label=label,
                content=content,
                status=status,
                depth=depth,
                order=order,
                priority=priority,
                data=data or {},
            )
            if status == NodeStatus.DONE:
                node.started_at = node.finished_at = utcnow()
            s.add(node)
            s.flush()
            if parent_id is not None:
                s.add(Edge(run_id=run_id, src=parent_id, dst=node.id, kind=edge_kind))
            s.exec(
                update(Run)
                .where(col(Run.id) == run_id)
                .values(
                    node_count=Run.node_count + 1, version=Run.version + 1, updated_at=utcnow()
                )
            )
            s.commit()
            s.refresh(node)
        return node

    def add_edge(self, run_id: str, src: int, dst: int, kind: str) -> None:
        with self._session() as s:
            s.add(Edge(run_id=run_id, src=src, dst=dst, kind=kind))
            s.exec(update(Run).where(col(Run.id) == run_id).values(version=Run.version + 1))
            s.commit()

    def get_node(self, node_id: int) -> Node:
        with self._session() as s:
            node = s.get(Node, node_id)
        if node is None:
            raise NodeNotFound(node_id)
        return node

    def update_node(self, node_id: int, *, merge_data: dict[str, Any] | None = None, **values: Any) -> Node:
        """Set columns; `merge_data` is merged into the node's `data` JSON."""
        with self._session() as s:
            node = s.get(Node, node_id)
            if node is None:
                raise NodeNotFound(node_id)
            for key, value in values.items():
                setattr(node, key, value)
            if merge_data:
                node.data = {**(node.data or {}), **merge_data}
            s.add(node)
            s.exec(
                update(Run)
                .where(col(Run.id) == node.run_id)
                .values(version=Run.version + 1, updated_at=utcnow())
            )
            s.commit()
            s.refresh(node)
        return node

    def start_node(self, node_id: int) -> Node:
        return self.update_node(node_id, status=NodeStatus.RUNNING, started_at=utcnow(), error="")

    def finish_node(
        self, node_id: int, *, content: str | None = None, data: dict[str, Any] | None = None, label: str | None = None
    ) -> Node:
        values: dict[str, Any] = {"status": NodeStatus.DONE, "finished_at": utcnow()}
        if content is not None:
            values["content"] = content
        if label is not None:
            values["label"] = label
        return self.update_node(node_id, merge_data=data, **values)

    def fail_node(self, node_id: int, error: str, *, data: dict[str, Any] | None = None) -> Node:
        return self.update_node(
            node_id, merge_data=data, status=NodeStatus.FAILED, error=error, finished_at=utcnow()
        )

    def list_nodes(self, run_id: str, *, kind: str | None = None, status: str | None = None) -> list[Node]:
        stmt = select(Node).where(Node.run_id == run_id)
        if kind:
            stmt = stmt.where(Node.kind == kind)
        if status:
            stmt = stmt.where(Node.status == status)
        with self._session() as s:
            return list(s.exec(stmt.order_by(col(Node.id))).all())

    def children(self, node_id: int) -> list[Node]:
        with self._session() as s:
            return list(s.exec(select(Node).where(Node.parent_id == node_id).order_by(col(Node.id))).all())

    def list_edges(self, run_id: str) -> list[Edge]:
        with self._session() as s:
            return list(s.exec(select(Edge).where(Edge.run_id == run_id).order_by(col(Edge.id))).all())

    def reset_unfinished_nodes(self, run_id: str) -> int:
        """Nodes left `running` by a stopped or dead worker go back to `pending` (for resume)."""
        with self._session() as s:
            result = s.exec(
                update(Node)
                .where(col(Node.run_id) == run_id, col(Node.status) == NodeStatus.RUNNING)
                .values(status=NodeStatus.PENDING, started_at=None)
            )
            s.commit()
        return result.rowcount

    def snapshot(self, run_id: str) -> GraphSnapshot:
        with self._session() as s:
            run = s.get(Run, run_id)
            if run is None:
                raise RunNotFound(run_id)
            nodes = list(s.exec(select(Node).where(Node.run_id == run_id).order_by(col(Node.id))).all())
            edges = list(s.exec(select(Edge).where(Edge.run_id == run_id).order_by(col(Edge.id))).all())
        return GraphSnapshot(run=run, nodes=nodes, edges=edges)

    # --------------------------------------------------------------- sources

    def add_sources(
        self, run_id: str, inputs: Sequence[SourceInput], *, node_id: int | None = None
    ) -> list[Source]:
        """Store sources (one row per run and ref) and link them to `node_id` in the given order.

        Safe under concurrency: when another worker inserts the same ref first, the unique
        constraint fires, and the retry finds and reuses that row."""
        for attempt in range(5):
            try:
                return self._add_sources_once(run_id, inputs, node_id)
            except IntegrityError:
                if attempt == 4:
                    raise
        raise AssertionError("unreachable")

    def _add_sources_once(self, run_id: str, inputs: Sequence[SourceInput], node_id: int | None) -> list[Source]:
        stored: list[Source] = []
        with self._session() as s:
            for rank, item in enumerate(inputs):
                source = s.exec(
                    select(Source).where(Source.run_id == run_id, Source.ref == item.ref)
                ).first()
                if source is None:
                    source = Source(
                        run_id=run_id,
                        ref=item.ref,
                        kind=item.kind,
                        url=item.url,
                        title=item.title,
                        snippet=item.snippet,
                        text=item.text,
                    )
                    s.add(source)
                    s.flush()
                elif item.text and len(item.text) > len(source.text):
                    source.text = item.text
                    s.add(source)
                if node_id is not None and s.get(NodeSource, (node_id, source.id)) is None:
                    s.add(NodeSource(node_id=node_id, source_id=source.id, rank=rank, score=item.score))
                    s.flush()
                stored.append(source)
            s.exec(update(Run).where(col(Run.id) == run_id).values(version=Run.version + 1))
            s.commit()
            for source in stored:
                s.refresh(source)
        return stored

    def link_sources(self, node_id: int, source_ids: Sequence[int]) -> None:
        with self._session() as s:
            for rank, source_id in enumerate(source_ids):
                if s.get(NodeSource, (node_id, source_id)) is None:
                    s.add(NodeSource(node_id=node_id, source_id=source_id, rank=rank))
                    s.flush()
            s.commit()

    def list_sources(self, run_id: str) -> list[Source]:
        with self._session() as s:
            return list(s.exec(select(Source).where(Source.run_id == run_id).order_by(col(Source.id))).all())

    def sources_for_node(self, node_id: int) -> list[Source]:
        with self._session() as s:
            stmt = (
                select(Source)
                .join(NodeSource, col(NodeSource.source_id) == col(Source.id))
                .where(NodeSource.node_id == node_id)
                .order_by(col(NodeSource.rank))
            )
            return list(s.exec(stmt).all())

    def node_source_links(self, run_id: str) -> list[NodeSource]:
        with self._session() as s:
            stmt = (
                select(NodeSource)
                .join(Node, col(Node.id) == col(NodeSource.node_id))
                .where(Node.run_id == run_id)
            )
            return list(s.exec(stmt).all())

    # ------------------------------------------------------------- LLM usage

    def record_llm_call(
        self,
        run_id: str,
        *,
        node_id: int | None,
        purpose: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        cost: float,
        latency_s: float,
        attempts: int = 1,
        ok: bool = True,
        error: str = "",
    ) -> None:
        """Store one call and add it to the run's (and node's) totals atomically."""
        with self._session() as s:
            s.add(
                LLMCall(
                    run_id=run_id,
                    node_id=node_id,
                    purpose=purpose,
                    model=model,
                    prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens,
                    cost=cost,
                    latency_s=latency_s,
                    attempts=attempts,
                    ok=ok,
                    error=error[:2000],
                )
            )
            s.exec(
                update(Run)
                .where(col(Run.id) == run_id)
                .values(
                    prompt_tokens=Run.prompt_tokens + prompt_tokens,
                    completion_tokens=Run.completion_tokens + completion_tokens,
                    cost=Run.cost + cost,
                    llm_calls=Run.llm_calls + 1,
                    version=Run.version + 1,
                    updated_at=utcnow(),
                )
            )
            if node_id is not None:
                s.exec(
                    update(Node)
                    .where(col(Node.id) == node_id)
                    .values(
                        prompt_tokens=Node.prompt_tokens + prompt_tokens,
                        completion_tokens=Node.completion_tokens + completion_tokens,
                        cost=Node.cost + cost,
                        latency_s=Node.latency_s + latency_s,
                    )
                )
            s.commit()

    def run_usage(self, run_id: str) -> tuple[int, float]:
        """(total tokens, total cost) of a run so far."""
        with self._session() as s:
            row = s.exec(
                select(Run.prompt_tokens, Run.completion_tokens, Run.cost).where(Run.id == run_id)
            ).first()
        if row is None:
            raise RunNotFound(run_id)
        return row[0] + row[1], row[2]

    def list_llm_calls(self, run_id: str) -> list[LLMCall]:
        with self._session() as s:
            return list(s.exec(select(LLMCall).where(LLMCall.run_id == run_id).order_by(col(LLMCall.id))).all())

    # -------------------------------------------------------------- commands

    def enqueue_command(self, run_id: str, kind: str, payload: dict[str, Any] | None = None) -> Command:
        self.get_run(run_id)
        command = Command(run_id=run_id, kind=kind, payload=payload or {})
        with self._session() as s:
            s.add(command)
            s.exec(update(Run).where(col(Run.id) == run_id).values(version=Run.version + 1))
            s.commit()
            s.refresh(command)
        return command

    def take_commands(self, run_id: str, kinds: Iterable[str] | None = None) -> list[Command]:
        """Claim queued commands in order. A command is taken by exactly one worker: the claim is
        an `UPDATE ... WHERE status = 'queued'` whose row count says who won."""
        stmt = select(Command).where(Command.run_id == run_id, Command.status == CommandStatus.QUEUED)
        if kinds is not None:
            stmt = stmt.where(col(Command.kind).in_(list(kinds)))
        taken: list[Command] = []
        with self._session() as s:
            for command in s.exec(stmt.order_by(col(Command.id))).all():
                result = s.exec(
                    update(Command)
                    .where(col(Command.id) == command.id, col(Command.status) == CommandStatus.QUEUED)
                    .values(status=CommandStatus.TAKEN, taken_at=utcnow())
                )
                s.commit()
                if result.rowcount == 1:
                    command.status = CommandStatus.TAKEN
                    taken.append(command)
        return taken

    def requeue_taken_commands(self, run_id: str) -> int:
        """Commands taken by a worker that died go back to the queue (for resume)."""
        with self._session() as s:
            result = s.exec(
                update(Command)
                .where(col(Command.run_id) == run_id, col(Command.status) == CommandStatus.TAKEN)
                .values(status=CommandStatus.QUEUED, taken_at=None)
            )
            s.commit()
        return result.rowcount

    def complete_command(self, command_id: int, *, ok: bool = True, error: str = "") -> None:
        with self._session() as s:
            s.exec(
                update(Command)
                .where(col(Command.id) == command_id)
                .values(
                    status=CommandStatus.DONE if ok else CommandStatus.FAILED,
                    error=error,
                    done_at=utcnow(),
                )
            )
            s.commit()

    def list_commands(self, run_id: str, *, status: str | None = None) -> list[Command]:
        stmt = select(Command).where(Command.run_id == run_id)
        if status:
            stmt = stmt.where(Command.status == status)
        with self._session() as s:
            return list(s.exec(stmt.order_by(col(Command.id))).all())

    # --------------------------------------------------------------- reports

    def save_report(self, run_id: str, markdown: str, *, kind: str = "final", data: dict[str, Any] | None = None) -> Report:
        report = Report(run_id=run_id, kind=kind, markdown=markdown, data=data or {})
        with self._session() as s:
            s.add(report)
            s.exec(update(Run).where(col(Run.id) == run_id).values(version=Run.version + 1))
            s.commit()
            s.refresh(report)
        return report

    def latest_report(self, run_id: str, kind: str = "final") -> Report | None:
        with self._session() as s:
            return s.exec(
                select(Report)
                .where(Report.run_id == run_id, Report.kind == kind)
                .order_by(col(Report.id).desc())
                .limit(1)
            ).first()

    def list_reports(self, run_id: str) -> list[Report]:
        with self._session() as s:
            return list(s.exec(select(Report).where(Report.run_id == run_id).order_by(col(Report.id))).all())
