"""Checks of what was typed on the `thoughtmap` command line, made before any work starts.

Each refuses with `BadInput` (exit code 2) and a message that says what was wrong and what to do,
so nothing is stored for input that could only fail later: a budget that is not a number the
budget check can compare with, argv bytes that no database or file can hold, an `--out` path the
report could not be written to at the end of a long run.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path

# A refused argument may be a whole question: the message shows its start.
MAX_SHOWN_CHARS = 80


class BadInput(Exception):
    """What was typed cannot be used. Not a ValueError on purpose: argparse would swallow a
    ValueError raised by a `type=` function into its generic "invalid value" message."""


def positive_type(flag: str, parse: Callable[[str], float], unit: str, absent: str) -> Callable[[str], float]:
    """An argparse `type=` for a positive, finite number of `unit` (`parse=int`: a whole number);
    `absent` says what leaving the flag out means.

    NaN compares false with everything, so a NaN budget would never be reached and a NaN interval
    never pass: it is refused like infinity and zero.
    """
    kind = "positive whole number" if parse is int else "positive, finite number"

    def parse_positive(text: str) -> float:
        try:
            value = parse(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or value <= 0:
            raise BadInput(f"{flag} must be a {kind} of {unit} (got {text!r}); leave {flag} out for {absent}")
        return value

    return parse_positive


def budget_type(flag: str, parse: Callable[[str], float], unit: str) -> Callable[[str], float]:
    """An argparse `type=` for a budget: a positive, finite number, never stored as "no budget"."""
    return positive_type(flag, parse, unit, "no budget")


def shown_argument(argument: str) -> str:
    """`argument` printable and short: bytes that were not UTF-8 shown as \\xNN escapes."""
    try:
        raw = argument.encode("utf-8", "surrogateescape")  # the bytes the shell passed
        shown = raw.decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that did not come from surrogateescape
        shown = argument.encode("utf-8", "backslashreplace").decode("utf-8")
    return shown if len(shown) <= MAX_SHOWN_CHARS else shown[:MAX_SHOWN_CHARS] + "..."


def check_arguments_are_utf8(argv: Sequence[str]) -> None:
    """Refuse argv that holds bytes which are not UTF-8.

    Python keeps such bytes as lone surrogates (surrogateescape); they cannot be stored in the
    database, written to a report or sent to a model, so they are refused up front.
    """
    for position, argument in enumerate(argv, start=1):
        try:
            argument.encode("utf-8")
        except UnicodeEncodeError:
            raise BadInput(
                f"argument {position} is not valid UTF-8 text: '{shown_argument(argument)}'. "
                "Retype it in a UTF-8 terminal, convert the file it came from to UTF-8 "
                "(iconv -f LATIN1 -t UTF-8), or rename a file whose name is not UTF-8"
            ) from None


def check_out_path(path: Path | None, flag: str = "--out") -> None:
    """Refuse an output file that cannot be written: checked before the work, not after."""
    if path is None:
        return
    if path.is_dir():
        raise BadInput(f"{flag} {path} is a folder; give a file name, e.g. {flag} {path / 'report.md'}")
    folder = path.parent
    if not folder.exists():
        raise BadInput(
            f"{flag} {path}: the folder {folder} does not exist; create it first "
            f"(mkdir -p {folder}) or choose another path"
        )
    if not folder.is_dir():
        raise BadInput(f"{flag} {path}: {folder} is not a folder; choose another path")
    writable = os.access(path, os.W_OK) if path.exists() else os.access(folder, os.W_OK | os.X_OK)
    if not writable:
        raise BadInput(f"{flag} {path}: no permission to write there; choose another path")
