"""`thoughtmap`: the same engine, headless.

The package: `parser.py` (the grammar, light: `--help` loads nothing else), `common.py` (the
helpers the commands share), one module per command family (`runs.py`: run, resume, list, show,
export, ingest; `catalog.py`: methods, model; `bench.py`; `judge.py`; `kg.py`; `search_eval.py`;
`worker.py`; `serve.py`: serve, mcp, token; `steer.py`: steer, pause, stop, delete), `input.py` (checks of what was typed), `basics.py` (exit codes, errors, output). `main` imports a command's module
only when that command runs.

Exit codes: 0 done; 1 the run failed or a runtime error (endpoint unreachable, the report could
not be written at the end: the run is saved; the database's disk full or the database read-only, or
the run deleted, mid-run: what was saved is kept); 2 bad input (unknown method, parameter or run, empty
question, missing key, a budget that is not a positive finite number, an argument that is not UTF-8,
an --out path that cannot be written, an ingest that found nothing to add; a configuration that cannot
work: an environment variable's value, a database that cannot be reached or written, each said in one
line naming the variable, engine/config_values.py); 3 the run stopped before
the end (budget reached, or stopped by the user) with its partial results kept.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Sequence

from engine.cli.basics import EXIT_FAILED, EXIT_OK, EXIT_STOPPED, EXIT_USAGE, CLIError, err
from engine.cli.input import BadInput, check_arguments_are_utf8
from engine.cli.parser import build_parser
from engine.config_values import ConfigError
from engine.llm.protocol import LLMError
from engine.search.protocol import SearchError
from engine.terminal_logging import make_last_resort_safe

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_STOPPED", "EXIT_USAGE", "CLIError", "main"]

# Each command's function, as "module:function" under engine.cli: imported when the command runs.
COMMANDS = {
    "run": "runs:cmd_run",
    "resume": "runs:cmd_resume",
    "list": "runs:cmd_list",
    "show": "runs:cmd_show",
    "export": "runs:cmd_export",
    "ingest": "runs:cmd_ingest",
    "methods": "catalog:cmd_methods",
    "model": "catalog:cmd_model",
    "bench": "bench:cmd_bench",
    "judge": "judge:cmd_judge",
    "kg": "kg:cmd_kg",
    "search-eval": "search_eval:cmd_search_eval",
    "worker": "worker:cmd_worker",
    "serve": "serve:cmd_serve",
    "steer": "steer:cmd_steer",
    "pause": "steer:cmd_control",
    "stop": "steer:cmd_control",
    "delete": "steer:cmd_control",
    "mcp": "serve:cmd_mcp",
    "token": "serve:cmd_token",
}


def command(name: str) -> Callable[..., int]:
    module, _, function = COMMANDS[name].partition(":")
    # Every `cmd_*` takes the parsed arguments and returns the exit code.
    cmd: Callable[..., int] = getattr(importlib.import_module(f"engine.cli.{module}"), function)
    return cmd


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    make_last_resort_safe()
    try:
        check_arguments_are_utf8(argv)
        args = build_parser().parse_args(argv)
        return command(args.command)(args)
    except (BadInput, ConfigError) as exc:  # the one place a configuration that cannot work is said
        err(f"error: {exc}")
        return EXIT_USAGE
    except CLIError as exc:
        err(f"error: {exc}")
        return exc.code
    except LLMError as exc:
        err(f"error: {exc.user_message}")
        return EXIT_FAILED
    except SearchError as exc:  # the corpus index cannot be opened now (`kg` and the others that open it)
        err(f"error: {exc.user_message}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        err("interrupted")
        return 130
    except BrokenPipeError:  # the reader of stdout went away (`thoughtmap show ID | head`)
        _drop_stdout()
        return EXIT_FAILED
    except Exception as exc:
        code = _storage_error(exc)
        if code is None:
            raise
        return code


def _storage_error(exc: Exception) -> int | None:
    """The exit code of an unknown run or a database that cannot be written, said; None for anything
    else. Looked up only in the modules already loaded: an exception of a module that was never
    imported cannot have been raised, and `--help` must not load the database layer."""
    repository, unwritable = sys.modules.get("storage.repository"), sys.modules.get("storage.unwritable")
    if repository is not None and isinstance(exc, repository.RunNotFound):
        err(f"error: {exc}")
        return EXIT_USAGE
    if unwritable is not None and isinstance(exc, unwritable.DatabaseUnwritable):  # before or after a run
        err(f"error: {exc}; {exc.fix}, then try again")
        return EXIT_FAILED
    return None


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush finds no closed pipe to complain of."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file behind stdout (tests capture it)
        pass
