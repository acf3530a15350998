"""The LLM seam: one small protocol that every backend (OpenAI-compatible server, fake) implements.

Methods never talk to a backend directly; they go through `engine.llm.structured` (typed outputs)
and `engine.llm.accounting.RunLLM` (usage, budget), both of which only need `LLM.chat`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal, Protocol, runtime_checkable

Role = Literal["system", "user", "assistant"]

# The HTTP header that carries `ChatRequest.prompt` (a header is safe on every OpenAI-compatible
# server, which ignores what it does not know; the body is not).
PROMPT_HEADER = "X-Thoughtmap-Prompt"


@dataclass(frozen=True)
class Message:
    role: Role
    content: str


class ResponseFormat(str, Enum):
    """How a structured answer is requested from the server.

    - ``json_schema``: OpenAI strict structured outputs (`response_format={"type": "json_schema"}`).
    - ``json_object``: JSON mode plus the schema (llama.cpp server, which rejects ``json_schema``).
    - ``prompted``: plain text; the schema is in the prompt and JSON is extracted tolerantly.
    - ``text``: free text, no JSON expected.
    """

    JSON_SCHEMA = "json_schema"
    JSON_OBJECT = "json_object"
    PROMPTED = "prompted"
    TEXT = "text"


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[Message, ...]
    # Logical role of the call ("default", "judge", "summarizer", ...); the backend maps it to a model.
    purpose: str = "default"
    response_format: ResponseFormat = ResponseFormat.TEXT
    json_schema: dict[str, Any] | None = None
    schema_name: str = "output"
    max_tokens: int | None = None
    temperature: float | None = None
    # The name of the prompt the messages were rendered from ("deot.controller"; "" when they were
    # not rendered from a `Prompt`): what the fake LLM and the tests select requests by. Sent over
    # HTTP as the `X-Thoughtmap-Prompt` header, never in the body.
    prompt: str = ""
    # 1 for the first try; 2, 3... for the re-asks of a structured answer that did not validate
    # (same prompt, the invalid answer and the error appended).
    attempt: int = 1
    # > 0 asks for the log probabilities of the answer's tokens, with this many alternatives per
    # token (OpenAI's `logprobs` + `top_logprobs`); a server that does not return them answers
    # without, and `ChatResponse.logprobs` is None.
    top_logprobs: int = 0
    # Seconds this call may take; None: the endpoint's configured timeout. The built-in model sets it
    # from its measured speed (`engine/llm/decode_speed.py`): a slow machine is not a failed call.
    timeout_s: float | None = None


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token with its log probability and the `top` alternatives the server sent
    ((token, log probability) pairs, the most likely first)."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class ChatResponse:
    text: str
    model: str
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    attempts: int = 1
    # The format the server actually honoured (auto mode may have downgraded it).
    response_format: ResponseFormat = ResponseFormat.TEXT
    # The answer's tokens with their log probabilities, when asked (`top_logprobs`) and returned.
    logprobs: tuple[TokenLogprob, ...] | None = None
    # The answer stopped at the output-token limit (finish_reason "length"), not where the model ended it.
    cut_off: bool = False
    # The output cap the call ran under, when the LLM chose a lower one than asked (the built-in
    # model on a slow machine: `decode_speed.py`); None: the request's own.
    output_cap: int | None = None


@runtime_checkable
class LLM(Protocol):
    """Anything that can answer a chat request. Must be safe to call from several threads."""

    @property
    def description(self) -> str:
        """Human-readable 'what am I running on' (model and endpoint, never a key)."""
        ...

    def model_for(self, purpose: str) -> str:
        """The model name a call with this purpose goes to."""
        ...

    def chat(self, request: ChatRequest) -> ChatResponse: ...


# ---------------------------------------------------------------- typed errors


class LLMError(Exception):
    """Base class of every error the LLM layer raises. `user_message` says what to do."""

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint

    @property
    def user_message(self) -> str:
        return f"{self} {self.hint}".strip()


class LLMConnectionError(LLMError):
    """The endpoint could not be reached (refused, DNS, TLS) after retries."""


class LLMTimeoutError(LLMError):
    """The endpoint did not answer within the per-call timeout after retries."""


class LLMRateLimitError(LLMError):
    """Still rate limited (429) after the retries."""


class LLMServerError(LLMError):
    """The server kept failing (5xx) after the retries."""


class LLMAuthError(LLMError):
    """Missing or rejected API key (401/403)."""


class LLMRequestError(LLMError):
    """The server rejected the request itself (400/404/422: bad model name, bad parameter)."""


class StructuredOutputError(LLMError):
    """The model's answer could not be parsed into the expected pydantic model after re-asking."""

    def __init__(
        self, message: str, *, last_output: str = "", attempts: int = 0, cut_off: bool = False, copied: bool = False
    ) -> None:
        super().__init__(message, hint="Try a stronger model or the 'prompted' structured mode.")
        self.last_output = last_output
        self.attempts = attempts
        # The last answer was cut off by the output limit: the model was answering but ran out of room
        # (a slow machine's lowered cap), not unable to answer in the form; a smaller form may do.
        self.cut_off = cut_off
        # The last answer fit the form but repeated the instructions in it (a small model's habit):
        # a plainer ask, without the form, may get the content itself.
        self.copied = copied


class BudgetExceeded(LLMError):
    """The run's token or cost budget is used up; the run stops cleanly and keeps its results.
    `dimension`: which budget, "tokens" or "cost"."""

    def __init__(self, message: str, *, hint: str = "", dimension: str = "tokens") -> None:
        super().__init__(message, hint=hint)
        self.dimension = dimension
