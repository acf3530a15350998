"""A method that exists only in the tests: a small matrix of thoughts (rows × columns of `cell`
nodes, a `synthesis` node per column, column links between neighbouring cells), a `refine` command
with a payload, a run-state panel and a grid layout. Nothing in `components/` or `pages/` names it:
the app shows it from its declarations alone. Registered by the tests only (Services(methods=...),
or THOUGHTMAP_METHODS=tests.support.grid_method:GridMethod for the browser test's app process).

It does real work on the injected parts: every cell searches the run's searcher and asks the LLM
(prompt `grid.cell`) for a thought citing what it found, so the contract tests can count calls,
kill it mid-run and check citations."""

from __future__ import annotations

from pydantic import Field

from engine.citations import cited_source_ids, source_blocks, to_stored_markers
from engine.contract import (
    CommandPayload,
    CommandRejected,
    CommandSpec,
    EdgeKind,
    Layout,
    NodeCommand,
    NodeData,
    NodeKind,
    RunStateModel,
    RunStateSpec,
    Variant,
    ViewSpec,
    regenerate_report_command,
)
from engine.graph import NewNode
from engine.methods.base import REPORT, Method, MethodParams, RunContext
from engine.methods.estimate import CostEstimate, Tally
from engine.prompting import Prompt
from engine.search.protocol import SearchError
from storage.models import Node, NodeStatus

CELL_PROMPT = Prompt(
    "grid.cell",
    "You write one short thought about a question, from one angle, citing the sources as [n].",
    "Question: $question\nAngle: $angle\n\nSources:\n$sources\n\nWrite two sentences.",
)
SYNTHESIS_PROMPT = Prompt(
    "grid.synthesis",
    "You merge the thoughts of one column into one paragraph, keeping their citations [n].",
    "Question: $question\n\nSources:\n$sources\n\nThoughts:\n$thoughts",
)


class GridParams(MethodParams):
    rows: int = Field(default=2, ge=1, le=4, description="Rows of the matrix: thoughts per column.")
    columns: int = Field(default=2, ge=1, le=4, description="Columns of the matrix: rounds of thought.")


class GridQuestionData(NodeData):
    """The question at the top of the grid."""


class CellData(NodeData):
    row: int = 0
    column: int = 0
    angle: str = ""
    refinements: list[str] = Field(default_factory=list, description="Notes given with Refine.")
    strength: int = Field(default=1, description="How strongly the last refinement weighs.")

    def caption(self) -> str:
        return f"Row {self.row + 1}, column {self.column + 1} · angle: {self.angle}"


class SynthesisData(NodeData):
    column: int = 0


class MatrixState(RunStateModel):
    rows: int = 0
    columns: int = 0
    filled: list[list[int]] = Field(default_factory=list, description="(row, column) of every answered cell.")

    def panel_caption(self) -> str:
        return f"{len(self.filled)} of {self.rows * self.columns} cells thought through"

    def panel_markdown(self) -> str:
        done = {tuple(cell) for cell in self.filled}
        lines = [
            "| row | " + " | ".join(f"column {c + 1}" for c in range(self.columns)) + " |",
            "|---|" + "---|" * self.columns,
        ]
        for r in range(self.rows):
            lines.append(
                f"| {r + 1} | " + " | ".join("filled" if (r, c) in done else "open" for c in range(self.columns)) + " |"
            )
        return "\n".join(lines)


class RefinePayload(NodeCommand):
    note: str = Field(min_length=1, max_length=500, description="What the cell should take into account.")
    strength: int = Field(default=2, ge=1, le=5, description="How strongly the note weighs (1-5).")


def _position(node: Node) -> tuple[int, int] | None:
    data = node.data or {}
    if node.kind == "cell":
        return data.get("row", 0) + 1, data.get("column", 0)
    if node.kind == "synthesis":
        return 0, data.get("column", 0)
    return None


CELL = "cell"
ANGLES = ("causes", "effects", "evidence", "open questions")


class GridMethod(Method):
    name = "gridtest"
    title = "Grid of thoughts (test method)"
    summary = "A test-only method: a rows × columns matrix of thoughts, one synthesis per column."
    Params = GridParams
    node_kinds = (
        NodeKind("question", GridQuestionData, "Question", "#1B4F72", "the question of the grid", shape="star"),
        NodeKind(
            CELL,
            CellData,
            "Cell",
            "#8E44AD",
            "a thought of the matrix",
            shape="box",
            answers=True,
            colour_field="strength",
            variants=(Variant(5, "#5B2C6F", "a cell refined at full strength"),),
        ),
        NodeKind("synthesis", SynthesisData, "Synthesis", "#16A085", "a column's synthesis", shape="diamond"),
    )
    edge_kinds = (
        # Lighter than the cells it links: an edge drawn in a node's own fill merges with it on the map.
        EdgeKind(
            "column",
            "column link",
            "links the cells of a column, top to bottom",
            dashes=True,
            colour="#C39BD3",
            structural=False,
        ),
    )
    commands = (
        CommandSpec(
            "refine",
            "Refine",
            "Think this cell again with your note.",
            RefinePayload,
            kinds=frozenset({CELL}),
            statuses=frozenset({NodeStatus.DONE, NodeStatus.FAILED}),
            done="Refining",
        ),
        CommandSpec(
            "reset_matrix", "Reset matrix view", "Recount the matrix panel.", CommandPayload, done="Recounting"
        ),
        regenerate_report_command(),
    )
    run_states = (RunStateSpec("matrix", MatrixState, "Matrix"),)
    view = ViewSpec(layout=Layout.GRID, panels=("matrix",), position=_position)

    @classmethod
    def estimate(cls, params: MethodParams) -> CostEstimate:
        """One call per cell (the synthesis joins the cells' texts without the model). Tokens: the
        cell prompt with two short passages, measured on the fake; the thought is capped at 200."""
        p: GridParams = params  # type: ignore[assignment]
        cells = p.rows * p.columns
        return (
            Tally()
            .add("think each cell", cells, prompt=240, completion=120)
            .estimate(low=cells, high=cells, how=f"{p.rows} x {p.columns} cells, one call each")
        )

    def start(self, ctx: RunContext) -> None:
        params: GridParams = ctx.params  # type: ignore[assignment]
        root = ctx.graph.root()
        if root is not None:
            return
        root = ctx.graph.add(kind="question", label=ctx.question, status=NodeStatus.DONE, content=ctx.question)
        cells = ctx.graph.add_many(
            [
                NewNode(
                    CELL,
                    f"{ANGLES[r % len(ANGLES)]} (round {c + 1})",
                    parent=root,
                    depth=1,
                    data={"row": r, "column": c, "angle": ANGLES[r % len(ANGLES)]},
                )
                for c in range(params.columns)
                for r in range(params.rows)
            ]
        )
        by_place = {(n.data["row"], n.data["column"]): n for n in cells}
        for (r, c), cell in by_place.items():
            if (r + 1, c) in by_place:
                ctx.graph.link(cell, by_place[(r + 1, c)], "column")
        ctx.graph.save_state("matrix", MatrixState(rows=params.rows, columns=params.columns))

    def step(self, ctx: RunContext) -> bool:
        pending = ctx.graph.frontier([CELL], [NodeStatus.PENDING])
        if not pending:
            return False
        column = min(n.data["column"] for n in pending)
        ctx.parallel([lambda cell=cell: self._think(ctx, cell) for cell in pending if cell.data["column"] == column])
        self._count(ctx)
        return True

    def _think(self, ctx: RunContext, cell: Node) -> None:
        ctx.checkpoint()
        cell = ctx.graph.start(cell)
        data = ctx.graph.data(cell, CellData)
        try:
            hits = ctx.searcher.search(f"{ctx.question} {data.angle}", k=2)
        except SearchError:
            hits = []
        sources = ctx.graph.add_sources(hits, node=cell) if hits else []
        angle = data.angle + (" — note: " + data.refinements[-1] if data.refinements else "")
        text = ctx.llm.text(
            CELL_PROMPT.render(
                question=ctx.question, angle=angle, sources=source_blocks(sources) if sources else "(none)"
            ),
            purpose="cell",
            node_id=cell.id,
            max_tokens=200,
        )
        content, _ = to_stored_markers(text, sources)
        ctx.graph.link_sources(cell, cited_source_ids(content))
        ctx.graph.finish(cell, content=content)

    def _count(self, ctx: RunContext) -> None:
        params: GridParams = ctx.params  # type: ignore[assignment]
        filled = [[n.data["row"], n.data["column"]] for n in ctx.graph.nodes(kind=CELL, status=NodeStatus.DONE)]
        ctx.graph.save_state("matrix", MatrixState(rows=params.rows, columns=params.columns, filled=sorted(filled)))

    def apply(self, ctx, command, payload, node) -> set[str]:
        if command.name == "refine":
            assert isinstance(payload, RefinePayload) and node is not None
            data = ctx.graph.data(node, CellData)
            ctx.graph.update(
                node,
                status=NodeStatus.PENDING,
                error="",
                finished_at=None,
                merge_data={"refinements": [*data.refinements, payload.note.strip()], "strength": payload.strength},
            )
            return {REPORT}
        if command.name == "reset_matrix":
            self._count(ctx)
            return set()
        if command.name == "regenerate_report":
            return {REPORT}
        raise CommandRejected(f"unknown command {command.name}")

    def write_outputs(self, ctx: RunContext, rewrite: set[str]) -> None:
        params: GridParams = ctx.params  # type: ignore[assignment]
        root = ctx.graph.root()
        cells = ctx.graph.nodes(kind=CELL)
        existing = {n.data["column"]: n for n in ctx.graph.nodes(kind="synthesis")}
        for column in range(params.columns):
            done = [c for c in cells if c.data["column"] == column and c.status == NodeStatus.DONE]
            synthesis = existing.get(column) or ctx.graph.add(
                kind="synthesis",
                label=f"Synthesis of round {column + 1}",
                parent=root,
                depth=1,
                data={"column": column},
            )
            if synthesis.status == NodeStatus.DONE and REPORT not in rewrite:
                continue
            for cell in done:
                ctx.graph.link(cell, synthesis, "column")
            ctx.graph.finish(synthesis, content="\n\n".join(c.content for c in done) or "_No cell was answered._")
        if REPORT in rewrite or not ctx.graph.has_report():
            self.write_report(ctx)

    def write_report(self, ctx: RunContext) -> None:
        parts = [f"## {n.label}\n\n{n.content}" for n in ctx.graph.nodes(kind="synthesis") if n.content]
        ctx.graph.save_report("\n\n".join(parts) or "_Nothing was answered._", data={"method": self.name})
