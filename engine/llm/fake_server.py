"""A real OpenAI-compatible HTTP server on 127.0.0.1, answering with a `FakeLLM`.

For tests and benchmarks of the real adapter (`OpenAICompatibleLLM` with the real openai client):

    with FakeOpenAIServer() as server:
        server.enqueue(status=429, headers={"Retry-After": "1"})   # the next chat request fails
        llm = OpenAICompatibleLLM(LLMSettings(base_url=server.base_url), limiter)

Routes: POST /v1/chat/completions, POST /v1/embeddings, GET /v1/models. Embeddings are deterministic:
each text's words hashed into `EMBEDDING_DIMS` dimensions and normalised (`fake_embedding`), so texts
sharing words are similar; `embedding_requests` records their bodies. Scripted replies (`enqueue`) are consumed one
per chat request, in order, before the default responder. A `response_format` of type json_schema
or json_object (with a `schema`, llama.cpp style) is handed to the responder as the request's JSON
schema, so structured requests get schema-valid answers. The `X-Thoughtmap-Prompt` header (the
prompt's name, sent by `OpenAICompatibleLLM`) becomes the request's `prompt`, so `FakeLLM` rules
and `calls_for` select by prompt name over HTTP too. (Re-asks of a structured answer arrive as
attempt 1: the attempt number does not travel over HTTP.)

Also runnable: `python -m engine.llm.fake_server --port 0 --latency 0.05` prints the base URL and
serves until killed (with `--stats`, then prints what it served as one JSON line).
"""

from __future__ import annotations

import argparse
import base64
import collections
import contextlib
import hashlib
import importlib
import json
import math
import random
import re
import signal
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from engine.llm.fake import FakeLLM
from engine.llm.protocol import PROMPT_HEADER, ChatRequest, Message, ResponseFormat, TokenLogprob

_HOST = "127.0.0.1"  # never anything else: this server must not be reachable from outside
EMBEDDING_DIMS = 64


def fake_embedding(text: str, dims: int = EMBEDDING_DIMS) -> list[float]:
    """A deterministic embedding: each word (lower-cased, its first five letters) hashed into one
    of `dims` dimensions, counted, then normalised to length 1 (all zeros for a text of no words)."""
    vector = [0.0] * dims
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        digest = hashlib.blake2b(word[:5].encode(), digest_size=4).digest()
        vector[int.from_bytes(digest, "big") % dims] += 1.0
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector


_ROLES = {"system", "user", "assistant"}


@dataclass(frozen=True)
class ScriptedReply:
    """One canned answer to the next chat request."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None  # JSON value or raw str; None gives an OpenAI-style error body for >= 400
    delay_s: float = 0.0
    content: str | None = None  # raw assistant content for a 200 (e.g. malformed JSON)


@dataclass(frozen=True)
class Chaos:
    """A flaky endpoint: each chat request independently fails in one of these ways, from a seeded
    random generator (reproducible across runs). Shares of all requests, 0..1; the rest are normal."""

    rate_limited: float = 0.0  # HTTP 429 with a short Retry-After
    server_error: float = 0.0  # HTTP 500 with a generic message (nothing about formats)
    malformed: float = 0.0  # HTTP 200 whose content is cut-off JSON
    hang: float = 0.0  # no answer for `hang_s` (past the client's timeout)
    hang_s: float = 5.0
    seed: int = 0

    def draw(self, rng: random.Random) -> str:
        roll = rng.random()
        for kind, share in (
            ("rate_limited", self.rate_limited),
            ("server_error", self.server_error),
            ("malformed", self.malformed),
            ("hang", self.hang),
        ):
            if roll < share:
                return kind
            roll -= share
        return "ok"


class FakeOpenAIServer:
    """OpenAI-compatible server on 127.0.0.1 in a background thread; a context manager.

    `reject_json_schema=True` mimics llama.cpp server: HTTP 500 for response_format json_schema.
    `api_key`, when set, makes every route answer 401 unless `Authorization: Bearer <api_key>`.
    `include_usage=False` mimics servers that omit `usage`.
    `chaos` makes it flaky (see `Chaos`); `chaos_counts` says what it injected.
    """

    def __init__(
        self,
        responder: FakeLLM | None = None,
        latency_s: float = 0.0,
        *,
        port: int = 0,
        reject_json_schema: bool = False,
        api_key: str | None = None,
        include_usage: bool = True,
        chaos: Chaos | None = None,
        cap_output: bool = False,
        keep_alive: bool = False,
    ) -> None:
        self.responder = responder if responder is not None else FakeLLM()
        # HTTP/1.1 with persistent connections, as a real endpoint speaks (a benchmark's: a new TCP
        # connection per call is a cost no real client pays); HTTP/1.0, one connection a request, by
        # default, so a test's stopped server refuses at once.
        self.keep_alive = keep_alive
        self._connections: set[socket.socket] = set()
        self.connections_accepted = 0
        self.latency_s = latency_s
        self.reject_json_schema = reject_json_schema
        self.api_key = api_key
        self.include_usage = include_usage
        self.chaos = chaos
        # Stop writing at the request's max_tokens, as a real endpoint does (the text cut at 4
        # characters a token, finish_reason "length"). Off by default: scripted answers are written
        # whole whatever the cap, so a test of a method's shape does not hang on its caps. A test of
        # spending turns it on: an answer past its cap is output no real endpoint would bill.
        self.cap_output = cap_output
        self._chaos_rng = random.Random(chaos.seed if chaos else 0)
        self.chaos_counts: collections.Counter[str] = collections.Counter()
        self._port = port
        self._lock = threading.Lock()
        self._script: collections.deque[ScriptedReply] = collections.deque()
        self._requests: list[dict[str, Any]] = []
        self._embedding_requests: list[dict[str, Any]] = []
        self._authorizations: list[str] = []  # every POST's Authorization header ("" when none)
        self._in_flight = 0
        self._max_in_flight = 0
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeOpenAIServer:
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = ThreadingHTTPServer((_HOST, self._port), _make_handler(self))
        httpd.daemon_threads = True
        # Do not wait for handlers sleeping on a scripted delay when stopping.
        httpd.block_on_close = False
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name=f"fake-openai-{self.port}",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._stopping.set()  # wakes handlers sleeping on a delay
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:  # idle persistent connections end with the server, as a real one's do
            connections, self._connections = list(self._connections), set()
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the fake server is not running")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://{_HOST}:{self.port}/v1"

    # ------------------------------------------------------------------ scripting and records

    def enqueue(
        self,
        status: int = 200,
        headers: dict[str, str] | None = None,
        body: Any = None,
        *,
        delay_s: float = 0.0,
        content: str | None = None,
    ) -> None:
        """Script the reply to the next chat request not yet scripted."""
        with self._lock:
            self._script.append(ScriptedReply(status, dict(headers or {}), body, delay_s, content))

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the chat requests received, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def authorizations(self) -> list[str]:
        """The Authorization header of every POST received, in arrival order (what key was sent)."""
        with self._lock:
            return list(self._authorizations)

    @property
    def embedding_requests(self) -> list[dict[str, Any]]:
        """The JSON bodies of the embeddings requests received, in arrival order."""
        with self._lock:
            return list(self._embedding_requests)

    def _embeddings(self, body: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
        with self._lock:
            self._embedding_requests.append(body)
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return 400, {}, _error(400, "input must be a string or a list of strings", "invalid_request_error")
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for index, text in enumerate(texts):
            vector = fake_embedding(text)
            embedding: Any = (
                base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode() if as_base64 else vector
            )
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        tokens = sum(max(1, len(t) // 4) for t in texts)
        return (
            200,
            {},
            {
                "object": "list",
                "data": data,
                "model": body.get("model") or "fake",
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    def count_chat_requests(self) -> int:
        with self._lock:
            return len(self._requests)

    @property
    def max_in_flight(self) -> int:
        """The most chat requests this server was handling at the same time."""
        with self._lock:
            return self._max_in_flight

    # ------------------------------------------------------------------ used by the handler

    def _record_start(self, body: dict[str, Any]) -> ScriptedReply | None:
        with self._lock:
            self._requests.append(body)
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            return self._script.popleft() if self._script else None

    def _record_end(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _wait(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)

    def _authorized(self, header: str | None) -> bool:
        return self.api_key is None or header == f"Bearer {self.api_key}"

    def _chat(self, body: dict[str, Any], prompt: str = "") -> tuple[int, dict[str, str], Any]:
        """(status, headers, JSON body) for a chat request; `prompt` is its `X-Thoughtmap-Prompt`.
        Every answer takes at least `latency_s` in all: the time the fake spends writing it counts
        toward that, so a benchmark's latency is the model's, not the model's plus the fake's."""
        started = time.monotonic()
        scripted = self._record_start(body)
        try:
            answer = self._answer(body, prompt, scripted)
            self._wait(self.latency_s - (time.monotonic() - started))
            return answer
        finally:
            self._record_end()

    def _answer(
        self, body: dict[str, Any], prompt: str, scripted: ScriptedReply | None
    ) -> tuple[int, dict[str, str], Any]:
        if scripted is not None:
            self._wait(scripted.delay_s)
            if scripted.status != 200:
                return scripted.status, scripted.headers, _error_body(scripted)
            if scripted.content is not None:
                return 200, scripted.headers, self._completion(body, scripted.content)
            if scripted.body is not None:
                return 200, scripted.headers, scripted.body
        if self.chaos is not None:
            with self._lock:
                kind = self.chaos.draw(self._chaos_rng)
                self.chaos_counts[kind] += 1
            if kind == "rate_limited":
                return 429, {"Retry-After": "0.2"}, _error(429, "Rate limit reached, slow down", "rate_limit_error")
            if kind == "server_error":
                return 500, {}, _error(500, "The server had an error while processing your request", "server_error")
            if kind == "hang":
                self._wait(self.chaos.hang_s)
            if kind == "malformed":
                return 200, {}, self._completion(body, '{"cut off": "in the mid')
        response_format = body.get("response_format") or {}
        if self.reject_json_schema and response_format.get("type") == "json_schema":
            # What llama.cpp server answers to a response_format it does not know.
            return (
                500,
                {},
                _error(
                    500,
                    'response_format type must be one of "text" or "json_object", but got: json_schema',
                    "server_error",
                ),
            )
        try:
            request = _to_chat_request(body, prompt)
        except (TypeError, ValueError, KeyError) as exc:
            return 400, {}, _error(400, f"invalid request: {exc}", "invalid_request_error")
        try:
            response = self.responder.chat(request)
        except Exception as exc:  # a scripted exception in the responder
            return 500, {}, _error(500, f"{type(exc).__name__}: {exc}", "server_error")
        return 200, {}, self._completion(body, response.text, response.logprobs, cut_off=response.cut_off)

    def _completion(
        self,
        body: dict[str, Any],
        text: str,
        logprobs: tuple[TokenLogprob, ...] | None = None,
        *,
        cut_off: bool = False,
    ) -> dict[str, Any]:
        with self._lock:
            number = len(self._requests)
        prompt_chars = sum(len(str(m.get("content") or "")) for m in body.get("messages", []))
        cap = body.get("max_tokens") or body.get("max_completion_tokens")
        if self.cap_output and isinstance(cap, int) and len(text) // 4 > cap:
            text, cut_off = text[: cap * 4], True
        completion: dict[str, Any] = {
            "id": f"chatcmpl-fake-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or "fake",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "length" if cut_off else "stop",
                    # OpenAI's shape: each token with its log probability and top alternatives.
                    "logprobs": None
                    if not (logprobs and body.get("logprobs"))
                    else {
                        "content": [
                            {
                                "token": t.token,
                                "logprob": t.logprob,
                                "bytes": None,
                                "top_logprobs": [{"token": a, "logprob": lp, "bytes": None} for a, lp in t.top],
                            }
                            for t in logprobs
                        ]
                    },
                }
            ],
        }
        if self.include_usage:
            prompt_tokens = max(1, prompt_chars // 4)
            completion_tokens = max(1, len(text) // 4)
            completion["usage"] = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            }
        return completion


def _error(status: int, message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": str(status)}}


def _error_body(reply: ScriptedReply) -> Any:
    if reply.body is not None:
        return reply.body
    kind = (
        "rate_limit_error"
        if reply.status == 429
        else ("server_error" if reply.status >= 500 else "invalid_request_error")
    )
    return _error(reply.status, f"scripted HTTP {reply.status}", kind)


def _to_chat_request(body: dict[str, Any], prompt: str = "") -> ChatRequest:
    messages = []
    for message in body["messages"]:
        role = message.get("role", "user")
        content = message.get("content") or ""
        if isinstance(content, list):  # content parts: keep the text ones
            content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
        messages.append(Message(role if role in _ROLES else "user", str(content)))
    response_format = body.get("response_format") or {}
    kind = response_format.get("type")
    schema: dict[str, Any] | None = None
    name = "output"
    if kind == "json_schema":
        spec = response_format.get("json_schema") or {}
        schema, name = spec.get("schema"), spec.get("name") or name
        wanted = ResponseFormat.JSON_SCHEMA
    elif kind == "json_object":
        schema = response_format.get("schema")
        wanted = ResponseFormat.JSON_OBJECT
    else:
        wanted = ResponseFormat.TEXT
    return ChatRequest(
        messages=tuple(messages),
        response_format=wanted,
        json_schema=schema,
        schema_name=name,
        max_tokens=body.get("max_tokens") or body.get("max_completion_tokens"),
        temperature=body.get("temperature"),
        prompt=prompt,
        top_logprobs=int(body.get("top_logprobs") or 1) if body.get("logprobs") else 0,
    )


def _make_handler(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "FakeOpenAI/1.0"
        protocol_version = "HTTP/1.1" if server.keep_alive else "HTTP/1.0"
        # Headers and body go out as two writes: on a persistent connection, Nagle's algorithm would
        # hold the body until the client's delayed ACK of the headers (40 ms). Real servers set it too.
        disable_nagle_algorithm = server.keep_alive

        def setup(self) -> None:
            super().setup()
            with server._lock:
                server._connections.add(self.connection)
                server.connections_accepted += 1

        def finish(self) -> None:
            with server._lock:
                server._connections.discard(self.connection)
            super().finish()

        def do_GET(self) -> None:  # noqa: N802 (http.server naming)
            if not server._authorized(self.headers.get("Authorization")):
                self._send(401, {}, _error(401, "invalid API key", "invalid_request_error"))
            elif self.path.rstrip("/") == "/v1/models":
                model = {"id": "fake", "object": "model", "created": 0, "owned_by": "thoughtmap"}
                self._send(200, {}, {"object": "list", "data": [model]})
            else:
                self._send(404, {}, _error(404, f"no route {self.path}", "invalid_request_error"))

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            with server._lock:
                server._authorizations.append(self.headers.get("Authorization") or "")
            if not server._authorized(self.headers.get("Authorization")):
                self._send(401, {}, _error(401, "invalid API key", "invalid_request_error"))
                return
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/v1/embeddings"):
                self._send(404, {}, _error(404, f"no route {self.path}", "invalid_request_error"))
                return
            try:
                body = json.loads(raw or b"{}")
                if not isinstance(body, dict):
                    raise ValueError("the body must be a JSON object")
            except ValueError as exc:
                error = _error(400, f"invalid JSON body: {exc}", "invalid_request_error")
                self._send(400, {}, error)
                return
            if self.path.rstrip("/") == "/v1/embeddings":
                self._send(*server._embeddings(body))
                return
            self._send(*server._chat(body, self.headers.get(PROMPT_HEADER) or ""))

        def _send(self, status: int, headers: dict[str, str], body: Any) -> None:
            payload = (body if isinstance(body, str) else json.dumps(body)).encode()
            try:
                self.send_response(status)
                content_type = "text/plain" if isinstance(body, str) else "application/json"
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test); nothing to tell it

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test and benchmark output clean

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve a fake OpenAI-compatible API on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument(
        "--latency", type=float, default=0.0, help="seconds each answer takes at least (writing it included)"
    )
    parser.add_argument("--reject-json-schema", action="store_true", help="behave like llama.cpp")
    parser.add_argument("--api-key", default=None, help="require this bearer key")
    parser.add_argument(
        "--load",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first, so its prompts' own offline answers are known (a method's "
        "prompts module registers them, e.g. engine.methods.research.prompts); repeatable",
    )
    parser.add_argument(
        "--keep-alive",
        action="store_true",
        help="HTTP/1.1 with persistent connections, as a real endpoint (default: a connection per request)",
    )
    parser.add_argument(
        "--stats",
        action="store_true",
        help="when stopped, print one JSON line: the chat requests answered and the most in flight "
        "at once (a benchmark's endpoint in its own process)",
    )
    args = parser.parse_args(argv)
    for module in args.load:  # a server in its own process has not imported the methods that call it
        importlib.import_module(module)
    server = FakeOpenAIServer(
        latency_s=args.latency,
        port=args.port,
        reject_json_schema=args.reject_json_schema,
        api_key=args.api_key,
        keep_alive=args.keep_alive,
    )
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    with server:
        print(server.base_url, flush=True)
        while not stop.wait(0.5):
            pass
    if args.stats:
        print(
            json.dumps({"chat_requests": server.count_chat_requests(), "max_in_flight": server.max_in_flight}),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
