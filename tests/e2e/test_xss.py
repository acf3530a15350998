"""Untrusted text (LLM answers, web pages, questions) never runs as script in the browser.

A run is written straight into the app's database with HTML, script and `javascript:` payloads in
its question, node labels, answers, sources and report; the test then looks at it everywhere the
app shows it — Explore (node panel, mind map with its hover titles and double click), Report and
Sessions — and checks that no payload ran (`window.__xss` stays undefined in the page and in the
map's iframe, no dialog opened, no popup navigated anywhere) and that the payloads are shown as
plain text.
"""

from __future__ import annotations

import pytest

from storage.models import NodeStatus, RunStatus
from storage.repository import SourceInput
from tests.e2e.conftest import (
    BREADTH_FILL,
    MAP_IFRAME,
    ROOT_FILL,
    choose_node,
    map_dots,
    open_page,
    panel_node,
    poll,
    settled_map,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

IMG = '<img src=x onerror="window.__xss=1;alert(1)">'
SCRIPT = "<script>window.__xss=2;alert(2)</script>"
LINK = "[click](javascript:window.__xss=3)"
MD_IMAGE = "![pixel](javascript:window.__xss=4)"
IFRAME = '<iframe src="javascript:parent.__xss=5"></iframe>'
SVG = "<svg onload=window.__xss=9>"
# A label that is a javascript: URL: the old map component window.open()ed a node's title on double
# click; ours opens nothing, and a double click must still navigate nowhere.
JS_LABEL = "javascript:opener.__xss=6;opener.parent.__xss=6;alert(6)//"


def seed_run(repo) -> dict:
    """A finished DEoT run whose every text field carries a payload."""
    run = repo.create_run(
        question=f"XSS probe {IMG} {SCRIPT} {LINK}",
        method="deot",
        params={},
        llm_info={"kind": "fake", "model": "fake", "description": "scripted fake LLM"},
        search_mode="local",
        title=f"XSS probe {IMG} {LINK}",
    )
    root = repo.add_node(
        run.id,
        kind="question",
        label=f"Root {IMG}",
        status=NodeStatus.DONE,
        depth=0,
        content=f"Root answer {SCRIPT}",
        data={"engine": "root"},
    )
    child = repo.add_node(
        run.id,
        kind="question",
        label=f"Child {IMG}",
        parent_id=root.id,
        status=NodeStatus.DONE,
        depth=1,
        data={"engine": "breadth", "aspect": f"aspect {IMG}"},
    )
    [source] = repo.add_sources(
        run.id,
        [
            SourceInput(
                ref="xss-doc",
                title=f"Source {IMG}",
                snippet=f"Snippet {SCRIPT}",
                text=f"Text {SVG}",
                kind="web",
                url="javascript:window.__xss=7",
            )
        ],
        node_id=child.id,
    )
    repo.update_node(
        child.id,
        content=(f"Answer {IMG} and {SCRIPT} and {LINK} and {MD_IMAGE} and {IFRAME} and {SVG} [[S{source.id}]]"),
    )
    runner = repo.add_node(
        run.id,
        kind="question",
        label=JS_LABEL,
        parent_id=root.id,
        status=NodeStatus.DONE,
        depth=1,
        content="A node whose label is a javascript: URL.",
        data={"engine": "breadth"},
    )
    repo.save_report(
        run.id, f"## Findings {IMG}\n\n{SCRIPT}\n\n{LINK} {MD_IMAGE} [[S{source.id}]]\n\n{IFRAME}\n\n{SVG}"
    )
    repo.set_status(run.id, RunStatus.DONE)
    return {"run": run.id, "root": root.id, "child": child.id, "js": runner.id}


def assert_nothing_ran(page) -> None:
    page.wait_for_timeout(500)  # let any injected handler fire (and Playwright deliver dialogs)
    assert page.evaluate("typeof window.__xss") == "undefined"
    frame = page.frame_locator(MAP_IFRAME).locator("body")
    if page.locator(MAP_IFRAME).count():
        assert frame.evaluate("() => typeof window.__xss") == "undefined"
    assert page.dialogs == []
    # No live element came out of a payload.
    assert page.locator("img[src='x'], iframe[src^='javascript'], svg[onload], a[href^='javascript']").count() == 0


def visible_text(page, text: str) -> None:
    """`text` is on the page as text (the payload was escaped, not interpreted)."""
    page.get_by_text(text, exact=False).first.wait_for(state="visible")


def test_payloads_never_run(streamlit_app, page, shot, app_repo):
    ids = seed_run(app_repo)
    popups = []
    page.context.on("page", lambda popup: popups.append(popup))

    # Explore: the run, with the payload-carrying child in the node panel.
    page.goto(f"{streamlit_app.url}/?run={ids['run']}")
    page.get_by_text("XSS probe").first.wait_for()
    dots = settled_map(page)
    assert len(dots) == 3
    choose_node(page, 2)  # the child: the second node of its run
    poll(page, lambda: panel_node(page) == ids["child"], what="the node panel to show the child")
    visible_text(page, f"Child {IMG}")  # the label, as a heading
    visible_text(page, IMG)
    visible_text(page, SCRIPT)
    visible_text(page, LINK)  # shown as text: the destination is not http(s), so it is no link
    visible_text(page, "![pixel](javascript:window.__xss=4)")  # an image with an unsafe target: text too
    visible_text(page, f"Source {IMG}")  # the cited source
    shot(page, "1-node-panel")
    assert_nothing_ran(page)

    # The map: hover each node. Its tooltip shows the label as text (textContent): no element, no HTML
    # escapes shown literally, the payload exactly as stored.
    map_canvas = page.frame_locator(MAP_IFRAME).locator("#map canvas")
    tooltip = page.frame_locator(MAP_IFRAME).locator("#tooltip")
    titles = {}
    for dot in map_dots(page, ROOT_FILL) + map_dots(page, BREADTH_FILL):
        if dot["pixels"] < 10:
            continue
        page.mouse.move(0, 0)
        map_canvas.hover(position={"x": dot["x"], "y": dot["y"]})
        text = poll(
            page, lambda: tooltip.is_visible() and tooltip.inner_text(), timeout=15, what="the map's hover title"
        )
        assert tooltip.locator("*").count() == 0  # text only
        assert "&lt;" not in text and "&quot;" not in text, text
        heading, label = text.split("\n", 1)
        assert heading.startswith("#") and "Question · done" in heading, heading
        titles[label] = dot
        if label.startswith("Child"):
            shot(page, "2-map-hover")
    assert set(titles) == {f"Root {IMG}", f"Child {IMG}", JS_LABEL}, titles
    assert_nothing_ran(page)

    # Double-clicking a node whose label is a javascript: URL opens nothing and runs nothing.
    page.mouse.move(0, 0)
    js_dot = titles[JS_LABEL]
    map_canvas.dblclick(position={"x": js_dot["x"], "y": js_dot["y"]})
    page.wait_for_timeout(1500)
    assert popups == [], [p.url for p in popups]
    assert_nothing_ran(page)
    for popup in popups:
        popup.close()

    # Report page: the report and its sources.
    open_page(page, "Report", page.get_by_role("button", name="Download Markdown"))
    visible_text(page, f"Findings {IMG}")
    visible_text(page, SCRIPT)
    visible_text(page, LINK)
    visible_text(page, f"Source {IMG}")
    shot(page, "3-report")
    assert_nothing_ran(page)

    # Sessions: the run's title.
    open_page(page, "Sessions", page.locator(f".st-key-open-{ids['run']} button"))
    visible_text(page, IMG)
    shot(page, "4-sessions")
    assert_nothing_ran(page)
    links = page.get_by_role("link", name="click")
    if links.count():  # a Markdown link in the title: following it must not run its target
        links.first.click()
        assert_nothing_ran(page)
