"""`OpenAICompatibleLLM`: the one adapter for every OpenAI-compatible endpoint.

OpenAI, Ollama, vLLM, llama.cpp server, LM Studio... all speak `POST {base_url}/chat/completions`.
This adapter owns what differs between them and what the openai client should not decide for us:

- retries (429, 408, 409, 5xx, connection errors, timeouts) with Retry-After / exponential
  backoff and full jitter, sleeping *outside* the shared concurrency limiter;
- the structured-output mode, with "auto" downgrading json_schema -> json_object -> prompted only
  when a server's answer proves it does not support a response_format (never on 429/5xx/time-outs),
  remembered per endpoint and model in the injected `StructuredModeMemory`;
- typed, actionable errors (see `engine.llm.protocol`) that name the endpoint and never the key, nor
  credentials written into the endpoint URL (`engine.redact`).
"""

from __future__ import annotations

import email.utils
import math
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import openai

from engine.config import LLMSettings
from engine.config_values import url_problem
from engine.llm.limits import ConcurrencyLimiter
from engine.llm.protocol import (
    PROMPT_HEADER,
    ChatRequest,
    ChatResponse,
    LLMAuthError,
    LLMConnectionError,
    LLMError,
    LLMRateLimitError,
    LLMRequestError,
    LLMServerError,
    LLMTimeoutError,
    ResponseFormat,
    TokenLogprob,
    Usage,
)
from engine.llm.structured_modes import MODE_LADDER, StructuredModeMemory, proves_mode_unsupported
from engine.redact import redact_secrets, redact_url
from engine.text import storable_text

RETRYABLE_STATUSES = frozenset({408, 409, 429})  # plus every 5xx

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 30.0
SERVER_DELAY_CAP_S = 60.0

_NO_KEY_PLACEHOLDER = "not-needed"  # local servers ignore the key, the openai client wants one
_LEADING_THINK = re.compile(r"^\s*<think>.*?</think>\s*", re.DOTALL)
_FORMAT_HINT = (
    "If this endpoint cannot do structured output, choose the json_object or prompted "
    "structured mode in Settings (THOUGHTMAP_STRUCTURED_MODE)."
)


# ====================================================================== the adapter


class OpenAICompatibleLLM:
    """An `LLM` talking to any OpenAI-compatible chat completions endpoint.

    `limiter` is shared by all adapters of the process; it is held only while an HTTP request is
    in flight. `modes` is what auto mode learned per endpoint and model (shared by the process's
    adapters through `Services`; a private one when not given). `sleep` and `rng` are injectable so
    tests can observe backoff without waiting.
    """

    def __init__(
        self,
        settings: LLMSettings,
        limiter: ConcurrencyLimiter,
        *,
        modes: StructuredModeMemory | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self._settings = settings
        self._limiter = limiter
        self._sleep = sleep
        self._rng = rng if rng is not None else random.Random()
        self._rng_lock = threading.Lock()  # random.Random is not documented as thread-safe
        self._base_url = settings.base_url.rstrip("/")
        self._display_url = redact_url(self._base_url)  # what messages show: no credentials
        # A URL typed in the app's Settings is checked here as OPENAI_BASE_URL is when read: the
        # HTTP client would raise its own error for a port like `abc` (a traceback).
        if problem := url_problem(self._base_url):
            raise LLMConnectionError(
                f"the LLM endpoint URL {self._display_url} cannot be used: {problem}",
                hint="Correct the endpoint URL (the Settings page, or OPENAI_BASE_URL).",
            )
        self._client = openai.OpenAI(
            api_key=settings.api_key or _NO_KEY_PLACEHOLDER,
            base_url=self._base_url,
            timeout=settings.timeout_s,
            max_retries=0,  # retries are ours: they must sleep outside the limiter
        )
        self.modes = modes if modes is not None else StructuredModeMemory()

    # ------------------------------------------------------------------ LLM protocol

    @property
    def description(self) -> str:
        extra = ", ".join(
            f"{purpose}: {model}"
            for purpose, model in sorted(self._settings.models.items())
            if model != self._settings.model
        )
        models = f"{self._settings.model} ({extra})" if extra else self._settings.model
        return f"{models} at {self._display_url}"

    def model_for(self, purpose: str) -> str:
        return self._settings.model_for(purpose)

    @property
    def structured_mode(self) -> ResponseFormat | None:
        """The mode auto mode settled on for the default model, or None (it starts from json_schema)."""
        return self.modes.mode_for(self._display_url, self._settings.model)

    def chat(self, request: ChatRequest) -> ChatResponse:
        model = self.model_for(request.purpose)
        modes = self._modes_to_try(request, model)
        attempts = 0
        rejection = ""
        for position, mode in enumerate(modes):
            can_downgrade = position < len(modes) - 1
            try:
                outcome = self._send_with_retries(
                    self._request_kwargs(request, model, mode),
                    give_up_on_format_rejection=can_downgrade,
                )
            except _FormatRejected as rejected:
                attempts += rejected.attempts
                rejection = rejected.reason
                continue
            attempts += outcome.attempts
            if position > 0:
                # Only a mode that worked after a proven rejection is remembered.
                self.modes.remember(self._display_url, model, mode, rejection)
            return self._to_response(request, outcome, model, mode, attempts)
        raise AssertionError("unreachable: the last mode never raises _FormatRejected")

    # ------------------------------------------------------------------ preflight

    def preflight(self, timeout_s: float = 5.0) -> None:
        """Raise a typed error unless the endpoint answers and accepts the key (GET /models).

        404/405 still prove the server is there (some servers have no /models route).
        """
        try:
            self._client.with_options(timeout=timeout_s).models.list()
        except openai.APIStatusError as exc:
            if exc.status_code in (404, 405, 429):
                return
            raise self._status_error(exc, attempts=1) from None
        except openai.APITimeoutError:
            raise self._timeout_error(timeout_s, attempts=1) from None
        except openai.APIConnectionError as exc:
            raise self._connection_error(exc, attempts=1) from None
        except openai.APIResponseValidationError:
            return  # it answered, just not in OpenAI's exact shape

    # ------------------------------------------------------------------ structured modes

    def _modes_to_try(self, request: ChatRequest, model: str) -> tuple[ResponseFormat, ...]:
        """The modes to try in order; only auto mode has more than one."""
        if request.response_format in (ResponseFormat.TEXT, ResponseFormat.PROMPTED):
            return (request.response_format,)
        wanted = MODE_LADDER.index(request.response_format)
        if request.json_schema is None:
            # Without a schema there is nothing for json_schema to carry; JSON mode still helps.
            wanted = max(wanted, MODE_LADDER.index(ResponseFormat.JSON_OBJECT))
        configured = self._settings.structured_mode
        if configured != "auto":
            # An explicit mode is the user's decision: never downgrade behind their back.
            return (MODE_LADDER[max(wanted, MODE_LADDER.index(ResponseFormat(configured)))],)
        learned = self.modes.mode_for(self._display_url, model)
        start = wanted if learned is None else max(wanted, MODE_LADDER.index(learned))
        return MODE_LADDER[start:]

    def _request_kwargs(self, request: ChatRequest, model: str, mode: ResponseFormat) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        }
        if request.prompt:
            # Which prompt this is, for logs and the fake server's scripts: a header, never the body.
            kwargs["extra_headers"] = {PROMPT_HEADER: _header_value(request.prompt)}
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.max_tokens is not None:
            # OpenAI's newer models only accept max_completion_tokens; many local servers only
            # know max_tokens.
            key = "max_completion_tokens" if self._settings.is_default_openai else "max_tokens"
            kwargs[key] = request.max_tokens
        if request.timeout_s is not None:
            kwargs["timeout"] = request.timeout_s
        if request.top_logprobs > 0:
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = request.top_logprobs
        if mode is ResponseFormat.JSON_SCHEMA:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": sanitize_schema_name(request.schema_name),
                    "schema": request.json_schema,
                    "strict": False,
                },
            }
        elif mode is ResponseFormat.JSON_OBJECT:
            # llama.cpp server constrains generation with the "schema" key; OpenAI ignores it.
            kwargs["response_format"] = {"type": "json_object"}
            if request.json_schema is not None:
                kwargs["response_format"]["schema"] = request.json_schema
        return kwargs

    # ------------------------------------------------------------------ HTTP with retries

    def _send_with_retries(self, kwargs: dict[str, Any], *, give_up_on_format_rejection: bool) -> _Outcome:
        carries_format = "response_format" in kwargs
        # A call's own timeout (`ChatRequest.timeout_s`, the built-in model's) or the endpoint's.
        kwargs = {**kwargs, "timeout": kwargs.get("timeout") or self._settings.timeout_s}
        timeout_s = kwargs["timeout"]
        attempt = 0
        slept_out_429 = False
        while True:
            attempt += 1
            started = time.monotonic()
            try:
                # A call that has just slept out its own 429 goes on; the others wait for the quiet.
                self._limiter.acquire(wait_cool=not slept_out_429)
                try:
                    completion = self._client.chat.completions.create(**kwargs)
                finally:
                    self._limiter.release()
                return _Outcome(completion, time.monotonic() - started, attempt)
            except openai.APIStatusError as exc:
                status = exc.status_code
                message = _server_message(exc)
                # Only an answer about the format itself moves auto mode down: a rate limit, an
                # overloaded server or a bare 500 says nothing about what the server supports.
                if give_up_on_format_rejection and carries_format and proves_mode_unsupported(status, message):
                    raise _FormatRejected(attempt, self._redact(message)) from exc
                if not _retryable_status(status) or attempt > self._settings.max_retries:
                    raise self._status_error(exc, attempts=attempt) from None
                delay = self._retry_delay(exc.response.headers, attempt)
                if status == 429:
                    # Every call sharing the limiter (every worker's, in queue mode) waits too.
                    self._limiter.cool_down(delay)
                    slept_out_429 = True
            except openai.APITimeoutError:
                if attempt > self._settings.max_retries:
                    raise self._timeout_error(timeout_s, attempt) from None
                delay = self._retry_delay({}, attempt)
            except openai.APIConnectionError as exc:
                if attempt > self._settings.max_retries or _is_bad_url(exc):
                    raise self._connection_error(exc, attempt) from None
                delay = self._retry_delay({}, attempt)
            except openai.APIResponseValidationError as exc:
                raise LLMServerError(
                    f"the LLM endpoint at {self._display_url} sent a response that is not an "
                    f"OpenAI chat completion: {self._redact(str(exc))}"
                ) from None
            # Sleep with the limiter released, so other calls can use the slot meanwhile.
            self._sleep(delay)

    def _retry_delay(self, headers: Mapping[str, str], attempt: int) -> float:
        with self._rng_lock:
            return retry_delay(headers, attempt, self._rng)

    def _to_response(
        self,
        request: ChatRequest,
        outcome: _Outcome,
        model: str,
        mode: ResponseFormat,
        attempts: int,
    ) -> ChatResponse:
        completion = outcome.completion
        try:
            text = completion.choices[0].message.content or ""
        except (AttributeError, IndexError, TypeError):
            raise LLMServerError(
                f"the LLM endpoint at {self._display_url} did not answer with a chat completion",
                hint="Check that the endpoint URL (the Settings page, or OPENAI_BASE_URL) points at an "
                "OpenAI-compatible API (usually ending in /v1).",
            ) from None
        # Reasoning models served locally (Qwen3, DeepSeek-R1) may prefix their thoughts.
        text = _LEADING_THINK.sub("", text, count=1)
        usage = completion.usage
        if usage is not None and (usage.prompt_tokens or usage.completion_tokens):
            tokens = Usage(usage.prompt_tokens or 0, usage.completion_tokens or 0)
        else:
            # Some servers omit usage; an estimate keeps budgets meaningful.
            prompt_chars = sum(len(m.content) for m in request.messages)
            tokens = Usage(math.ceil(prompt_chars / 4), math.ceil(len(text) / 4))
        return ChatResponse(
            text=storable_text(text),  # a lone surrogate or NUL must not fail the run's writes
            model=getattr(completion, "model", None) or model,
            usage=tokens,
            latency_s=outcome.latency_s,
            attempts=attempts,
            response_format=mode,
            logprobs=_logprobs(completion) if request.top_logprobs > 0 else None,
            cut_off=getattr(completion.choices[0], "finish_reason", None) == "length",
        )

    # ------------------------------------------------------------------ errors

    def _status_error(self, exc: openai.APIStatusError, attempts: int) -> LLMError:
        status = exc.status_code
        detail = self._redact(_server_message(exc))
        where = f"the LLM endpoint at {self._display_url}"
        after = f" after {attempts} attempts" if attempts > 1 else ""
        if status in (401, 403):
            return LLMAuthError(
                f"{where} rejected the API key (HTTP {status}): {detail}",
                hint="Set OPENAI_API_KEY to a key valid for this endpoint (local servers usually accept any key).",
            )
        if status == 429:
            return LLMRateLimitError(
                f"{where} is still rate limiting (HTTP 429){after}: {detail}",
                hint="Lower THOUGHTMAP_LLM_CONCURRENCY, wait a little, or check your quota.",
            )
        if status >= 500 or status in (408, 409):
            return LLMServerError(
                f"{where} kept failing (HTTP {status}){after}: {detail}",
                hint="The server may be overloaded or down; try again later.",
            )
        hint = _FORMAT_HINT if proves_mode_unsupported(status, detail) else ""
        if status == 404:
            hint = (
                f"Check the model name (the Settings page, or THOUGHTMAP_MODEL; now {self._settings.model}) "
                "and that the endpoint URL (the Settings page, or OPENAI_BASE_URL) ends with the API prefix "
                "(usually /v1)."
            )
        return LLMRequestError(f"{where} rejected the request (HTTP {status}): {detail}", hint=hint)

    def _timeout_error(self, timeout_s: float, attempts: int) -> LLMTimeoutError:
        tries = f" ({attempts} attempts)" if attempts > 1 else ""
        return LLMTimeoutError(
            f"the LLM endpoint at {self._display_url} did not answer within {timeout_s:g} s{tries}",
            hint="Raise THOUGHTMAP_LLM_TIMEOUT, lower THOUGHTMAP_LLM_CONCURRENCY, or use a smaller model.",
        )

    def _connection_error(self, exc: openai.APIConnectionError, attempts: int) -> LLMConnectionError:
        tries = f", {attempts} attempts" if attempts > 1 else ""
        return LLMConnectionError(
            f"cannot reach the LLM endpoint at {self._display_url} ({self._redact(_connection_reason(exc))}{tries})",
            hint="Check the endpoint URL (the Settings page, or OPENAI_BASE_URL), or start the server "
            "(e.g. `ollama serve`, "
            "`llama-server`, `vllm serve`).",
        )

    def _redact(self, text: str) -> str:
        """Servers sometimes echo (part of) the key or the URL in error messages; never pass them on."""
        text = text.replace(self._base_url, self._display_url)
        return redact_secrets(text, known=(self._settings.api_key or "",))


@dataclass(frozen=True)
class _Outcome:
    completion: Any
    latency_s: float
    attempts: int


class _FormatRejected(Exception):
    """Auto mode: the server refused this response_format; the caller tries the next mode."""

    def __init__(self, attempts: int, reason: str) -> None:
        super().__init__("response_format rejected")
        self.attempts = attempts
        self.reason = reason


# ====================================================================== helpers


def missing_key_error(settings: LLMSettings) -> LLMAuthError | None:
    """The error to show before any call when OpenAI itself is targeted without a key."""
    if settings.is_default_openai and not settings.api_key:
        return LLMAuthError(
            f"OPENAI_API_KEY is not set, so the OpenAI API at {redact_url(settings.base_url)} cannot be used.",
            hint="Export OPENAI_API_KEY=<your key>, or point OPENAI_BASE_URL at a local "
            "OpenAI-compatible server (e.g. http://localhost:11434/v1 for Ollama), or use "
            "--llm fake for an offline run.",
        )
    return None


def _header_value(name: str) -> str:
    """A prompt name as a safe header value: visible ASCII only, bounded."""
    return re.sub(r"[^A-Za-z0-9._:*-]", "_", name)[:128]


def sanitize_schema_name(name: str) -> str:
    """OpenAI requires json_schema names matching [a-zA-Z0-9_-]{1,64}."""
    cleaned = re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64]
    return cleaned or "output"


def retry_delay(
    headers: Mapping[str, str],
    attempt: int,
    rng: random.Random,
    *,
    now: datetime | None = None,
) -> float:
    """Seconds to wait before retry number `attempt` (1-based).

    The server's `retry-after-ms` or `Retry-After` (seconds or HTTP-date) wins, capped at 60 s;
    otherwise exponential backoff (0.5 s doubling, capped at 30 s) with full jitter.
    """
    server_delay = _server_requested_delay(headers, now)
    if server_delay is not None:
        return min(max(server_delay, 0.0), SERVER_DELAY_CAP_S)
    ceiling = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (attempt - 1))
    return rng.uniform(0.0, ceiling)


def _server_requested_delay(headers: Mapping[str, str], now: datetime | None) -> float | None:
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis:
        try:
            value = float(millis) / 1000
            if math.isfinite(value):
                return value
        except ValueError:
            pass
    after = lowered.get("retry-after")
    if not after:
        return None
    try:
        value = float(after)
        return value if math.isfinite(value) else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(after)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - (now or datetime.now(UTC))).total_seconds()


def _retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUSES or status >= 500


def _server_message(exc: openai.APIStatusError) -> str:
    """The human part of an error body: OpenAI's {"error": {"message"}}, or the raw text."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(message := inner.get("message"), str):
            return message
        if isinstance(inner, str):
            return inner
        if isinstance(detail := body.get("detail"), str):  # FastAPI-style servers (vLLM)
            return detail
        if isinstance(message := body.get("message"), str):
            return message
    if isinstance(body, str) and body.strip():
        return body.strip()[:300]
    return f"HTTP {exc.status_code}"


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _is_bad_url(exc: BaseException) -> bool:
    """A malformed base URL fails the same way on every retry."""
    return any(type(e).__name__ in ("UnsupportedProtocol", "InvalidURL") for e in _causes(exc))


def _connection_reason(exc: BaseException) -> str:
    """A short reason from the exception chain: 'connection refused', 'host not found'..."""
    for current in _causes(exc):
        if isinstance(current, ConnectionRefusedError):
            return "connection refused"
        if isinstance(current, ConnectionResetError):
            return "connection reset"
        name = type(current).__name__
        if "gaierror" in name or "Name or service not known" in str(current):
            return "host not found"
        if "SSL" in name or "CERTIFICATE" in str(current).upper():
            return f"TLS error: {current}"
        if name in ("UnsupportedProtocol", "InvalidURL"):
            return "the URL must start with http:// or https://"
    text = str(exc.__cause__ or exc).strip()
    return text.lower() if text else "connection failed"


def _logprobs(completion: Any) -> tuple[TokenLogprob, ...] | None:
    """The answer's tokens with their log probabilities (OpenAI's `choices[0].logprobs.content`);
    None when the server sent none (many ignore the request)."""
    try:
        content = completion.choices[0].logprobs.content
    except (AttributeError, IndexError, TypeError):
        return None
    if not content:
        return None
    tokens = []
    for item in content:
        top = tuple((str(t.token), float(t.logprob)) for t in (getattr(item, "top_logprobs", None) or ()))
        tokens.append(TokenLogprob(str(item.token), float(item.logprob), top))
    return tuple(tokens)
