"""A map that reads at 50-500 nodes (issue 43), in Chromium at 1440×900, on DEoT runs stored through
the repository (no LLM): the outline beside a 300-node map, labels never drawn below a legible size
(the canvas's own text calls are recorded), the root question whole in the default view, and a
follow-up the reader asked for brought into view after they had moved the map away.

Screenshots: test-artifacts/map-overview-300-default.png, -fit.png, -outline-search.png and
test-artifacts/map-follow-up-brought-into-view.png."""

from __future__ import annotations

import os
import socket

import pytest

from components.mindmap import LEGIBLE_PX
from engine.node_numbers import node_numbers
from storage.models import CommandStatus, NodeStatus, RunStatus
from tests.e2e.conftest import ARTIFACTS, MAP_IFRAME, map_frame, map_nodes, node_panel_column, node_selectbox, poll

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

VIEWPORT = {"width": 1440, "height": 900}
TOPICS = (
    "winter temperatures",
    "summer droughts",
    "coastal flooding",
    "crop yields",
    "heat waves",
    "river levels",
    "snow cover",
    "wildfires",
    "insurance claims",
    "public health",
)
PLACES = ("in Spain", "in Kenya", "in Canada", "in India", "in Brazil")
ANGLES = ("since 1990", "by 2050", "for farmers", "for cities")


def deot_tree(repo, size: int, *, question: str) -> dict:
    """A finished DEoT run of `size` question nodes grown breadth first (6, then 5, then 4 children a
    node), every third a depth-engine follow-up, all done with a short cited answer."""
    run = repo.create_run(
        question=question,
        method="deot",
        params={},
        llm_info={"kind": "fake", "model": "fake", "description": "stored test run"},
        search_mode="local",
    )
    nodes = [
        repo.add_node(
            run.id,
            kind="question",
            label=question,
            status=NodeStatus.DONE,
            depth=0,
            data={"engine": "root"},
            content="What the sources say [[S1]].",
        )
    ]
    queue = [nodes[0]]
    while len(nodes) < size:
        parent = queue.pop(0)
        for _ in range((6, 5, 4, 3)[min(parent.depth, 3)]):
            if len(nodes) == size:
                break
            i = len(nodes)
            engine = "depth" if i % 3 == 0 else "breadth"
            label = (
                f"How do {TOPICS[i % len(TOPICS)]} change {PLACES[i % len(PLACES)]} {ANGLES[(i // 5) % len(ANGLES)]}?"
            )
            node = repo.add_node(
                run.id,
                kind="question",
                label=label,
                parent_id=parent.id,
                depth=parent.depth + 1,
                status=NodeStatus.DONE,
                data={"engine": engine},
                edge_kind=engine,
                content="An answer that cites its source [[S1]].",
            )
            nodes.append(node)
            queue.append(node)
    repo.set_status(run.id, RunStatus.DONE)
    return {"run": run.id, "nodes": nodes, "numbers": node_numbers(nodes)}


def hook(page, script: str, arg=None):
    return map_frame(page).locator("body").evaluate(script, arg, timeout=5_000)


# Every fillText on the map's canvas, with the size of its text on screen (the font's px times the
# canvas transform's scale, over the device pixel ratio), recorded over one redraw.
RECORD_TEXT_JS = """() => {
  const P = CanvasRenderingContext2D.prototype;
  if (!P.__recorded) {
    const fillText = P.fillText;
    P.fillText = function (text, x, y, ...rest) {
      const m = /(\\d+(?:\\.\\d+)?)px/.exec(this.font);
      const t = this.getTransform();
      if (window.__texts) window.__texts.push({text: String(text), px: (m ? parseFloat(m[1]) : 0) *
        Math.hypot(t.a, t.b) / (window.devicePixelRatio || 1), alpha: this.globalAlpha});
      return fillText.call(this, text, x, y, ...rest);
    };
    P.__recorded = true;
  }
  window.__texts = [];
  window.__thoughtmap.network.redraw();
  return true;
}"""


def drawn_texts(page) -> list[dict]:
    """The texts the map's canvas draws in one redraw (labels, landmarks), with their size on screen."""
    hook(page, RECORD_TEXT_JS)
    page.wait_for_timeout(300)  # vis draws on the next animation frame
    return [t for t in hook(page, "() => window.__texts") if t["text"].strip()]


def test_a_300_node_deot_map_has_a_legible_overview(streamlit_app, page, app_repo):
    # A long question: three lines of label under the root, wider than the margin the first view left.
    seeded = deot_tree(
        app_repo,
        300,
        question="How is climate change reshaping daily life around the world, from "
        "food prices and housing to health and work, by 2050?",
    )
    numbers, nodes = seeded["numbers"], seeded["nodes"]
    page.set_viewport_size(VIEWPORT)
    page.goto(f"{streamlit_app.url}/?run={seeded['run']}")
    poll(page, lambda: len(map_nodes(page)) == 300, what="the 300 nodes on the map")
    page.wait_for_timeout(1000)  # the first reruns settle

    # The default view: the map at its readable scale, the root whole; the Outline button lists the
    # tree beside it, as deep as about 40 entries allow, folded branches saying how many nodes they hold.
    map_frame(page).get_by_role("button", name="Outline").click()
    outline = poll(
        page,
        lambda: (o := hook(page, "() => window.__thoughtmap.outline()"))["shown"] and o,
        what="the outline open beside the large map",
    )
    entries = outline["entries"]
    assert 20 <= len(entries) <= 45, len(entries)  # (as deep as about 40 entries allow)
    assert entries[0]["text"] == f"#1 {nodes[0].label}" and entries[0]["level"] == 1
    assert {e["level"] for e in entries} == {1, 2, 3}
    assert all(e["more"].startswith("+") for e in entries if e["level"] == 3), entries
    size = map_frame(page).locator("#outline .text").first.evaluate("e => parseFloat(getComputedStyle(e).fontSize)")
    assert size >= 12, size
    root = next(n for n in map_nodes(page) if n["id"] == str(nodes[0].id))
    assert root["wholeInView"], root  # its question, centred under it, is not cut at the left edge
    texts = drawn_texts(page)
    assert len(texts) >= 3 and min(t["px"] for t in texts) >= LEGIBLE_PX, sorted(t["px"] for t in texts)[:5]
    assert any(nodes[0].label[:20] in t["text"] for t in texts)
    assert all(label["px"] >= LEGIBLE_PX for label in hook(page, "() => window.__thoughtmap.labels()"))
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "map-overview-300-default.png"))

    # Fit: the whole tree, far too small for its labels: none is drawn below the legible size; the
    # upper levels keep one-line landmarks (with their branch's size) where they have room.
    map_frame(page).get_by_role("button", name="Fit").click()
    poll(page, lambda: all(n["inView"] for n in map_nodes(page)), what="every node in view after Fit")
    texts = drawn_texts(page)
    assert texts and min(t["px"] for t in texts) >= LEGIBLE_PX, sorted(t["px"] for t in texts)[:5]
    landmarks = [label for label in hook(page, "() => window.__thoughtmap.labels()") if label["kind"] == "landmark"]
    assert landmarks and landmarks[0]["text"].startswith("#1 ") and "+299" in landmarks[0]["text"], landmarks[:3]
    page.screenshot(path=str(ARTIFACTS / "map-overview-300-fit.png"))

    # The outline searches: typing lists the matches with the way to them; a click on an entry
    # chooses the node as a click on the map does: selected, in view at a readable scale, in the panel.
    target = nodes[250]
    box = map_frame(page).get_by_role("searchbox", name="Find a node")
    box.fill(target.label)
    found = poll(
        page,
        lambda: [e for e in hook(page, "() => window.__thoughtmap.outline()")["entries"] if e["id"] == str(target.id)],
        what="the match listed in the outline",
    )
    assert found[0]["level"] == target.depth + 1
    page.screenshot(path=str(ARTIFACTS / "map-overview-300-outline-search.png"))
    map_frame(page).locator(f'#outline .entry[data-id="{target.id}"] .text').click()
    shown = poll(
        page,
        lambda: (n := next(n for n in map_nodes(page) if n["id"] == str(target.id)))["selected"] and n["inView"] and n,
        what="the chosen entry's node selected and in view",
    )
    assert shown["fontPx"] >= 12
    poll(
        page,
        lambda: node_selectbox(page).input_value().startswith(f"#{numbers[target.id]} "),
        what="the Node selectbox to follow the outline",
    )


def test_a_follow_up_the_reader_asked_for_comes_into_view_after_they_moved_the_map(streamlit_app, page, app_repo):
    """The reader asks a follow-up under a node, then drags the map elsewhere while it is worked on:
    the new node is brought into view when it appears. (This test plays the method: the run is owned
    by this living process, so the app queues the command, which the test takes and applies.)"""
    seeded = deot_tree(app_repo, 60, question="Why do some bridges sway in the wind?")
    run_id, nodes, numbers = seeded["run"], seeded["nodes"], seeded["numbers"]
    app_repo.set_status(run_id, RunStatus.RUNNING)
    app_repo.claim_run(run_id, f"{socket.gethostname()}:{os.getpid()}:test")
    page.set_viewport_size(VIEWPORT)
    page.goto(f"{streamlit_app.url}/?run={run_id}")
    poll(page, lambda: len(map_nodes(page)) == 60, what="the 60 nodes on the map")
    target = nodes[40]
    box = map_frame(page).get_by_role("searchbox", name="Find a node")
    box.fill(f"#{numbers[target.id]}")
    box.press("Enter")
    poll(
        page,
        lambda: node_selectbox(page).input_value().startswith(f"#{numbers[target.id]} "),
        what="the target in the node panel",
    )

    # The reader drags the map far from the node, then asks their follow-up.
    canvas = page.locator(MAP_IFRAME).bounding_box()
    x, y = canvas["x"] + canvas["width"] * 0.75, canvas["y"] + canvas["height"] * 0.6
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x - 300, y - 250, steps=8)
    page.mouse.move(x - 600, y - 450, steps=8)
    page.mouse.up()
    poll(
        page,
        lambda: not next(n for n in map_nodes(page) if n["id"] == str(target.id))["inView"],
        what="the target dragged out of view",
    )
    panel = node_panel_column(page)
    panel.get_by_role("textbox", name="Your follow-up").fill("Which bridges were retrofitted with dampers after 2000?")
    panel.get_by_role("button", name="Ask", exact=True).click()
    command = poll(
        page,
        lambda: next((c for c in app_repo.list_commands(run_id) if c.kind == "ask"), None),
        what="the follow-up queued",
    )

    # Applied as the method would: the command taken, the new question under the node, the command done.
    app_repo.take_commands(run_id, ["ask"])
    added = app_repo.add_node(
        run_id,
        kind="question",
        label=command.payload["question"],
        parent_id=target.id,
        depth=target.depth + 1,
        status=NodeStatus.RUNNING,
        data={"engine": "user"},
        edge_kind="user",
    )
    app_repo.complete_command(command.id)
    assert app_repo.list_commands(run_id)[-1].status == CommandStatus.DONE
    shown = poll(
        page,
        lambda: (n := next((n for n in map_nodes(page) if n["id"] == str(added.id)), None)) and n["wholeInView"] and n,
        what="the follow-up brought into view",
    )
    assert shown["fontPx"] >= 12
    page.wait_for_timeout(500)
    page.screenshot(path=str(ARTIFACTS / "map-follow-up-brought-into-view.png"))
    # Its parent, the node the reader asked under, is in sight with it.
    assert next(n for n in map_nodes(page) if n["id"] == str(target.id))["inView"]
    app_repo.set_status(run_id, RunStatus.DONE)
