"""Nodes and edges: add (in batches), update with the node's usage, list, the snapshot of a graph. (Mixed into `storage.repository.Repository`.)"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, insert, update
from sqlalchemy import select as sa_select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.dml import ReturningInsert
from sqlmodel import Session, col, select

from storage.models import (
    Edge,
    Node,
    Run,
    loaded_row,
    table_of,
    utcnow,
)
from storage.repository_base import (
    GraphSnapshot,
    NodeInput,
    NodeNotFound,
    RepositoryBase,
    RunNotFound,
    _node_usage_columns,
    _nodes,
    _runs,
)
from storage.statuses import NodeStatus

# A node's columns that an add leaves as the model's defaults (`error`, the usage totals).
_NODE_DEFAULTS = {
    name: field.default
    for name, field in Node.model_fields.items()
    if name != "id" and not field.is_required() and field.default_factory is None
}


class NodeRows(RepositoryBase):
    if TYPE_CHECKING:
        # RunRows's, which `Repository` mixes in beside this class.
        def get_run(self, run_id: str) -> Run: ...

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
        item = NodeInput(
            kind=kind,
            label=label,
            parent_id=parent_id,
            content=content,
            status=status,
            depth=depth,
            priority=priority,
            data=data,
            edge_kind=edge_kind,
        )
        return self._add_nodes(run_id, [item], order=order or 0)[0]

    def add_nodes(self, run_id: str, inputs: Sequence[NodeInput], *, counted: bool = True) -> list[Node]:
        """Several nodes (and the edges from their parents) in one transaction, one version bump.
        `counted=False`: the caller adds them to the run's node count and bumps its version itself
        (an executing run's journal, in its next batch)."""
        return self._add_nodes(run_id, inputs, counted=counted) if inputs else []

    def _add_nodes(
        self, run_id: str, inputs: Sequence[NodeInput], order: int = 0, *, counted: bool = True
    ) -> list[Node]:
        now = utcnow()
        rows = [
            {
                **_NODE_DEFAULTS,
                "run_id": run_id,
                "parent_id": i.parent_id,
                "kind": i.kind,
                "label": i.label,
                "content": i.content,
                "status": i.status,
                "depth": i.depth,
                "order": order,
                "priority": i.priority,
                "data": dict(i.data or {}),
                "created_at": now,
                # Set here, not by the database, so the returned node is complete without a re-read.
                "started_at": now if i.status == NodeStatus.DONE else None,
                "finished_at": now if i.status == NodeStatus.DONE else None,
            }
            for i in inputs
        ]
        try:
            with self._session() as s:
                # The ids, in the rows' order: one prepared INSERT ... RETURNING (the ORM's unit of
                # work and a freshly compiled edge INSERT were most of a node's add).
                ids = s.execute(self._nodes_insert, rows).scalars().all()
                edges: list[dict[str, Any]] = [
                    dict(run_id=run_id, src=i.parent_id, dst=node_id, kind=i.edge_kind, data={})
                    for i, node_id in zip(inputs, ids)
                    if i.parent_id is not None
                ]
                bump = {"node_count": _runs.c.node_count + len(rows), "updated_at": now}
                if edges and counted:  # nothing to read back: one multi-row INSERT, with the bump on PostgreSQL
                    self._insert_rows_with_bump(
                        s, lambda rows: insert(table_of(Edge)).values(rows), edges, run_id, **bump
                    )
                elif edges:
                    s.execute(self._edges_insert, edges)
                elif counted:
                    s.execute(self._bump(run_id, **bump))
                s.commit()
        except IntegrityError as exc:
            # The keys refused the run or a parent: say which, in words.
            self.get_run(run_id)
            parents = sorted({i.parent_id for i in inputs if i.parent_id is not None})
            if not parents:
                raise
            raise ValueError(f"a parent ({', '.join(map(str, parents))}) is not a node of run '{run_id}'") from exc
        return [loaded_row(Node, {**row, "id": node_id}) for row, node_id in zip(rows, ids)]

    @cached_property
    def _nodes_insert(self) -> ReturningInsert[tuple[int]]:
        """`INSERT INTO nodes ... RETURNING id`, its rows given as parameters: an executemany whose ids
        come back in the rows' order. Built once per repository."""
        return insert(_nodes).returning(_nodes.c.id, sort_by_parameter_order=True)

    def remove_edge(self, run_id: str, src: int, dst: int, kind: str) -> bool:
        """Remove the edge src -> dst of this kind; whether there was one."""
        with self._session() as s:
            result = s.exec(
                delete(Edge).where(
                    col(Edge.run_id) == run_id, col(Edge.src) == src, col(Edge.dst) == dst, col(Edge.kind) == kind
                )
            )
            if result.rowcount:
                s.exec(update(Run).where(col(Run.id) == run_id).values(version=Run.version + 1))
            s.commit()
        return bool(result.rowcount)

    def add_edge(
        self, run_id: str, src: int, dst: int, kind: str, data: dict[str, Any] | None = None, *, bump: bool = True
    ) -> Edge:
        """The edge src -> dst of this kind; an existing one is returned as it is (idempotent).
        One `INSERT ... ON CONFLICT DO NOTHING RETURNING`, the version bump, one COMMIT; the
        existing edge is read back only when there was one. `bump=False`: the caller bumps the
        run's version itself (an executing run's journal, in its next batch).

        Both ends must be nodes of the run (ValueError otherwise; the database's keys check it)."""
        table = table_of(Edge)
        row = dict(run_id=run_id, src=src, dst=dst, kind=kind, data=dict(data or {}))
        try:
            with self._session() as s:
                added: Edge | None = s.scalars(
                    sa_select(Edge).from_statement(
                        self._insert_on_conflict(table)
                        .values(row)
                        .on_conflict_do_nothing(index_elements=[table.c.run_id, table.c.src, table.c.dst, table.c.kind])
                        .returning(*table.c)
                    )
                ).first()
                if added is not None and bump:
                    s.exec(update(Run).where(col(Run.id) == run_id).values(version=Run.version + 1))
                s.commit()
        except IntegrityError as exc:  # an end is not a node of this run (the foreign keys)
            raise ValueError(f"cannot link {src} -> {dst}: both must be nodes of run '{run_id}'") from exc
        if added is not None:
            return added
        # Stored before (by this run, or by another worker at the same moment): that one.
        existing = self._find_edge(run_id, src, dst, kind)
        if existing is None:  # pragma: no cover - the unique key said it is there
            raise ValueError(f"cannot link {src} -> {dst} in run '{run_id}'")
        return existing

    def _find_edge(self, run_id: str, src: int, dst: int, kind: str) -> Edge | None:
        with self._session() as s:
            return s.exec(
                select(Edge).where(Edge.run_id == run_id, Edge.src == src, Edge.dst == dst, Edge.kind == kind)
            ).first()

    def get_node(self, node_id: int) -> Node:
        with self._session() as s:
            node = s.get(Node, node_id)
        if node is None:
            raise NodeNotFound(node_id)
        return node

    def update_node(self, node_id: int, *, merge_data: dict[str, Any] | None = None, **values: Any) -> Node:
        """Set columns (`data=` replaces the node's data); `merge_data` is merged into its `data`.

        Without `merge_data` (or with `data=` too, merged over it here): one `UPDATE nodes ...
        RETURNING`, no read. With `merge_data` alone the stored data is read first (and locked on
        PostgreSQL, so concurrent merges do not lose keys). Every update also recomputes the node's
        usage totals from its LLM calls, in the same statement."""
        # The read locks FOR NO KEY UPDATE (`key_share=True`), as the UPDATE does anyway. FOR UPDATE
        # would also block the key-share locks of inserts that reference the node (the links of
        # its sources) while they hold the run's row, which this update waits for next: a deadlock.
        with self._session() as s:
            if merge_data:
                if "data" in values:
                    values["data"] = {**(values["data"] or {}), **merge_data}
                else:
                    row = s.execute(
                        sa_select(_nodes.c.data).where(_nodes.c.id == node_id).with_for_update(key_share=True)
                    ).first()
                    if row is None:
                        raise NodeNotFound(node_id)
                    values["data"] = {**(row.data or {}), **merge_data}
            node = self._write_node(s, node_id, values)
            if node is None:
                raise NodeNotFound(node_id)
            s.commit()  # expire_on_commit=False: `node` keeps the returned values, no re-read
        return node

    def _write_node(self, s: Session, node_id: int, values: dict[str, Any]) -> Node | None:
        """`UPDATE nodes SET values, usage totals WHERE id = node_id RETURNING *` and the version
        bump of its run; None when there is no such node (nothing written)."""
        write = (
            update(_nodes)
            .where(_nodes.c.id == node_id)
            .values({**values, **_node_usage_columns()})
            .returning(*_nodes.c)
        )
        bump = {"updated_at": utcnow()}
        if self._pg:
            # WITH changed AS (UPDATE nodes ... RETURNING *), bumped AS (UPDATE runs ... WHERE id =
            # (SELECT run_id FROM changed)) SELECT * FROM changed: the node's row is locked first.
            changed = write.cte("changed_node")
            bumped = self._bump(sa_select(changed.c.run_id).scalar_subquery(), **bump).cte("bumped_run")
            return s.scalars(sa_select(Node).from_statement(sa_select(changed).add_cte(bumped))).first()
        node = s.scalars(sa_select(Node).from_statement(write)).first()
        if node is not None:
            s.execute(self._bump(node.run_id, **bump))
        return node

    @staticmethod
    def _data_values(merge: dict[str, Any] | None, replace: dict[str, Any] | None) -> dict[str, Any]:
        """`update_node` keywords for `data=` (merge, as before) and `replace_data=`."""
        if merge is not None and replace is not None:
            raise ValueError("give data= (merged into the node's data) or replace_data=, not both")
        if replace is not None:
            return {"data": dict(replace)}
        return {"merge_data": merge}

    def start_node(
        self, node_id: int, *, data: dict[str, Any] | None = None, replace_data: dict[str, Any] | None = None
    ) -> Node:
        """Mark a node running; `data` is merged into its data (a read first), `replace_data`
        replaces it (one UPDATE)."""
        return self.update_node(
            node_id, status=NodeStatus.RUNNING, started_at=utcnow(), error="", **self._data_values(data, replace_data)
        )

    def finish_node(
        self,
        node_id: int,
        *,
        content: str | None = None,
        data: dict[str, Any] | None = None,
        label: str | None = None,
        replace_data: dict[str, Any] | None = None,
    ) -> Node:
        """Mark a node done; `data` is merged into its data (a read first), `replace_data`
        replaces it (one UPDATE, no read)."""
        values: dict[str, Any] = {"status": NodeStatus.DONE, "finished_at": utcnow()}
        if content is not None:
            values["content"] = content
        if label is not None:
            values["label"] = label
        return self.update_node(node_id, **values, **self._data_values(data, replace_data))

    def fail_node(
        self,
        node_id: int,
        error: str,
        *,
        data: dict[str, Any] | None = None,
        replace_data: dict[str, Any] | None = None,
    ) -> Node:
        """Mark a node failed; `data` is merged, `replace_data` replaces (as `finish_node`)."""
        return self.update_node(
            node_id,
            status=NodeStatus.FAILED,
            error=error,
            finished_at=utcnow(),
            **self._data_values(data, replace_data),
        )

    def node_usage(self, node_id: int) -> tuple[int, int, float, float]:
        """A node's exact usage so far, (prompt tokens, completion tokens, cost, LLM seconds), from
        its LLM calls: one SELECT. (The node's columns are brought up to date by its next update.)"""
        usage = _node_usage_columns()
        with self._session() as s:
            row = s.execute(
                sa_select(usage["prompt_tokens"], usage["completion_tokens"], usage["cost"], usage["latency_s"]).where(
                    _nodes.c.id == node_id
                )
            ).first()
        if row is None:
            raise NodeNotFound(node_id)
        return int(row[0]), int(row[1]), float(row[2]), float(row[3])

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

    def frontier(
        self, run_id: str, kinds: Iterable[str], statuses: Iterable[str] = NodeStatus.UNFINISHED
    ) -> list[Node]:
        """The run's nodes of these kinds and statuses (pending or running by default), by id."""
        stmt = select(Node).where(
            Node.run_id == run_id, col(Node.kind).in_(list(kinds)), col(Node.status).in_(list(statuses))
        )
        with self._session() as s:
            return list(s.exec(stmt.order_by(col(Node.id))).all())

    def list_edges(self, run_id: str, kind: str | None = None) -> list[Edge]:
        stmt = select(Edge).where(Edge.run_id == run_id)
        if kind is not None:
            stmt = stmt.where(Edge.kind == kind)
        with self._session() as s:
            return list(s.exec(stmt.order_by(col(Edge.id))).all())

    def reset_unfinished_nodes(self, run_id: str) -> int:
        """Nodes left `running` by a stopped or dead worker go back to `pending` (for resume)."""
        with self._session() as s:
            result = s.exec(
                update(_nodes)
                .where(_nodes.c.run_id == run_id, _nodes.c.status == NodeStatus.RUNNING)
                .values(status=NodeStatus.PENDING, started_at=None, **_node_usage_columns())
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
