"""A steering command's way through the step log: queued (at once, when it is sent), applying
(when the run takes it), then applied or refused with the reason. The node panel, the map's badges
and the step log read these events, so a person sees the command the moment it is sent."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from engine import narration
from engine.contract import MethodContract
from storage.models import Command, stored_id


class EventLog(Protocol):
    """Where step-log lines go: the repository, or a running run's journal (`engine/write_behind.py`)."""

    def add_event(
        self, run_id: str, kind: str, text: str, *, node_id: int | None = None, data: Mapping[str, Any] | None = None
    ) -> None: ...


class SteeringEvents:
    """Writes the `steer` events of one run's commands, in the words of the method's contract."""

    def __init__(self, repo: EventLog, run_id: str, contract: MethodContract) -> None:
        self._repo = repo
        self._run_id = run_id
        self._contract = contract
        # Commands taken by this run's worker, so their outcome can name them.
        self._taken: dict[int, Command] = {}
        self._lock = threading.Lock()

    def _label(self, command: Command) -> str:
        spec = self._contract.commands.get(command.kind)
        return spec.label if spec is not None else command.kind.replace("_", " ")

    def _write(self, command: Command, phase: str, text: str, **data: object) -> None:
        node_id = (command.payload or {}).get("node_id")
        self._repo.add_event(
            self._run_id,
            narration.STEER,
            text,
            node_id=node_id if isinstance(node_id, int) else None,
            data={"phase": phase, "command_id": command.id, "command": command.kind, **data},
        )

    def queued(self, command: Command) -> None:
        self._write(command, narration.QUEUED, f"{self._label(command)} queued")

    def taken(self, commands: Iterable[Command]) -> list[Command]:
        commands = list(commands)
        for command in commands:
            with self._lock:
                self._taken[stored_id(command)] = command
            self._write(command, narration.APPLYING, f"applying {self._label(command)}")
        return commands

    def completed(self, command_id: int, ok: bool = True, error: str = "") -> None:
        with self._lock:
            command = self._taken.pop(command_id, None)
        if command is None:
            return  # not one this worker took (nothing to name it by)
        label = self._label(command)
        if ok:
            self._write(command, narration.APPLIED, f"{label} applied")
        else:
            self._write(command, narration.REFUSED, f"{label} refused: {error}", error=error)
