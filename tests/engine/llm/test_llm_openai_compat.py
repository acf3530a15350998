"""OpenAICompatibleLLM with the real openai client against FakeOpenAIServer on 127.0.0.1.

Sleeps are injected (recorded, not slept), so retry tests are fast and can assert the delays.
Also covers the concurrency limiter and the price table.
"""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest
from pydantic import BaseModel

from engine.config import LLMSettings
from engine.llm.fake_server import FakeOpenAIServer
from engine.llm.limits import ConcurrencyLimiter
from engine.llm.openai_compat import (
    OpenAICompatibleLLM,
    missing_key_error,
    retry_delay,
    sanitize_schema_name,
)
from engine.llm.pricing import PriceFileError, PriceTable
from engine.llm.protocol import (
    LLM,
    ChatRequest,
    LLMAuthError,
    LLMConnectionError,
    LLMRateLimitError,
    LLMRequestError,
    LLMServerError,
    LLMTimeoutError,
    Message,
    ResponseFormat,
)
from tests import REPO_ROOT

API_KEY = "sk-test-0123456789abcdef"


class Verdict(BaseModel):
    answer: str
    confidence: float


SCHEMA = Verdict.model_json_schema()


def text_request(content: str = "Question: Why is the sky blue?") -> ChatRequest:
    return ChatRequest(messages=(Message("user", content),))


def structured_request(content: str = "Question: Why is the sky blue?") -> ChatRequest:
    return ChatRequest(
        messages=(Message("user", content),),
        response_format=ResponseFormat.JSON_SCHEMA,
        json_schema=SCHEMA,
        schema_name="Verdict",
    )


class Recorder:
    """An injected `sleep` that records the delays instead of sleeping."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def make_llm(
    base_url: str,
    sleep: Recorder | None = None,
    limiter: ConcurrencyLimiter | None = None,
    **overrides,
) -> OpenAICompatibleLLM:
    options = dict(base_url=base_url, api_key=API_KEY, model="fake-model", timeout_s=2.0,
                   max_retries=2)  # fmt: skip
    options.update(overrides)
    return OpenAICompatibleLLM(
        LLMSettings(**options),
        limiter or ConcurrencyLimiter(4),
        sleep=sleep if sleep is not None else Recorder(),
        rng=random.Random(7),
    )


@pytest.fixture
def server():
    with FakeOpenAIServer() as running:
        yield running


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---------------------------------------------------------------------- happy path


def test_text_chat_round_trip(server):
    llm = make_llm(server.base_url)
    response = llm.chat(text_request())

    assert isinstance(llm, LLM)
    assert llm.description == f"fake-model at {server.base_url}"
    assert response.text and response.model == "fake-model"
    assert response.usage.prompt_tokens > 0 and response.usage.completion_tokens > 0
    assert response.attempts == 1 and response.response_format is ResponseFormat.TEXT
    body = server.requests[0]
    assert body["model"] == "fake-model" and "response_format" not in body


def test_model_for_purpose_and_max_tokens_key(server):
    llm = make_llm(server.base_url, models={"judge": "judge-model"})
    llm.chat(ChatRequest(messages=(Message("user", "hi"),), purpose="judge", max_tokens=50))

    assert llm.model_for("judge") == "judge-model" and llm.model_for("other") == "fake-model"
    assert "judge: judge-model" in llm.description
    body = server.requests[0]
    # Local servers get max_tokens; max_completion_tokens is for OpenAI itself.
    assert body["model"] == "judge-model" and body["max_tokens"] == 50


def test_usage_is_estimated_when_the_server_omits_it():
    with FakeOpenAIServer(include_usage=False) as server:
        response = make_llm(server.base_url).chat(text_request("x" * 400))
    assert response.usage.prompt_tokens == 100
    assert response.usage.completion_tokens == -(-len(response.text) // 4)


def test_leading_think_block_is_stripped(server):
    server.enqueue(content="<think>let me think</think>\nThe answer.")
    assert make_llm(server.base_url).chat(text_request()).text == "The answer."


@pytest.mark.parametrize("body", ["not json", {"unexpected": 1}, {"choices": []}])
def test_a_non_completion_answer_is_a_server_error(server, body):
    server.enqueue(status=200, body=body)
    with pytest.raises(LLMServerError, match="did not answer with a chat completion"):
        make_llm(server.base_url).chat(text_request())


# ---------------------------------------------------------------------- retries


def test_429_retry_after_is_honoured_then_succeeds(server):
    server.enqueue(status=429, headers={"Retry-After": "1"})
    sleep = Recorder()
    response = make_llm(server.base_url, sleep).chat(text_request())

    assert sleep.delays == [1.0]
    assert response.attempts == 2 and response.text
    assert server.count_chat_requests() == 2


def test_a_429_quiets_every_call_that_shares_the_limiter(server):
    """One call's 429 with Retry-After: the other calls through the same limiter wait the quiet out
    instead of each hitting the limit; the call that got the 429 retries once its own sleep is over."""
    limiter = ConcurrencyLimiter(4)
    server.enqueue(status=429, headers={"Retry-After": "1"})
    sleep = Recorder()
    first = make_llm(server.base_url, sleep, limiter=limiter).chat(text_request())
    assert first.attempts == 2 and sleep.delays == [1.0]  # its own sleep (recorded), then its retry
    assert 0.5 < limiter.cooling_for() <= 1.0
    started = time.monotonic()
    other = make_llm(server.base_url, Recorder(), limiter=limiter).chat(text_request())
    assert other.attempts == 1 and time.monotonic() - started >= 0.5  # it started after the quiet
    assert limiter.cooling_for() == 0.0


def test_retry_after_ms_header_wins(server):
    server.enqueue(status=429, headers={"retry-after-ms": "250", "Retry-After": "9"})
    sleep = Recorder()
    make_llm(server.base_url, sleep).chat(text_request())
    assert sleep.delays == [0.25]


def test_429_forever_raises_rate_limit_error(server):
    for _ in range(3):
        server.enqueue(status=429, headers={"Retry-After": "0"})
    with pytest.raises(LLMRateLimitError) as caught:
        make_llm(server.base_url).chat(text_request())
    assert server.base_url in str(caught.value) and "CONCURRENCY" in caught.value.hint


def test_500_then_success_uses_jittered_backoff(server):
    server.enqueue(status=500)
    sleep = Recorder()
    response = make_llm(server.base_url, sleep).chat(text_request())

    assert response.attempts == 2
    assert len(sleep.delays) == 1 and 0.0 <= sleep.delays[0] <= 0.5


def test_500_forever_raises_server_error(server):
    for _ in range(3):
        server.enqueue(status=500)
    sleep = Recorder()
    with pytest.raises(LLMServerError) as caught:
        make_llm(server.base_url, sleep, max_retries=2).chat(text_request())

    assert server.count_chat_requests() == 3 and len(sleep.delays) == 2
    assert server.base_url in str(caught.value) and "after 3 attempts" in str(caught.value)


def test_timeout_is_retried_then_raises_timeout_error(server):
    server.enqueue(delay_s=3)
    server.enqueue(delay_s=3)
    sleep = Recorder()
    llm = make_llm(server.base_url, sleep, timeout_s=0.5, max_retries=1)
    with pytest.raises(LLMTimeoutError) as caught:
        llm.chat(text_request())

    message = str(caught.value)
    assert server.base_url in message and "0.5 s" in message
    assert server.count_chat_requests() == 2 and len(sleep.delays) == 1


def test_connection_refused_names_the_url():
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    sleep = Recorder()
    with pytest.raises(LLMConnectionError) as caught:
        make_llm(base_url, sleep, max_retries=2).chat(text_request())

    error = caught.value
    assert f"cannot reach the LLM endpoint at {base_url} (connection refused" in str(error)
    assert "OPENAI_BASE_URL" in error.hint
    assert len(sleep.delays) == 2


def test_a_malformed_base_url_is_not_retried():
    sleep = Recorder()
    with pytest.raises(LLMConnectionError, match="must start with http"):
        make_llm("localhost:11434/v1", sleep).chat(text_request())
    assert sleep.delays == []


def test_limiter_is_released_while_sleeping(server):
    server.enqueue(status=503)
    limiter = ConcurrencyLimiter(1)
    seen_in_flight: list[int] = []
    llm = OpenAICompatibleLLM(
        LLMSettings(base_url=server.base_url, api_key=API_KEY),
        limiter,
        sleep=lambda _: seen_in_flight.append(limiter.in_flight),
        rng=random.Random(1),
    )
    llm.chat(text_request())
    assert seen_in_flight == [0] and limiter.in_flight == 0


def test_retry_delay_rules():
    rng = random.Random(3)
    now = datetime(2025, 1, 1, tzinfo=UTC)
    in_ten = format_datetime(now + timedelta(seconds=10), usegmt=True)

    assert retry_delay({"Retry-After": in_ten}, 1, rng, now=now) == pytest.approx(10)
    assert retry_delay({"Retry-After": "120"}, 1, rng) == 60.0  # capped
    assert retry_delay({"Retry-After": "garbage"}, 1, rng) <= 0.5  # falls back to backoff
    for attempt, ceiling in ((1, 0.5), (2, 1.0), (3, 2.0), (20, 30.0)):
        delays = [retry_delay({}, attempt, rng) for _ in range(50)]
        assert all(0 <= d <= ceiling for d in delays) and max(delays) > ceiling / 4


# ---------------------------------------------------------------------- client errors


def test_401_raises_auth_error_without_leaking_the_key():
    with FakeOpenAIServer(api_key="the-right-key") as server:
        with pytest.raises(LLMAuthError) as caught:
            make_llm(server.base_url).chat(text_request())
        assert server.count_chat_requests() == 0  # rejected before reaching the chat handler
    assert API_KEY not in caught.value.user_message and "OPENAI_API_KEY" in caught.value.hint


def test_keys_echoed_by_the_server_are_redacted(server):
    echoed = {"error": {"message": f"Incorrect API key provided: {API_KEY}"}}
    server.enqueue(status=401, body=echoed)
    with pytest.raises(LLMAuthError) as caught:
        make_llm(server.base_url).chat(text_request())
    assert API_KEY not in caught.value.user_message and "Incorrect API key" in str(caught.value)


def test_unknown_model_is_a_request_error_with_the_server_message(server):
    server.enqueue(status=404, body={"error": {"message": "model 'nope' not found"}})
    with pytest.raises(LLMRequestError) as caught:
        make_llm(server.base_url, model="nope").chat(text_request())
    assert "model 'nope' not found" in str(caught.value) and "THOUGHTMAP_MODEL" in caught.value.hint
    assert server.count_chat_requests() == 1  # not retried


def test_missing_key_error_only_for_openai_itself():
    error = missing_key_error(LLMSettings())
    assert isinstance(error, LLMAuthError)
    assert "OPENAI_API_KEY is not set" in str(error)
    assert "OPENAI_BASE_URL" in error.hint and "--llm fake" in error.hint
    assert missing_key_error(LLMSettings(api_key="k")) is None
    assert missing_key_error(LLMSettings(base_url="http://localhost:11434/v1")) is None


# ---------------------------------------------------------------------- preflight


def test_preflight(server):
    make_llm(server.base_url).preflight(timeout_s=1)

    with FakeOpenAIServer(api_key="other") as guarded, pytest.raises(LLMAuthError):
        make_llm(guarded.base_url).preflight(timeout_s=1)

    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    with pytest.raises(LLMConnectionError, match=base_url):
        make_llm(base_url).preflight(timeout_s=1)


def test_preflight_accepts_a_server_without_models_route(server):
    # The base URL without /v1: GET /models is a 404 there, but the server answered.
    make_llm(server.base_url.removesuffix("/v1")).preflight(timeout_s=1)


# ---------------------------------------------------------------------- structured modes


def formats_sent(server: FakeOpenAIServer) -> list[str | None]:
    return [(body.get("response_format") or {}).get("type") for body in server.requests]


def test_json_schema_mode_sends_the_schema(server):
    request = ChatRequest(
        messages=(Message("user", "Question: sky colour"),),
        response_format=ResponseFormat.JSON_SCHEMA,
        json_schema=SCHEMA,
        schema_name="list[Verdict] output!",
    )
    response = make_llm(server.base_url, structured_mode="json_schema").chat(request)

    sent = server.requests[0]["response_format"]
    expected = {"name": "list_Verdict__output_", "schema": SCHEMA, "strict": False}
    assert sent["json_schema"] == expected
    assert response.response_format is ResponseFormat.JSON_SCHEMA
    Verdict.model_validate_json(response.text)


def test_json_object_and_prompted_modes(server):
    make_llm(server.base_url, structured_mode="json_object").chat(structured_request())
    make_llm(server.base_url, structured_mode="prompted").chat(structured_request())
    make_llm(server.base_url, structured_mode="json_schema").chat(text_request())

    first, second, third = server.requests
    assert first["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert "response_format" not in second and "response_format" not in third


def test_sanitize_schema_name():
    assert sanitize_schema_name("Plan") == "Plan"
    assert sanitize_schema_name("a b/c") == "a_b_c"
    assert sanitize_schema_name("") == "output"
    assert len(sanitize_schema_name("x" * 100)) == 64


def test_auto_mode_downgrades_to_json_object_and_remembers():
    with FakeOpenAIServer(reject_json_schema=True) as server:
        llm = make_llm(server.base_url)
        first = llm.chat(structured_request())
        second = llm.chat(structured_request())

        assert formats_sent(server) == ["json_schema", "json_object", "json_object"]
    assert first.response_format is ResponseFormat.JSON_OBJECT and first.attempts == 2
    assert second.response_format is ResponseFormat.JSON_OBJECT and second.attempts == 1
    assert llm.structured_mode is ResponseFormat.JSON_OBJECT
    Verdict.model_validate_json(first.text)


def test_auto_mode_downgrades_to_prompted(server):
    server.enqueue(status=400, body={"error": {"message": "response_format json_schema is not supported"}})
    server.enqueue(status=422, body={"error": {"message": "Unknown response_format type: json_object"}})
    llm = make_llm(server.base_url)
    prompt = f"Question: sky\nAnswer with JSON. JSON schema:\n{json.dumps(SCHEMA)}"
    response = llm.chat(structured_request(prompt))
    llm.chat(structured_request(prompt))

    assert formats_sent(server) == ["json_schema", "json_object", None, None]
    assert response.response_format is ResponseFormat.PROMPTED
    Verdict.model_validate_json(response.text)  # the fake read the schema from the prompt


def test_an_error_that_is_not_about_the_format_never_downgrades(server):
    server.enqueue(status=404, body={"error": {"message": "model 'x' not found"}})
    llm = make_llm(server.base_url)
    with pytest.raises(LLMRequestError, match="model 'x' not found"):
        llm.chat(structured_request())
    llm.chat(structured_request())

    assert formats_sent(server) == ["json_schema", "json_schema"]
    assert llm.structured_mode is None


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_transient_errors_never_change_the_structured_mode(server, status):
    """Finding 1 of the reliability issue: one HTTP 500 used to move the process to json_object,
    a second to prompted JSON, for good. A transient error is retried in the same mode."""
    for _ in range(2):
        server.enqueue(status=status)
    llm = make_llm(server.base_url, max_retries=3)
    response = llm.chat(structured_request())
    llm.chat(structured_request())

    assert formats_sent(server) == ["json_schema"] * 4
    assert response.response_format is ResponseFormat.JSON_SCHEMA
    assert llm.structured_mode is None


def test_a_timeout_never_changes_the_structured_mode(server):
    server.enqueue(delay_s=1.5)  # past the 0.5 s timeout: retried, in the same mode
    llm = make_llm(server.base_url, timeout_s=0.5)
    response = llm.chat(structured_request())

    assert formats_sent(server) == ["json_schema", "json_schema"]
    assert response.response_format is ResponseFormat.JSON_SCHEMA and llm.structured_mode is None


def test_learned_mode_is_per_endpoint_and_model_and_can_be_forgotten():
    from engine.llm.structured_modes import StructuredModeMemory

    memory = StructuredModeMemory()
    with FakeOpenAIServer(reject_json_schema=True) as rejecting, FakeOpenAIServer() as other:
        limiter = ConcurrencyLimiter(4)

        def adapter(url, model):
            return OpenAICompatibleLLM(
                LLMSettings(base_url=url, api_key=API_KEY, model=model, timeout_s=2.0),
                limiter,
                modes=memory,
                sleep=Recorder(),
            )

        adapter(rejecting.base_url, "m1").chat(structured_request())
        assert memory.mode_for(rejecting.base_url, "m1") is ResponseFormat.JSON_OBJECT
        assert "json_object" in memory.all()[0].reason  # the server's own words, for Settings
        # Another model behind the same URL, and another endpoint, start again from json_schema.
        adapter(rejecting.base_url, "m2").chat(structured_request())
        adapter(other.base_url, "m1").chat(structured_request())
        assert formats_sent(other) == ["json_schema"]
        assert formats_sent(rejecting) == ["json_schema", "json_object", "json_schema", "json_object"]
        # A new adapter for the same endpoint and model (the app's Settings rebuild it) remembers.
        adapter(rejecting.base_url, "m1").chat(structured_request())
        assert formats_sent(rejecting)[-1] == "json_object"

        assert memory.forget() == 2
        adapter(rejecting.base_url, "m1").chat(structured_request())
        assert formats_sent(rejecting)[-2:] == ["json_schema", "json_object"]


def test_explicit_json_schema_mode_never_downgrades():
    with FakeOpenAIServer(reject_json_schema=True) as server:
        with pytest.raises(LLMServerError, match="json_object"):
            make_llm(server.base_url, structured_mode="json_schema", max_retries=1).chat(structured_request())
        assert formats_sent(server) == ["json_schema", "json_schema"]


# ---------------------------------------------------------------------- concurrency limiter


def test_limiter_bounds_requests_in_flight():
    limiter = ConcurrencyLimiter(2)
    with FakeOpenAIServer(latency_s=0.1) as server:
        llm = make_llm(server.base_url, limiter=limiter)
        threads = [threading.Thread(target=llm.chat, args=(text_request(),)) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=10)

        assert server.count_chat_requests() == 8
        assert server.max_in_flight <= 2
    assert limiter.peak_in_flight == 2 and limiter.in_flight == 0


def test_limiter_basics():
    limiter = ConcurrencyLimiter(3)
    assert limiter.limit == 3 and limiter.in_flight == 0
    with limiter, limiter:
        assert limiter.in_flight == 2
    assert limiter.in_flight == 0 and limiter.peak_in_flight == 2
    with pytest.raises(ValueError):
        ConcurrencyLimiter(0)
    with pytest.raises(RuntimeError):
        limiter.release()


def test_limiter_blocks_until_a_slot_is_free():
    limiter = ConcurrencyLimiter(1)
    entered = threading.Event()
    limiter.acquire()

    def take_slot() -> None:
        with limiter:
            entered.set()

    thread = threading.Thread(target=take_slot)
    thread.start()
    assert not entered.wait(0.1)
    limiter.release()
    assert entered.wait(2)
    thread.join()


def test_limiter_gives_a_freed_slot_to_the_call_that_waited_longest():
    """A thread that releases a slot and asks again at once goes behind the calls already waiting:
    before, it took the slot straight back, and a waiting call could miss round after round."""
    limiter = ConcurrencyLimiter(1)
    order: list[str] = []
    limiter.acquire()

    def call(name: str) -> None:
        with limiter:
            order.append(name)

    first, second = (threading.Thread(target=call, args=(name,)) for name in ("first", "second"))
    first.start()
    while limiter.waiting < 1:  # progress, not a clock: "first" is in line before "second" starts
        time.sleep(0.001)
    second.start()
    while limiter.waiting < 2:
        time.sleep(0.001)
    limiter.release()
    limiter.acquire()  # the releasing thread's next call
    order.append("again")
    limiter.release()
    first.join(timeout=10)
    second.join(timeout=10)
    assert order == ["first", "second", "again"]
    assert limiter.in_flight == 0 and limiter.waiting == 0


# ---------------------------------------------------------------------- pricing


def test_price_table_costs():
    prices = PriceTable()
    assert prices.cost("gpt-4o-mini", 1_000_000, 1_000_000) == pytest.approx(0.75)
    assert prices.cost("gpt-4o", 2000, 1000) == pytest.approx(0.015)
    # Date suffixes: the longest listed prefix wins (gpt-4o-mini, not gpt-4o).
    assert prices.cost("gpt-4o-mini-2024-07-18", 1_000_000, 0) == pytest.approx(0.15)
    assert prices.cost("gpt-4.1-nano-2025-04-14", 0, 1_000_000) == pytest.approx(0.40)
    assert prices.cost("GPT-4.1", 1_000_000, 0) == pytest.approx(2.00)
    assert prices.cost("openai/gpt-4.1-mini", 1_000_000, 0) == pytest.approx(0.40)
    assert prices.cost("llama3.1:8b", 10_000, 10_000) == 0.0
    assert prices.price_for("gpt-4omni") is None  # a prefix must end at a separator


def test_price_table_from_file(tmp_path: Path):
    path = tmp_path / "prices.json"
    custom = {"my-model": {"input": 1, "output": 2}, "gpt-4o": {"input": 1, "output": 1}}
    path.write_text(json.dumps(custom))
    prices = PriceTable.from_file(path)

    assert prices.cost("my-model", 1_000_000, 1_000_000) == pytest.approx(3.0)
    assert prices.cost("gpt-4o", 1_000_000, 0) == pytest.approx(1.0)  # overridden
    assert prices.cost("gpt-4o-mini", 1_000_000, 0) == pytest.approx(0.15)  # default kept


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"gpt-4o": {"input": 1,', "not valid JSON"),
        ('["gpt-4o"]', "must hold a JSON object"),
        ('{"m": {"input": 1}}', '"m" needs'),
        ('{"m": {"input": "cheap", "output": 1}}', "must be a number"),
        ('{"m": {"input": -1, "output": 1}}', ">= 0"),
    ],
)
def test_price_file_errors_name_the_file(tmp_path: Path, content: str, expected: str):
    path = tmp_path / "prices.json"
    path.write_text(content)
    with pytest.raises(PriceFileError) as caught:
        PriceTable.from_file(path)
    assert str(path) in str(caught.value) and expected in str(caught.value)


def test_missing_price_file(tmp_path: Path):
    with pytest.raises(PriceFileError, match="cannot read the prices file"):
        PriceTable.from_file(tmp_path / "absent.json")


# ---------------------------------------------------------------------- the server as a process


def test_fake_server_runs_as_a_module():
    process = subprocess.Popen(
        [sys.executable, "-m", "engine.llm.fake_server", "--port", "0", "--latency", "0.01"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    try:
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        llm = make_llm(base_url)
        llm.preflight(timeout_s=2)
        assert llm.chat(text_request()).text
    finally:
        process.terminate()
        process.wait(timeout=5)


@pytest.mark.parametrize("load", [[], ["--load", "engine.methods.fgdip.prompts"]])
def test_a_server_process_answers_a_method_prompt_once_it_loaded_the_method(load):
    """A server in its own process knows a prompt's own offline answers only once it imported the
    module that registers them (`--load`); before, it answers generically, schema-valid text."""
    process = subprocess.Popen(
        [sys.executable, "-m", "engine.llm.fake_server", "--port", "0", *load],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    try:
        llm = make_llm(process.stdout.readline().strip())
        question = "Question: Which magazine was started first, Arthur's Magazine or First for Women?"
        answer = llm.chat(ChatRequest(messages=(Message("user", question),), prompt="fgdip.extract")).text
        if load:
            assert json.loads(answer) == {"entities": ["Arthur's Magazine", "First for Women"]}
        else:
            assert "entities" not in answer
    finally:
        process.terminate()
        process.wait(timeout=5)


def test_a_server_process_with_stats_says_what_it_served_when_stopped():
    """`--stats` (a benchmark's endpoint in its own process): stopped, it prints the chat requests it
    answered and the most it handled at once, as its last line."""
    process = subprocess.Popen(
        [sys.executable, "-m", "engine.llm.fake_server", "--port", "0", "--stats"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    try:
        llm = make_llm(process.stdout.readline().strip())
        for _ in range(2):
            assert llm.chat(text_request()).text
    finally:
        process.terminate()
        out, _ = process.communicate(timeout=30)
    assert json.loads(out.strip().splitlines()[-1]) == {"chat_requests": 2, "max_in_flight": 1}


def test_a_keep_alive_server_reuses_one_connection_and_closes_it_when_stopped():
    """The benchmarks' endpoint speaks HTTP/1.1 as a real one does: the client's calls share a
    connection (a connection per call cost every call a TCP handshake no real client pays), and a
    stopped server ends its idle connections instead of answering on them."""
    with FakeOpenAIServer(keep_alive=True) as server:
        llm = make_llm(server.base_url, max_retries=0)
        answers = [llm.chat(text_request()).text for _ in range(3)]
        assert all(answers) and server.connections_accepted == 1
    with pytest.raises(LLMConnectionError):
        llm.chat(text_request())
    with FakeOpenAIServer() as closing:  # the tests' server: one connection a request
        llm = make_llm(closing.base_url)
        for _ in range(2):
            llm.chat(text_request())
        assert closing.connections_accepted == 2
