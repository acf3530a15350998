"""A method the app has never heard of, in a real browser: the test-only grid method
(`tests/support/grid_method.py`), loaded as a plugin (THOUGHTMAP_METHODS), is offered in Explore, runs, and
is drawn from its declarations alone: a rows × columns map, its legend, its node panel's Refine
command with its form, and its "Matrix" run-state panel. The screenshot goes to
test-artifacts/grid-method.png (1400×900)."""

from __future__ import annotations

import os

import pytest

from engine.node_numbers import node_numbers
from storage.models import CommandStatus
from tests.e2e.conftest import (
    ARTIFACTS,
    MAP_IFRAME,
    REPO,
    StreamlitApp,
    app_idle,
    choose_method,
    choose_node,
    map_dots,
    metric,
    panel_node,
    poll,
    rgb,
)
from tests.support.grid_method import GridMethod

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

QUESTION = "Why did the Bronze Age collapse?"
CELL_FILL = rgb(GridMethod.contract().node_kinds["cell"].colour)
SYNTHESIS_FILL = rgb(GridMethod.contract().node_kinds["synthesis"].colour)


@pytest.fixture
def grid_app(app_home, tmp_path, request):
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    app = StreamlitApp(
        app_home,
        log_dir=tmp_path,
        env={"THOUGHTMAP_METHODS": "tests.support.grid_method:GridMethod", "PYTHONPATH": path},
    )
    try:
        app.start()
        yield app
    finally:
        app.stop()
        report = getattr(request.node, "rep_call", None)
        if report is None or report.failed:
            print(f"--- end of the Streamlit log ({app.log_path}) ---\n{app.log()}")


def _blobs(page, colour, minimum: int = 40) -> list[dict]:
    return [d for d in map_dots(page, colour) if d["pixels"] >= minimum]


def _distinct(values: list[float], tolerance: float = 12) -> int:
    groups: list[float] = []
    for value in sorted(values):
        if not groups or value - groups[-1] > tolerance:
            groups.append(value)
    return len(groups)


def test_a_plugin_method_is_drawn_from_its_declarations(grid_app, page, app_repo):
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(grid_app.url)
    page.get_by_label("Question").fill(QUESTION)
    choose_method(page, GridMethod.title)
    page.get_by_text(GridMethod.summary).wait_for()
    page.get_by_role("button", name="Start").click()

    poll(page, lambda: metric(page, "Status") == "done", timeout=120, what="the grid run to finish")
    # Streamlit's own Deploy button is hidden (.streamlit/config.toml): the only controls are ours.
    assert page.get_by_role("button", name="Deploy").count() == 0
    run_id = page.url.split("run=")[1].split("&")[0]
    nodes = app_repo.list_nodes(run_id)
    cells = [n for n in nodes if n.kind == "cell"]
    assert len(cells) == 4 and len([n for n in nodes if n.kind == "synthesis"]) == 2

    # The map: four cell boxes in two rows and two columns, two synthesis diamonds on a row above.
    def laid_out():
        boxes, diamonds = _blobs(page, CELL_FILL, 200), _blobs(page, SYNTHESIS_FILL)
        return len(boxes) >= 4 and len(diamonds) >= 2 and (boxes, diamonds)

    boxes, diamonds = poll(page, laid_out, timeout=60, interval=0.5, what="the grid on the map")
    # (The page reruns under us: a replaced map may linger for a moment, hence the poll.)
    poll(
        page,
        lambda: page.locator(MAP_IFRAME).scroll_into_view_if_needed(timeout=2_000) or True,
        what="the map to scroll into view",
    )
    boxes = sorted(boxes, key=lambda d: -d["pixels"])[:4]
    assert _distinct([d["x"] for d in boxes]) == 2 and _distinct([d["y"] for d in boxes]) == 2, boxes
    assert max(d["y"] for d in diamonds) < min(d["y"] for d in boxes), (diamonds, boxes)
    page.wait_for_timeout(500)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "grid-method.png"))

    # The legend, drawn in the map's frame from the declared kinds and edge kind.
    page.frame_locator(MAP_IFRAME).get_by_role("button", name="Legend").click()
    legend = page.frame_locator(MAP_IFRAME).locator("#legend")
    legend.wait_for()
    text = legend.inner_text()
    for expected in ("Cell", "Synthesis", "column link", "a thought of the matrix", "links the cells of a column"):
        assert expected in text, (expected, text)
    page.screenshot(path=str(ARTIFACTS / "grid-method-legend.png"))
    page.frame_locator(MAP_IFRAME).get_by_role("button", name="Legend").click()

    # A cell in the node panel: its caption, the Refine command with its form; the Matrix panel.
    cell = cells[0]
    choose_node(page, node_numbers(nodes)[cell.id])
    poll(page, lambda: panel_node(page) == cell.id, what="the node panel to show the cell")
    page.get_by_text(f"Row {cell.data['row'] + 1}, column {cell.data['column'] + 1} · angle:").wait_for()
    refine = page.get_by_role("button", name="Refine", exact=True)
    refine.wait_for()
    note = page.get_by_role("textbox", name="Note", exact=True)
    note.wait_for()
    page.get_by_role("spinbutton", name="Strength", exact=True).wait_for()
    # The run's state and its command, in the tab beside the node's (the default name, "Run").
    page.get_by_role("tab", name="Run", exact=True).click()
    page.get_by_text("Matrix", exact=True).wait_for()
    page.get_by_text("4 of 4 cells thought through").wait_for()
    page.get_by_role("button", name="Reset matrix view").wait_for()
    node_tab = page.get_by_role("tab", name="Node", exact=True)
    node_tab.click()

    def note_shown() -> bool:
        # A tab click that lands while the page reruns can be lost (a fresh-clone run waited 30 s for
        # the Note box of a Node tab that never opened): clicked again when the page is idle.
        if note.is_visible():
            return True
        if app_idle(page):
            node_tab.click(timeout=2_000)
        return False

    poll(page, note_shown, what="the Node tab with the Refine form")

    # Refine with a note: queued, applied, the run done again.
    note.fill("Weigh the climate record")
    note.press("Tab")
    refine.click()
    poll(
        page,
        lambda: [c.status for c in app_repo.list_commands(run_id)] == [CommandStatus.DONE],
        timeout=120,
        what="the refine command to be applied",
    )
    assert app_repo.get_node(cell.id).data["refinements"] == ["Weigh the climate record"]
    poll(page, lambda: metric(page, "Status") == "done", timeout=60, what="the run to be done again")
    page.screenshot(path=str(ARTIFACTS / "grid-method-refined.png"), full_page=True)
    assert page.dialogs == []
