"""The mind map in a real browser (issue 12, findings 6 and 9): a stored 50-node OmniThink-shaped run
(written through the repository, no LLM) opened by its URL at 1400×900.

At the default zoom the labels are readable (the network's scale and the font size on screen, read
through the frame's test hook `window.__thoughtmap`), the map is wide and starts above the fold; a
search for a node's text selects and centres it and tells Streamlit (the Node selectbox follows);
collapse hides a subtree and expand restores it; Fit shows every node; full screen fills the viewport;
a failed node keeps its red border when selected. Screenshots: test-artifacts/map-50-nodes-default-
zoom.png and test-artifacts/map-full-screen.png."""

from __future__ import annotations

import os
import socket

import pytest

from components.map_style import STATUS_STYLES
from components.run_view import STEER_ON
from engine.node_numbers import node_numbers
from storage.models import NodeStatus, RunStatus
from tests.e2e.conftest import ARTIFACTS, MAP_IFRAME, map_frame, map_nodes, node_panel_column, node_selectbox, poll, rgb

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

ASPECTS = ("water supply", "housing", "public health", "transport", "local economy")
ANGLES = ("insurance costs", "migration inland", "building codes")
DETAILS = ("in the Netherlands", "in Bangladesh")
FAILED_RED = STATUS_STYLES[NodeStatus.FAILED].border


def seed_run(repo) -> dict:
    """A finished OmniThink-shaped information tree of 50 nodes: the topic, 5 subtopics, 15 below
    them, 29 below those; one failed, two pending."""
    run = repo.create_run(
        question="How will sea-level rise change coastal cities by 2100?",
        method="omnithink",
        params={},
        llm_info={"kind": "fake", "model": "fake", "description": "stored test run"},
        search_mode="local",
        title="Sea-level rise and coastal cities",
    )
    nodes = [
        repo.add_node(
            run.id,
            kind="topic",
            label="How will sea-level rise change coastal cities by 2100?",
            status=NodeStatus.DONE,
            depth=0,
        )
    ]
    level1 = [
        repo.add_node(
            run.id,
            kind="subtopic",
            label=f"How will sea-level rise affect the {aspect} of coastal cities?",
            parent_id=nodes[0].id,
            status=NodeStatus.DONE,
            depth=1,
        )
        for aspect in ASPECTS
    ]
    level2 = [
        repo.add_node(
            run.id,
            kind="subtopic",
            label=f"What does sea-level rise mean for {aspect}: {angle}?",
            parent_id=parent.id,
            status=NodeStatus.DONE,
            depth=2,
        )
        for parent, aspect in zip(level1, ASPECTS, strict=True)
        for angle in ANGLES
    ]
    level3 = []
    for index in range(29):
        parent = level2[index // 2]
        status = NodeStatus.FAILED if index == 7 else NodeStatus.PENDING if index in (20, 21) else NodeStatus.DONE
        level3.append(
            repo.add_node(
                run.id,
                kind="subtopic",
                label=f"{parent.label[:-1]}, {DETAILS[index % 2]}?",
                parent_id=parent.id,
                status=status,
                depth=3,
            )
        )
    nodes += level1 + level2 + level3
    repo.set_status(run.id, RunStatus.DONE)
    assert len(nodes) == 50
    return {"run": run.id, "nodes": nodes, "numbers": node_numbers(nodes), "level1": level1, "level3": level3}


def hook(page, script: str):
    return map_frame(page).locator("body").evaluate(script, timeout=5_000)


def by_id(page) -> dict[str, dict]:
    return {n["id"]: n for n in map_nodes(page)}


def search(page, text: str) -> None:
    box = map_frame(page).get_by_role("searchbox", name="Find a node")
    box.fill(text)
    box.press("Enter")


def centred(node: dict, size: dict, tolerance: float = 3) -> bool:
    return abs(node["x"] - size["width"] / 2) < tolerance and abs(node["y"] - size["height"] / 2) < tolerance


RED_PIXELS = """(body, [x, y, r, colour]) => {
  const canvas = document.querySelector('#map canvas');
  const k = canvas.width / canvas.clientWidth;
  const data = canvas.getContext('2d').getImageData((x - r) * k, (y - r) * k, 2 * r * k, 2 * r * k).data;
  const [R, G, B] = [1, 3, 5].map(i => parseInt(colour.slice(i, i + 2), 16));
  let n = 0;
  for (let i = 0; i < data.length; i += 4)
    if (Math.abs(data[i] - R) < 30 && Math.abs(data[i + 1] - G) < 30 && Math.abs(data[i + 2] - B) < 30) n++;
  return n;
}"""


def red_pixels_around(page, node: dict) -> int:
    """Pixels of the failed border's red drawn within 30 px of the node's centre on the canvas."""
    return map_frame(page).locator("body").evaluate(RED_PIXELS, [node["x"], node["y"], 30, FAILED_RED])


def test_the_map_of_50_nodes_is_readable_searchable_and_foldable(streamlit_app, page, app_repo):
    seeded = seed_run(app_repo)
    numbers = seeded["numbers"]
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{streamlit_app.url}/?run={seeded['run']}")
    poll(page, lambda: len(map_nodes(page)) == 50, what="the 50 nodes on the map")
    page.wait_for_timeout(500)  # the first reruns settle

    # Default zoom: readable labels (never below the frame's minimum scale: 12 px on screen), several
    # nodes in view, the map wide and starting above the fold.
    scale, minimum = hook(page, "() => [window.__thoughtmap.scale(), window.__thoughtmap.minScale()]")
    assert scale >= minimum >= 0.8, (scale, minimum)
    shown = [n for n in map_nodes(page) if n["inView"]]
    assert len(shown) >= 5 and all(n["fontPx"] >= 12 for n in shown), shown
    frame_box = page.locator(MAP_IFRAME).bounding_box()
    content = page.locator('[data-testid="stMainBlockContainer"]').evaluate(
        "e => { const s = getComputedStyle(e); return e.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight); }"
    )
    assert frame_box["width"] >= 0.65 * content and frame_box["height"] >= 600, (frame_box, content)
    assert frame_box["y"] < 900 - 300, frame_box  # most of the map is above the fold
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "map-50-nodes-default-zoom.png"))

    # Search by text: a node far from the start is selected, centred, and chosen in the page as well.
    target = seeded["level3"][27]
    size = hook(page, "() => window.__thoughtmap.map()")
    assert not by_id(page)[str(target.id)]["inView"]
    search(page, target.label)
    found = poll(page, lambda: (n := by_id(page)[str(target.id)])["selected"] and n, what="the match selected")
    assert centred(found, size), (found, size)
    assert map_frame(page).locator("#search-status").inner_text() == "1 of 1"
    poll(
        page,
        lambda: node_selectbox(page).input_value().startswith(f"#{numbers[target.id]} "),
        what="the Node selectbox to follow the map's search",
    )
    # By number, and Enter cycles through several matches.
    search(page, "netherlands")
    first = poll(page, lambda: next((n for n in map_nodes(page) if n["selected"]), None), what="a match")
    map_frame(page).get_by_role("searchbox", name="Find a node").press("Enter")
    second = poll(
        page,
        lambda: (n := next((n for n in map_nodes(page) if n["selected"]), None)) and n["id"] != first["id"] and n,
        what="the next match",
    )
    assert "Netherlands" in first["text"] and "Netherlands" in second["text"] and second["number"] > first["number"]

    # Collapse a first-level subtopic: its 3 + 6 descendants are hidden and it says how many; expand.
    branch = seeded["level1"][0]
    search(page, f"#{numbers[branch.id]}")
    poll(page, lambda: by_id(page)[str(branch.id)]["selected"], what="the subtopic selected by number")
    below = [n for n in seeded["nodes"] if n.parent_id == branch.id]
    below += [n for n in seeded["nodes"] if n.parent_id in {b.id for b in below}]
    assert len(below) == 9
    map_frame(page).get_by_role("button", name="Fold", exact=True).click()
    state = poll(
        page, lambda: all((m := by_id(page))[str(n.id)]["hidden"] for n in below) and m, what="the subtree hidden"
    )
    assert "9 hidden" in state[str(branch.id)]["label"]
    assert sum(n["hidden"] for n in state.values()) == 9
    map_frame(page).get_by_role("button", name="Unfold", exact=True).click()
    poll(page, lambda: not any(n["hidden"] for n in map_nodes(page)), what="the subtree shown again")

    # Fit shows every node (smaller than readable: that is what the button is for).
    map_frame(page).get_by_role("button", name="Fit").click()
    poll(page, lambda: all(n["inView"] for n in map_nodes(page)), what="every node in view after Fit")

    # A failed node keeps its red border when selected (a halo marks the selection, not a colour).
    failed = seeded["level3"][7]
    search(page, f"#{numbers[failed.id]}")
    node = poll(page, lambda: (n := by_id(page)[str(failed.id)])["selected"] and n, what="the failed node selected")
    assert rgb(node["border"]) == rgb(node["selectedBorder"]) == rgb(FAILED_RED), node
    page.wait_for_timeout(300)  # drawn
    assert red_pixels_around(page, by_id(page)[str(failed.id)]) > 40

    # Full screen: the map's frame fills the viewport; leaving restores it.
    map_frame(page).get_by_role("button", name="Full screen").click()
    poll(
        page,
        lambda: hook(page, "() => document.fullscreenElement && document.fullscreenElement.id") == "root",
        what="full screen",
    )
    box = poll(
        page,
        lambda: (b := page.locator(MAP_IFRAME).bounding_box()) and b["width"] >= 1399 and b,
        what="the frame to fill the viewport",
    )
    assert box["height"] >= 899, box
    inner = hook(
        page, "() => { const r = document.getElementById('map').getBoundingClientRect(); return [r.width, r.height]; }"
    )
    assert inner[0] >= 1399 and inner[1] >= 800, inner
    page.wait_for_timeout(300)
    page.screenshot(path=str(ARTIFACTS / "map-full-screen.png"))
    map_frame(page).get_by_role("button", name="Exit full screen").click()
    poll(page, lambda: hook(page, "() => document.fullscreenElement === null"), what="full screen left")
    poll(page, lambda: page.locator(MAP_IFRAME).bounding_box()["width"] < 1300, what="the frame back in the page")


def test_a_wheel_over_the_map_scrolls_the_page_and_ctrl_wheel_zooms(streamlit_app, page, app_repo):
    """The map fills most of the page's width: a plain wheel over it scrolls the page (with a hint
    that Ctrl zooms), Ctrl + wheel zooms the map."""
    seeded = seed_run(app_repo)
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{streamlit_app.url}/?run={seeded['run']}")
    poll(page, lambda: len(map_nodes(page)) == 50, what="the 50 nodes on the map")
    page.wait_for_timeout(500)  # the first reruns settle
    frame = page.locator(MAP_IFRAME)
    top = frame.bounding_box()["y"]
    scale = hook(page, "() => window.__thoughtmap.scale()")
    box = frame.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + min(box["height"], 900 - box["y"]) / 2)
    page.mouse.wheel(0, 400)
    poll(page, lambda: frame.bounding_box()["y"] < top - 100, what="the page to scroll under the wheel")
    assert hook(page, "() => window.__thoughtmap.scale()") == scale  # the map did not zoom
    assert map_frame(page).locator("#wheel-hint").is_visible()
    page.screenshot(path=str(ARTIFACTS / "map-wheel-scrolls-the-page.png"))
    box = frame.bounding_box()  # the page scrolled under the pointer: back over the map
    page.mouse.move(box["x"] + box["width"] / 2, max(box["y"], 0) + 150)
    page.keyboard.down("Control")
    page.mouse.wheel(0, -300)
    page.keyboard.up("Control")
    poll(page, lambda: hook(page, "() => window.__thoughtmap.scale()") > scale, what="Ctrl + wheel to zoom in")


def view_of(page) -> tuple[float, float, float]:
    """The camera: scale and the canvas point at the map's centre."""
    return tuple(
        hook(
            page,
            "() => { const n = window.__thoughtmap.network; const p = n.getViewPosition();"
            " return [n.getScale(), p.x, p.y]; }",
        )
    )


def live_run(app_repo) -> dict:
    """The 50-node run, live: owned by this (living) test process, so the app does not take it for
    a dead one; `grow` adds a running node under a parent, as the method would."""
    seeded = seed_run(app_repo)
    app_repo.claim_run(seeded["run"], f"{socket.gethostname()}:{os.getpid()}:test")

    def grow(parent, label: str) -> str:
        return str(
            app_repo.add_node(
                seeded["run"],
                kind="subtopic",
                label=label,
                parent_id=parent.id,
                depth=parent.depth + 1,
                status=NodeStatus.RUNNING,
            ).id
        )

    return {**seeded, "grow": grow}


def test_a_live_run_keeps_the_node_it_works_on_in_view_and_the_view_stays_when_it_ends(streamlit_app, page, app_repo):
    """A tree wider than the screen grows past its right edge: while the run works (and the reader
    has not picked a node), the map keeps the working node (the newest running one) in sight, moving
    only when it would leave the view. When the run ends, the view stays where the reader watched it
    and the map does not move on the page (its Pause/Stop row keeps its height)."""
    seeded = live_run(app_repo)
    run_id, level3, grow = seeded["run"], seeded["level3"], seeded["grow"]
    page.set_viewport_size({"width": 1400, "height": 900})
    working = grow(level3[-1], "Which Dutch coastal cities plan managed retreat before 2100?")
    page.goto(f"{streamlit_app.url}/?run={run_id}")
    poll(page, lambda: len(map_nodes(page)) == 51, what="the 51 nodes on the map")
    assert hook(page, "() => window.__thoughtmap.scale()") >= 0.8  # readable, so not the whole map
    poll(page, lambda: by_id(page)[working]["inView"], what="the working node (bottom right) in view")
    assert not by_id(page)[str(seeded["nodes"][1].id)]["inView"]  # the top of the tree is out of sight

    # It works on the top branch now: the view goes there.
    app_repo.update_node(int(working), status=NodeStatus.DONE)
    working = grow(level3[0], "What do insurers charge for flood cover in Rotterdam?")
    poll(page, lambda: working in by_id(page) and by_id(page)[working]["inView"], what="the view to follow the run")
    # A sibling that is already in sight: the view stays still (no jolt at every refresh).
    before = view_of(page)
    sibling = grow(level3[0], "What do insurers charge for flood cover in Amsterdam?")
    poll(page, lambda: sibling in by_id(page), what="the sibling drawn")
    page.wait_for_timeout(1500)  # a live refresh or two
    assert by_id(page)[sibling]["inView"] and view_of(page) == before
    page.screenshot(path=str(ARTIFACTS / "map-follows-the-run.png"))

    # The run ends: the view stays on the last work (it used to jump back to the question), its
    # "Now:" line says it can be steered on, Pause and Stop leave an empty row of their height.
    app_repo.update_node(int(working), status=NodeStatus.DONE)
    poll(page, lambda: page.get_by_text("Now: #").inner_text().count("#") == 1, what="one node at work")
    top = page.locator(MAP_IFRAME).bounding_box()["y"]
    app_repo.update_node(int(sibling), status=NodeStatus.DONE)
    app_repo.set_status(run_id, RunStatus.DONE)
    poll(page, lambda: page.get_by_text(STEER_ON).is_visible(), what="the finished run's line where Now: was")
    poll(page, lambda: page.get_by_role("button", name="Stop").count() == 0, what="Stop gone")
    page.wait_for_timeout(1500)  # the page's rerun finished
    assert page.locator(MAP_IFRAME).bounding_box()["y"] == top
    assert view_of(page) == before and by_id(page)[sibling]["inView"]


def test_a_node_the_reader_picks_in_a_live_run_stops_the_map_following_the_run(streamlit_app, page, app_repo):
    seeded = live_run(app_repo)
    run_id, level3, grow = seeded["run"], seeded["level3"], seeded["grow"]
    page.set_viewport_size({"width": 1400, "height": 900})
    grow(level3[0], "What do insurers charge for flood cover in Rotterdam?")
    page.goto(f"{streamlit_app.url}/?run={run_id}")
    poll(page, lambda: len(map_nodes(page)) == 51, what="the 51 nodes on the map")
    # Picked by its number on the map here (a click does the same).
    number = seeded["numbers"][level3[0].id]
    search(page, f"#{number}")
    poll(
        page, lambda: node_selectbox(page).input_value().startswith(f"#{number} "), what="the picked node in the panel"
    )
    far = grow(level3[-1], "Which Bangladeshi cities plan managed retreat before 2100?")
    poll(page, lambda: far in by_id(page), what="the new node drawn")
    page.wait_for_timeout(1500)  # a live refresh or two
    shown = by_id(page)
    assert shown[str(level3[0].id)]["inView"] and not shown[far]["inView"]


def test_steering_a_finished_run_does_not_move_the_map(streamlit_app, page, app_repo):
    """A prune reopens the finished run to apply it, and the run ends again: the rows above the map
    ("Now:" where the finished run says it can be steered on, the Pause/Stop row that keeps its
    height) leave the map where the reader's pointer is."""
    seeded = seed_run(app_repo)
    run_id = seeded["run"]
    target = seeded["level1"][1]
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{streamlit_app.url}/?run={run_id}")
    poll(page, lambda: len(map_nodes(page)) == 50, what="the 50 nodes on the map")
    search(page, f"#{seeded['numbers'][target.id]}")
    panel = node_panel_column(page)
    prune = panel.get_by_role("button", name="Prune", exact=True)
    prune.wait_for()
    frame = page.locator(MAP_IFRAME)
    page.wait_for_timeout(500)  # settled
    top = frame.bounding_box()["y"]
    tops = []
    prune.click()

    def applied() -> bool:
        tops.append(frame.bounding_box()["y"])
        return (
            app_repo.get_node(target.id).status == NodeStatus.PRUNED
            and app_repo.get_run(run_id).status == RunStatus.DONE
        )

    poll(page, applied, interval=0.05, what="the prune applied and the run done again")
    page.wait_for_timeout(1500)  # the page's last reruns
    tops.append(frame.bounding_box()["y"])
    assert set(tops) == {top}, sorted(set(tops))


def test_a_small_map_that_nearly_fits_is_shown_whole_with_every_label(streamlit_app, page, app_repo):
    """Seen by a new user: a finished six-node run of long questions opened at the readable scale
    with its last column's labels cut at the frame's right edge ("When was Arthur's Magazin"). It
    fits whole at nine tenths of that scale, so it opens whole: every node with its label in view."""
    run = app_repo.create_run(
        question="Which magazine was started first, Arthur's Magazine or First for Women?",
        method="deot",
        params={},
        llm_info={"kind": "fake", "model": "fake", "description": "stored test run"},
        search_mode="local",
    )
    root = app_repo.add_node(run.id, kind="question", label=run.question, status=NodeStatus.DONE, depth=0)
    labels = {
        "What is Arthur's Magazine about?": [
            "Who was the first magazine to start?",
            "When was Arthur's Magazine founded?",
        ],
        "What is First for Women and what does it do?": ["What is First for Women?"],
    }
    for label, below in labels.items():
        child = app_repo.add_node(
            run.id, kind="question", label=label, parent_id=root.id, status=NodeStatus.DONE, depth=1
        )
        for text in below:
            app_repo.add_node(run.id, kind="question", label=text, parent_id=child.id, status=NodeStatus.DONE, depth=2)
    app_repo.set_status(run.id, RunStatus.DONE)
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{streamlit_app.url}/?run={run.id}")
    poll(page, lambda: len(map_nodes(page)) == 6, what="the 6 nodes on the map")
    poll(page, lambda: all(n["wholeInView"] for n in map_nodes(page)), what="every node and its label in view")
    assert hook(page, "() => window.__thoughtmap.scale()") >= 0.9 * 0.8
    assert all(n["fontPx"] >= 11.5 for n in map_nodes(page))
    page.screenshot(path=str(ARTIFACTS / "map-small-run-whole.png"))
