"""Log records on a terminal carry model output (a task id a model wrote, a failed call's text, a
traceback quoting either): every formatted record goes through `terminal_text`, so none of it can
drive the terminal (clear the screen, retitle the window, rewrite a line)."""

from __future__ import annotations

import logging
import sys

from engine.safe_text import terminal_text


class TerminalSafeFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return terminal_text(super().format(record))


def make_last_resort_safe() -> None:
    """The CLI configures no logging, so Python prints warnings through its last-resort handler
    (`%(message)s` on stderr): keep that output, made safe."""
    if logging.lastResort is not None and not isinstance(logging.lastResort.formatter, TerminalSafeFormatter):
        logging.lastResort.setFormatter(TerminalSafeFormatter())


def log_to_stderr(level: int, fmt: str) -> None:
    """Records at `level` and above on stderr in `fmt`, made safe (the worker's log)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TerminalSafeFormatter(fmt))
    logging.basicConfig(level=level, handlers=[handler], force=True)  # the worker process owns its log
