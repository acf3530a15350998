"""The built-in model's cap and timeout follow its measured speed (engine/llm/decode_speed.py), and
`LocalModelLLM` applies them to every call, timed without its wait for the server's one slot."""

from __future__ import annotations

from engine.llm.decode_speed import CALL_SECONDS, MIN_CAP, TIMEOUT_CEILING_S, TIMEOUT_FLOOR_S, DecodeSpeed


def test_before_any_call_is_measured_the_step_asks_and_the_configured_timeout_apply():
    limits = DecodeSpeed().limits(1000)
    assert limits.max_tokens == 1000 and limits.timeout_s is None


def test_a_slow_machine_gets_a_shorter_cap_and_a_timeout_that_lets_it_write_it():
    speed = DecodeSpeed()
    speed.record(190, 100.0)  # 1.9 tokens/s: the loaded machine of the issue
    limits = speed.limits(1000)
    assert limits.max_tokens == int(1.9 * CALL_SECONDS)  # 456: four minutes of writing
    # Enough time to write the cap at half the measured speed.
    assert limits.timeout_s >= 2 * limits.max_tokens / 1.9 and limits.timeout_s >= TIMEOUT_FLOOR_S


def test_a_fast_machine_keeps_the_step_cap_and_the_floors_hold():
    speed = DecodeSpeed()
    speed.record(1200, 100.0)  # 12 tokens/s
    assert speed.limits(1000).max_tokens == 1000 and speed.limits(1000).timeout_s == TIMEOUT_FLOOR_S
    crawling = DecodeSpeed()
    crawling.record(20, 200.0)  # 0.1 tokens/s: the cap never goes under what a summary needs
    limits = crawling.limits(1000)
    assert limits.max_tokens == MIN_CAP and limits.timeout_s == TIMEOUT_CEILING_S
    assert crawling.limits(100).max_tokens == 100  # never above what the step asked


def test_short_answers_measure_the_prompt_not_the_writing_and_are_not_counted():
    speed = DecodeSpeed()
    speed.record(3, 30.0)
    assert speed.tokens_per_s is None
    speed.record(100, 10.0)
    speed.record(20, 10.0)
    assert speed.tokens_per_s == 0.5 * 2.0 + 0.5 * 10.0  # smoothed towards the newest


def test_the_local_llm_applies_the_measured_limits_and_says_the_cap_it_used(monkeypatch):
    from engine.config import load_settings
    from engine.llm.local import LocalModelLLM
    from engine.llm.protocol import ChatRequest, ChatResponse, Message, Usage

    settings = load_settings()
    llm = LocalModelLLM(server=None, settings=settings.local, base=settings.llm)  # the server is never reached
    seen: list[ChatRequest] = []

    def answer(request):
        seen.append(request)
        return ChatResponse(text="a" * 10, model="m", usage=Usage(10, request.max_tokens))

    monkeypatch.setattr(llm, "_chat", answer)
    request = ChatRequest(messages=(Message("user", "hi"),), max_tokens=1000)
    first = llm.chat(request)
    assert seen[0].max_tokens == 1000 and seen[0].timeout_s is None and first.output_cap is None
    llm.speed = DecodeSpeed()  # forget the instant answer above: the machine got busy
    llm.speed.record(190, 100.0)
    second = llm.chat(request)
    assert seen[1].max_tokens < 1000 and second.output_cap == seen[1].max_tokens
    assert seen[1].timeout_s >= TIMEOUT_FLOOR_S
