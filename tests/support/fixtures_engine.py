"""Engine fixtures: a `Services` on a private SQLite database and the prebuilt bundled corpus,
with a scripted FakeLLM installed as the "fake" LLM."""

from __future__ import annotations

import pytest

from engine.config import load_settings
from engine.llm.fake import FakeLLM
from engine.services import Services, build_services
from storage.models import CommandStatus, RunStatus


@pytest.fixture
def fake_llm() -> FakeLLM:
    return FakeLLM()


@pytest.fixture
def services(prebuilt_corpus_home, fake_llm) -> Services:
    built = build_services(load_settings())
    built.use_llm("fake", fake_llm)
    yield built
    built.close()


def run_to_end(
    services: Services,
    question: str,
    method: str,
    params: dict | None = None,
    *,
    search: str = "local",
    timeout: float = 60,
    **budget,
) -> str:
    """Create and execute a run on the fake LLM; return its id once it has stopped."""
    run = services.runner.create_run(
        question=question,
        method=method,
        params=params or {},
        llm_info=services.llm_info("fake"),
        search_mode=search,
        **budget,
    )
    services.runner.start(run.id)
    final = services.runner.wait(run.id, timeout=timeout)
    assert final.status not in (RunStatus.RUNNING, RunStatus.QUEUED), f"run still {final.status}"
    return run.id


def command_of(services: Services, run_id: str, command_id: int):
    return next(c for c in services.repo.list_commands(run_id) if c.id == command_id)


def steer_and_wait(services: Services, run_id: str, kind: str, payload: dict | None = None):
    """Steer a run (reopening it if it is finished), wait for it to be done; the command's state."""
    command = services.runner.steer(run_id, kind, payload or {})
    run = services.runner.wait(run_id, timeout=30)
    assert run.status == RunStatus.DONE, (run.status, run.error)
    return command_of(services, run_id, command.id)


def steer_refused(services: Services, run_id: str, kind: str, payload: dict | None = None) -> str:
    """Steer with a command that must not be applied; its error. It is refused either when it is
    queued (checked against the method's declaration: nothing is stored, not even the command) or,
    when only the applying can tell (what the model answered), fails once applied."""
    queued = len(services.repo.list_commands(run_id))
    try:
        command = steer_and_wait(services, run_id, kind, payload)
    except ValueError as refused:
        assert len(services.repo.list_commands(run_id)) == queued
        return str(refused)
    assert command.status == CommandStatus.FAILED, command
    return command.error


def refused_before_queueing(services: Services, run_id: str, kind: str, payload: dict | None = None) -> str:
    """Steer with a command the method's check of the stored run refuses before it is queued: the
    error; nothing is stored, not even the command (a form in the app keeps what was typed)."""
    queued = len(services.repo.list_commands(run_id))
    try:
        services.runner.steer(run_id, kind, payload)
    except ValueError as refused:
        assert len(services.repo.list_commands(run_id)) == queued
        return str(refused)
    raise AssertionError(f"'{kind}' {payload} was queued; it should have been refused before")


def release_and_finish(services: Services, run_id: str, gate, command_id: int):
    """Open a gate holding a running run, wait for the run to be done; the command's state."""
    assert services.repo.get_run(run_id).status == RunStatus.RUNNING
    gate.opened.set()
    run = services.runner.wait(run_id, timeout=30)
    assert run.status == RunStatus.DONE, (run.status, run.error)
    return command_of(services, run_id, command_id)
