"""`LocalModelLLM`: the built-in model as an `LLM`, through the same OpenAI-compatible adapter.

What differs from a remote endpoint is handled here and only here:
- the endpoint is our own `LocalModelServer`, started on the first call;
- llama.cpp's server rejects `json_schema`, so structured calls use `json_object` + schema (its
  grammar then guarantees JSON of the schema's shape);
- it serves one request at a time, so calls queue here (one slot) rather than inside the server,
  where they would spend their timeout waiting;
- a small model may ramble until the context is full, so every call gets an output cap, and it
  strays at high temperatures, so calls that set none run at a low one;
- its speed depends on what else the machine runs, so each call's cap and timeout follow the
  speed measured on the calls before it (`decode_speed.py`);
- it loops easily, so JSON cut off by the token limit is closed and repeated sentences are
  removed (`small_models.py`);
- when the server process dies (a native crash, an OOM kill), the call that hit it starts the
  server again and is retried: the run goes on.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import TYPE_CHECKING

from engine.config import LLMSettings, LocalModelSettings
from engine.llm.decode_speed import DecodeSpeed
from engine.llm.limits import ConcurrencyLimiter
from engine.llm.local_model import LocalModelError, describe
from engine.llm.local_server import LocalModelServer
from engine.llm.protocol import ChatRequest, ChatResponse, LLMConnectionError, LLMServerError, ResponseFormat
from engine.llm.small_models import collapse_repeats, collapse_repeats_in_json

if TYPE_CHECKING:  # only for annotations: the openai SDK is imported on the first call (below)
    from engine.llm.openai_compat import OpenAICompatibleLLM

log = logging.getLogger("thoughtmap.local_model")

DEFAULT_MAX_TOKENS = 768  # when a call sets none: long enough for a section, short of a runaway
# Structured calls that set none: room for a large structured output (a node summary); a looping
# model is cut here and its JSON closed (small_models.close_truncated_json).
DEFAULT_STRUCTURED_MAX_TOKENS = 1000
# When a call sets none: a 0.5B model strays and breaks formats at llama.cpp's default of 0.8.
DEFAULT_TEMPERATURE = 0.2
RESTARTS_PER_CALL = 2
# How long a call that could not reach the server waits for a killed server to finish dying before
# it takes the error as the server's own (`LocalServer.dies_within`).
DYING_S = 2.0


class LocalModelLLM:
    def __init__(self, server: LocalModelServer, settings: LocalModelSettings, base: LLMSettings) -> None:
        self._server = server
        self._local_settings = settings
        self._base = base.model_copy(
            update={
                "api_key": None,
                "models": {},
                "structured_mode": "json_object",
                # Retries are ours (restart the server first); a CPU model needs long per-call timeouts.
                "max_retries": 1,
                "timeout_s": max(base.timeout_s, 600.0),
            }
        )
        self._limiter = ConcurrencyLimiter(1)
        self._turn = threading.Lock()
        # Tokens per second written by the model on this machine, measured on every call.
        self.speed = DecodeSpeed()
        self._lock = threading.Lock()
        self._adapter: OpenAICompatibleLLM | None = None
        self._adapter_url: str | None = None

    @property
    def server(self) -> LocalModelServer:
        return self._server

    @property
    def description(self) -> str:
        return f"{describe(self._local_settings)} (llama.cpp on this machine)"

    def model_for(self, purpose: str) -> str:
        return "local:" + (self._server.model_file.name if self._server.model_file else "built-in")

    def preflight(self) -> None:
        """Start the server now (so its errors show before a run starts)."""
        self._current_adapter()

    @property
    def in_flight(self) -> int:
        """Calls being answered by the server right now (0 or 1)."""
        return self._limiter.in_flight

    def chat(self, request: ChatRequest) -> ChatResponse:
        asked = request.max_tokens
        if asked is None:
            structured_call = request.response_format is not ResponseFormat.TEXT
            asked = DEFAULT_STRUCTURED_MAX_TOKENS if structured_call else DEFAULT_MAX_TOKENS
            request = dataclasses.replace(request, max_tokens=asked)
        if request.temperature is None:
            request = dataclasses.replace(request, temperature=DEFAULT_TEMPERATURE)
        with self._turn:  # one call at a time (the server's one slot), timed without the wait for it
            # The cap and timeout this machine's measured speed allows (engine/llm/decode_speed.py).
            limits = self.speed.limits(asked)
            request = dataclasses.replace(request, max_tokens=limits.max_tokens, timeout_s=limits.timeout_s)
            started = time.monotonic()
            response = self._chat(request)
            self.speed.record(response.usage.completion_tokens, time.monotonic() - started)
        if limits.max_tokens != asked:
            response = dataclasses.replace(response, output_cap=limits.max_tokens)
        structured = request.response_format is not ResponseFormat.TEXT
        text = collapse_repeats_in_json(response.text) if structured else collapse_repeats(response.text)
        return dataclasses.replace(response, text=text) if text != response.text else response

    def _chat(self, request: ChatRequest) -> ChatResponse:
        for attempt in range(RESTARTS_PER_CALL + 1):
            adapter, url = self._current_adapter()
            try:
                return adapter.chat(request)
            except (LLMConnectionError, LLMServerError) as exc:
                # Retry when the server this call went to is gone: dead now, or already replaced by
                # a restart that another call made while this one waited for its turn.
                replaced = self._server.base_url != url or self._server.dies_within(DYING_S)
                if not replaced:
                    raise
                if attempt == RESTARTS_PER_CALL:
                    raise LocalModelError(
                        f"the local model server kept dying ({self._server.starts} starts): {exc}",
                        hint="See THOUGHTMAP_HOME/logs/local-model.log; the machine may be out of memory.",
                    ) from exc
                log.warning("the local model server died during a call; restarting it and retrying (%s)", exc)
        raise AssertionError("unreachable")

    def _current_adapter(self) -> tuple[OpenAICompatibleLLM, str]:
        url = self._server.ensure_running()
        with self._lock:
            if self._adapter is None or url != self._adapter_url:
                # Imported here: the openai SDK is slow to import and unneeded on fake runs.
                from engine.llm.openai_compat import OpenAICompatibleLLM

                settings = self._base.model_copy(update={"base_url": url, "model": self._server.alias})
                self._adapter = OpenAICompatibleLLM(settings, self._limiter)
                self._adapter_url = url
            return self._adapter, url
