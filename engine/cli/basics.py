"""The CLI's exit codes, its one error type, and the two ways a command speaks: light, so `main` can
say an error before any command module is loaded."""

from __future__ import annotations

import sys

from engine.safe_text import terminal_text

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_STOPPED = 0, 1, 2, 3


class CLIError(Exception):
    """What the command says on stderr as "error: ...", and the exit code it ends with."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def err(message: str) -> None:
    """A line on stderr. Messages carry stored text (run errors, labels, model descriptions): no
    terminal controls."""
    print(f"thoughtmap: {terminal_text(message)}", file=sys.stderr, flush=True)


def say(line: str) -> None:
    """One line of command output on stdout; stored text in it cannot drive the terminal."""
    print(terminal_text(line))
