"""The acceptance scenario, in a real browser, as a person does it: ask a DEoT question, watch the
tree grow, click a node in the mind map, go deeper on it, download the report, restart the
server and reopen the run from Sessions. Screenshots of every step go to test-artifacts/."""

from __future__ import annotations

import re
import time

import pytest

from engine.node_numbers import node_numbers
from storage.models import RunStatus
from tests.e2e.conftest import (
    BREADTH_FILL,
    DEPTH_FILL,
    MAP_IFRAME,
    ROOT_FILL,
    all_dots,
    assert_citations_resolve,
    choose_node,
    download_report,
    map_dots,
    metric,
    node_options,
    node_selectbox,
    nodes_done,
    open_page,
    panel_node,
    poll,
    settled_map,
    well_inside,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

QUESTION = "How did the Apollo program influence the history of computing?"


def test_research_watch_steer_report_restart(streamlit_app, page, shot, app_repo, tmp_path):
    started = time.monotonic()
    repo = app_repo

    # 1. Open the app, type a question; DEoT is the default method; its defaults (15 nodes) take a
    # few seconds at THOUGHTMAP_FAKE_LATENCY=0.15.
    page.goto(streamlit_app.url)
    page.get_by_label("Question").fill(QUESTION)
    assert page.get_by_role("combobox", name="Method", exact=True).input_value().startswith("DEoT")
    shot(page, "1-question")
    page.get_by_role("button", name="Start").click()

    # 2. The tree grows between two screenshots: in the "Nodes done" metric and on the map.
    def growing(minimum_nodes: int, minimum_dots: int):
        """(nodes in the tree, dots on the map) while the run is active and has at least these."""
        if metric(page, "Status") not in ("queued", "running"):
            return None
        total, dots = nodes_done(page)[1], len(all_dots(page))
        return total >= minimum_nodes and dots >= minimum_dots and (total, dots)

    (first, first_dots) = poll(page, lambda: growing(1, 1), interval=0.1, what="the live view with its first node")
    shot(page, "2a-growing")
    (second, second_dots) = poll(
        page, lambda: growing(first + 1, first_dots + 1), interval=0.1, what="the tree to grow while the run is active"
    )
    shot(page, "2b-grown")
    assert second > first and second_dots > first_dots, (first, first_dots, second, second_dots)
    run_id = page.url.split("run=")[1].split("&")[0]

    # 3. When the run is done, click a node in the map.
    poll(page, lambda: metric(page, "Status") == "done", timeout=120, what="the run to finish")
    # Watched to its end, the run opens its report (it is folded while the run works).
    poll(
        page,
        lambda: page.get_by_role("link", name="Open in the Report page").is_visible(),
        timeout=30,
        what="the watched run's report to open",
    )
    total = poll(page, lambda: (n := nodes_done(page))[0] == n[1] and n[1], what="all nodes done")
    assert total == len(repo.list_nodes(run_id)) > 1
    root = repo.list_nodes(run_id)[0]
    assert root.parent_id is None and panel_node(page) == root.id  # the root is selected by default
    # The map redraws on every rerun; wait until its dots are drawn, then click a whole aspect dot.
    dots = settled_map(page)
    # One root, in its own colour although it is selected (a halo marks the selection), in view.
    roots = [d for d in dots if d["fill"] == ROOT_FILL]
    assert [d["id"] for d in roots] == [str(root.id)], ("one root, in its own colour", roots)
    assert roots[0]["selected"] and roots[0]["inView"], roots[0]
    aspects = [d for d in map_dots(page, BREADTH_FILL) if well_inside(d)]
    top_row = min(d["y"] for d in aspects)  # a first-layer aspect of the question
    target = max((d for d in aspects if d["y"] < top_row + 5), key=lambda d: d["pixels"])
    shot(page, "3a-done")
    canvas = page.frame_locator(MAP_IFRAME).locator("#map canvas")
    canvas.click(position={"x": target["x"], "y": target["y"]})
    clicked = poll(
        page, lambda: (n := panel_node(page)) != root.id and n, what="the node panel to show the clicked node"
    )
    # The node under the pointer is the one the panel shows: its tooltip starts with its number. A
    # click hides the tooltip (it would cover the map); hovering the same spot again shows it.
    tooltip = page.frame_locator(MAP_IFRAME).locator("#tooltip")
    assert not tooltip.is_visible(), "a click hides the hover title"
    page.mouse.move(0, 0)
    canvas.hover(position={"x": target["x"], "y": target["y"]})
    hovered = poll(
        page,
        lambda: tooltip.is_visible() and re.match(r"#(\d+) ", tooltip.inner_text()),
        timeout=15,
        what="the hover title of the clicked node",
    )
    assert int(hovered.group(1)) == node_numbers(repo.list_nodes(run_id))[clicked], (hovered.group(0), clicked)
    node = repo.get_node(clicked)
    assert node.run_id == run_id and node.parent_id is not None
    assert node_selectbox(page).input_value().startswith(f"#{node_numbers(repo.list_nodes(run_id))[clicked]} ")
    page.get_by_role("heading", name=node.label).first.wait_for()
    shot(page, "3b-map-click")
    page.mouse.move(0, 0)  # away from the map: its hover title would cover the next screenshots

    # 4. Go deeper on the clicked node: a new follow-up appears under it, without touching the page.
    page.get_by_role("button", name="Go deeper").click()
    poll(
        page,
        lambda: nodes_done(page) == (total + 1, total + 1) and metric(page, "Status") == "done",
        timeout=120,
        what="the new follow-up node to appear and finish",
    )
    new = repo.list_nodes(run_id)[-1]
    assert new.parent_id == clicked and new.data.get("engine") == "depth", new
    options = node_options(page)
    assert len(options) == total + 1
    new_number = node_numbers(repo.list_nodes(run_id))[new.id]
    assert options[-1].startswith(f"#{new_number} ")
    assert options[-1].removeprefix(f"#{new_number} ").rstrip("…") in new.label
    assert poll(
        page, lambda: [d for d in map_dots(page, DEPTH_FILL) if d["pixels"] > 10], what="the follow-up on the map"
    )
    settled_map(page)
    shot(page, "4-go-deeper")

    # The Node selectbox still selects after a map click (the map's last value must not win).
    choose_node(page, new_number)
    poll(page, lambda: panel_node(page) == new.id, what="the panel to follow the Node selectbox")
    shot(page, "4b-selectbox")

    # 5. Report page: download the Markdown report.
    report = download_report(page, tmp_path)
    shot(page, "5-report")
    assert QUESTION in report
    assert_citations_resolve(report)

    # 6. Restart the server on the same home; open the run from Sessions; the tree is back.
    streamlit_app.restart()
    page.goto(streamlit_app.url)
    open_page(page, "Sessions", page.locator(f".st-key-open-{run_id} button"))
    page.locator(f".st-key-open-{run_id} button").click()
    page.get_by_role("heading", name=QUESTION).first.wait_for()
    poll(
        page,
        lambda: metric(page, "Status") == "done" and nodes_done(page) == (total + 1, total + 1),
        what="the reopened run's progress",
    )
    reopened = settled_map(page)
    assert [d["id"] for d in reopened if d["fill"] == ROOT_FILL and d["inView"]] == [str(root.id)], (
        "the reopened map shows the root",
        reopened,
    )
    assert len(node_options(page)) == total + 1
    assert repo.get_run(run_id).status == RunStatus.DONE
    shot(page, "6-reopened")
    assert page.dialogs == []
    assert page.outside_requests == [], "the offline app asked for something past this machine"
    print(f"scenario took {time.monotonic() - started:.1f} s")
