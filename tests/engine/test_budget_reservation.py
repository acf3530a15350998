"""A run's budget is a hard stop when its LLM calls run in parallel (issue 41, point 1).

Each call reserves its prompt and output cap before it is sent; another call goes only while the
reservations of the calls in flight leave room, so a run overshoots by at most one call's output.
The end-to-end test runs MTQA (about five calls at once) through the real openai client against the
OpenAI-compatible test server on 127.0.0.1, priced at $100 per million tokens."""

from __future__ import annotations

import json
import threading
import time

import pytest

from engine import cli
from engine.config import load_settings
from engine.llm.accounting import UNCAPPED_CALL_OUTPUT_CAP, Budget, RunLLM
from engine.llm.fake_server import FakeOpenAIServer
from engine.llm.pricing import ModelPrice, PriceTable
from engine.llm.protocol import BudgetExceeded, ChatRequest, ChatResponse, Message, ResponseFormat, Usage
from engine.services import build_services

MODEL = "gpt-4o-mini"
PRICE_PER_MILLION = 100.0  # dollars in and out: one token costs $0.0001


class _Ledger:
    """The run's recorded usage, in memory (what storage.Repository keeps in the database)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: list[tuple[int, int]] = []

    def record_llm_call(
        self,
        run_id,
        *,
        node_id,
        purpose,
        model,
        prompt_tokens,
        completion_tokens,
        cost,
        latency_s,
        attempts=1,
        ok=True,
        error="",
    ) -> None:
        with self._lock:
            self.calls.append((prompt_tokens, completion_tokens))

    def run_usage(self, run_id: str) -> tuple[int, float]:
        with self._lock:
            tokens = sum(p + c for p, c in self.calls)
        return tokens, tokens * PRICE_PER_MILLION / 1_000_000


class _GatedLLM:
    """An endpoint that holds every call until `open` is set, then answers with `completion` tokens:
    so calls really are in flight together, as MTQA's are. `max_in_flight` is the most seen at once."""

    description = "gated"

    def __init__(self, completion: int) -> None:
        self.completion = completion
        self.open = threading.Event()
        self._lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.arrived = 0
        self.caps: list[int | None] = []

    def model_for(self, purpose: str) -> str:
        return MODEL

    def chat(self, request: ChatRequest) -> ChatResponse:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.caps.append(request.max_tokens)
            self.arrived += 1
        self.open.wait()
        with self._lock:
            self.in_flight -= 1
        prompt = sum(len(m.content) for m in request.messages) // 4
        return ChatResponse(
            text="x" * (4 * self.completion),
            model=MODEL,
            usage=Usage(prompt_tokens=prompt, completion_tokens=self.completion),
        )


def _prices() -> PriceTable:
    return PriceTable({MODEL: ModelPrice(PRICE_PER_MILLION, PRICE_PER_MILLION)})


def _request(cap: int | None) -> ChatRequest:
    return ChatRequest(
        messages=(Message("user", "p" * 400),),
        purpose="thought",  # a 100-token prompt
        response_format=ResponseFormat.TEXT,
        max_tokens=cap,
    )


def _parallel_calls(run_llm: RunLLM, endpoint: _GatedLLM, count: int, cap: int | None) -> list[BaseException | None]:
    """`count` calls at once. The endpoint answers nothing until every call has arrived at it or is
    waiting for room in the budget: so each call was let through, or not, beside all the others."""
    outcomes: list[BaseException | None] = [None] * count

    def call(i: int) -> None:
        try:
            run_llm.bound().chat(_request(cap))
        except BudgetExceeded as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=call, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 120  # a backstop only: the wait is on the calls' progress
    while endpoint.arrived + run_llm.reservations.waiting < count and time.monotonic() < deadline:
        time.sleep(0.01)
    endpoint.open.set()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    return outcomes


def test_parallel_calls_stop_within_one_calls_output_of_a_token_budget():
    ledger, endpoint = _Ledger(), _GatedLLM(completion=300)
    budget = Budget(max_tokens=1000)
    run_llm = RunLLM(endpoint, ledger, "run", _prices(), budget)

    outcomes = _parallel_calls(run_llm, endpoint, count=6, cap=300)

    spent, _ = ledger.run_usage("run")
    # Each call holds 100 + 300 tokens: two fit beside each other (800 < 1000), the rest wait and go
    # one by one as room appears; the last let through may use its whole output.
    assert spent <= budget.max_tokens + 300, ledger.calls
    assert spent >= budget.max_tokens - 400  # not stopped early: the budget was used
    assert any(isinstance(o, BudgetExceeded) for o in outcomes)
    assert endpoint.max_in_flight <= 3


def test_parallel_calls_stop_within_one_calls_output_of_a_cost_budget():
    ledger, endpoint = _Ledger(), _GatedLLM(completion=250)
    budget = Budget(max_cost=0.1)  # 1,000 tokens at $100 per million
    run_llm = RunLLM(endpoint, ledger, "run", _prices(), budget)

    _parallel_calls(run_llm, endpoint, count=8, cap=250)

    _, cost = ledger.run_usage("run")
    assert cost <= budget.max_cost + 250 * PRICE_PER_MILLION / 1_000_000 + 1e-9, ledger.calls


def test_a_call_with_no_output_cap_is_reserved_at_the_assumed_cap_and_sent_as_it_is():
    """An uncapped call holds `UNCAPPED_CALL_OUTPUT_CAP` of the budget, but is not sent with that cap
    (an endpoint with a small context would refuse prompt + max_tokens beyond it)."""
    ledger, endpoint = _Ledger(), _GatedLLM(completion=10)
    endpoint.open.set()
    prompt = 100  # `_request`'s 400 characters
    roomy = RunLLM(endpoint, ledger, "run", _prices(), Budget(max_tokens=prompt + UNCAPPED_CALL_OUTPUT_CAP + 10))
    roomy.bound().chat(_request(None))
    assert endpoint.caps == [None]
    # Beside one uncapped call in flight, a second waits: what the first holds leaves no room.
    ledger2, gated = _Ledger(), _GatedLLM(completion=10)
    tight = RunLLM(gated, ledger2, "run", _prices(), Budget(max_tokens=prompt + UNCAPPED_CALL_OUTPUT_CAP + 50))
    outcomes = _parallel_calls(tight, gated, count=2, cap=None)
    assert gated.max_in_flight == 1 and outcomes == [None, None]


def test_a_refused_call_reports_what_was_spent_not_the_reservations():
    ledger, endpoint = _Ledger(), _GatedLLM(completion=50)
    endpoint.open.set()
    run_llm = RunLLM(endpoint, ledger, "run", _prices(), Budget(max_tokens=200))
    run_llm.bound().chat(_request(50))  # 150 spent
    with pytest.raises(
        BudgetExceeded, match=r"token budget reached: 150 tokens used and the next call needs about 100 more"
    ):
        run_llm.bound().chat(_request(50))


@pytest.mark.parametrize("budget_flag, limit", [("--max-cost", "0.2"), ("--max-tokens", "2000")])
def test_parallel_mtqa_under_a_tiny_budget_stops_within_one_calls_output(
    prebuilt_corpus_home, capsys, monkeypatch, tmp_path, budget_flag, limit
):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({MODEL: {"input": PRICE_PER_MILLION, "output": PRICE_PER_MILLION}}))
    # Every answer takes a moment, so MTQA's parallel calls are in flight together (before the
    # reservation, its five calls at once each passed a check that counted none of the others). The
    # server stops at each call's output cap, as a real one does: the reservation counts on it (an
    # answer written past its cap, which no real endpoint bills, made this test fail 1 time in 10).
    with FakeOpenAIServer(latency_s=0.2, cap_output=True) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        monkeypatch.setenv("THOUGHTMAP_PRICES", str(prices))
        capsys.readouterr()
        code = cli.main(
            [
                "run",
                "What drives inflation after a supply shock?",
                "--method",
                "mtqa",
                "--llm",
                "openai",
                budget_flag,
                limit,
                "--quiet",
            ]
        )
        out, err = capsys.readouterr()
    assert code == cli.EXIT_STOPPED, err
    run_id = out.strip()
    services = build_services(load_settings())
    try:
        run = services.repo.get_run(run_id)
        calls = services.repo.list_llm_calls(run_id)
    finally:
        services.close()
    assert len(calls) >= 2 and "budget reached" in run.stop_reason
    # The bound: the budget plus the largest output any one call wrote.
    largest_output = max(c.completion_tokens for c in calls)
    if budget_flag == "--max-cost":
        assert run.cost <= float(limit) + largest_output * PRICE_PER_MILLION / 1_000_000 + 1e-9, run.cost
    else:
        assert run.prompt_tokens + run.completion_tokens <= int(limit) + largest_output
