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

from engine.graph import NewNode
from engine.methods.mtqa.kinds import (
    CELL,
    COLUMN_LINK,
    COMMUNICATION,
    KNOWLEDGE,
    SUMMARISED,
    SUMMARY,
    WEIGHTS,
    WeightState,
)
from engine.methods.mtqa.weights import cell_alpha
from storage.models import Node, NodeStatus


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
            if chains and (cell.data or {}).get("alpha"):
                chains[-1].append(cell)
            else:
                chains.append([cell])
        return chains


def knowledge_node(graph) -> Node | None:
    return next(iter(graph.nodes(kind=KNOWLEDGE)), None)


def columns(graph) -> list[Column]:
    """The stored columns, in order."""
    cells = graph.nodes(kind=CELL)
    summaries = {n.data["column"]: n for n in graph.nodes(kind=SUMMARY)}
    count = max([c.data["column"] + 1 for c in cells] + [c + 1 for c in summaries] + [0])
    out = []
    for index in range(count):
        column_cells = sorted((c for c in cells if c.data["column"] == index), key=lambda n: n.data["row"])
        out.append(Column(index, column_cells, summaries.get(index)))
    return out


def source_of_column(graph, index: int) -> Node | None:
    """What column `index` thinks from: the knowledge base (column 0) or the previous summary."""
    if index == 0:
        return knowledge_node(graph)
    return next((n for n in graph.nodes(kind=SUMMARY) if n.data["column"] == index - 1), None)


def ensure_column(graph, index: int, rows: int, alphas: Sequence[float | None]) -> Column:
    """Create what is missing of column `index` (thoughts by row, then its summary, then its edges)."""
    parent = source_of_column(graph, index)
    assert parent is not None, "a column is created after what it thinks from"
    edge_kind = "child" if index == 0 else COLUMN_LINK
    existing = {c.data["row"]: c for c in graph.nodes(kind=CELL) if c.data["column"] == index}
    new = [NewNode(CELL, f"Thought {row + 1}.{index + 1}", parent=parent, edge_kind=edge_kind,
                   data={"row": row, "column": index, "alpha": alphas[row]})
           for row in range(rows) if row not in existing]
    for cell in graph.add_many(new):
        existing[cell.data["row"]] = cell
    summary = next((n for n in graph.nodes(kind=SUMMARY) if n.data["column"] == index), None)
    if summary is None:
        summary = graph.add(kind=SUMMARY, label=f"Summary {index + 1}", parent=parent, edge_kind=edge_kind,
                            data={"column": index, "grid_row": rows + 1})
    cells = [existing[row] for row in sorted(existing)]
    for above, below in zip(cells, cells[1:]):
        if below.data.get("alpha"):
            graph.link(above, below, COMMUNICATION, data={"alpha": below.data["alpha"]})
    for cell in cells:
        graph.link(cell, summary, SUMMARISED)
    return Column(index, cells, summary)


def column_alphas(matrix: Sequence[Sequence[float]], rows: int, index: int, override: float | None = None) -> list[float | None]:
    """α of each thought of column `index` (None for the first); `override` for every other one."""
    return [None if row == 0 else (override if override is not None else cell_alpha(matrix, row, index))
            for row in range(rows)]


def save_weights(graph, preset: str, matrix: Sequence[Sequence[float]]) -> None:
    """The weight panel: A and the α each stored thought has now."""
    cols = columns(graph)
    rows = max((len(c.cells) for c in cols), default=0)
    cells = [[(c.cells[r].data or {}).get("alpha") if r < len(c.cells) else None for c in cols] for r in range(rows)]
    graph.save_state(WEIGHTS, WeightState(preset=preset, matrix=[list(r) for r in matrix], cells=cells))


def reset(graph, nodes: Sequence[Node], *, keep_units: bool = False) -> None:
    """Put nodes back to pending with only what they are (row, column, α; a summary's units when
    `keep_units`), so the scheduler thinks them again."""
    for node in nodes:
        data = node.data or {}
        if node.kind == CELL:
            identity = {"row": data["row"], "column": data["column"], "alpha": data.get("alpha")}
        else:
            identity = {"column": data["column"], "grid_row": data.get("grid_row", 0)}
            if keep_units:
                identity.update(units=data.get("units", []), units_ready=data.get("units_ready", False),
                                retrieval_keywords=data.get("retrieval_keywords", []))
        graph.update(node, status=NodeStatus.PENDING, error="", started_at=None, finished_at=None, content="",
                     replace_data=identity)


def reset_from(graph, index: int, *, first_row: int = 0, keep_units: bool = False) -> None:
    """Think again from column `index` on: its thoughts from `first_row` down (none when
    `first_row` is past the last row), its summary (with its units kept when `keep_units`), and
    every later column."""
    for column in columns(graph):
        if column.index < index:
            continue
        start = first_row if column.index == index else 0
        reset(graph, [c for c in column.cells if c.data["row"] >= start])
        if column.summary is not None:
            reset(graph, [column.summary], keep_units=keep_units and column.index == index)
