"""What became of a steering command (queued, applying, applied, refused with the reason), said under
the button that sent it. The panels beside the map scroll on their own: an outcome said at a panel's
top was out of view of a button further down (issue 43), so each button's own commands are drawn
right under it, and follow it from queued to applied or refused as the live view refreshes."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import streamlit as st

from components.step_log import OPEN_COMMAND, command_state
from engine.contract import MethodContract
from engine.reads import Command, CommandStatus
from engine.safe_text import inline_text

# How many finished commands are still shown (the step log has them all): the latest only, so an
# older refusal does not stand beside a later command that was applied.
FINISHED_SHOWN = 1
_WAITING = {CommandStatus.QUEUED: "queued", CommandStatus.TAKEN: "applying"}


@dataclass(frozen=True)
class Outcomes:
    """The commands of one place (a node, or the run) whose outcome is shown: those on their way,
    then the latest finished. `explain` adds to a waiting command's line what it waits for."""

    contract: MethodContract | None
    shown: tuple[Command, ...] = ()
    explain: Callable[[Command], str] | None = None

    @classmethod
    def of(
        cls,
        contract: MethodContract | None,
        commands: Sequence[Command],
        explain: Callable[[Command], str] | None = None,
    ) -> Outcomes:
        """`commands`: the place's commands, oldest first."""
        waiting = [c for c in commands if c.status in OPEN_COMMAND]
        finished = [c for c in commands if c.status not in OPEN_COMMAND][-FINISHED_SHOWN:]
        return cls(contract, (*waiting, *finished), explain)

    def waiting(self) -> dict[str, str]:
        """Command name -> "queued" or "applying", for the commands on their way."""
        return {c.kind: _WAITING[c.status] for c in self.shown if c.status in OPEN_COMMAND}

    def draw(self, kinds: Collection[str]) -> None:
        """The outcomes of these commands, newest first: where their button is."""
        for command in reversed([c for c in self.shown if c.kind in kinds]):
            text = command_state(self.contract, command)
            if command.status in OPEN_COMMAND:
                why = self.explain(command) if self.explain is not None else ""
                st.info(inline_text(f"{text}. {why}" if why else text), icon=":material/schedule:")
            elif command.status == CommandStatus.DONE:
                st.success(inline_text(text), icon=":material/check:")
            else:
                st.warning(inline_text(text), icon=":material/block:")

    def draw_others(self, kinds: Collection[str]) -> None:
        """The outcomes of commands that have no button here (any more): a Prune applied, whose
        node now offers only Restore; a command a notice above sent."""
        self.draw({c.kind for c in self.shown} - set(kinds))
