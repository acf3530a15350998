"""Per-run LLM access: every call is checked against the run's budget (when it has one), told to
the run's step log (`on_call`), then recorded (tokens, latency, cost) with the node it served. Methods only ever see a `RunLLM`.

A budget holds when calls run in parallel (MTQA sends about five at once): each call reserves its
prompt and its output cap, priced, before it is sent, and gives the reservation back once its real
usage is recorded. A call is let through only while what was spent, plus every reservation of the
calls in flight, plus its own prompt stays under the budget; otherwise it waits for the calls in
flight to settle, and is refused (BudgetExceeded) only when none is left. So a run spends at most
its budget plus one call's output (the last call let through may use all of its cap), and with
calls one at a time the check is the same as it always was.

A person's spending limit (multi-user mode) is the same mechanism one level up: a `SharedBudget`
that every run of the person's in this process reserves from too, against what they spent in the
window (read from storage at each check), so two runs of theirs at once share one remainder."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from pydantic import BaseModel

from engine.llm.cutoff import complete_sentences
from engine.llm.pricing import PriceTable
from engine.llm.protocol import LLM, BudgetExceeded, ChatRequest, ChatResponse, LLMError, Message, ResponseFormat
from engine.llm.structured import DEFAULT_MAX_REASKS, ask_structured
from engine.redact import redact_secrets
from storage.models import Run
from storage.statuses import RunStatus

T = TypeVar("T", bound=BaseModel)


class UsageStore(Protocol):
    """What accounting needs from storage (storage.Repository implements it)."""

    def record_llm_call(
        self,
        run_id: str,
        *,
        node_id: int | None,
        purpose: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        cost: float,
        latency_s: float,
        attempts: int = 1,
        ok: bool = True,
        error: str = "",
    ) -> None: ...

    def run_usage(self, run_id: str) -> tuple[int, float]: ...


@dataclass(frozen=True)
class Budget:
    max_tokens: int | None = None
    max_cost: float | None = None

    @property
    def unlimited(self) -> bool:
        """No limit at all: nothing to check, so the run's usage need not be read."""
        return self.max_tokens is None and self.max_cost is None

    def check(self, tokens: int, cost: float, *, upcoming_tokens: int = 0, upcoming_cost: float = 0.0) -> None:
        """Raise BudgetExceeded when what was spent, plus the prompt about to be sent, reaches
        the budget."""
        if self.max_tokens is not None and tokens + upcoming_tokens >= self.max_tokens:
            raise BudgetExceeded(
                f"token budget reached: {tokens} tokens used and the next call needs about "
                f"{upcoming_tokens} more, of a budget of {self.max_tokens}",
                hint="Resume with a larger --max-tokens to continue.",
                dimension="tokens",
            )
        if self.max_cost is not None and cost + upcoming_cost >= self.max_cost:
            raise BudgetExceeded(
                f"cost budget reached: ${cost:.4f} spent and the next call needs about "
                f"${upcoming_cost:.4f} more, of a budget of ${self.max_cost:.4f}",
                hint="Resume with a larger --max-cost to continue.",
                dimension="cost",
            )


# What the call a budget stopped needed, read back from the run's stop reason (the words above).
_NEEDED_TOKENS = re.compile(r"token budget reached: \d+ tokens used and the next call needs about (\d+) more")
_NEEDED_COST = re.compile(r"cost budget reached: \$[\d.]+ spent and the next call needs about \$([\d.]+) more")


def stopped_by_budget(run: Run) -> bool:
    """Whether a stored run stopped because its budget was reached (its stop reason is the words above)."""
    reason = getattr(run, "stop_reason", "") or ""
    return run.status == "stopped" and bool(_NEEDED_TOKENS.search(reason) or _NEEDED_COST.search(reason))


def budget_short(run: Run, *, max_tokens: int | None = None, max_cost: float | None = None) -> BudgetExceeded | None:
    """Whether a run's budget cannot pay for its next call (it would stop again at once): the
    BudgetExceeded saying so, or None. The next call is the one a budget stop refused (its size is
    in the stop reason), else one of the run's average size. `run`: a storage Run; `max_tokens`,
    `max_cost`: a budget it is about to be given instead of its own (None: its own)."""
    budget = Budget(
        max_tokens=run.max_tokens if max_tokens is None else max_tokens,
        max_cost=run.max_cost if max_cost is None else max_cost,
    )
    if budget.unlimited:
        return None
    tokens = run.prompt_tokens + run.completion_tokens
    calls = max(run.llm_calls, 1)
    next_tokens, next_cost = tokens // calls, run.cost / calls
    if run.status == RunStatus.STOPPED and run.stop_reason:
        if needed := _NEEDED_TOKENS.search(run.stop_reason):
            next_tokens = max(next_tokens, int(needed.group(1)))
        if needed := _NEEDED_COST.search(run.stop_reason):
            next_cost = max(next_cost, float(needed.group(1)))
    try:
        budget.check(tokens, run.cost, upcoming_tokens=next_tokens, upcoming_cost=next_cost)
    except BudgetExceeded as exc:
        return exc
    return None


# What a call without an output cap is assumed to write, for its reservation. It is not sent as the
# call's cap: an endpoint with a small context (vLLM with max_model_len 4096) refuses a request whose
# prompt plus max_tokens exceeds it, so a budget would break calls that work without one. Such a
# call keeps the bound as long as it writes no more than this (about 3,000 words).
UNCAPPED_CALL_OUTPUT_CAP = 4096


@dataclass(frozen=True)
class _Reservation:
    tokens: int
    cost: float


class _Reservations:
    """What the calls in flight of one run may still spend: their prompts and output caps, priced.

    Thread-safe; `hold` blocks while the budget has no room for another call but calls in flight
    may free some, and raises BudgetExceeded when none is in flight and there is no room."""

    def __init__(self) -> None:
        self._settled = threading.Condition()
        self._tokens = 0
        self._cost = 0.0
        self._count = 0
        self._waiting = 0

    @property
    def waiting(self) -> int:
        """Calls waiting for room in the budget right now."""
        with self._settled:
            return self._waiting

    def hold(
        self,
        budget: Budget,
        spent: Callable[[], tuple[int, float]],
        *,
        prompt_tokens: int,
        prompt_cost: float,
        reserve: _Reservation,
    ) -> _Reservation:
        """Reserve `reserve` once `budget` has room for a call with this prompt beside the calls in
        flight. `spent()`: the run's stored usage (tokens, cost), read again after each settle."""
        with self._settled:
            while True:
                spent_tokens, spent_cost = spent()
                try:
                    budget.check(
                        spent_tokens + self._tokens,
                        spent_cost + self._cost,
                        upcoming_tokens=prompt_tokens,
                        upcoming_cost=prompt_cost,
                    )
                    break
                except BudgetExceeded:
                    if self._count == 0:  # nothing in flight can make room: the budget is spent
                        raise
                    self._waiting += 1
                    try:
                        self._settled.wait()
                    finally:
                        self._waiting -= 1
            self._tokens += reserve.tokens
            self._cost += reserve.cost
            self._count += 1
            return reserve

    def release(self, reservation: _Reservation) -> None:
        """The call's real usage is recorded (or it failed): its reservation is given back."""
        with self._settled:
            self._tokens -= reservation.tokens
            self._cost -= reservation.cost
            self._count -= 1
            self._settled.notify_all()


class SharedBudget:
    """A cost limit that several runs share (one person's runs): each of their calls reserves from it
    as from its run's own budget. `spent()`: what was spent against it so far, as stored; `why`: the
    limit in words, for the run's stop reason; `hint`: what to do."""

    def __init__(self, max_cost: float, spent: Callable[[], float], *, why: str, hint: str) -> None:
        self.budget = Budget(max_cost=max_cost)
        self.reservations = _Reservations()
        self._spent = spent
        self._why = why
        self._hint = hint

    def hold(self, *, prompt_cost: float, reserve: _Reservation) -> _Reservation:
        """Reserve the call's cost once the limit has room (tokens are not limited here)."""
        try:
            return self.reservations.hold(
                self.budget, lambda: (0, self._spent()), prompt_tokens=0, prompt_cost=prompt_cost, reserve=reserve
            )
        except BudgetExceeded as exc:
            raise BudgetExceeded(f"{self._why} is reached ({exc})", hint=self._hint, dimension="cost") from exc

    def release(self, reservation: _Reservation) -> None:
        self.reservations.release(reservation)


class _AccountedLLM:
    """An LLM proxy bound to one run and node: budget reservation before, usage record after."""

    def __init__(self, owner: RunLLM, node_id: int | None) -> None:
        self._owner = owner
        self._node_id = node_id

    @property
    def description(self) -> str:
        return self._owner.llm.description

    def model_for(self, purpose: str) -> str:
        return self._owner.llm.model_for(purpose)

    def chat(self, request: ChatRequest) -> ChatResponse:
        owner = self._owner
        reservation = shared = None
        if not owner.budget.unlimited or owner.shared is not None:
            prompt_tokens, prompt_cost, reserve = self._estimate(request)
            if not owner.budget.unlimited:  # without a budget, no read of the run's usage per call
                reservation = owner.reservations.hold(
                    owner.budget,
                    lambda: owner.usage.run_usage(owner.run_id),
                    prompt_tokens=prompt_tokens,
                    prompt_cost=prompt_cost,
                    reserve=reserve,
                )
        try:
            if owner.shared is not None:  # the person's limit, shared with their other runs
                shared = owner.shared.hold(prompt_cost=prompt_cost, reserve=reserve)
            return self._send(request)
        finally:
            if shared is not None and owner.shared is not None:
                owner.shared.release(shared)
            if reservation is not None:
                owner.reservations.release(reservation)

    def _estimate(self, request: ChatRequest) -> tuple[int, float, _Reservation]:
        """The call's prompt (tokens, cost), and what it reserves: the prompt and its output cap (for a
        call with none, `UNCAPPED_CALL_OUTPUT_CAP`), priced. The prompt about to be sent counts too
        (about 4 characters a token), so a call that would by itself overrun a budget is not made."""
        owner = self._owner
        prompt_estimate = sum(len(m.content) for m in request.messages) // 4
        model = owner.llm.model_for(request.purpose)
        cap = UNCAPPED_CALL_OUTPUT_CAP if request.max_tokens is None else request.max_tokens
        return (
            prompt_estimate,
            owner.prices.cost(model, prompt_estimate, 0),
            _Reservation(prompt_estimate + cap, owner.prices.cost(model, prompt_estimate, cap)),
        )

    def _send(self, request: ChatRequest) -> ChatResponse:
        owner = self._owner
        if owner.on_call is not None:
            owner.on_call(request.prompt, node_id=self._node_id, attempt=request.attempt)
        try:
            response = owner.llm.chat(request)
        except LLMError as exc:
            owner.usage.record_llm_call(
                owner.run_id,
                node_id=self._node_id,
                purpose=request.purpose,
                model=owner.llm.model_for(request.purpose),
                prompt_tokens=0,
                completion_tokens=0,
                cost=0.0,
                latency_s=0.0,
                ok=False,
                error=redact_secrets(str(exc)),
            )
            raise
        usage = response.usage
        owner.usage.record_llm_call(
            owner.run_id,
            node_id=self._node_id,
            purpose=request.purpose,
            model=response.model,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cost=owner.prices.cost(response.model, usage.prompt_tokens, usage.completion_tokens),
            latency_s=response.latency_s,
            attempts=response.attempts,
        )
        return response


class CallObserver(Protocol):
    """Told of every call about to be made (the run's step log: `RunGraph.narrate_call`)."""

    def __call__(self, prompt: str, *, node_id: int | None, attempt: int) -> None: ...


class RunLLM:
    """The LLM as one run sees it."""

    def __init__(
        self,
        llm: LLM,
        usage: UsageStore,
        run_id: str,
        prices: PriceTable,
        budget: Budget | None = None,
        max_reasks: int = DEFAULT_MAX_REASKS,
        on_call: CallObserver | None = None,
        shared: SharedBudget | None = None,
    ) -> None:
        self.llm = llm
        self.usage = usage
        self.run_id = run_id
        self.prices = prices
        self.budget = budget or Budget()
        self.reservations = _Reservations()  # one per run: its calls in flight share the budget
        self.shared = shared  # a limit shared with other runs (the person's), or None
        self.max_reasks = max_reasks
        self.on_call = on_call

    @property
    def description(self) -> str:
        return self.llm.description

    def bound(self, node_id: int | None = None) -> LLM:
        """This run's LLM as a plain `LLM` (`chat`) whose calls are budgeted, told to the step log and
        recorded for `node_id`: for code that speaks the seam itself (the LLM reranker)."""
        return _AccountedLLM(self, node_id)

    def ask(
        self,
        messages: Sequence[Message],
        output_type: type[T],
        *,
        purpose: str = "default",
        node_id: int | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> T:
        """A validated `output_type`; raises StructuredOutputError, BudgetExceeded or LLMError.

        The requests carry the prompt's name (`messages.name`, set by `Prompt.render`)."""
        return ask_structured(
            _AccountedLLM(self, node_id),
            messages,
            output_type,
            purpose=purpose,
            max_reasks=self.max_reasks,
            max_tokens=max_tokens,
            temperature=temperature,
            prompt=getattr(messages, "name", ""),
        )

    def text(
        self,
        messages: Sequence[Message],
        *,
        purpose: str = "default",
        node_id: int | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> str:
        """Free text; the request carries the prompt's name (`messages.name`, set by `Prompt.render`).
        A text the output limit cut off ends at its last complete sentence (`complete_sentences`)."""
        return self.text_reply(
            messages, purpose=purpose, node_id=node_id, max_tokens=max_tokens, temperature=temperature
        ).text

    def text_reply(
        self,
        messages: Sequence[Message],
        *,
        purpose: str = "default",
        node_id: int | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> TextReply:
        """`text`, and whether the output limit cut it off: for a step that must not use a partial text."""
        request = ChatRequest(
            messages=tuple(messages),
            purpose=purpose,
            response_format=ResponseFormat.TEXT,
            max_tokens=max_tokens,
            temperature=temperature,
            prompt=getattr(messages, "name", ""),
        )
        response = _AccountedLLM(self, node_id).chat(request)
        if response.cut_off:
            return TextReply(complete_sentences(response.text), cut_off=True)
        return TextReply(response.text, cut_off=False)


@dataclass(frozen=True)
class TextReply:
    text: str
    cut_off: bool  # the output limit stopped it; `text` then ends at its last complete sentence
