"""Steering commands as the method declares them (`CommandSpec`): a button with the command's label
and help, a payload form generated from the payload model's fields, validation with
`CommandSpec.parse` before anything is sent, and the runner's refusal (checked again before it is
queued) shown as an error, and what became of the command (`Outcomes`: queued, applied, refused)
drawn under the button that sent it. Used by the node panel (node commands) and the run panels
(run-level commands and notices)."""

from __future__ import annotations

from typing import Any

import streamlit as st
from annotated_types import MinLen
from pydantic.fields import FieldInfo

from components import identity
from components.command_outcome import Outcomes
from components.params_form import field_label, model_form, readable_problems
from engine.access import LimitReached
from engine.contract import CommandRejected, CommandSpec
from engine.methods.base import UnsupportedCommand
from engine.reads import Node, Run
from engine.runner import RunnerError
from engine.services import Services

# A command's form starts empty again once the command is queued (a submitted follow-up left in
# its box invites sending it twice). The browser keeps a widget's value across reruns, so the form
# gets new widgets: its keys carry a generation, counted up per queued command.
_GENERATION = "form-generation-"


def _form_key(key: str) -> str:
    generation = st.session_state.get(_GENERATION + key, 0)
    return key if generation == 0 else f"{key}~{generation}"


def _clear_form(key: str) -> None:
    st.session_state[_GENERATION + key] = st.session_state.get(_GENERATION + key, 0) + 1


def payload_form(spec: CommandSpec, *, key: str) -> dict[str, Any]:
    """Widgets for the payload fields a person fills in (not the target node); the raw values."""
    fields = spec.form_fields()
    if not fields:
        return {}
    values = model_form(spec.payload, key=_form_key(key), fields=fields)
    # Text typed with spaces around it is the text; only blanks would pass a min_length check.
    return {name: value.strip() if isinstance(value, str) else value for name, value in values.items()}


def _needs_a_value(info: FieldInfo) -> bool:
    return info.is_required() or any(isinstance(m, MinLen) and m.min_length > 0 for m in info.metadata)


def _blank_fields(spec: CommandSpec, values: dict[str, Any]) -> list[str]:
    """The labels of fields left blank that the payload needs filled in."""
    return [
        field_label(name, info)
        for name, info in spec.form_fields().items()
        if values.get(name) in (None, "", []) and _needs_a_value(info)
    ]


# A refusal said under its form stays there until the form is sent again: drawn only in the run of
# the click, the live view's next refresh (every second while the run is active) wiped it.
_REFUSAL = "refusal-"


def _refused(text: str, form_key: str | None) -> None:
    if form_key is None:
        st.error(text)
    else:
        st.session_state[_REFUSAL + form_key] = text  # drawn by the form's control, under its button


def _refusal(form_key: str) -> None:
    if (text := st.session_state.get(_REFUSAL + form_key)) is not None:
        st.error(text)


def send(
    services: Services,
    run: Run,
    spec: CommandSpec,
    values: dict[str, Any],
    node: Node | None = None,
    *,
    form_key: str | None = None,
) -> None:
    """Validate the payload, queue the command (the runner checks it once more against the stored
    graph), say it is queued and empty its form (`form_key`); or show why it was refused (nothing is
    queued)."""
    if identity.refuse_change(services, run):  # the last guard: only the run's owner steers it
        return
    try:
        services.access.check_may_run(identity.viewer(services), run)  # a finished run is reopened for it
    except LimitReached as exc:
        _refused(f"Could not {spec.label.lower()}: {exc}", form_key)
        return
    raw = {**values, **({"node_id": node.id} if node is not None and spec.targets_node else {})}
    try:
        payload = spec.parse(raw)
    except CommandRejected as exc:
        blank = _blank_fields(spec, values)
        problems = readable_problems(spec.form_fields(), exc.errors) or str(exc)
        _refused(
            f"Could not {spec.label.lower()}: " + (f"fill in {' and '.join(blank)} first." if blank else problems),
            form_key,
        )
        return
    try:
        services.runner.steer(run.id, spec.name, payload.model_dump(mode="json"))
    except (CommandRejected, UnsupportedCommand, RunnerError, ValueError, LookupError) as exc:
        _refused(f"Could not {spec.label.lower()}: {exc}", form_key)
    else:
        if form_key is not None:
            st.session_state.pop(_REFUSAL + form_key, None)
            _clear_form(form_key)
        # Queued, not done: the node panel and the step log follow it until it is applied.
        st.session_state["flash"] = f"{spec.label} queued"
        # A full rerun: the run may have been reopened, and the live view must start polling again.
        st.rerun(scope="app")


def _button(spec: CommandSpec, *, key: str, label: str | None = None, waiting: str | None = None) -> bool:
    """The command's button, keyed `<key>-<command>`. `waiting` ("queued", "applying") disables a
    command without fields: the same command on the same node is on its way, and a second click
    would only queue it twice."""
    if waiting and not spec.form_fields():
        st.button(f"{label or spec.label} · {waiting}", key=f"{key}-{spec.name}", help=spec.help, disabled=True)
        return False
    return st.button(label or spec.label, key=f"{key}-{spec.name}", help=spec.help)


def command_control(
    services: Services,
    run: Run,
    spec: CommandSpec,
    *,
    key: str,
    node: Node | None = None,
    label: str | None = None,
    waiting: str | None = None,
    outcomes: Outcomes | None = None,
) -> None:
    """The command's payload form (when it has fields) and its button, keyed `<key>-<command>`;
    under it, a refusal of the last click and what became of the command (`outcomes`). None for a
    reader who may not change the run."""
    if not identity.may_change(services, run):
        return
    base = f"{key}-{spec.name}"
    values = payload_form(spec, key=base)
    if _button(spec, key=key, label=label, waiting=waiting):
        send(services, run, spec, values, node, form_key=base)
    _refusal(base)
    if outcomes is not None:
        outcomes.draw({spec.name})


def command_controls(
    services: Services,
    run: Run,
    specs: list[CommandSpec],
    *,
    key: str,
    node: Node | None = None,
    outcomes: Outcomes | None = None,
) -> None:
    """Buttons for the commands without fields side by side, then each command with fields under its
    form. `outcomes`: the place's commands, each said under its own button (those with no button
    here after the controls); a command on its way disables a button without fields. None for a
    reader who may not change the run (shared with them, or read as an admin)."""
    if not identity.may_change(services, run):
        return
    outcomes = outcomes or Outcomes(None)
    waiting = outcomes.waiting()
    plain = [spec for spec in specs if not spec.form_fields()]
    with_fields = [spec for spec in specs if spec.form_fields()]
    if plain:
        # A row that wraps, each button as wide as its label: fixed columns in the narrow node panel
        # cut a label such as "Mark impossible" down to "Mark im…". Sent after the row: a refusal
        # drawn inside it would sit between two buttons.
        pressed = None
        with st.container(horizontal=True, wrap=True):
            for spec in plain:
                if _button(spec, key=key, waiting=waiting.get(spec.name)):
                    pressed = spec
        if pressed is not None:
            send(services, run, pressed, {}, node, form_key=f"{key}-{pressed.name}")
        for spec in plain:
            _refusal(f"{key}-{spec.name}")
        outcomes.draw({spec.name for spec in plain})  # right under the row its button is in
    # Commands that take the same payload share one form (MTQA's pin and drop both ask for a unit's
    # number): the same field twice over read as two different questions.
    sharing: dict[type, list[CommandSpec]] = {}
    for spec in with_fields:
        sharing.setdefault(spec.payload, []).append(spec)
    for group in sharing.values():
        with st.container(border=True):
            if len(group) == 1:
                command_control(services, run, group[0], key=key, node=node, outcomes=outcomes)
            else:
                shared_form(services, run, group, key=key, node=node, outcomes=outcomes)
    outcomes.draw_others({spec.name for spec in specs})


def shared_form(
    services: Services,
    run: Run,
    specs: list[CommandSpec],
    *,
    key: str,
    node: Node | None = None,
    outcomes: Outcomes | None = None,
) -> None:
    """One payload form for commands that take the same payload, then a button per command, keyed
    `<key>-<command>` as `command_control` keys them; a refusal and the commands' outcomes under
    the row."""
    if not identity.may_change(services, run):
        return
    base = f"{key}-" + "+".join(spec.name for spec in specs)
    values = payload_form(specs[0], key=base)
    pressed = None
    with st.container(horizontal=True, wrap=True):
        for spec in specs:
            if _button(spec, key=key):
                pressed = spec
    if pressed is not None:
        send(services, run, pressed, values, node, form_key=base)
    _refusal(base)
    if outcomes is not None:
        outcomes.draw({spec.name for spec in specs})
