"""Runs several methods at once, in one process, against a flaky OpenAI-compatible endpoint, and
says how each run ended. Shared by the chaos test (tests/engine/test_chaos.py) and the benchmark
(benchmarks/bench_chaos.py), so both check the same thing: every run ends `done` with answers or
`failed` with a reason, none silently empty, and the structured mode is never degraded by
transient errors.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.config import load_settings
from engine.llm.fake_server import Chaos, FakeOpenAIServer
from engine.llm.openai_compat import OpenAICompatibleLLM
from engine.services import Services, build_services
from storage.models import NodeStatus, RunStatus

DEOT_SMALL = {"max_layers": 2, "max_nodes": 4, "optimize_query": False}
OMNITHINK_SMALL = {"max_depth": 1, "subnodes": 2, "max_sections": 2}
QUESTIONS = [
    "How did the Apollo program shape later space exploration?",
    "Which magazine was started first, Arthur's Magazine or First for Women?",
    "What influenced the design of the Wallace and Gromit films?",
    "Who founded the company that makes the Game Boy?",
    "What were the causes of the decline of the Roman Empire?",
]


@dataclass(frozen=True)
class RunResult:
    run_id: str
    method: str
    status: str
    answered: int  # answer-bearing nodes done
    failed_nodes: int
    has_report: bool
    error: str
    warning: str

    @property
    def truthful(self) -> bool:
        """`done` with at least one answer and a report, or `failed` with a reason."""
        if self.status == RunStatus.DONE:
            return self.answered > 0 and self.has_report
        return self.status == RunStatus.FAILED and bool(self.error)


@dataclass(frozen=True)
class ChaosOutcome:
    results: list[RunResult]
    mode_before: str | None
    mode_after: str | None
    formats_sent: dict[str, int]  # response_format types of every request the server saw
    injected: dict[str, int]

    @property
    def all_truthful(self) -> bool:
        return all(r.truthful for r in self.results)


def chaos_services(server: FakeOpenAIServer, *, timeout_s: float, max_retries: int) -> Services:
    settings = load_settings()
    llm = settings.llm.model_copy(
        update={
            "base_url": server.base_url,
            "api_key": "sk-chaos-test",
            "timeout_s": timeout_s,
            "max_retries": max_retries,
            "structured_mode": "auto",
        }
    )
    return build_services(settings.model_copy(update={"llm": llm}))


def _answer_kinds(services: Services, method: str) -> frozenset[str]:
    return services.runner.methods[method].answer_kinds


def run_jobs(services: Services, jobs: list[tuple[str, str, dict]], *, wait_s: float) -> list[RunResult]:
    """Start every job at once (one process, one runner), wait for all, read how each ended."""
    run_ids = []
    for method, question, params in jobs:
        run = services.runner.create_run(
            question=question, method=method, params=params, llm_info=services.llm_info("openai"), search_mode="local"
        )
        services.runner.start(run.id)
        run_ids.append((run.id, method))
    results = []
    for run_id, method in run_ids:
        run = services.runner.wait(run_id, timeout=wait_s)
        nodes = services.repo.list_nodes(run_id)
        kinds = _answer_kinds(services, method)
        results.append(
            RunResult(
                run_id=run_id,
                method=method,
                status=run.status,
                answered=sum(n.kind in kinds and n.status == NodeStatus.DONE for n in nodes),
                failed_nodes=sum(n.status == NodeStatus.FAILED for n in nodes),
                has_report=services.repo.latest_report(run_id) is not None
                or services.repo.latest_report(run_id, "article") is not None,
                error=run.error,
                warning=run.warning,
            )
        )
    return results


def run_under_chaos(
    chaos: Chaos,
    jobs: list[tuple[str, str, dict]],
    *,
    timeout_s: float = 1.0,
    max_retries: int = 6,
    wait_s: float = 300,
) -> ChaosOutcome:
    with FakeOpenAIServer(chaos=chaos) as server:
        services = chaos_services(server, timeout_s=timeout_s, max_retries=max_retries)
        try:
            adapter = services.llm("openai")
            assert isinstance(adapter, OpenAICompatibleLLM)
            before = adapter.structured_mode
            results = run_jobs(services, jobs, wait_s=wait_s)
            after = adapter.structured_mode
        finally:
            services.close()
        formats: dict[str, int] = {}
        for body in server.requests:
            kind = (body.get("response_format") or {}).get("type") or "none (text or prompted)"
            formats[kind] = formats.get(kind, 0) + 1
        injected = dict(server.chaos_counts)
    return ChaosOutcome(results, before.value if before else None, after.value if after else None, formats, injected)
