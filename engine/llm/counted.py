"""The LLM outside a run: the evaluation harness's reader and judge calls, and a collection knowledge
graph's build, are counted like a run's calls (calls, tokens, cost), but into an `EvalUsage` kept with
the verdict, the benchmark item or the graph, never into a run's own totals (a method's cost must not
include the cost of scoring it). In `engine/llm` so that the knowledge layer uses it without
importing the evaluation harness."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import BaseModel

from engine.llm.pricing import PriceTable
from engine.llm.protocol import LLM, ChatRequest, ChatResponse, LLMError, Message
from engine.llm.structured import DEFAULT_MAX_REASKS, ask_structured

T = TypeVar("T", bound=BaseModel)


@dataclass
class EvalUsage:
    """What evaluating cost so far; safe to share between threads."""

    calls: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, *, prompt_tokens: int = 0, completion_tokens: int = 0, cost: float = 0.0, ok: bool = True) -> None:
        with self._lock:
            self.calls += 1
            self.failed_calls += 0 if ok else 1
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens
            self.cost += cost

    def as_dict(self) -> dict[str, float | int]:
        with self._lock:
            return {
                "calls": self.calls,
                "failed_calls": self.failed_calls,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "cost": self.cost,
            }


class BudgetSpent(Exception):
    """A gate refused an evaluation call: the benchmark's budget is spent (`reached`: "tokens" or
    "cost"). Not an LLMError: the item keeps what it had, it is not scored as a failed reading."""

    def __init__(self, reached: str) -> None:
        super().__init__(f"the {reached} budget is spent")
        self.reached = reached


class _CountingLLM:
    def __init__(self, owner: EvalLLM) -> None:
        self._owner = owner

    @property
    def description(self) -> str:
        return self._owner.llm.description

    def model_for(self, purpose: str) -> str:
        return self._owner.llm.model_for(purpose)

    def chat(self, request: ChatRequest) -> ChatResponse:
        owner = self._owner
        try:
            response = owner.llm.chat(request)
        except LLMError:
            for usage in owner.usages:
                usage.add(ok=False)
            raise
        u = response.usage
        cost = owner.prices.cost(response.model, u.prompt_tokens, u.completion_tokens)
        for usage in owner.usages:
            usage.add(prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens, cost=cost)
        return response


class EvalLLM:
    """An LLM for readers and judges. `purpose` picks the model per role (THOUGHTMAP_MODEL_<PURPOSE>,
    e.g. THOUGHTMAP_MODEL_JUDGE), as for a run's calls."""

    def __init__(
        self,
        llm: LLM,
        prices: PriceTable | None = None,
        usage: EvalUsage | None = None,
        max_reasks: int = DEFAULT_MAX_REASKS,
        *,
        also: tuple[EvalUsage, ...] = (),
        gate: Callable[[], None] | None = None,
    ) -> None:
        self.llm = llm
        self.prices = prices or PriceTable()
        self.usage = usage or EvalUsage()
        self.max_reasks = max_reasks
        # Called before each question; raises (BudgetSpent, or why the call may not be made) to refuse it.
        self.gate = gate
        # The usages of the EvalLLMs this one was made from: a verdict's calls also count in the
        # item's total that asked for it.
        self.usages: tuple[EvalUsage, ...] = (self.usage, *also)

    @property
    def description(self) -> str:
        return self.llm.description

    def model_for(self, purpose: str) -> str:
        return self.llm.model_for(purpose)

    def with_usage(self, usage: EvalUsage) -> EvalLLM:
        """The same LLM counting into `usage` (one per item or verdict) as well as into this one's."""
        return EvalLLM(self.llm, self.prices, usage, self.max_reasks, also=self.usages, gate=self.gate)

    def with_gate(self, gate: Callable[[], None]) -> EvalLLM:
        """The same LLM, counting into the same usages, that calls `gate` before each question."""
        return EvalLLM(self.llm, self.prices, self.usage, self.max_reasks, also=self.usages[1:], gate=gate)

    def ask(
        self,
        messages: Sequence[Message],
        output_type: type[T],
        *,
        purpose: str = "judge",
        max_tokens: int | None = None,
        temperature: float | None = 0.0,
    ) -> T:
        """A validated `output_type`; raises StructuredOutputError or LLMError, or what the gate
        raises to refuse the question (BudgetSpent)."""
        if self.gate is not None:
            self.gate()
        return ask_structured(
            _CountingLLM(self),
            messages,
            output_type,
            purpose=purpose,
            max_reasks=self.max_reasks,
            max_tokens=max_tokens,
            temperature=temperature,
            prompt=getattr(messages, "name", ""),
        )


__all__ = ["BudgetSpent", "EvalLLM", "EvalUsage"]
