"""Beside the map, in the tab `ViewSpec.side_tab` names: the run-state panels the method's view
declares (`ViewSpec.panels`), each drawn by its own model (`panel_caption`, `panel_markdown`,
`history_markdown`); the method's notices (what a reader should know now, with the command to
offer); and the run-level commands (`CommandSpec`s that target no node). Built from the
declarations alone, for a column as narrow as the node panel's."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st
from pydantic import ValidationError

from components.command_outcome import Outcomes
from components.commands import command_control, command_controls
from components.live_run import RunReads
from components.safe_markdown import render, sanitize
from components.step_log import run_commands as stored_commands
from engine.contract import MethodContract, Notice, RunStateModel
from engine.reads import Command, Run
from engine.safe_text import inline_text
from engine.services import Services


def _state_versions(services: Services, run: Run, contract: MethodContract, name: str) -> list[RunStateModel]:
    spec = contract.run_states[name]
    versions = []
    for stored in services.reads.list_run_states(run.id, name):
        try:
            versions.append(spec.model.model_validate(stored.data))
        except ValidationError:  # a version stored by an older model: skipped rather than fatal
            continue
    return versions


def state_panels(services: Services, run: Run, contract: MethodContract, reads: RunReads | None = None) -> None:
    """One panel per declared run state: title, caption, body (what it says before its first version,
    while it has none); and how it grew, when it has more than one version."""
    for name in contract.view.panels:
        spec = contract.run_states[name]

        def read(name: str = name) -> list[RunStateModel]:
            return _state_versions(services, run, contract, name)

        versions = reads.memo(("run-state", name), read) if reads is not None else read()
        if not versions:
            with st.expander(spec.title, expanded=spec.expanded):
                st.caption(inline_text(spec.empty))
            continue
        latest = versions[-1]
        with st.expander(spec.title, expanded=spec.expanded):
            caption = latest.panel_caption()
            if caption:
                st.caption(inline_text(caption))  # one line by contract: plain text
            render(st, latest.panel_markdown() or "_empty_")
        if len(versions) > 1:
            history = spec.model.history_markdown(versions)
            if history:
                # Beside the panel, not in it: Streamlit does not nest expanders.
                with st.expander(f"How it grew · {spec.title}"):
                    render(st, history)


def notice_list(services: Services, run: Run, contract: MethodContract, reads: RunReads | None = None) -> list[Notice]:
    """What the method says the reader should know now (read once per version of the run)."""

    def read() -> list[Notice]:
        method = services.method(run.method)()
        return method.notices(services.reads.graph(run.id, contract))

    return reads.memo("notices", read) if reads is not None else read()


def notices(services: Services, run: Run, contract: MethodContract, reads: RunReads | None = None) -> set[str]:
    """The method's notices, each with a button for its command; the names of the commands offered."""
    offered = set()
    # A command a notice sent is on its way: its button says so (disabled), and a refusal is said
    # under it; the run tab says what became of it.
    waiting = Outcomes.of(contract, stored_commands(services, reads)).waiting() if reads is not None else {}
    for notice in notice_list(services, run, contract, reads):
        spec = contract.commands.get(notice.command) if notice.command else None
        if spec is None:
            st.info(sanitize(notice.text), icon=":material/info:")
            continue
        # The notice, then its button under it: the column is as narrow as the node panel.
        st.info(sanitize(notice.text), icon=":material/update:")
        command_control(services, run, spec, key=f"notice-{run.id}", waiting=waiting.get(spec.name))
        offered.add(spec.name)
    return offered


def run_commands(
    services: Services,
    run: Run,
    contract: MethodContract,
    commands: Sequence[Command] = (),
    *,
    offered_above: set[str] = frozenset(),
) -> None:
    """The run-level commands (e.g. rewrite the outline) as buttons, with their forms when they take
    a payload, each with what became of its latest commands under its button: a refusal is said
    where the command was given, not only in the step log. A command a notice above offers already
    gets no second button (two "Rewrite article" buttons on one page read as two different things):
    its outcome is said after the buttons."""
    specs = contract.run_commands
    if not specs:
        return
    offered = {spec.name for spec in specs}
    outcomes = Outcomes.of(contract, [c for c in commands if c.kind in offered])
    # As the node panel lays out its own: buttons in a row that wraps, then each form in its frame.
    command_controls(
        services,
        run,
        [spec for spec in specs if spec.name not in offered_above],
        key=f"run-cmd-{run.id}",
        outcomes=outcomes,
    )


def has_side_tab(contract: MethodContract) -> bool:
    """Whether the method has anything for the tab beside the map: run states to show or run-level
    commands (a notice always offers one of these, or is said without a button in the run's tab)."""
    return bool(contract.view.panels or contract.run_commands)


def side_panels(
    services: Services,
    run: Run,
    contract: MethodContract,
    reads: RunReads | None = None,
    commands: Sequence[Command] = (),
    *,
    offered: set[str] | None = None,
) -> None:
    """The run's tab: its state panels, then its commands. `offered`: the commands the notices
    (drawn above the tabs, where either tab shows them) offer already; None draws the notices here."""
    if offered is None:
        offered = notices(services, run, contract, reads)
    state_panels(services, run, contract, reads)
    run_commands(services, run, contract, commands, offered_above=offered)
