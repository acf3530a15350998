"""The matrix as stored: its nodes found by (row, column), columns created (idempotently, so a run
killed while creating them is repaired on resume), and columns put back to pending when steering
asks for them to be thought again.

Shape: the question (root) → the knowledge base node → column 0; the summary S_c of column c →
column c+1 (a column link). A column's thoughts and its summary are children of that node; a
communication edge joins two vertically neighbouring thoughts when α > 0; every thought has a
"checked by" edge to its column's summary."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.graph import NewNode, RunGraph
from engine.methods.mtqa.kinds import (
    CELL,
    COLUMN_LINK,
    COMMUNICATION,
    KNOWLEDGE,
    SUMMARISED,
    SUMMARY,
    WEIGHTS,
    WeightState,
    cell_data,
    summary_data,
)
from engine.methods.mtqa.weights import cell_alpha
from storage.models import Node
from storage.statuses import NodeStatus


@dataclass(frozen=True)
class Column:
    index: int
    cells: list[Node]  # by row
    summary: Node | None

    def chains(self) -> list[list[Node]]:
        """The column's thoughts in chains that must run in order: a thought with α > 0 waits for the
        one above it; a thought whose α is 0 (or the first) starts a chain of its own, so chains run
        concurrently."""
        chains: list[list[Node]] = []
        for cell in self.cells:
            if chains and cell_data(cell).alpha:
                chains[-1].append(cell)
            else:
                chains.append([cell])
        return chains

    def created_summary(self) -> Node:
        """The column's summary, which is created with the column."""
        return _created(self.summary, f"summary of column {self.index + 1}")


def _created(node: Node | None, what: str) -> Node:
    # `MtqaMethod.start` creates the knowledge base and every column whole (repairing one a crash left
    # half made) before any step or steering: a node missing after that is a bug, not a state to handle.
    if node is None:
        raise RuntimeError(f"the matrix has no {what}")
    return node


def knowledge_node(graph: RunGraph) -> Node | None:
    return next(iter(graph.nodes(kind=KNOWLEDGE)), None)


def created_knowledge_node(graph: RunGraph) -> Node:
    """The knowledge base node of a run that has started."""
    return _created(knowledge_node(graph), "knowledge base node")


def columns(graph: RunGraph) -> list[Column]:
    """The stored columns, in order."""
    cells = graph.nodes(kind=CELL)
    summaries = {summary_data(n).column: n for n in graph.nodes(kind=SUMMARY)}
    places = {c.id: cell_data(c) for c in cells}
    count = max([places[c.id].column + 1 for c in cells] + [c + 1 for c in summaries] + [0])
    out = []
    for index in range(count):
        column_cells = sorted((c for c in cells if places[c.id].column == index), key=lambda n: places[n.id].row)
        out.append(Column(index, column_cells, summaries.get(index)))
    return out


def source_of_column(graph: RunGraph, index: int) -> Node | None:
    """What column `index` thinks from: the knowledge base (column 0) or the previous summary."""
    if index == 0:
        return knowledge_node(graph)
    return next((n for n in graph.nodes(kind=SUMMARY) if summary_data(n).column == index - 1), None)


def created_source_of_column(graph: RunGraph, index: int) -> Node:
    """What a created column thinks from (created before the column)."""
    return _created(source_of_column(graph, index), f"knowledge base or summary for column {index + 1} to think from")


def ensure_column(graph: RunGraph, index: int, rows: int, alphas: Sequence[float | None]) -> Column:
    """Create what is missing of column `index` (thoughts by row, then its summary, then its edges)."""
    parent = source_of_column(graph, index)
    assert parent is not None, "a column is created after what it thinks from"
    edge_kind = "child" if index == 0 else COLUMN_LINK
    existing = {cell_data(c).row: c for c in graph.nodes(kind=CELL) if cell_data(c).column == index}
    new = [
        NewNode(
            CELL,
            f"Thought {row + 1}.{index + 1}",
            parent=parent,
            edge_kind=edge_kind,
            data={"row": row, "column": index, "alpha": alphas[row]},
        )
        for row in range(rows)
        if row not in existing
    ]
    for cell in graph.add_many(new):
        existing[cell_data(cell).row] = cell
    summary = next((n for n in graph.nodes(kind=SUMMARY) if summary_data(n).column == index), None)
    if summary is None:
        summary = graph.add(
            kind=SUMMARY,
            label=f"Summary {index + 1}",
            parent=parent,
            edge_kind=edge_kind,
            data={"column": index, "grid_row": rows + 1},
        )
    cells = [existing[row] for row in sorted(existing)]
    for above, below in zip(cells, cells[1:]):
        alpha = cell_data(below).alpha
        if alpha:
            graph.link(above, below, COMMUNICATION, data={"alpha": alpha})
    for cell in cells:
        graph.link(cell, summary, SUMMARISED)
    return Column(index, cells, summary)


def column_alphas(
    matrix: Sequence[Sequence[float]], rows: int, index: int, override: float | None = None
) -> list[float | None]:
    """α of each thought of column `index` (None for the first); `override` for every other one."""
    return [
        None if row == 0 else (override if override is not None else cell_alpha(matrix, row, index))
        for row in range(rows)
    ]


def save_weights(graph: RunGraph, preset: str, matrix: Sequence[Sequence[float]]) -> None:
    """The weight panel: A and the α each stored thought has now."""
    cols = columns(graph)
    rows = max((len(c.cells) for c in cols), default=0)
    cells = [[cell_data(c.cells[r]).alpha if r < len(c.cells) else None for c in cols] for r in range(rows)]
    graph.save_state(WEIGHTS, WeightState(preset=preset, matrix=[list(r) for r in matrix], cells=cells))


def reset(graph: RunGraph, nodes: Sequence[Node], *, keep_units: bool = False) -> None:
    """Put nodes back to pending with only what they are (row, column, α; a summary's units when
    `keep_units`), so the scheduler thinks them again."""
    for node in nodes:
        identity: dict[str, Any]
        if node.kind == CELL:
            cell = cell_data(node)
            identity = {"row": cell.row, "column": cell.column, "alpha": cell.alpha}
        else:
            summary = summary_data(node)
            identity = {"column": summary.column, "grid_row": summary.grid_row}
            if keep_units:
                identity.update(
                    units=[u.model_dump() for u in summary.units],
                    units_ready=summary.units_ready,
                    retrieval_keywords=summary.retrieval_keywords,
                )
        graph.update(
            node,
            status=NodeStatus.PENDING,
            error="",
            started_at=None,
            finished_at=None,
            content="",
            replace_data=identity,
        )


def reset_from(graph: RunGraph, index: int, *, first_row: int = 0, keep_units: bool = False) -> None:
    """Think again from column `index` on: its thoughts from `first_row` down (none when
    `first_row` is past the last row), its summary (with its units kept when `keep_units`), and
    every later column."""
    for column in columns(graph):
        if column.index < index:
            continue
        start = first_row if column.index == index else 0
        reset(graph, [c for c in column.cells if cell_data(c).row >= start])
        if column.summary is not None:
            reset(graph, [column.summary], keep_units=keep_units and column.index == index)
