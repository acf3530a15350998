"""FGDIP's search tree in a real browser (issue 15): a run started on Explore as a person would,
on a HotpotQA question, with the fake LLM scripted by prompt name (tests/engine/methods/fgdip/fgdip_scripts.py) and
served over HTTP by `FakeOpenAIServer` in this process, so the app's own run threads call it.

The script: two key entities; on the first branch one step judged sure, one maybe, one impossible;
the first branch's answer is rejected with an error analysis, the search backtracks to the second
entity, whose answer is accepted. On the map (read through the frame's test hook
`window.__thoughtmap`): the entities are the first layer, fills follow the declared verdict colours,
the backtrack is its own edge kind (dashed, its own colour, drawn on the canvas), labels carry the
exploration order; the error memory panel lists the rejected answer's analysis; Mark impossible from
the node panel is queued, then applied, and the node turns the impossible grey.

Screenshots: test-artifacts/fgdip-search-tree.png (the map at its default zoom),
fgdip-search-tree-fit.png (the whole tree), fgdip-error-memory.png, fgdip-steered.png."""

from __future__ import annotations

import re

import pytest

from engine.llm.fake import FakeLLM
from engine.methods.fgdip.kinds import EDGES, NODE_KINDS
from engine.methods.fgdip.method import FgdipMethod
from engine.node_numbers import node_numbers
from storage.models import CommandStatus, RunStatus
from tests.e2e.conftest import (
    ARTIFACTS,
    MAP_IFRAME,
    canvas_pixels,
    choose_method,
    choose_node,
    click_map_node,
    map_edges,
    map_frame,
    map_nodes,
    metric,
    node_panel_column,
    panel_node,
    poll,
    rgb,
    serving_fake_llm,
)
from tests.engine.methods.fgdip.fgdip_scripts import (
    EVALUATE_ANSWER,
    EVALUATE_STEP,
    EXTRACT,
    GENERATE,
    QUESTION,
    answers_by_branch,
    candidate_of,
    entities,
    judged_answer,
    numbered_steps,
    verdicts_by_last_argument,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

ARTHUR, FIRST = "Arthur's Magazine", "First for Women"
LESSON = "LESSON-BROWSER: the founding year of Arthur's Magazine was never compared with First for Women's."
KINDS = {kind.name: kind for kind in NODE_KINDS}
FILLS = {v.value: rgb(v.colour) for v in KINDS["step"].variants}
ANSWER_FILLS = {v.value: rgb(v.colour) for v in KINDS["answer"].variants}
BACKTRACK = next(e for e in EDGES if e.name == "backtrack")

# Whether a button's label is cut short (an element inside it narrower than its text).
_CUT_JS = "b => [b, ...b.querySelectorAll('*')].some((e) => e.scrollWidth > e.clientWidth + 1)"


def scripted_fake() -> FakeLLM:
    fake = FakeLLM()
    fake.when(EXTRACT, entities(ARTHUR, FIRST))
    fake.when(GENERATE, numbered_steps(answer=answers_by_branch))
    fake.when(EVALUATE_STEP, verdicts_by_last_argument({f"{ARTHUR} d2 s2": "maybe", f"{ARTHUR} d2 s3": "impossible"}))
    fake.when(
        EVALUATE_ANSWER,
        lambda request: (
            judged_answer(False, LESSON) if candidate_of(request) == f"answer from {ARTHUR}" else judged_answer(True)
        ),
    )
    return fake


@pytest.fixture
def fgdip_app(app_home, tmp_path, request):
    """The app on an OpenAI-compatible endpoint that is the scripted fake (this process's thread)."""
    yield from serving_fake_llm(scripted_fake(), app_home, tmp_path, request)


def test_the_search_tree_error_memory_and_a_steering_command(fgdip_app, page, app_repo):
    page.set_viewport_size({"width": 1500, "height": 1100})
    page.goto(fgdip_app.url)
    page.get_by_label("Question").fill(QUESTION)
    choose_method(page, FgdipMethod.title)
    page.get_by_role("button", name="Start").click()
    poll(page, lambda: metric(page, "Status") == "done", timeout=180, what="the FGDIP run to finish")
    run_id = page.url.split("run=")[1].split("&")[0]
    nodes = app_repo.list_nodes(run_id)
    numbers = node_numbers(nodes)
    by_arg = {(n.data or {}).get("argument"): n for n in nodes if n.kind in ("entity", "step")}
    root = next(n for n in nodes if n.parent_id is None)
    branch = {n.data["entity"]: n for n in nodes if n.kind == "entity"}
    answers = {n.data["verdict"]: n for n in nodes if n.kind == "answer"}
    assert list(branch) == [ARTHUR, FIRST] and set(answers) == {"rejected", "accepted"}

    poll(page, lambda: len(map_nodes(page)) == len(nodes), what="every node on the map")
    page.wait_for_timeout(500)  # the first reruns settle
    drawn = {n["id"]: n for n in map_nodes(page)}

    def at(node) -> dict:
        return drawn[str(node.id)]

    # The entity branches are the first layer: one column right of the question, left of the steps.
    xs = {round(at(b)["x"]) for b in branch.values()}
    steps = [n for n in nodes if n.kind == "step"]
    assert len(xs) == 1 and at(root)["x"] < xs.pop() < min(at(s)["x"] for s in steps), drawn
    assert {n.parent_id for n in branch.values()} == {root.id}

    # Verdict colours, as declared: sure, maybe and impossible steps; the rejected and accepted answers.
    for argument, verdict in (
        (f"{ARTHUR} d2 s1", "sure"),
        (f"{ARTHUR} d2 s2", "maybe"),
        (f"{ARTHUR} d2 s3", "impossible"),
    ):
        assert by_arg[argument].data["verdict"] == verdict
        assert rgb(at(by_arg[argument])["fill"]) == FILLS[verdict], (argument, at(by_arg[argument]))
    assert rgb(at(branch[ARTHUR])["fill"]) == FILLS["sure"]
    for verdict, answer in answers.items():
        assert rgb(at(answer)["fill"]) == ANSWER_FILLS[verdict], (verdict, at(answer))
        assert f"{verdict} answer: answer from" in at(answer)["label"], at(answer)  # not by colour alone

    # The exploration order in the labels: (1), (2)... on the nodes the search took, in that order.
    taken = sorted(
        (n for n in nodes if (n.data or {}).get("explored_order") and n.parent_id is not None),
        key=lambda n: n.data["explored_order"],
    )
    assert len(taken) >= 4
    for order, node in enumerate(taken, start=1):
        assert f"({order}) " in at(node)["label"], (order, at(node)["label"])
    assert not re.search(r"\(\d+\) ", at(by_arg[f"{ARTHUR} d2 s2"])["label"])  # never taken: no order

    # The backtrack: its own edge kind, from the rejected answer to the second entity, dashed and in
    # its own colour (not the tree's), and drawn on the canvas.
    edges = map_edges(page)
    back = [e for e in edges if e["colour"].upper() == BACKTRACK.colour.upper()]
    assert [(e["from"], e["to"]) for e in back] == [(str(answers["rejected"].id), str(branch[FIRST].id))], edges
    assert back[0]["dashes"] and not back[0]["hidden"]
    assert all(not e["dashes"] and e["colour"].upper() != BACKTRACK.colour.upper() for e in edges if e not in back)
    poll(
        page,
        lambda: page.locator(MAP_IFRAME).scroll_into_view_if_needed(timeout=2_000) or True,
        what="the map to scroll into view",
    )
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator(MAP_IFRAME).screenshot(path=str(ARTIFACTS / "fgdip-search-tree.png"))  # the default zoom
    map_frame(page).get_by_role("button", name="Fit").click()
    poll(page, lambda: all(n["inView"] for n in map_nodes(page)), what="the whole tree in view")
    page.wait_for_timeout(500)
    assert canvas_pixels(page, BACKTRACK.colour) > 100
    page.locator(MAP_IFRAME).screenshot(path=str(ARTIFACTS / "fgdip-search-tree-fit.png"))

    # The error memory beside the map, in its tab next to the node's: the rejected answer's analysis,
    # with the answer and its branch.
    page.get_by_role("tab", name="Error memory", exact=True).click()
    memory = page.locator('[data-testid="stExpander"]').filter(has_text="Error memory").first
    memory.wait_for(state="visible")
    text = memory.inner_text()
    assert "1 lesson from a rejected answer" in text and LESSON in text, text
    assert f"answer from {ARTHUR}' on {ARTHUR}" in text, text
    drawn_map, listed = page.locator(MAP_IFRAME).bounding_box(), memory.bounding_box()
    assert listed["x"] >= drawn_map["x"] + drawn_map["width"] and listed["y"] < drawn_map["y"] + drawn_map["height"], (
        drawn_map,
        listed,
    )  # right of the map, level with it: not below the step log
    page.screenshot(path=str(ARTIFACTS / "fgdip-error-memory.png"))
    # A node clicked on the map while the error memory is open: the Node tab comes back, showing it.
    click_map_node(page, branch[FIRST].id)  # the whole tree is in view since Fit
    poll(
        page,
        lambda: (
            page.get_by_role("tab", selected=True).inner_text(timeout=2_000) == "Node"
            and panel_node(page) == branch[FIRST].id
        ),
        what="the Node tab to come back with the clicked entity",
    )

    # Steering from the node panel: Mark impossible on a sure step the search never took.
    target = by_arg[f"{FIRST} d2 s3"]
    assert target.data["verdict"] == "sure" and target.data.get("explored_order") is None
    choose_node(page, numbers[target.id])
    poll(page, lambda: panel_node(page) == target.id, what="the node panel to show the step")
    buttons = [
        node_panel_column(page).get_by_role("button", name=name, exact=True)
        for name in ("Explore next", "Mark impossible")
    ]
    for button in buttons:  # whole labels, none cut to "Mark im…" by the narrow panel
        assert not button.evaluate(_CUT_JS), button.inner_text()
    buttons[1].click()
    poll(
        page,
        lambda: [c.status for c in app_repo.list_commands(run_id)] == [CommandStatus.DONE],
        timeout=120,
        what="Mark impossible to be applied",
    )
    assert app_repo.get_node(target.id).data["verdict"] == "impossible"
    poll(page, lambda: app_repo.get_run(run_id).status == RunStatus.DONE, timeout=60, what="the run to be done again")
    poll(
        page,
        lambda: metric(page, "Status") == "done" and not page.get_by_role("button", name="Pause").count(),
        timeout=60,
        what="the page to show the run done again",
    )
    # The step log told it on its way: queued, then applied (newest first).
    log = page.locator('[data-testid="stExpander"]').filter(has_text="Step log").first
    lines = poll(
        page,
        lambda: "Mark impossible applied" in (t := log.inner_text(timeout=2_000)) and t,
        what="the step log to say it was applied",
    )
    assert lines.index("Mark impossible applied") < lines.index("Mark impossible queued"), lines
    node_panel_column(page).locator('[data-testid="stAlert"]').filter(
        has_text="Mark impossible applied"
    ).first.wait_for()
    # The map follows: the step now has the impossible fill.
    poll(
        page,
        lambda: rgb(next(n for n in map_nodes(page) if n["id"] == str(target.id))["fill"]) == FILLS["impossible"],
        what="the step to turn impossible grey on the map",
    )
    page.locator(MAP_IFRAME).scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    page.screenshot(path=str(ARTIFACTS / "fgdip-steered.png"), full_page=True)
    assert page.dialogs == []
