"""The step log and what is derived from it: each running node's current step ("Now:"), the
short badge a node carries on the map (a steering command on its way, else its current step), and
the log itself (newest first: time, #n, plain words; optionally only the selected node).

Events and commands are read once per version of the run (`RunReads.memo`); every text in them
may quote the model or a search query, so it is shown as inline text (no Markdown of its own)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import streamlit as st

from components.live_run import RunReads
from components.params_form import field_label
from engine import narration
from engine.contract import MethodContract
from engine.reads import Command, CommandStatus, Node, NodeStatus, RunEvent
from engine.safe_text import inline_text
from engine.services import Services

# The log shows the newest events; older ones stay stored (the exports may use them).
LOG_LIMIT = 200
LOG_HEIGHT_PX = 260
DETAIL_CHARS = 60  # a command's text as the state line quotes it
# Kinds that say what a node is doing now.
_DOING = (narration.STEP, narration.SEARCH)
OPEN_COMMAND = (CommandStatus.QUEUED, CommandStatus.TAKEN)


def run_events(services: Services, reads: RunReads) -> list[RunEvent]:
    """The newest events of the run (newest first), once per version."""
    return reads.memo("events", lambda: services.reads.list_events(reads.run_id, limit=LOG_LIMIT))


def lifecycle_events(services: Services, reads: RunReads) -> list[RunEvent]:
    """All of the run's lifecycle events (for active time), once per version."""
    return reads.memo("lifecycle", lambda: services.reads.list_events(reads.run_id, kinds=[narration.RUN]))


def run_commands(services: Services, reads: RunReads) -> list[Command]:
    return reads.memo("commands", lambda: services.reads.list_commands(reads.run_id))


def stop_asked(commands: Iterable[Command]) -> bool:
    """A Stop was pressed and the run has not read it yet: it stops once its current step ends,
    which on a slow model is a call of many seconds away."""
    return any(c.kind == "stop" and c.status in OPEN_COMMAND for c in commands)


def current_steps(events: Iterable[RunEvent]) -> dict[int | None, str]:
    """Node id (None: the run itself) -> its latest step or search, from events newest first."""
    steps: dict[int | None, str] = {}
    for event in events:
        if event.kind in _DOING and event.node_id not in steps:
            steps[event.node_id] = event.text
    return steps


def command_node(command: Command) -> int | None:
    node_id = (command.payload or {}).get("node_id")
    return node_id if isinstance(node_id, int) else None


def command_label(contract: MethodContract | None, kind: str) -> str:
    spec = contract.commands.get(kind) if contract is not None else None
    return spec.label if spec is not None else kind.replace("_", " ")


def command_details(contract: MethodContract | None, command: Command) -> str:
    """What the person gave with the command, as its form names it: "Knowledge unit 2",
    "Lesson “Compare the founding years”" (long text cut); "" for a command without a form."""
    spec = contract.commands.get(command.kind) if contract is not None else None
    if spec is None:
        return ""
    parts = []
    for name, info in spec.form_fields().items():
        value = (command.payload or {}).get(name)
        if value is None or value == "" or value == [] or (not info.is_required() and value == info.default):
            continue  # left as the form had it: nothing the person gave (Entry 0 is "a new one")
        typed = isinstance(value, str)  # the person's own text is quoted; numbers, flags and lists are not
        if isinstance(value, bool):
            value = "on" if value else "off"
        elif isinstance(value, (list, tuple)):
            value = ", ".join(str(v) for v in value)
        text = " ".join(str(value).split())
        text = text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"
        parts.append(f"{field_label(name, info)} " + (f"“{text}”" if typed else text))
    return ", ".join(parts)


def command_state(contract: MethodContract | None, command: Command, *, details: bool = True) -> str:
    """ "Prune queued", "applying Prune", "Pin knowledge unit applied · Knowledge unit 2", "Prune
    refused: <why>"; `details`: with what the person gave (a map badge has no room for it)."""
    label = command_label(contract, command.kind)
    state = {
        CommandStatus.QUEUED: f"{label} queued",
        CommandStatus.TAKEN: f"applying {label}",
        CommandStatus.DONE: f"{label} applied",
    }.get(command.status, f"{label} refused: {command.error}")
    given = command_details(contract, command) if details else ""
    return f"{state} · {given}" if given else state


def open_commands(commands: Iterable[Command]) -> dict[int, list[Command]]:
    """Node id -> its commands not yet applied (queued or being applied), oldest first."""
    by_node: dict[int, list[Command]] = {}
    for command in commands:
        node_id = command_node(command)
        if node_id is not None and command.status in OPEN_COMMAND:
            by_node.setdefault(node_id, []).append(command)
    return by_node


def node_badges(
    nodes: Sequence[Node],
    events: Iterable[RunEvent],
    commands: Iterable[Command],
    contract: MethodContract | None = None,
) -> dict[int, str]:
    """Node id -> one short line for the map: a steering command on its way (queued, applying),
    else the running node's current step."""
    steps = current_steps(events)
    waiting = open_commands(commands)
    badges: dict[int, str] = {}
    for node in nodes:
        if node.id in waiting:
            badges[node.id] = command_state(contract, waiting[node.id][-1], details=False)
        elif node.status == NodeStatus.RUNNING and steps.get(node.id):
            badges[node.id] = steps[node.id]
    return badges


def now_lines(
    nodes: Sequence[Node], events: Sequence[RunEvent], numbers: dict[int, int], *, label_chars: int = 60
) -> list[str]:
    """ "#n label — its current step" for each running node; when none is running, the run's latest
    step (a node's engines deciding what comes next, the report). Plain text (the caller makes it
    safe); events newest first."""
    by_id = {node.id: node for node in nodes}

    def line(node_id: int | None, step: str) -> str:
        node = by_id.get(node_id)
        if node is None:
            return step
        label = node.label if len(node.label) <= label_chars else node.label[: label_chars - 1] + "…"
        return f"#{numbers.get(node.id, '?')} {label} — {step}"

    steps = current_steps(events)
    running = [n for n in nodes if n.status == NodeStatus.RUNNING]
    if running:
        return [line(node.id, steps.get(node.id) or "starting") for node in running]
    latest = next((e for e in events if e.kind in _DOING), None)
    return [line(latest.node_id, latest.text)] if latest is not None else []


def log_line(event: RunEvent, numbers: dict[int, int]) -> str:
    """One line of the log as safe Markdown: time, #n (when it is about a node), the words."""
    where = f"#{numbers[event.node_id]} · " if event.node_id in numbers else ""
    return f"`{event.created_at:%H:%M:%S}` {where}{inline_text(event.text)}"


def step_log(events: Sequence[RunEvent], numbers: dict[int, int], *, key: str, selected: int | None = None) -> None:
    """The log under the map: newest first, optionally only the selected node's lines."""
    with st.expander("Step log", expanded=True):
        only_selected = selected is not None and st.toggle(
            f"Only #{numbers.get(selected, '?')}",
            key=f"{key}-only-selected",
            help="Show only what happened to the node selected on the map.",
        )
        shown = [e for e in events if not only_selected or e.node_id == selected]
        if not shown:
            st.caption("Nothing yet: the first step appears here as soon as the run starts.")
            return
        with st.container(height=LOG_HEIGHT_PX, border=False):
            st.markdown("  \n".join(log_line(event, numbers) for event in shown))
