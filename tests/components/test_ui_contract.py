"""The app is built from each method's declarations (issue "Method contract v2", the app part).

A method that exists only in the tests (`tests/support/grid_method.py`, loaded as a plugin through
THOUGHTMAP_METHODS, as a method kept outside the package would be) is served by the app unchanged:
its map (colours, shapes, grid layout, edge styles), its legend, its node panel (caption, the Refine
command and its payload form, validation before anything is queued), its run-state panel and its
run-level commands. The live view reads the stored graph only when the run's version changed. And
no file of `components/` or `pages/` names a method or a method's data key.
"""

from __future__ import annotations

import re

import pytest
from sqlalchemy import event

from components import app_state, map_layout, mindmap
from components.map_legend import legend, legend_text
from engine.contract import EdgeKind, Layout, MethodContract, NodeData, NodeKind, ViewSpec
from storage.models import CommandStatus, Edge, Node, NodeStatus, RunStatus
from tests import REPO_ROOT
from tests.pages.test_app_pages import assert_no_exception, joined, node_list, open_page, texts, wait_until_idle
from tests.support.fixtures_engine import run_to_end
from tests.support.grid_method import GridMethod

ROOT = REPO_ROOT
QUESTION = "Why did the Bronze Age collapse?"
PLUGIN = "tests.support.grid_method:GridMethod"


@pytest.fixture
def services(prebuilt_corpus_home, monkeypatch):
    """The app's own Services, serving the built-in methods and the test-only grid method."""
    monkeypatch.setenv("THOUGHTMAP_METHODS", PLUGIN)
    app_state.get_services.clear()
    built = app_state.get_services()
    assert list(built.methods)[-1] == GridMethod.name  # after the built-in ones, in their order
    yield built
    for run in built.repo.list_runs(limit=1000):
        built.runner.wait(run.id, timeout=20)
    built.close()
    app_state.get_services.clear()


@pytest.fixture
def grid_run(services) -> str:
    run_id = run_to_end(services, QUESTION, GridMethod.name, {"rows": 2, "columns": 2})
    assert services.repo.get_run(run_id).status == RunStatus.DONE
    return run_id


class MapSpy:
    """Stands in for the map component (AppTest cannot render it): records what it was given and
    reports a click on `click`."""

    def __init__(self, monkeypatch, click: int | None = None) -> None:
        self.calls: list[mindmap.MapData] = []
        self.click = click
        monkeypatch.setattr(mindmap, "mind_map", self)
        monkeypatch.setattr(mindmap, "map_choice", lambda key: self.click)

    def __call__(self, data, *, key, **kwargs):
        self.calls.append(data)

    @property
    def last(self) -> mindmap.MapData:
        assert self.calls, "the map was not drawn"
        return self.calls[-1]


def _cells(services, run_id: str) -> list[Node]:
    return services.repo.list_nodes(run_id, kind="cell")


# ---------------------------------------------------------------------- Explore, from the declarations


def test_the_grid_method_is_offered_and_started_from_explore(services):
    at = open_page()
    method = at.selectbox(key="method")
    assert method.options[-1] == GridMethod.title
    assert method.value == list(services.methods)[0]  # the registered order, nothing named
    at.selectbox(key="method").set_value(GridMethod.name).run()
    assert_no_exception(at)
    assert GridMethod.summary in texts(at.caption)
    assert at.number_input(key=f"params-{GridMethod.name}.rows").label == "Rows"
    at.text_area(key="question").input(QUESTION)
    at.number_input(key=f"params-{GridMethod.name}.rows").set_value(1)
    at.button(key="start").click().run()
    assert_no_exception(at)
    run_id = at.query_params.get("run")
    run = wait_until_idle(services, run_id)
    assert (run.method, run.status, run.params["rows"]) == (GridMethod.name, RunStatus.DONE, 1)


def test_the_map_draws_the_declared_kinds_edges_and_grid(services, grid_run, monkeypatch):
    spy = MapSpy(monkeypatch)
    open_page(run_id=grid_run)
    data = spy.last
    assert data.mode == mindmap.FIXED
    kinds = {n.kind: GridMethod.contract().node_kinds[n.kind] for n in services.repo.list_nodes(grid_run)}
    nodes = {int(item["id"]): item for item in data.nodes}
    stored = {n.id: n for n in services.repo.list_nodes(grid_run)}
    for node_id, item in nodes.items():
        kind = kinds[stored[node_id].kind]
        assert item["shape"] == kind.shape
        assert item["color"]["background"] == kind.fill(stored[node_id])
        assert "level" not in item  # no hierarchy on a grid
    by_kind = {}
    for node_id, item in nodes.items():
        by_kind.setdefault(stored[node_id].kind, []).append(item)
    assert {i["shape"] for i in by_kind["cell"]} == {"box"}
    assert {i["color"]["background"] for i in by_kind["cell"]} == {"#8E44AD"}
    assert {i["shape"] for i in by_kind["synthesis"]} == {"diamond"}
    assert {i["color"]["background"] for i in by_kind["synthesis"]} == {"#16A085"}
    [root] = by_kind["question"]
    assert (root["shape"], root["color"]["background"]) == ("star", "#1B4F72")
    # Rows × columns: each cell at its (row + 1, column), each synthesis on row 0, the question above,
    # centred over the two columns (the drawing is centred on x = 0).
    for cell in _cells(services, grid_run):
        item = nodes[cell.id]
        assert (item["x"], item["y"]) == (
            (cell.data["column"] - 0.5) * map_layout.GRID_COLUMN,
            (cell.data["row"] + 1) * map_layout.GRID_ROW,
        )
    assert {i["y"] for i in by_kind["synthesis"]} == {0}
    assert (root["x"], root["y"]) == (0, -map_layout.GRID_ROW)
    # Edges styled by their kind: column links dashed, purple, drawn over the layout.
    kinds_of_edges = {(e.src, e.dst): e.kind for e in services.repo.list_edges(grid_run)}
    assert "column" in kinds_of_edges.values()
    for edge in data.edges:
        kind = kinds_of_edges[(int(edge["from"]), int(edge["to"]))]
        if kind == "column":
            assert (
                edge["dashes"] is True and edge["color"]["color"] == GridMethod.contract().edge_kinds["column"].colour
            )
            assert edge["physics"] is False and edge["tip"] == "column link"
        else:
            assert (
                edge["dashes"] is False and "physics" not in edge and "tip" not in edge
            )  # the tree says nothing on hover
    assert not data.options["layout"]["hierarchical"]["enabled"] and not data.options["physics"]["enabled"]

    # The legend (drawn in the map's frame) lists the declared kinds, the variant and the edge kind, and
    # the status borders.
    legend = legend_text(data.legend)
    for text in (
        "Question:",
        "Cell:",
        "Synthesis:",
        "a cell refined at full strength",
        "column link:",
        "links the cells of a column",
        "running",
        "failed",
    ):
        assert text in legend, text


def test_the_node_panel_offers_refine_with_its_form_and_validates_it(services, grid_run, monkeypatch):
    cell = _cells(services, grid_run)[0]
    MapSpy(monkeypatch, click=cell.id)
    at = open_page(run_id=grid_run)
    assert node_list(at).value == cell.id
    assert f"Row {cell.data['row'] + 1}, column {cell.data['column'] + 1} · angle: {cell.data['angle']}" in texts(
        at.caption
    )
    key = f"steer-{grid_run}-{cell.id}-refine"
    button = at.button(key=key)
    assert (button.label, button.help) == ("Refine", "Think this cell again with your note.")
    note, strength = at.text_input(key=f"{key}.note"), at.number_input(key=f"{key}.strength")
    assert (note.label, note.value) == ("Note", "")
    # No bounds in the widget (it would keep the last valid value of a bad entry): the help says
    # the range, the model refuses a bad value with the reason.
    assert (strength.label, strength.value, strength.min, strength.max) == ("Strength", 2, None, None)
    assert strength.help.endswith("Allowed: 1 to 5.")
    # The run-level commands and the run state's panel, beside the map.
    labels = {b.label for b in at.button}
    assert {"Reset matrix view", "Rewrite report"} <= labels
    assert "Matrix" in [e.label for e in at.expander]
    filled = len(_cells(services, grid_run))
    assert f"{filled} of {filled} cells thought through" in texts(at.caption)
    assert "| row | column 1 | column 2 |" in joined(at.markdown)

    # Refine without a note: refused before anything is queued.
    at.text_input(key=f"{key}.note").input("   ")
    at.button(key=key).click().run()
    assert_no_exception(at)
    errors = joined(at.error)
    assert "Could not refine: fill in Note first." in errors, errors
    assert services.repo.list_commands(grid_run) == []

    # With a note: a validated command is queued and applied.
    at.text_input(key=f"{key}.note").input("  Weigh the climate record  ")
    at.number_input(key=f"{key}.strength").set_value(5)
    at.button(key=key).click().run()
    assert_no_exception(at)
    assert not at.error, texts(at.error)
    [command] = services.repo.list_commands(grid_run)
    assert (command.kind, command.payload) == (
        "refine",
        {"node_id": cell.id, "note": "Weigh the climate record", "strength": 5},
    )
    assert wait_until_idle(services, grid_run).status == RunStatus.DONE
    assert services.repo.list_commands(grid_run)[0].status == CommandStatus.DONE
    refined = services.repo.get_node(cell.id)
    assert refined.data["refinements"] == ["Weigh the climate record"] and refined.status == NodeStatus.DONE
    at.run()
    assert_no_exception(at)
    # Refined at full strength: the variant's colour.
    spy = MapSpy(monkeypatch, click=cell.id)
    at.run()
    item = next(i for i in spy.last.nodes if i["id"] == str(cell.id))
    assert item["color"]["background"] == "#5B2C6F"


def test_a_node_without_commands_and_a_method_without_steering_say_so(services, grid_run, monkeypatch):
    synthesis = services.repo.list_nodes(grid_run, kind="synthesis")[0]
    MapSpy(monkeypatch, click=synthesis.id)
    at = open_page(run_id=grid_run)
    assert "No command applies to this node now." in texts(at.caption)
    assert not [b for b in at.button if (b.key or "").startswith(f"steer-{grid_run}-")]

    direct = run_to_end(services, "Who wrote the play Hamlet?", "direct")
    MapSpy(monkeypatch, click=services.repo.list_nodes(direct)[-1].id)
    at = open_page(run_id=direct)
    assert "This method has no steering." in texts(at.caption)
    # Beside the map, the run's tab holds only what every method has: rewriting the report.
    assert [t.label for t in at.tabs] == ["Node", "Run"]
    assert [b.label for b in at.tabs[1].button] == ["Rewrite report"]


def test_a_run_command_from_the_panel_area(services, grid_run, monkeypatch):
    spy = MapSpy(monkeypatch)
    at = open_page(run_id=grid_run)
    # Beside the map: the node's tab and the run's (the default name: the method declares none),
    # which holds the run state's panel and the run-level command.
    assert [t.label for t in at.tabs] == ["Node", "Run"]
    run_tab = at.tabs[1]
    assert [e.label for e in run_tab.expander][:1] == [
        services.method(GridMethod.name).contract().run_states["matrix"].title
    ]
    assert f"run-cmd-{grid_run}-reset_matrix" in {b.key for b in run_tab.button}
    assert node_list(at) in at.tabs[0].selectbox
    # A node clicked on the map while the run's tab is open brings the node's tab back.
    at.session_state[f"side-{grid_run}"] = "Run"
    at.run()
    assert at.session_state[f"side-{grid_run}"] == "Run"
    spy.click = _cells(services, grid_run)[0].id
    at.run()
    assert at.session_state[f"side-{grid_run}"] == "Node"
    spy.click = None
    states = len(services.repo.list_run_states(grid_run, "matrix"))
    at.button(key=f"run-cmd-{grid_run}-reset_matrix").click().run()
    assert_no_exception(at)
    assert not at.error, texts(at.error)
    assert wait_until_idle(services, grid_run).status == RunStatus.DONE
    [command] = services.repo.list_commands(grid_run)
    assert (command.kind, command.status) == ("reset_matrix", CommandStatus.DONE)
    assert len(services.repo.list_run_states(grid_run, "matrix")) == states + 1


# ---------------------------------------------------------------------- the live view's reads


def test_an_unchanged_run_is_not_read_again(services, grid_run, monkeypatch):
    """The live view asks for the run's version; the graph, the node's sources and the run states
    are read again only when it changed. (AppTest reruns the whole page; the live view alone, a
    fragment, reruns every second while a run is active: only its version query is left then.)"""
    MapSpy(monkeypatch, click=_cells(services, grid_run)[0].id)
    at = open_page(run_id=grid_run)
    statements: list[str] = []

    def record(conn, cursor, statement, *args):
        statements.append(" ".join(statement.split()))

    event.listen(services.db.engine, "before_cursor_execute", record)
    try:
        at.run()
        assert_no_exception(at)
        graph_reads = re.compile(r"\bFROM (nodes|edges|run_states)\b|\bnode_sources\b")
        assert [s for s in statements if graph_reads.search(s)] == []
        assert sum(s.startswith("SELECT runs.version FROM runs") for s in statements) == 1, statements
        # A stored change (a rename bumps the version): read once more.
        services.repo.rename_run(grid_run, "Collapse, renamed")
        statements.clear()
        at.run()
        assert_no_exception(at)
        assert [s for s in statements if re.search(r"\bFROM nodes\b", s)], statements
        assert [s for s in statements if re.search(r"\bFROM run_states\b", s)], statements
    finally:
        event.remove(services.db.engine, "before_cursor_execute", record)
    assert "**Collapse, renamed**" in texts(at.markdown)


# ---------------------------------------------------------------------- layouts, unit by unit


class _Data(NodeData):
    pass


def _contract(layout: Layout) -> MethodContract:
    return MethodContract.build(
        "layouts",
        [NodeKind("step", _Data, "Step", "#4C78A8", "a step")],
        [EdgeKind("backtrack", "backtrack", "back to an ancestor", dashes=True, colour="#E45756", structural=False)],
        [],
        [],
        ViewSpec(layout=layout),
    )


def _tree() -> tuple[list[Node], list[Edge]]:
    nodes = [
        Node(id=1, run_id="r", kind="step", label="root", depth=0),
        Node(id=2, run_id="r", kind="step", label="a", parent_id=1, depth=1),
        Node(id=3, run_id="r", kind="step", label="b", parent_id=1, depth=1),
        Node(id=4, run_id="r", kind="step", label="a1", parent_id=2, depth=2),
        Node(id=5, run_id="r", kind="step", label="a2", parent_id=2, depth=2),
    ]
    edges = [Edge(id=i, run_id="r", src=n.parent_id, dst=n.id, kind="child") for i, n in enumerate(nodes[1:], 1)]
    return nodes, edges


def test_tree_layouts_keep_the_structural_tree_under_edges_drawn_over_it():
    nodes, edges = _tree()
    plain = mindmap.build_map(nodes, edges, contract=_contract(Layout.SEARCH_TREE))
    assert plain.mode == mindmap.HIERARCHICAL  # nothing drawn over it: vis's own tree layout
    assert [n["level"] for n in plain.nodes] == [0, 1, 1, 2, 2]

    backtrack = Edge(id=9, run_id="r", src=5, dst=3, kind="backtrack")
    over = mindmap.build_map(nodes, [*edges, backtrack], contract=_contract(Layout.SEARCH_TREE))
    assert over.mode == mindmap.FIXED
    at = {int(n["id"]): (n["x"], n["y"]) for n in over.nodes}
    spacing, level = map_layout.NODE_SPACING, map_layout.LEVEL_SEPARATION
    # Levels left to right by depth, leaves one below the other, parents centred beside their children,
    # the whole centred on y = 0: the backtrack (5 -> 3) moves nothing.
    assert at == {
        4: (2 * level, -spacing),
        5: (2 * level, 0),
        2: (level, -spacing / 2),
        3: (level, spacing),
        1: (0, spacing / 4),
    }
    drawn = over.edges[-1]
    assert (drawn["dashes"], drawn["color"]["color"], drawn["physics"], drawn["tip"]) == (
        True,
        "#E45756",
        False,
        "backtrack",
    )
    assert drawn["smooth"]["enabled"] is True
    # The same positions as without the backtrack, had they been computed here.
    assert map_layout.tree_positions(nodes) == at


def test_network_layout_uses_physics_and_no_levels():
    nodes, edges = _tree()
    data = mindmap.build_map(nodes, edges, contract=_contract(Layout.NETWORK))
    assert data.mode == mindmap.PHYSICS and all("level" not in n and "x" not in n for n in data.nodes)
    assert data.options["physics"]["enabled"] and not data.options["layout"]["hierarchical"]["enabled"]


def test_a_map_without_a_contract_draws_neutral_nodes():
    nodes, edges = _tree()
    data = mindmap.build_map(nodes, edges, selected=2)
    assert {n["color"]["background"] for n in data.nodes} == {mindmap.NEUTRAL_FILL}
    assert data.selected == "2"
    assert legend(None)  # still explains the borders


# ---------------------------------------------------------------------- nothing named


QUOTED_METHOD = re.compile(r"""(['"])(gridtest|deot|omnithink|rag|direct)\1""", re.IGNORECASE)
QUOTED_KEY = re.compile(r"""(['"])(engine|topic|subtopic)\1""")


def test_no_component_or_page_names_a_method_or_its_data_keys():
    files = sorted([*(ROOT / "components").glob("*.py"), *(ROOT / "pages").glob("*.py"), ROOT / "app.py"])
    assert len(files) > 8
    found = []
    for path in files:
        source = path.read_text(encoding="utf-8")
        for pattern in (QUOTED_METHOD, QUOTED_KEY):
            found += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in pattern.finditer(source)]
        # Nor through the registry's fixed table instead of the methods the process serves.
        if re.search(r"\bMETHODS\b", source):
            found.append(f"{path.relative_to(ROOT)}: METHODS")
    assert found == []
    assert not (ROOT / "components" / "artifacts.py").exists()


def test_the_name_check_would_catch_a_method_name():
    assert QUOTED_METHOD.search('if run.method == "deot":')
    assert QUOTED_METHOD.search("kind in ('topic', 'subtopic') or m == 'omnithink'")
    assert QUOTED_KEY.search('(node.data or {}).get("engine")')
    assert not QUOTED_METHOD.search('"Go deeper: a direct follow-up"') and not QUOTED_KEY.search("engine.methods")
