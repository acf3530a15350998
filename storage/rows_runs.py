"""Runs: create, find, list and count, status and ownership, budget, rename, delete. (Mixed into `storage.repository.Repository`.)"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar, overload

from sqlalchemy import delete, func, insert, or_, update
from sqlalchemy import select as sa_select
from sqlmodel import col, select
from sqlmodel.sql.expression import SelectOfScalar

from engine.questions import check_length, check_storable
from storage import users
from storage.models import (
    BenchmarkItem,
    Command,
    CommandStatus,
    Edge,
    Judgment,
    LLMCall,
    Node,
    NodeSource,
    Report,
    Run,
    RunEvent,
    RunState,
    Source,
    table_of,
    utcnow,
)
from storage.repository_base import (
    TERMINAL_STATUSES,
    RepositoryBase,
    RunNotFound,
    _events,
    _node_usage_columns,
    _nodes,
    _runs,
    new_run_id,
)
from storage.rows_batch import EventRecord, RunEnding
from storage.statuses import NodeStatus, RunStatus

# A query over runs, of their rows or their count.
_RunsQuery = TypeVar("_RunsQuery", bound=SelectOfScalar[Any])


_commands = table_of(Command)
# The claim's extra column: how many commands waited for the run as it was claimed.
_QUEUED_COMMANDS = "queued_commands_"


@dataclass(frozen=True)
class Claim:
    """A run as `claim_run` claimed it, and whether commands waited for it then."""

    run: Run
    commands_queued: bool


class RunRows(RepositoryBase):
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
        search_exclusions: dict[str, Any] | None = None,
        run_id: str | None = None,
        user_id: int | None = None,
    ) -> Run:
        """`run_id`: the id to create it under, chosen beforehand (`new_run_id()`) by a caller that
        records it elsewhere first (a benchmark item), so a kill between the two leaves no run that
        nothing refers to; a new one by default. `user_id`: whose run (the local user by default)."""
        # The last guard for callers that skip the runner: a NUL or a non-string would be stored
        # as given by SQLite and fail later, or fail with a driver error on PostgreSQL; a document
        # pasted as a question would be sent again with every prompt of the run.
        check_length(check_storable(question))
        run = Run(
            id=run_id or new_run_id(),
            question=question,
            title=title or question[:300],
            method=method,
            params=params,
            llm_info=llm_info or {},
            search_mode=search_mode,
            max_tokens=max_tokens,
            max_cost=max_cost,
            search_exclusions=search_exclusions or {},
        )
        with self._session() as s:
            run.user_id = user_id if user_id is not None else self._local_user(s)
            s.add(run)
            s.commit()  # every column has a Python-side value: no re-read
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
                matches = s.exec(select(Run).where(col(Run.id).startswith(run_id_or_prefix)).limit(2)).all()
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
        offset: int = 0,
        visible_to: int | None = None,
        owned_by: int | None = None,
        not_owned_by: int | None = None,
    ) -> list[Run]:
        """The runs that match, newest first, `limit` of them from `offset` on (a page of Sessions).
        Ties on the creation time are ordered by id, so pages neither repeat nor skip a run.
        `visible_to`: only the runs that user may read (theirs and those shared with them);
        `owned_by` / `not_owned_by`: only that user's runs / only others'."""
        stmt = self._matching_runs(
            select(Run),
            text=text,
            method=method,
            status=status,
            since=since,
            visible_to=visible_to,
            owned_by=owned_by,
            not_owned_by=not_owned_by,
        )
        stmt = stmt.order_by(col(Run.created_at).desc(), col(Run.id).desc()).offset(max(offset, 0)).limit(limit)
        with self._session() as s:
            return list(s.exec(stmt).all())

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
        statuses: Iterable[str] | None = None,
    ) -> int:
        """How many runs `list_runs` with the same filters would page through; `statuses`: only runs
        in one of them."""
        stmt = self._matching_runs(
            select(func.count()).select_from(Run),
            text=text,
            method=method,
            status=status,
            since=since,
            visible_to=visible_to,
            owned_by=owned_by,
            not_owned_by=not_owned_by,
        )
        if statuses is not None:
            stmt = stmt.where(col(Run.status).in_(list(statuses)))
        with self._session() as s:
            return int(s.exec(stmt).one())

    def spent_by(self, user_id: int, *, since: datetime) -> float:
        """What a user's runs have spent since then: their LLM calls made since, whenever each run
        was created (a run resumed a month later spends now)."""
        with self._session() as s:
            total = s.exec(
                select(func.sum(LLMCall.cost))
                .join(Run, col(Run.id) == col(LLMCall.run_id))
                .where(Run.user_id == user_id, LLMCall.created_at >= since)
            ).one()
        return float(total or 0.0)

    @staticmethod
    def _matching_runs(
        stmt: _RunsQuery,
        *,
        text: str | None,
        method: str | None,
        status: str | None,
        since: datetime | None,
        visible_to: int | None = None,
        owned_by: int | None = None,
        not_owned_by: int | None = None,
    ) -> _RunsQuery:
        if visible_to is not None:
            stmt = stmt.where(users.visible_to(visible_to))
        if owned_by is not None:
            stmt = stmt.where(Run.user_id == owned_by)
        if not_owned_by is not None:
            stmt = stmt.where(Run.user_id != not_owned_by)
        if text:
            # Escaped: a search for "%" or "_" finds those characters, not every run.
            stmt = stmt.where(
                or_(col(Run.question).icontains(text, autoescape=True), col(Run.title).icontains(text, autoescape=True))
            )
        if method:
            stmt = stmt.where(Run.method == method)
        if status:
            stmt = stmt.where(Run.status == status)
        if since:
            stmt = stmt.where(Run.created_at >= since)
        return stmt

    def _update_run(
        self, run_id: str, *, refresh_node_usage: bool = False, event: EventRecord | None = None, **values: Any
    ) -> None:
        values.setdefault("updated_at", utcnow())
        with self._session() as s:
            if refresh_node_usage:
                self._refresh_node_usage(s, run_id)
            result = s.exec(self._bump(run_id, **values))
            if result.rowcount == 0:
                raise RunNotFound(run_id)
            if event is not None:  # after the bump: a deleted run is RunNotFound, not a broken key
                s.execute(insert(_events).values(event.row(run_id)))
            s.commit()

    def open_execution(self, run_id: str, *, has_nodes: bool, started_kind: str, first: bool = False) -> bool:
        """Ready a run for an execution, in one transaction: nodes an earlier execution left
        `running` (it was stopped, or its worker died) go back to `pending`, and the commands it
        had taken back to the queue. Returns whether the run executed before: an event of
        `started_kind` (the runner's "started" line) is stored. A run that never executed has
        nothing to put back, and costs one SELECT; `has_nodes` (its stored node count) spares the
        nodes' UPDATE of a run that has none. `first`: the caller knows it never executed (it was
        never claimed before): no query at all."""
        if first and not has_nodes:
            return False
        with self._session() as s:
            started = (
                s.exec(
                    select(RunEvent.id).where(RunEvent.run_id == run_id, RunEvent.kind == started_kind).limit(1)
                ).first()
                is not None
            )
            if not (started or has_nodes):
                return False
            if has_nodes:
                s.exec(
                    update(_nodes)
                    .where(_nodes.c.run_id == run_id, _nodes.c.status == NodeStatus.RUNNING)
                    .values(status=NodeStatus.PENDING, started_at=None, **_node_usage_columns())
                )
            s.exec(
                update(Command)
                .where(col(Command.run_id) == run_id, col(Command.status) == CommandStatus.TAKEN)
                .values(status=CommandStatus.QUEUED, taken_at=None)
            )
            s.commit()
        return started

    @overload
    def claim_run(self, run_id: str, owner: str) -> Claim: ...

    @overload
    def claim_run(self, run_id: str, owner: str, *, never_started: bool) -> Claim | None: ...

    def claim_run(self, run_id: str, owner: str, *, never_started: bool = False) -> Claim | None:
        """Mark a run running in this process (for crash detection by other processes): the run as
        claimed, and whether commands wait for it, in one `UPDATE ... RETURNING` (the execution
        reads the run from here, and its control polls the queue first only if something waits).
        `never_started`: only if no process ever claimed it (None if one did, or it is gone): a
        caller that did not read the run first (it created it) checks that it is as created."""
        now = utcnow()
        waiting = (
            sa_select(func.count())
            .select_from(_commands)
            .where(_commands.c.run_id == run_id, _commands.c.status == CommandStatus.QUEUED)
            .scalar_subquery()
        )
        claim = self._bump(
            run_id,
            status=RunStatus.RUNNING,
            owner=owner,
            heartbeat_at=now,
            started_at=func.coalesce(_runs.c.started_at, now),  # the first start is kept
            finished_at=None,
            stop_reason="",
            error="",
            warning="",
            updated_at=now,
        ).returning(*_runs.c, waiting.label(_QUEUED_COMMANDS))
        if never_started:
            claim = claim.where(_runs.c.started_at.is_(None))
        with self._session() as s:
            row = s.execute(claim).mappings().first()
            if row is None:
                if never_started:
                    return None
                raise RunNotFound(run_id)
            s.commit()
        run = Run.model_validate({key: value for key, value in row.items() if key != _QUEUED_COMMANDS})
        return Claim(run=run, commands_queued=bool(row[_QUEUED_COMMANDS]))

    def mark_queued(self, run_id: str) -> None:
        """The run waits for a worker (distributed execution). A run some process is executing
        keeps its status: that process applies what was asked."""
        with self._session() as s:
            s.execute(
                self._bump(run_id, status=RunStatus.QUEUED, owner="", updated_at=utcnow()).where(
                    _runs.c.status.not_in([RunStatus.RUNNING, RunStatus.PAUSED])
                )
            )
            s.commit()

    def set_budget(self, run_id: str, *, max_tokens: int | None, max_cost: float | None) -> None:
        self._update_run(run_id, max_tokens=max_tokens, max_cost=max_cost)

    def update_llm_info(self, run_id: str, llm_info: dict[str, Any]) -> None:
        self._update_run(run_id, llm_info=llm_info)

    def heartbeat(self, run_id: str) -> None:
        """The executing process is alive; RunNotFound when the run was deleted under it."""
        with self._session() as s:
            result = s.exec(update(Run).where(col(Run.id) == run_id).values(heartbeat_at=utcnow()))
            s.commit()
        if result.rowcount == 0:
            raise RunNotFound(run_id)

    def set_status(
        self,
        run_id: str,
        status: str,
        *,
        stop_reason: str | None = None,
        error: str | None = None,
        warning: str | None = None,
        event: EventRecord | None = None,
    ) -> None:
        """`event`: a line of the run's step log stored in the same transaction (how it ended, said
        the moment it is stored)."""
        self.end_run(
            run_id, self.run_ending(status, stop_reason=stop_reason, error=error, warning=warning, event=event)
        )

    def end_run(self, run_id: str, ending: RunEnding) -> None:
        """Store a `run_ending` on its own (`set_status`): a finished run's nodes get their final
        usage totals in the same transaction."""
        self._update_run(run_id, refresh_node_usage=ending.terminal, event=ending.event, **ending.values)

    @staticmethod
    def run_ending(
        status: str,
        *,
        stop_reason: str | None = None,
        error: str | None = None,
        warning: str | None = None,
        event: EventRecord | None = None,
    ) -> RunEnding:
        """What `set_status` writes, to store with a run's last batch instead (`write_batch`)."""
        values: dict[str, Any] = {"status": status}
        if stop_reason is not None:
            values["stop_reason"] = stop_reason
        if error is not None:
            values["error"] = error
        if warning is not None:
            values["warning"] = warning
        terminal = status in TERMINAL_STATUSES
        if terminal:
            values["finished_at"] = utcnow()
            values["owner"] = ""
        return RunEnding(values=values, event=event, terminal=terminal)

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
            for table in (Edge, Source, LLMCall, Command, Report, RunState, RunEvent, Node):
                s.exec(delete(table).where(col(table.run_id) == run_id))
            # Verdicts on the run go with it; a benchmark item keeps its scores and forgets the run.
            s.exec(delete(Judgment).where(or_(col(Judgment.run_a) == run_id, col(Judgment.run_b) == run_id)))
            s.exec(update(BenchmarkItem).where(col(BenchmarkItem.run_id) == run_id).values(run_id=None))
            s.exec(delete(Run).where(col(Run.id) == run_id))
            s.commit()

    def mark_dead_runs_interrupted(self, is_owner_alive: Callable[[Run], bool]) -> list[str]:
        """Runs left running/paused by a process that no longer exists become `interrupted`."""
        with self._session() as s:
            candidates = s.exec(select(Run).where(col(Run.status).in_([RunStatus.RUNNING, RunStatus.PAUSED]))).all()
        dead = [run for run in candidates if not is_owner_alive(run)]
        for run in dead:
            self.interrupt_run(run.id, owner=run.owner, reason="the process running it ended; resume to continue")
        return [run.id for run in dead]

    def interrupt_run(self, run_id: str, *, owner: str, reason: str) -> bool:
        """Mark the run `interrupted` (resumable) with `reason`, only if `owner` still holds it
        running or paused: never clobber a claim made since. Whether it was marked."""
        with self._session() as s:
            self._refresh_node_usage(s, run_id)
            result = s.exec(
                self._bump(
                    run_id, status=RunStatus.INTERRUPTED, stop_reason=reason, owner="", updated_at=utcnow()
                ).where(_runs.c.owner == owner, _runs.c.status.in_([RunStatus.RUNNING, RunStatus.PAUSED]))
            )
            s.commit()
        return bool(result.rowcount)

    def run_version(self, run_id: str) -> int:
        """The run's change counter: one SELECT of one column, for cheap polling."""
        with self._session() as s:
            version = s.exec(select(Run.version).where(Run.id == run_id)).first()
        if version is None:
            raise RunNotFound(run_id)
        return version
