"""What the CLI's commands share: saying things on the terminal, the services, the LLM's set-up, a
run watched to its end and its outcome said. Command modules call these as `common.NAME(...)` (a test
may replace `common.services`)."""

from __future__ import annotations

import argparse
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Protocol, cast

from engine.cli.basics import EXIT_FAILED, EXIT_OK, EXIT_STOPPED, CLIError, err, say
from engine.config import load_settings
from engine.llm.protocol import LLMAuthError, LLMError
from engine.methods.registry import MethodPluginError, RegisteredMethods, load_methods
from engine.report import render_markdown
from engine.runner import ExecutionDied
from engine.safe_text import one_line
from storage.models import stored_id
from storage.repository import RunNotFound
from storage.statuses import RunStatus

if TYPE_CHECKING:  # only for annotations: imported where first used
    from engine.access import Viewer
    from engine.services import Services
    from storage.models import Run

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_STOPPED",
    "CLIError",
    "choose_llm",
    "clause",
    "corpus_progress",
    "died_line",
    "err",
    "finish",
    "load_method_classes",
    "prepare_llm",
    "reading_services",
    "say",
    "run_for",
    "say_outcome",
    "services",
    "user_argument",
    "user_named",
    "viewer",
    "watch",
    "write_file",
]


def services() -> Services:
    """The services; a configuration that cannot work raises ConfigError, said by `main`."""
    from engine.services import build_services  # imported late: keeps `--help` fast

    return build_services(load_settings())


def reading_services() -> Services:
    """The services of a command that only reads (list, show, export): a database that cannot be
    written (a read-only mount) is read as it is instead of refused."""
    from engine.services import build_services

    services = build_services(load_settings(), read_only_ok=True)
    if services.db.read_only:
        err(f"note: the database ({services.db.display_url}) cannot be written: reading it as it is")
    return services


def user_argument(args: argparse.Namespace) -> str | None:
    """The person --user (or THOUGHTMAP_USER) names, as typed; None when neither does."""
    return (getattr(args, "user", None) or os.environ.get("THOUGHTMAP_USER") or "").strip() or None


def user_named(services: Services, args: argparse.Namespace) -> str | None:
    """Whom the command acts for: with sign-in on, the person --user (or THOUGHTMAP_USER) names. The
    CLI trusts its operator: whoever can run it on the server can read the database anyway."""
    user = user_argument(args)
    if not services.settings.team.sign_in:
        return None  # single-user mode: every run is the local user's, whoever types
    if user is None:
        raise CLIError(
            "sign-in is on (multi-user mode): say whom this command acts for with --user EMAIL "
            "(before the command) or THOUGHTMAP_USER"
        )
    return user


def viewer(services: Services, args: argparse.Namespace) -> Viewer:
    """The person the command acts for (`user_named`), as the access rules see them."""
    from engine.service.api import BadRequest, Thoughtmap

    user = user_named(services, args)
    if user is None:
        return services.access.local_viewer()
    try:
        return Thoughtmap(services=services, user=user).viewer
    except BadRequest as exc:
        raise CLIError(str(exc)) from exc


def run_for(services: Services, args: argparse.Namespace, run_id: str, *, change: bool = False) -> Run:
    """The run `run_id` (an id or a unique prefix), when the command's person may read it (and,
    with `change`, change it: only its owner may)."""
    from engine.access import AccessDenied

    run = services.repo.find_run(run_id)
    person = viewer(services, args)
    try:
        (services.access.check_change if change else services.access.check_read)(person, run)
    except AccessDenied as exc:
        raise CLIError(str(exc)) from exc
    return run


def choose_llm(requested: str | None, services: Services) -> str:
    """The same rule as the app (Services.resolve_llm); no --llm means THOUGHTMAP_LLM, else auto."""
    settings = services.settings
    return services.resolve_llm(requested or settings.llm_choice, settings.llm.api_key)


class _Preflight(Protocol):
    def preflight(self) -> None: ...


def prepare_llm(services: Services, kind: str, quiet: bool) -> None:
    if kind == "fake":
        if not quiet:
            err(
                "running on the scripted fake LLM (offline, deterministic): it quotes the sources it is "
                "given, it does not reason. For real answers set OPENAI_API_KEY (OpenAI) or "
                "OPENAI_BASE_URL (Ollama, vLLM, llama.cpp server...) and use --llm openai."
            )
        return
    if kind == "local" and not quiet:
        err(
            "running on the built-in local model (llama.cpp on this CPU): a 0.5B model, so expect weak, "
            "sometimes wrong answers, slowly. For better ones set OPENAI_API_KEY (OpenAI) or OPENAI_BASE_URL "
            "(Ollama, vLLM, another server) and use --llm openai. Starting the model..."
        )
    try:
        llm = services.llm(kind)
    except LLMAuthError as exc:
        raise CLIError(exc.user_message) from exc
    try:
        # Only the built-in and OpenAI-compatible adapters get here (fake returned above): both
        # check their endpoint before a run, which the LLM protocol does not ask of every adapter.
        cast(_Preflight, llm).preflight()
    except LLMAuthError as exc:
        raise CLIError(exc.user_message) from exc
    except LLMError as exc:
        raise CLIError(exc.user_message, EXIT_FAILED) from exc
    if not quiet:
        err(f"LLM: {llm.description}")


# The corpus index's build (or the wait for another process's) says a line at most this often.
CORPUS_PROGRESS_EVERY_S = 2.0


def corpus_progress() -> Callable[[str, float], None]:
    """A progress callback putting the corpus index's first build, or the wait for another process
    building it, on stderr: a line when what happens changes (the words before the first colon),
    then one every few seconds, and the last; not one per batch."""
    said_at, said_what = 0.0, ""

    def say(message: str, fraction: float) -> None:
        nonlocal said_at, said_what
        now, what = time.monotonic(), message.partition(":")[0]
        if what != said_what or fraction >= 1.0 or now - said_at >= CORPUS_PROGRESS_EVERY_S:
            err(message)
            said_at, said_what = now, what

    return say


def watch(services: Services, run_id: str, quiet: bool) -> None:
    """Wait for a run, printing new nodes on stderr; Ctrl-C stops the run cleanly."""
    repo = services.repo
    seen: dict[int, str] = {}

    def on_interrupt(_signum: int, _frame: FrameType | None) -> None:
        err("stopping (Ctrl-C again to quit at once)...")
        services.runner.stop(run_id)
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        while True:
            try:
                status = services.runner.wait(run_id, timeout=0.3).status
                finished = status not in (RunStatus.RUNNING, RunStatus.PAUSED, RunStatus.QUEUED)
            except RunNotFound:
                if not services.runner.is_active(run_id) and services.runner.execution_died(run_id) is None:
                    raise
                finished = False  # deleted under its execution, which ends at its next step and says so
            # Its executor ended without recording the end (a full disk...): the stored status
            # would say `running` for ever.
            if (died := services.runner.execution_died(run_id)) is not None:
                raise CLIError(died_line(died), EXIT_FAILED)
            if not quiet:
                for node in repo.list_nodes(run_id):
                    node_id = stored_id(node)
                    if seen.get(node_id) != node.status:
                        seen[node_id] = node.status
                        indent = "  " * node.depth
                        label = one_line(node.label)[:90]
                        err(f"{indent}[{node.kind}] {label} ({node.status})")
            if finished and not services.runner.is_active(run_id):
                return
    finally:
        signal.signal(signal.SIGINT, previous)


def died_line(died: ExecutionDied) -> str:
    """How an execution that could not record its end ended, and what to do, in one line."""
    if not died.resumable:
        return f"run {died.run_id} stopped: {died.what}; nothing is left to resume"
    then = f"{died.fix}, then continue it" if died.fix else "continue it"
    return f"run {died.run_id} stopped: {died.what}. {then[0].upper()}{then[1:]} with: thoughtmap resume {died.run_id}"


def finish(services: Services, run_id: str, out: Path | None) -> int:
    """Say how the run ended, then write its report to `out`; returns the exit code."""
    code = say_outcome(services, run_id)
    if out is None:
        return code
    try:
        write_file(out, render_markdown(services.repo, run_id))
    except CLIError as exc:
        # The run itself is stored: say so, and how to get the report once the cause is fixed.
        err(f"error: {exc}. The run is saved; write its report with: thoughtmap export {run_id} --out ANOTHER_FILE.md")
        return EXIT_FAILED if code == EXIT_OK else code
    return code


def write_file(path: Path, text: str) -> None:
    """Write an output file; a failure (disk full, permissions changed) is a CLIError naming it."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CLIError(f"could not write {path}: {exc.strerror or exc}", EXIT_FAILED) from exc


def say_outcome(services: Services, run_id: str) -> int:
    run = services.repo.get_run(run_id)
    tokens = run.prompt_tokens + run.completion_tokens
    summary = f"run {run_id}: {run.status}; {run.node_count} nodes, {run.llm_calls} LLM calls, {tokens} tokens, ${run.cost:.4f}"
    if run.status == RunStatus.DONE:
        retry = f" (thoughtmap resume {run_id})" if services.runner.retryable(run) else ""
        err(summary + (f". Warning: {clause(run.warning)}{retry}" if run.warning else ""))
        return EXIT_OK
    if run.status == RunStatus.STOPPED:
        err(
            f"{summary}. {clause(run.stop_reason)}. Partial results are kept; continue with: thoughtmap resume {run_id}"
        )
        return EXIT_STOPPED
    err(f"{summary}. {clause(run.error or run.stop_reason)}. Continue with: thoughtmap resume {run_id}")
    return EXIT_FAILED


def clause(text: str | None) -> str:
    """A stored reason without its closing period, so the line's own "." after it is the only one."""
    return (text or "").strip().rstrip(".").rstrip()


def load_method_classes() -> RegisteredMethods:
    """The built-in methods and the plugins THOUGHTMAP_METHODS names (before any other set-up)."""
    try:
        return load_methods(load_settings().method_plugins)
    except MethodPluginError as exc:
        raise CLIError(str(exc)) from exc
