"""The Explore page's narration and steering states (AppTest, fake LLM): the one-line progress
with active time, the step log, and a node panel that shows a command queued (its button disabled),
applying, refused with the reason or applied; a busy node says when the command applies; a queued
follow-up leaves its box empty."""

from __future__ import annotations

import threading

from components.run_view import progress_line
from components.step_log import node_badges, now_lines
from engine import narration
from engine.methods.registry import METHODS
from engine.node_numbers import node_numbers
from engine.steering_events import SteeringEvents
from storage.models import Command, CommandStatus, Node, NodeStatus, Run, RunEvent, RunStatus
from tests.pages.test_app_pages import (  # the page helpers and fixtures of the app tests
    _open_on_node,
    _steer_target,
    assert_no_exception,
    finished_deot,
    in_order,
    services,  # noqa: F401  (fixture)
    texts,
    wait_until_idle,
)
from tests.support.progress_line import parse_progress, progress_of


def _quiet(run_id: str) -> None:
    """Wait for the run's worker thread to end: after a run is done, it still looks once for a
    steering command queued meanwhile (and would apply the one a test queues by hand)."""
    for thread in threading.enumerate():
        if thread.name == f"run-{run_id}":
            thread.join(timeout=30)


def _panel_texts(at) -> list[str]:
    return texts(at.info) + texts(at.success) + texts(at.warning) + texts(at.caption)


def test_progress_is_one_line_with_active_time_and_the_step_log_is_under_the_map(services, monkeypatch):
    run_id = finished_deot(services)
    target = _steer_target(services, run_id)
    at = _open_on_node(services, monkeypatch, run_id, target.id)
    fields = progress_of(at)
    assert fields["Status"] == "done" and "active" in fields and "wall" in fields
    assert not at.metric  # no row of metric boxes above the map any more
    log = next(e for e in at.expander if e.label == "Step log")
    lines = "\n".join(texts(log.markdown))
    assert "the run started" in lines and "finished" in lines
    assert "planning the tasks" in lines and "writing the report" in lines
    # Lines about a node carry its number in the run.
    assert "#1 · " in lines


def test_progress_line_says_not_started_only_of_a_queued_run():
    # A run stored without its start time (imported, or of an earlier release) that is done has
    # run: "not started" beside "done" would contradict itself.
    done = Run(id="r1", question="q", method="deot", status=RunStatus.DONE, started_at=None)
    queued = Run(id="r2", question="q", method="deot", status=RunStatus.QUEUED, started_at=None)
    node = Node(id="n1", run_id="r1", kind="task", label="a task", status=NodeStatus.DONE)
    assert progress_line(done, [node], []) == "done · 1 / 1 nodes done · time not recorded · 0 tokens · $0.0000"
    assert progress_line(queued, [], []) == "queued · 0 / 0 nodes done · not started · 0 tokens · $0.0000"
    stopped = Run(id="r3", question="q", method="deot", status=RunStatus.STOPPED, started_at=None)  # while queued
    assert progress_line(stopped, [], []) == "stopped · 0 / 0 nodes done · not started · 0 tokens · $0.0000"
    assert parse_progress(progress_line(done, [node], []))["Status"] == "done"


def test_progress_line_names_the_model_the_run_ran_on():
    # With a run open, what new research runs on is said only in the folded form: the open run's own
    # model is said on its line (a run opened later may have run on another one).
    info = {"kind": "local", "model": "Qwen2.5-Coder-0.5B-Instruct (Q4_K_M), built in"}
    run = Run(id="r1", question="q", method="deot", status=RunStatus.DONE, started_at=None, llm_info=info)
    node = Node(id="n1", run_id="r1", kind="task", label="a task", status=NodeStatus.DONE)
    line = progress_line(run, [node], [])
    assert line == (
        "done · 1 / 1 nodes done · time not recorded · 0 tokens · $0.0000 · "
        "Qwen2.5-Coder-0.5B-Instruct (Q4_K_M), built in"
    )
    assert parse_progress(line)["model"] == info["model"] and parse_progress(line)["Cost"] == "$0.0000"


def test_a_queued_command_shows_on_its_node_and_its_button_is_disabled(services, monkeypatch):
    run_id = finished_deot(services)
    target = _steer_target(services, run_id)
    # Queued as the runner would, without reopening the run: the state a busy run shows.
    _quiet(run_id)
    services.repo.enqueue_command(run_id, "prune", {"node_id": target.id})
    at = _open_on_node(services, monkeypatch, run_id, target.id)
    key = f"steer-{run_id}-{target.id}-prune"
    assert at.button(key=key).disabled and at.button(key=key).label == "Prune · queued"
    assert "Prune queued. The prune applies at the run's next step." in _panel_texts(at)
    # Commands come before the node's long text.
    assert at.button(key=key) is not None

    # Taken and completed as the runner does: the events tell the live view (a new version).
    steering = SteeringEvents(services.repo, run_id, METHODS["deot"].contract())
    steering.taken(services.repo.take_commands(run_id, ["prune"]))
    at.run()
    assert at.button(key=key).label == "Prune · applying"
    assert "applying Prune. Applying the prune now." in _panel_texts(at)

    (command,) = services.repo.list_commands(run_id)
    services.repo.complete_command(command.id, ok=False, error="node 9 is pruned; nothing grows under it")
    steering.completed(command.id, ok=False, error="node 9 is pruned; nothing grows under it")
    at.run()
    assert "Prune refused: node 9 is pruned; nothing grows under it" in _panel_texts(at)
    assert not at.button(key=key).disabled and at.button(key=key).label == "Prune"


def test_a_busy_node_says_when_the_command_applies(services, monkeypatch):
    run_id = finished_deot(services)
    target = _steer_target(services, run_id)
    _quiet(run_id)
    services.repo.update_node(target.id, status=NodeStatus.RUNNING)
    services.repo.add_event(run_id, narration.STEP, "summarising what the sources say", node_id=target.id)
    services.repo.enqueue_command(run_id, "prune", {"node_id": target.id})
    from tests.pages.test_app_pages import open_page, pick_node

    pick_node(monkeypatch, target.id)
    at = open_page(run_id=run_id)
    number = sorted(n.id for n in services.repo.list_nodes(run_id)).index(target.id) + 1
    assert (
        f"Prune queued. #{number} is summarising what the sources say; the prune applies when that step ends."
    ) in _panel_texts(at)
    assert "Now: summarising what the sources say" in _panel_texts(at)


def test_a_queued_follow_up_clears_its_box_and_shows_applied(services, monkeypatch):
    run_id = finished_deot(services)
    target = _steer_target(services, run_id)
    at = _open_on_node(services, monkeypatch, run_id, target.id)
    key = f"steer-{run_id}-{target.id}-ask"
    at.text_input(key=f"{key}.question").input("Which Apollo technologies reached consumer products?")
    at.button(key=key).click().run()
    assert_no_exception(at)
    # Sent: the box is empty again (a new widget, so the browser forgets the old text too).
    (box,) = [t for t in at.text_input if t.label == "Your follow-up"]
    assert box.value == "" and box.key != f"{key}.question"
    assert wait_until_idle(services, run_id).status == RunStatus.DONE
    at.run()
    # What was asked is said with it (the form's words), so a person sees which follow-up it was.
    assert "Ask applied · Your follow-up “Which Apollo technologies reached consumer products?”" in _panel_texts(at)


def _node(node_id: int, status: str, label: str = "", parent: int | None = 1) -> Node:
    return Node(
        id=node_id, run_id="r", kind="question", label=label or f"question {node_id}", status=status, parent_id=parent
    )


def _step(node_id: int | None, text: str, event_id: int, kind: str = narration.STEP) -> RunEvent:
    return RunEvent(id=event_id, run_id="r", node_id=node_id, kind=kind, text=text)


def test_badges_show_a_command_on_its_way_else_the_running_nodes_step():
    nodes = [
        _node(1, NodeStatus.DONE, parent=None),
        _node(2, NodeStatus.RUNNING),
        _node(3, NodeStatus.RUNNING),
        _node(4, NodeStatus.DONE),
    ]
    events = [
        _step(3, "searched local corpus for “x”: 2 sources came back", 5, narration.SEARCH),
        _step(2, "summarising what the sources say", 4),
        _step(3, "planning the tasks", 3),
        _step(2, "planning the tasks", 2),
        _step(4, "checking the facts", 1),
    ]  # newest first
    commands = [
        Command(id=1, run_id="r", kind="prune", payload={"node_id": 2}, status=CommandStatus.QUEUED),
        Command(id=2, run_id="r", kind="expand", payload={"node_id": 4, "n": 1}, status=CommandStatus.TAKEN),
        Command(id=3, run_id="r", kind="deepen", payload={"node_id": 1}, status=CommandStatus.DONE),
    ]
    badges = node_badges(nodes, events, commands, METHODS["deot"].contract())
    assert badges == {2: "Prune queued", 3: "searched local corpus for “x”: 2 sources came back", 4: "applying Expand"}


def test_now_names_each_running_node_with_its_number_and_step_else_the_latest_step():
    nodes = [
        _node(10, NodeStatus.DONE, "Why?", parent=None),
        _node(12, NodeStatus.RUNNING, "How?"),
        _node(15, NodeStatus.PENDING, "When?"),
    ]
    numbers = node_numbers(nodes)
    events = [_step(12, "checking the plan", 2), _step(None, "writing the report", 1)]
    assert now_lines(nodes, events, numbers) == ["#2 How? — checking the plan"]
    nodes[1].status = NodeStatus.DONE
    assert now_lines(nodes, events, numbers) == ["#2 How? — checking the plan"]  # its engines decide next
    assert now_lines(nodes, [_step(None, "writing the report", 3)] + events, numbers) == ["writing the report"]


def test_a_commands_state_says_what_was_given_with_it_but_its_map_badge_does_not():
    from components.step_log import command_state

    contract = METHODS["fgdip"].contract()
    lesson = "Compare the founding years of both magazines before answering, and check each source's date."
    edit = Command(
        id=1, run_id="r", kind="edit_error_memory", status=CommandStatus.DONE, payload={"number": 0, "analysis": lesson}
    )
    assert command_state(contract, edit) == (
        "Edit error memory applied · Lesson “Compare the founding years of both magazines before answeri…”"
    )
    pin = Command(id=2, run_id="r", kind="pin_unit", status=CommandStatus.QUEUED, payload={"node_id": 4, "unit": 2})
    assert command_state(METHODS["mtqa"].contract(), pin) == "Pin knowledge unit queued · Knowledge unit 2"
    assert command_state(METHODS["mtqa"].contract(), pin, details=False) == "Pin knowledge unit queued"
    sub = Command(
        id=3,
        run_id="r",
        kind="add_subtopic",
        status=CommandStatus.DONE,
        payload={"node_id": 1, "subtopic": "Solar sails", "keywords": ["light", "o'neill"]},
    )
    assert command_state(METHODS["omnithink"].contract(), sub).endswith("Keywords light, o'neill")


_ALERTS = ("info", "success", "warning", "error")


def _said_under(at, button_key: str, text: str) -> bool:
    """Whether an alert saying `text` follows the button keyed `button_key` with nothing but the
    other buttons of its row and other such alerts between: under the button that sent the
    command, not at the top of the panel (nor under another command's form)."""
    elements = in_order(at.main)
    at_button = next(i for i, e in enumerate(elements) if e.type == "button" and getattr(e, "key", None) == button_key)
    for element in elements[at_button + 1 :]:
        if element.type in _ALERTS and text in str(element.value):
            return True
        if element.type not in ("button", *_ALERTS):
            return False
    return False


def test_a_commands_outcome_is_said_under_its_button_as_it_moves_on(services, monkeypatch):
    """Issue 43: the outcome of a command was said at the top of the panel, which scrolls on its
    own, out of view of a button further down (a follow-up's Ask sits under its form)."""
    run_id = finished_deot(services)
    target = _steer_target(services, run_id)
    _quiet(run_id)
    services.repo.enqueue_command(run_id, "ask", {"node_id": target.id, "question": "Which parts flew again?"})
    at = _open_on_node(services, monkeypatch, run_id, target.id)
    ask = f"steer-{run_id}-{target.id}-ask"
    assert _said_under(
        at, ask, "Ask queued · Your follow-up “Which parts flew again?”. The ask applies at the run's next step."
    )

    steering = SteeringEvents(services.repo, run_id, METHODS["deot"].contract())
    steering.taken(services.repo.take_commands(run_id, ["ask"]))
    at.run()
    assert _said_under(at, ask, "applying Ask")
    (command,) = services.repo.list_commands(run_id)
    services.repo.complete_command(command.id, ok=False, error="the run has reached its node limit")
    steering.completed(command.id, ok=False, error="the run has reached its node limit")
    at.run()
    assert _said_under(at, ask, "Ask refused: the run has reached its node limit")
    # Not also said under the row of buttons above it (Prune, Go deeper...).
    assert sum("Ask refused" in str(a.value) for a in at.warning) == 1

    # A command without fields: said right under the row its button is in.
    services.repo.enqueue_command(run_id, "prune", {"node_id": target.id})
    at.run()
    assert _said_under(at, f"steer-{run_id}-{target.id}-prune", "Prune queued")
