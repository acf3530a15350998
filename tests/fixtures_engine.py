"""Engine fixtures: a `Services` on a private SQLite database and the prebuilt bundled corpus,
with a scripted FakeLLM installed as the "fake" LLM."""

from __future__ import annotations

import pytest

from engine.config import load_settings
from engine.llm.fake import FakeLLM
from engine.services import Services, build_services
from storage.models import RunStatus


@pytest.fixture
def fake_llm() -> FakeLLM:
    return FakeLLM()


@pytest.fixture
def services(prebuilt_corpus_home, fake_llm) -> Services:
    built = build_services(load_settings())
    built.use_llm("fake", fake_llm)
    yield built
    built.close()


def run_to_end(services: Services, question: str, method: str, params: dict | None = None,
               *, search: str = "local", timeout: float = 60, **budget) -> str:
    """Create and execute a run on the fake LLM; return its id once it has stopped."""
    run = services.runner.create_run(question=question, method=method, params=params or {},
                                     llm_info=services.llm_info("fake"), search_mode=search, **budget)
    services.runner.start(run.id)
    final = services.runner.wait(run.id, timeout=timeout)
    assert final.status not in (RunStatus.RUNNING, RunStatus.QUEUED), f"run still {final.status}"
    return run.id
