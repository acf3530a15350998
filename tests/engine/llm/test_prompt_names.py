"""Prompt names travel with the request: `Prompt.render` -> `RunLLM` -> `ChatRequest.prompt` ->
the `X-Thoughtmap-Prompt` header -> the fake server's `FakeLLM`. Tests and the fake select requests
by these names, not by the prompts' wording."""

from __future__ import annotations

import importlib
import json

import pytest
from pydantic import BaseModel

from engine.config import LLMSettings
from engine.llm.accounting import Budget, RunLLM
from engine.llm.fake import FakeLLM, named
from engine.llm.fake_server import FakeOpenAIServer
from engine.llm.limits import ConcurrencyLimiter
from engine.llm.openai_compat import OpenAICompatibleLLM
from engine.llm.pricing import PriceTable
from engine.llm.protocol import PROMPT_HEADER, BudgetExceeded, ChatRequest, Message, StructuredOutputError
from engine.prompting import Prompt, PromptError, PromptMessages
from tests import REPO_ROOT

ROOT = REPO_ROOT

GREET = Prompt(name="test.greet", system="You greet people.", user="Question: who is $who?")
CHECK = Prompt(name="test.check", system="You check facts.", user="Question: is $claim true?")


class Verdict(BaseModel):
    verdict: str
    sure: bool


class MemoryUsage:
    """The `UsageStore` accounting needs, in memory, counting the budget's reads."""

    def __init__(self) -> None:
        self.calls: list[dict] = []
        self.usage_reads = 0

    def record_llm_call(self, run_id: str, **call) -> None:
        self.calls.append(call)

    def run_usage(self, run_id: str) -> tuple[int, float]:
        self.usage_reads += 1
        tokens = sum(c["prompt_tokens"] + c["completion_tokens"] for c in self.calls)
        return tokens, sum(c["cost"] for c in self.calls)


def run_llm(llm, budget: Budget | None = None) -> tuple[RunLLM, MemoryUsage]:
    usage = MemoryUsage()
    return RunLLM(llm, usage, "run-1", PriceTable(), budget=budget), usage


# ---------------------------------------------------------------------- the rendered prompt


def test_render_gives_named_messages_that_are_still_a_sequence():
    messages = GREET.render(who="Ada")
    assert isinstance(messages, PromptMessages) and isinstance(messages, tuple)
    assert messages.name == "test.greet"
    assert list(messages) == [Message("system", "You greet people."), Message("user", "Question: who is Ada?")]
    assert messages[-1].role == "user" and len(messages) == 2
    assert "test.greet" not in "".join(m.content for m in messages)  # the name is not in the text
    with pytest.raises(PromptError):
        GREET.render()


# ---------------------------------------------------------------------- through RunLLM


def test_text_and_ask_put_the_name_in_the_request():
    fake = FakeLLM()
    llm, usage = run_llm(fake)
    llm.text(GREET.render(who="Ada"))
    llm.ask(CHECK.render(claim="water is wet"), Verdict)
    llm.text([Message("user", "Question: no template here")])  # hand-made messages: no name
    assert [(r.prompt, r.attempt) for r in fake.calls] == [("test.greet", 1), ("test.check", 1), ("", 1)]
    assert [r.prompt for r in fake.calls_for("test.greet")] == ["test.greet"]


def test_a_rule_by_name_answers_whatever_the_wording():
    fake = FakeLLM().when(prompt="test.greet", respond="scripted hello")
    llm, _ = run_llm(fake)
    assert llm.text(GREET.render(who="Ada")) == "scripted hello"
    reworded = Prompt(name="test.greet", system="Say hello.", user="Person: $who")
    assert llm.text(reworded.render(who="Bob")) == "scripted hello"
    assert llm.text(CHECK.render(claim="x")) != "scripted hello"


def test_reasks_keep_the_name_and_count_their_attempt():
    fake = FakeLLM().when(prompt="test.check", respond={"wrong": "shape"}, times=2)
    llm, usage = run_llm(fake)
    result = llm.ask(CHECK.render(claim="the sky is green"), Verdict)
    assert isinstance(result, Verdict)
    calls = fake.calls_for("test.check")
    assert [(r.prompt, r.attempt) for r in calls] == [("test.check", 1), ("test.check", 2), ("test.check", 3)]
    assert fake.calls_for("test.check", first_try_only=True) == calls[:1]
    assert len(usage.calls) == 3  # every attempt is accounted


def test_a_failed_structured_answer_names_every_attempt():
    fake = FakeLLM().when(prompt="test.check", respond={"wrong": "shape"})
    llm, _ = run_llm(fake)
    with pytest.raises(StructuredOutputError):
        llm.ask(CHECK.render(claim="x"), Verdict)
    assert [r.attempt for r in fake.calls_for(named("test.*"))] == [1, 2, 3]


# ---------------------------------------------------------------------- the budget read


def test_no_budget_no_usage_read():
    llm, usage = run_llm(FakeLLM())
    llm.text(GREET.render(who="Ada"))
    llm.ask(CHECK.render(claim="x"), Verdict)
    assert usage.usage_reads == 0 and len(usage.calls) == 2


def test_a_budget_is_checked_before_every_call():
    llm, usage = run_llm(FakeLLM(), Budget(max_tokens=10_000))
    llm.text(GREET.render(who="Ada"))
    llm.ask(CHECK.render(claim="x"), Verdict)
    assert usage.usage_reads == 2
    spent, _ = usage.run_usage("run-1")
    tight, tight_usage = run_llm(FakeLLM(), Budget(max_tokens=spent))
    tight_usage.calls = list(usage.calls)
    with pytest.raises(BudgetExceeded):
        tight.text(GREET.render(who="Ada"))
    cost_capped, _ = run_llm(FakeLLM(), Budget(max_cost=0.0))
    with pytest.raises(BudgetExceeded):
        cost_capped.text(GREET.render(who="Ada"))


# ---------------------------------------------------------------------- over HTTP


def test_the_name_travels_as_a_header_to_the_fake_server():
    fake = FakeLLM().when(prompt="test.greet", respond="hello over HTTP")
    with FakeOpenAIServer(fake) as server:
        adapter = OpenAICompatibleLLM(
            LLMSettings(base_url=server.base_url, api_key="test", model="fake-model", timeout_s=5.0, max_retries=0),
            ConcurrencyLimiter(2),
        )
        llm, _ = run_llm(adapter)
        assert llm.text(GREET.render(who="Ada")) == "hello over HTTP"
        assert isinstance(llm.ask(CHECK.render(claim="x"), Verdict), Verdict)
        llm.text([Message("user", "Question: unnamed")])
        bodies = server.requests
    assert [r.prompt for r in fake.calls] == ["test.greet", "test.check", ""]
    # Never in the body: only the header carries it.
    assert all("test.greet" not in json.dumps(body) and "test.check" not in json.dumps(body) for body in bodies)


def test_the_fake_server_reads_the_header():
    import httpx

    fake = FakeLLM().when(prompt="test.raw", respond="matched by header")
    body = {"model": "fake", "messages": [{"role": "user", "content": "hi"}]}
    with FakeOpenAIServer(fake) as server:
        named_reply = httpx.post(
            f"{server.base_url}/chat/completions", json=body, headers={PROMPT_HEADER: "test.raw"}, timeout=5
        )
        unnamed_reply = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=5)
    assert named_reply.json()["choices"][0]["message"]["content"] == "matched by header"
    assert unnamed_reply.json()["choices"][0]["message"]["content"] != "matched by header"
    assert [r.prompt for r in fake.calls] == ["test.raw", ""]


def test_the_header_value_is_safe():
    from engine.llm.openai_compat import _header_value

    assert _header_value("deot.controller") == "deot.controller"
    assert _header_value("bad\r\nX-Evil: 1 é") == "bad__X-Evil:_1__"
    assert len(_header_value("x" * 500)) == 128


def test_a_request_without_a_name_sends_no_header():
    adapter = OpenAICompatibleLLM(
        LLMSettings(base_url="http://127.0.0.1:9/v1", api_key="t", model="m"), ConcurrencyLimiter(1)
    )
    from engine.llm.protocol import ResponseFormat

    unnamed = adapter._request_kwargs(ChatRequest(messages=(Message("user", "x"),)), "m", ResponseFormat.TEXT)
    named_kwargs = adapter._request_kwargs(
        ChatRequest(messages=(Message("user", "x"),), prompt="a.b"), "m", ResponseFormat.TEXT
    )
    assert "extra_headers" not in unnamed
    assert named_kwargs["extra_headers"] == {PROMPT_HEADER: "a.b"}


# ---------------------------------------------------------------------- the names themselves


def _all_prompts() -> list[tuple[str, str, Prompt]]:
    """(module, attribute, prompt) for every Prompt defined in engine/methods' prompt modules."""
    found = []
    for path in sorted((ROOT / "engine" / "methods").rglob("*prompts.py")):
        module_name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        module = importlib.import_module(module_name)
        for attribute, value in vars(module).items():
            if isinstance(value, Prompt):
                found.append((module_name, attribute, value))
    return found


def test_prompt_names_are_unique_and_qualified():
    prompts = _all_prompts()
    assert len(prompts) >= 20
    by_name: dict[str, list[str]] = {}
    for module, attribute, prompt in prompts:
        by_name.setdefault(prompt.name, []).append(f"{module}.{attribute}")
        method, _, rest = prompt.name.partition(".")
        assert method and rest and "." not in rest and rest.islower(), prompt.name
    # The same object imported in two modules is one prompt; two objects with one name are not.
    objects = {id(p): p for _, _, p in prompts}
    names = [p.name for p in objects.values()]
    assert len(names) == len(set(names)), {n: w for n, w in by_name.items() if len(w) > 1}


def test_the_test_scripts_name_existing_prompts():
    from tests.engine.methods.deot import deot_scripts
    from tests.engine.methods.omnithink import omnithink_scripts

    names = {p.name for _, _, p in _all_prompts()}
    for scripts in (deot_scripts, omnithink_scripts):
        for attribute, value in vars(scripts).items():
            if attribute.isupper() and hasattr(value, "names") and hasattr(value, "where"):
                for name in value.names:
                    if name.endswith(".*"):
                        assert any(n.startswith(name[:-1]) for n in names), name
                    else:
                        assert name in names, f"{scripts.__name__}.{attribute}: no prompt named {name!r}"


@pytest.mark.parametrize(
    "method, params",
    [
        ("deot", {"max_layers": 2, "max_nodes": 3}),
        ("omnithink", {"subnodes": 2, "max_depth": 1}),
        ("direct", {}),
        ("rag", {}),
    ],
)
def test_every_call_of_a_run_is_named(services, fake_llm, method, params):
    """Every request a method sends comes from a named prompt of that method: what the fake and the
    tests select by, and what the endpoint sees in the header."""
    from tests.support.fixtures_engine import run_to_end

    run_to_end(services, "How did the Apollo program shape later space exploration?", method, params)
    names = {p.name for _, _, p in _all_prompts()}
    called = {r.prompt for r in fake_llm.calls}
    assert fake_llm.calls and called <= names, called - names
    assert all(name.startswith(f"{method}.") for name in called), called
