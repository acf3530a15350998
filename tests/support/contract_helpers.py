"""Helpers of the method contract suite (`tests/engine/methods/test_method_contract.py`): the methods it runs over,
their small parameters, a snapshot of everything a run stores, the bad payloads a declared command
must refuse, and a `thoughtmap run` subprocess to kill.

Everything here is read from the methods' declarations (`Method.contract()`), never from a method's
name, except the two small tables at the top, each kept as short as the methods allow."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen
from pydantic import ValidationError

from engine.contract import CommandSpec, NodeCommand
from engine.methods.base import Method
from engine.methods.registry import load_methods
from storage.models import Node
from storage.repository import Repository
from tests import REPO_ROOT

# The test-only method, registered the way a plugin is (THOUGHTMAP_METHODS).
PLUGIN = "tests.support.grid_method:GridMethod"
QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"

# Smaller than the quick profile, only where a method's quick profile is too slow for this suite
# (none is, so far). Keyed by method name.
SMALLER: dict[str, dict[str, Any]] = {}


def methods() -> dict[str, type[Method]]:
    """Every registered method, and the test method: a method added later is covered at once."""
    return load_methods(PLUGIN)


def params_for(cls: type[Method]) -> dict[str, Any]:
    return {**cls.Params.quick_profile, **SMALLER.get(cls.name, {})}


def cli_params(cls: type[Method]) -> list[str]:
    """`--profile quick` plus the SMALLER overrides, as `thoughtmap run` arguments."""
    args = ["--profile", "quick"]
    for key, value in SMALLER.get(cls.name, {}).items():
        args += ["--param", f"{key}={value}"]
    return args


# --------------------------------------------------------------------------- what a run stores


def stored_state(repo: Repository, run_id: str) -> dict[str, Any]:
    """Everything stored for a run that a refused command must leave as it was."""
    run = repo.get_run(run_id)
    return {
        "run": (run.status, run.version, run.node_count, run.llm_calls, run.error, run.stop_reason, run.warning),
        "nodes": [(n.id, n.kind, n.status, n.data, n.content, n.label, n.parent_id) for n in repo.list_nodes(run_id)],
        "edges": [(e.id, e.src, e.dst, e.kind, e.data) for e in repo.list_edges(run_id)],
        "sources": [(s.id, s.ref, s.title) for s in repo.list_sources(run_id)],
        "node_sources": sorted((link.node_id, link.source_id) for link in repo.node_source_links(run_id)),
        "reports": [(r.id, r.kind, r.markdown, r.data) for r in repo.list_reports(run_id)],
        "run_states": [(s.name, s.version, s.data) for s in repo.list_run_states(run_id)],
        "commands": [(c.id, c.kind, c.payload, c.status, c.error) for c in repo.list_commands(run_id)],
        "llm_calls": len(repo.list_llm_calls(run_id)),
    }


# --------------------------------------------------------------------------- bad payloads


@dataclass(frozen=True)
class BadPayload:
    what: str
    payload: dict[str, Any]


def _base_type(annotation: Any) -> Any:
    """`int | None` -> int; `list[str]` -> list."""
    origin = get_origin(annotation)
    if origin in (Union, UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return _base_type(args[0]) if len(args) == 1 else annotation
    return origin or annotation


def _filler(info) -> Any:
    """A valid value for a required field other than node_id."""
    kind = _base_type(info.annotation)
    low = next((m.ge for m in info.metadata if isinstance(m, Ge)), None)
    if kind is str:
        return "contract test"
    if kind is int:
        return low if low is not None else 1
    if kind is float:
        return float(low) if low is not None else 1.0
    if kind is bool:
        return True
    if kind is list:
        return []
    raise AssertionError(f"no filler for a required field of type {info.annotation!r}; extend _filler")


def valid_base(spec: CommandSpec, node: Node | None) -> dict[str, Any]:
    """A payload that parses: the required fields filled, node_id set to `node` (never sent as is)."""
    payload: dict[str, Any] = {}
    for name, info in spec.payload.model_fields.items():
        if name == "node_id":
            payload[name] = node.id if node is not None else 1
        elif info.is_required():
            payload[name] = _filler(info)
    spec.payload.model_validate(payload)  # the base must parse, or the variants prove nothing
    return payload


def _out_of_range(info) -> Iterator[tuple[str, Any]]:
    kind = _base_type(info.annotation)
    for m in info.metadata:
        if isinstance(m, Ge) and kind in (int, float):
            yield f"below its minimum {m.ge}", m.ge - 1
        elif isinstance(m, Gt) and kind in (int, float):
            yield f"not above {m.gt}", m.gt
        elif isinstance(m, Le) and kind in (int, float):
            yield f"above its maximum {m.le}", m.le + 1
        elif isinstance(m, Lt) and kind in (int, float):
            yield f"not below {m.lt}", m.lt
        elif isinstance(m, MinLen) and m.min_length > 0:
            yield "shorter than its minimum length", "" if kind is str else []
        elif isinstance(m, MaxLen):
            yield (
                "longer than its maximum length",
                "x" * (m.max_length + 1) if kind is str else ["x"] * (m.max_length + 1),
            )


def _rejected(spec: CommandSpec, payload: dict[str, Any]) -> bool:
    try:
        spec.payload.model_validate(payload)
    except ValidationError:
        return True
    return False


def bad_payloads(spec: CommandSpec, base: dict[str, Any]) -> list[BadPayload]:
    """Payloads the command's model refuses: an unknown key, each required field missing, each
    field of the wrong type or out of its declared range."""
    out = [BadPayload("an unknown key", {**base, "no_such_field": 1})]
    if not spec.targets_node:
        out.append(BadPayload("a node_id given to a run-level command", {**base, "node_id": 1}))
    for name, info in spec.payload.model_fields.items():
        if info.is_required():
            out.append(BadPayload(f"'{name}' missing", {k: v for k, v in base.items() if k != name}))
        out.append(BadPayload(f"'{name}' of the wrong type", {**base, name: {"not": "valid"}}))
        if name != "node_id":
            out.extend(BadPayload(f"'{name}' {what}", {**base, name: value}) for what, value in _out_of_range(info))
    if spec.targets_node:
        out.append(BadPayload("node_id not a number", {**base, "node_id": "first"}))
        out.append(BadPayload("node_id null", {**base, "node_id": None}))
    # Only the ones the model really refuses (a field that takes any value has no wrong type).
    return [b for b in out if _rejected(spec, b.payload)]


def node_targets(spec: CommandSpec) -> bool:
    return issubclass(spec.payload, NodeCommand)


# --------------------------------------------------------------------------- a CLI run to kill

_SCRIPT = Path(sys.executable).with_name("thoughtmap")
THOUGHTMAP = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "engine.cli"]
START_TIMEOUT_S = 60


def cli_env(home: Path, latency_s: float) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "THOUGHTMAP_"))}
    pythonpath = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(
        THOUGHTMAP_HOME=str(home),
        THOUGHTMAP_FAKE_LATENCY=str(latency_s),
        THOUGHTMAP_METHODS=PLUGIN,
        PYTHONPATH=pythonpath,
        PYTHONUNBUFFERED="1",
    )
    return env


def _read_lines(stream, into: queue.Queue) -> None:
    try:
        for line in iter(stream.readline, ""):
            into.put(line)
    except (OSError, ValueError):  # the pipe was closed after the kill
        pass
    into.put(None)


def start_cli_run(cls: type[Method], home: Path, latency_s: float) -> tuple[subprocess.Popen, str]:
    """`thoughtmap run QUESTION --method NAME --llm fake` as a real process: (process, run id)."""
    proc = subprocess.Popen(
        [
            *THOUGHTMAP,
            "run",
            QUESTION,
            "--method",
            cls.name,
            "--llm",
            "fake",
            "--search",
            "local",
            *cli_params(cls),
            "--quiet",
        ],
        env=cli_env(home, latency_s),
        cwd=str(REPO_ROOT),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_read_lines, args=(proc.stdout, lines), daemon=True).start()
    try:
        first = lines.get(timeout=START_TIMEOUT_S)
    except queue.Empty:
        first = None
    if not first or not first.strip():
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        error = proc.stderr.read().strip()
        stop(proc)
        raise AssertionError(
            f"`thoughtmap run --method {cls.name}` printed no run id (exit {proc.returncode}): {error}"
        )
    return proc, first.strip()


def stop(proc: subprocess.Popen) -> None:
    """Kill the process if it still runs (by its own pid), reap it, close its pipes."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def poll_until(
    condition: Callable[[], object],
    timeout: float,
    what: str,
    proc: subprocess.Popen | None = None,
    interval: float = 0.01,
) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            return None  # the process ended first: the caller says what that means
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
