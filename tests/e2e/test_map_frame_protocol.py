"""The map frame's side of Streamlit's component protocol, in a real browser, with the page's part
played by a harness page that sends renders in an order a test chooses (Streamlit's own order
depends on timing: a full-suite run once sent a render whose selection was a search match from two
Enters before, and the map selected it again under a reader about to click Expand).

The frame (components/mindmap_frontend, served as it is) gets the args `components.mindmap.frame_args`
builds from `build_map`, and answers with `streamlit:setComponentValue` messages the harness records."""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
from pathlib import Path

import pytest

from components import mindmap
from storage.models import Node, NodeStatus
from tests.e2e.conftest import MAP_IFRAME, map_frame, map_nodes, poll

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

FRONTEND = Path(mindmap.__file__).parent / "mindmap_frontend"

HARNESS = f"""<!doctype html>
<html><body style="margin:0">
<iframe title="{MAP_IFRAME.split("'")[1]}" src="frame/index.html" style="width:1000px;height:600px;border:0"></iframe>
<script>
  window.sent = [];  // what the frame sent, in order
  window.ready = false;
  window.addEventListener("message", (event) => {{
    if (!event.data || !event.data.isStreamlitMessage) return;
    if (event.data.type === "streamlit:componentReady") window.ready = true;
    if (event.data.type === "streamlit:setComponentValue") window.sent.push(event.data.value);
  }});
  window.render = (args) => document.querySelector("iframe").contentWindow.postMessage(
    {{type: "streamlit:render", args: args}}, "*");
</script>
</body></html>"""


@pytest.fixture
def harness(tmp_path):
    """The frame's files and the harness page, served on 127.0.0.1 (one origin, as Streamlit serves
    a component): yields the harness's URL."""
    shutil.copytree(FRONTEND, tmp_path / "frame")
    (tmp_path / "index.html").write_text(HARNESS, encoding="utf-8")
    handler = functools.partial(_QuietHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/index.html"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


def tree() -> list[Node]:
    """A question with three branches of two leaves each (ids 1..10), as stored nodes (not saved)."""
    nodes = [Node(id=1, run_id="r", kind="topic", label="Which city is larger?", status=NodeStatus.DONE)]
    for branch in range(3):
        branch_id = 2 + branch * 3
        nodes.append(Node(id=branch_id, run_id="r", parent_id=1, kind="subtopic", depth=1,
                          label=f"Branch {branch}", status=NodeStatus.DONE))
        nodes += [Node(id=branch_id + leaf, run_id="r", parent_id=branch_id, kind="subtopic", depth=2,
                       label=f"Leaf {branch}.{leaf}", status=NodeStatus.DONE) for leaf in (1, 2)]
    return nodes


def render(page, selected: int | None, received: str | None = None) -> None:
    args = mindmap.frame_args(mindmap.build_map(tree(), [], selected), received=received)
    page.evaluate("(args) => window.render(args)", args)


def selected(page) -> list[str]:
    return [n["id"] for n in map_nodes(page) if n["selected"]]


def open_at_the_question(page, harness: str) -> None:
    page.goto(harness)
    poll(page, lambda: page.evaluate("window.ready"), what="the frame ready")
    render(page, selected=1)
    poll(page, lambda: selected(page) == ["1"], what="the page's selection drawn")


def find(page, text: str) -> None:
    box = map_frame(page).get_by_role("searchbox", name="Find a node")
    box.fill(text)
    box.press("Enter")


def test_renders_behind_the_frames_own_choices_do_not_take_the_selection_back(harness, page):
    open_at_the_question(page, harness)

    # Three quick choices on the map: two matches of a search (Enter, Enter), then a branch by number.
    find(page, "Leaf 0")
    find(page, "Leaf 0")
    find(page, "#2")  # numbers follow the tree's order: #2 is Branch 0 (id 2)
    sent = poll(page, lambda: len(s := page.evaluate("window.sent")) == 3 and s, what="three choices sent")
    assert [s["node"] for s in sent] == ["3", "4", "2"]
    assert selected(page) == ["2"]

    # The page answers late: renders that had not read the last choice yet, each still carrying an
    # older selection (the first match, then the second), the last one the render in which it first
    # reads the branch (built before it reads it).
    render(page, selected=1, received=sent[0]["seq"])
    render(page, selected=3, received=sent[1]["seq"])
    render(page, selected=4, received=sent[2]["seq"])
    page.wait_for_timeout(300)
    assert selected(page) == ["2"]
    map_frame(page).get_by_role("button", name="Collapse").click()
    poll(page, lambda: sum(n["hidden"] for n in map_nodes(page)) == 2, what="the branch's two leaves hidden")

    # The page then selects the branch itself: nothing moves. A node the reader picks in the page's
    # list afterwards is followed, even one the frame had chosen before.
    render(page, selected=2, received=sent[2]["seq"])
    page.wait_for_timeout(200)
    assert selected(page) == ["2"]
    assert map_frame(page).get_by_role("button", name="Expand").is_visible()
    render(page, selected=4, received=sent[2]["seq"])
    poll(page, lambda: selected(page) == ["4"], what="the page's own later selection followed")
    assert not page.evaluate("window.sent.length > 3"), "a choice was sent again though the page had it"


def test_a_choice_the_page_never_receives_is_sent_twice_more_then_the_page_is_followed_again(harness, page):
    open_at_the_question(page, harness)
    find(page, "#3")
    # Every 3 s without a receipt the choice goes again, with a new seq, twice at most.
    sent = poll(page, lambda: len(s := page.evaluate("window.sent")) == 3 and s, timeout=15, what="two resends")
    assert [s["node"] for s in sent] == ["3", "3", "3"] and len({s["seq"] for s in sent}) == 3
    render(page, selected=1)  # still pending: not followed
    assert selected(page) == ["3"]
    page.wait_for_timeout(3500)  # the last wait ends: given up
    assert len(page.evaluate("window.sent")) == 3
    render(page, selected=5)
    poll(page, lambda: selected(page) == ["5"], what="the page followed again")
