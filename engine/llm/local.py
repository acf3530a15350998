"""`LocalModelLLM`: the built-in model as an `LLM`, through the same OpenAI-compatible adapter.

What differs from a remote endpoint is handled here and only here:
- the endpoint is our own `LocalModelServer`, started on the first call;
- llama.cpp's server rejects `json_schema`, so structured calls use `json_object` + schema (its
  grammar then guarantees JSON of the schema's shape);
- it serves one request at a time, so calls queue here (one slot) rather than inside the server,
  where they would spend their timeout waiting;
- a small model may ramble until the context is full, so every call gets an output cap;
- when the server process dies (a native crash, an OOM kill), the call that hit it starts the
  server again and is retried: the run goes on.
"""

from __future__ import annotations

import dataclasses
import logging
import threading

from engine.config import LLMSettings, LocalModelSettings
from engine.llm.limits import ConcurrencyLimiter
from engine.llm.local_model import LocalModelError, describe
from engine.llm.local_server import LocalModelServer
from engine.llm.protocol import ChatRequest, ChatResponse, LLMConnectionError, LLMServerError

log = logging.getLogger("thoughtmap.local_model")

DEFAULT_MAX_TOKENS = 768  # when a call sets none: long enough for a section, short of a runaway
RESTARTS_PER_CALL = 2


class LocalModelLLM:
    def __init__(self, server: LocalModelServer, settings: LocalModelSettings, base: LLMSettings) -> None:
        self._server = server
        self._local_settings = settings
        self._base = base.model_copy(update={
            "api_key": None, "models": {}, "structured_mode": "json_object",
            # Retries are ours (restart the server first); a CPU model needs long per-call timeouts.
            "max_retries": 1, "timeout_s": max(base.timeout_s, 600.0),
        })
        self._limiter = ConcurrencyLimiter(1)
        self._lock = threading.Lock()
        self._adapter = None
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

    def chat(self, request: ChatRequest) -> ChatResponse:
        if request.max_tokens is None:
            request = dataclasses.replace(request, max_tokens=DEFAULT_MAX_TOKENS)
        for attempt in range(RESTARTS_PER_CALL + 1):
            adapter = self._current_adapter()
            try:
                return adapter.chat(request)
            except (LLMConnectionError, LLMServerError) as exc:
                if self._server.alive() or attempt == RESTARTS_PER_CALL:
                    if not self._server.alive():
                        raise LocalModelError(
                            f"the local model server kept dying ({self._server.starts} starts): {exc}",
                            hint="See THOUGHTMAP_HOME/logs/local-model.log; the machine may be out of memory.",
                        ) from exc
                    raise
                log.warning("the local model server died during a call; restarting it and retrying (%s)", exc)
        raise AssertionError("unreachable")

    def _current_adapter(self):
        url = self._server.ensure_running()
        with self._lock:
            if self._adapter is None or url != self._adapter_url:
                # Imported here: the openai SDK is slow to import and unneeded on fake runs.
                from engine.llm.openai_compat import OpenAICompatibleLLM

                settings = self._base.model_copy(update={"base_url": url, "model": self._server.alias})
                self._adapter = OpenAICompatibleLLM(settings, self._limiter)
                self._adapter_url = url
            return self._adapter
