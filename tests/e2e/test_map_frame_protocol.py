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


def tree(first_id: int = 1) -> list[Node]:
    """A question with three branches of two leaves each (ids first_id .. first_id + 9), as stored
    nodes (not saved)."""
    nodes = [Node(id=first_id, run_id="r", kind="topic", label="Which city is larger?", status=NodeStatus.DONE)]
    for branch in range(3):
        branch_id = first_id + 1 + branch * 3
        nodes.append(
            Node(
                id=branch_id,
                run_id="r",
                parent_id=first_id,
                kind="subtopic",
                depth=1,
                label=f"Branch {branch}",
                status=NodeStatus.DONE,
            )
        )
        nodes += [
            Node(
                id=branch_id + leaf,
                run_id="r",
                parent_id=branch_id,
                kind="subtopic",
                depth=2,
                label=f"Leaf {branch}.{leaf}",
                status=NodeStatus.DONE,
            )
            for leaf in (1, 2)
        ]
    return nodes


def hook(page, call: str):
    return map_frame(page).locator("body").evaluate(f"() => window.__thoughtmap.{call}", timeout=5_000)


def render(page, selected: int | None, received: str | None = None, *, first_id: int = 1) -> None:
    """A render as the page sends it; returns once the frame has handled it."""
    before = hook(page, "renders()")
    args = mindmap.frame_args(mindmap.build_map(tree(first_id), [], selected), received=received)
    page.evaluate("(args) => window.render(args)", args)
    poll(page, lambda: hook(page, "renders()") > before, what="the render handled")


def placement(drawn: list[dict]) -> list[tuple[int, int]]:
    """Where each node is drawn from the first one (the question), in map order: the layout and its
    scale, apart from where the view is panned (a pan can land a frame later on a busy machine)."""
    x0, y0 = drawn[0]["x"], drawn[0]["y"]
    return [(round(n["x"] - x0), round(n["y"] - y0)) for n in drawn]


def settled_placement(page) -> list[tuple[int, int]]:
    """`placement` once two reads a quarter second apart agree: a first view is placed again when
    its labels have been measured (map.js, `create`), a drawing later."""
    previous: list = []

    def check():
        nonlocal previous
        now = placement(map_nodes(page))
        stable = now == previous
        previous = now
        return stable and now

    return poll(page, check, what="the map placed")


def selected(page) -> list[str]:
    return [n["id"] for n in map_nodes(page) if n["selected"]]


def open_at_the_question(page, harness: str) -> None:
    page.goto(harness)
    poll(page, lambda: page.evaluate("window.ready"), what="the frame ready")
    poll(
        page,
        lambda: page.evaluate("document.querySelector('iframe').contentWindow.__thoughtmap !== undefined"),
        what="the frame's hook",
    )
    render(page, selected=1)
    assert selected(page) == ["1"]


def sent(page, count: int) -> list[dict]:
    return poll(page, lambda: len(s := page.evaluate("window.sent")) == count and s, what=f"{count} values sent")


def find(page, text: str) -> None:
    box = map_frame(page).get_by_role("searchbox", name="Find a node")
    box.fill(text)
    box.press("Enter")


def test_renders_behind_the_frames_own_choices_do_not_take_the_selection_back(harness, page):
    open_at_the_question(page, harness)

    # Three quick choices on the map: two matches of a search (Enter, Enter), then a branch by number.
    find(page, "Leaf 0")
    find(page, "Leaf 0")
    find(page, "#2")  # numbers follow the ids here: #2 is Branch 0 (id 2)
    choices = sent(page, 3)
    assert [c["node"] for c in choices] == ["3", "4", "2"]
    assert all(c["chain"] == c["seq"] for c in choices)  # first sends: each its own chain
    assert selected(page) == ["2"]

    # The page answers late: each render has read one choice more, and selects it (the page reads a
    # choice before it builds the map), but not yet the frame's last one.
    render(page, selected=3, received=choices[0]["chain"])
    render(page, selected=4, received=choices[1]["chain"])
    assert selected(page) == ["2"]
    map_frame(page).get_by_role("button", name="Fold", exact=True).click()
    poll(page, lambda: sum(n["hidden"] for n in map_nodes(page)) == 2, what="the branch's two leaves hidden")

    # The render that has read the last choice, then Streamlit's repeat of it (a resize, a
    # reconnect): nothing moves. A node the reader then picks in the page's list is followed.
    render(page, selected=2, received=choices[2]["chain"])
    assert not hook(page, "pending()")
    render(page, selected=2, received=choices[2]["chain"])
    assert selected(page) == ["2"]
    assert map_frame(page).get_by_role("button", name="Unfold", exact=True).is_visible()
    render(page, selected=5, received=choices[2]["chain"])
    assert selected(page) == ["5"]
    hook(page, "resendNow()")  # (nothing is pending: nothing goes)
    assert len(page.evaluate("window.sent")) == 3


def test_a_choice_never_received_is_sent_twice_more_in_its_chain_then_the_page_is_followed(harness, page):
    open_at_the_question(page, harness)
    find(page, "#3")
    sent(page, 1)
    render(page, selected=1)  # the page's renders meanwhile (its old selection) are not followed
    assert selected(page) == ["3"]
    hook(page, "resendNow()")
    hook(page, "resendNow()")
    choices = sent(page, 3)
    assert [c["node"] for c in choices] == ["3", "3", "3"] and len({c["seq"] for c in choices}) == 3
    assert {c["chain"] for c in choices} == {choices[0]["seq"]}  # one choice, sent three times
    render(page, selected=1)
    assert selected(page) == ["3"] and hook(page, "pending()")
    hook(page, "resendNow()")  # given up: the map shows the page's selection again, without a render
    assert not hook(page, "pending()") and selected(page) == ["1"]
    assert len(page.evaluate("window.sent")) == 3
    # A receipt that comes after that is an ordinary render: its selection is followed.
    render(page, selected=3, received=choices[0]["chain"])
    assert selected(page) == ["3"]


def test_a_receipt_of_the_chain_before_its_last_resend_ends_the_wait(harness, page):
    open_at_the_question(page, harness)
    find(page, "#5")
    hook(page, "resendNow()")  # the page was slow: its rerun for the first send comes after the resend
    first = sent(page, 2)
    render(page, selected=5, received=first[0]["chain"])
    assert not hook(page, "pending()")
    hook(page, "resendNow()")
    assert len(page.evaluate("window.sent")) == 2
    render(page, selected=6, received=first[0]["chain"])
    assert selected(page) == ["6"]


def test_a_pending_choice_ends_when_the_frame_draws_another_map(harness, page):
    """Streamlit may keep the iframe for another run's map: a choice pending on the old one is
    dropped (never sent again as a node of the new run), and the new map's selection is followed."""
    open_at_the_question(page, harness)
    first_view = settled_placement(page)
    find(page, "#5")  # Branch 1
    sent(page, 1)
    map_frame(page).get_by_role("button", name="Fold", exact=True).click()  # folds of the old map...
    render(page, selected=21, first_id=21)
    assert not hook(page, "pending()") and selected(page) == ["21"]
    drawn = map_nodes(page)
    assert sorted(int(n["id"]) for n in drawn) == list(range(21, 31))
    assert settled_placement(page) == first_view  # placed as a first map is
    assert not any(n["hidden"] for n in drawn)  # ...are not the new one's
    assert map_frame(page).get_by_role("searchbox", name="Find a node").input_value() == ""
    hook(page, "resendNow()")
    assert len(page.evaluate("window.sent")) == 1
