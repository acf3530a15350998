"""The HTTP API (`thoughtmap serve`): the Python API (`engine/service/api.py`) over FastAPI, with a
server-sent event stream per run. The OpenAPI document is at `/openapi.json` (and `/docs`).

Every error is JSON, `{"error": "<what was wrong and what to do>"}`, with a 4xx status: 401 no or a
wrong token, 403 someone else's run (not shared, or shared read-only), 404 an unknown run, 409 a run whose state refuses the action, 413 a body over 1 MB,
422 bad input (the method, its parameters, the question, a command that does not apply).

Untrusted text (model output, page text) goes out as JSON strings only: the stream's `data:` lines
are JSON, one line each, so no text can forge an SSE field."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.routing import APIRoute
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.routing import Match

from engine.access import Viewer
from engine.methods.registry import DEFAULT_METHOD
from engine.reads import RunNotFound
from engine.service.api import MAX_SEARCH_K, REPORT_FORMATS, ApiError, Thoughtmap, run_view
from engine.service.feed import FeedEvent
from engine.service.tokens import check_token
from storage.tokens import TokenStore

MAX_BODY_BYTES = 1_000_000
# Event ids are database ids: anything larger is no id this server sent (and overflows SQLite).
MAX_CURSOR = 2**62
# A comment line this often keeps proxies and clients from closing a quiet stream.
KEEPALIVE_S = 15.0

MEDIA = {
    "md": "text/markdown; charset=utf-8",
    "json": "application/json",
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
}


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NewRun(_Body):
    question: str = Field(description="The question to research (at most 2,000 characters).")
    method: str = Field(DEFAULT_METHOD, description="A method name from GET /v1/methods.")
    params: dict[str, Any] = Field(
        default_factory=dict, description="The method's parameters; others keep their defaults."
    )
    llm: Literal["auto", "local", "openai", "fake"] | None = Field(
        None, description="The model; default: the server's."
    )
    search: Literal["local", "web", "both", "none"] | None = Field(None, description="Where the run searches.")
    profile: Literal["auto", "quick", "paper"] = "auto"
    max_tokens: int | None = Field(None, description="Token budget; the run stops when it is spent.")
    max_cost: float | None = Field(None, description="Cost budget in dollars.")


class Steer(_Body):
    command: str = Field(description="One of the method's commands (GET /v1/methods).")
    payload: dict[str, Any] = Field(default_factory=dict, description='The command\'s payload, e.g. {"node_id": 3}.')


class Resume(_Body):
    max_tokens: int | None = None
    max_cost: float | None = None


class Share(_Body):
    user: str | None = Field(None, description="The email of a person who has signed in; null: everyone signed in.")


class SearchRequest(_Body):
    query: str
    k: int = Field(10, ge=1, le=MAX_SEARCH_K)


@dataclass(frozen=True)
class _Door:
    tm: Thoughtmap
    tokens: TokenStore
    require_token: bool


def _caller(request: Request, authorization: Annotated[str | None, Header()] = None) -> Thoughtmap:
    """The API serving whoever the request's bearer token belongs to (without tokens: the local user)."""
    door: _Door = request.app.state.door
    if not door.require_token:
        return door.tm  # loopback, single-user: served as before, whatever the header says
    viewer = token_viewer(door.tm, door.tokens, authorization)
    if viewer is None:
        raise _Unauthorised()
    return door.tm.as_viewer(viewer)


Caller = Annotated[Thoughtmap, Depends(_caller)]


def sse(event: FeedEvent) -> str:
    return f"id: {event.cursor}\nevent: {event.kind}\ndata: {json.dumps(event.data, ensure_ascii=False)}\n\n"


def _readable(errors: list[Any], path: str) -> str:
    """Pydantic's errors about a request, in words that say what to change."""
    parts = []
    for error in errors:
        kind = error.get("type", "")
        where = ".".join(str(p) for p in error.get("loc", ()) if p != "body")
        if kind == "json_invalid":
            position = error.get("loc", ("body", "?"))[-1]
            parts.append(
                f"the body is not valid JSON (at character {position}): {error.get('ctx', {}).get('error', '')}"
                "; check quotes (double only) and commas (none after the last item)"
            )
        elif kind == "model_attributes_type" and not where:
            parts.append("the body must be a JSON object; send it with 'Content-Type: application/json'")
        elif kind == "extra_forbidden":
            hint = '; a command\'s own fields go under "payload"' if path.endswith("/commands") else ""
            parts.append(f"'{where}' is not a field of this request{hint}")
        else:
            parts.append(f"{where}: {error.get('msg', 'invalid')}" if where else str(error.get("msg", "invalid")))
    return "; ".join(parts) or "the request is not valid"


LOOPBACK_NAMES = ["127.0.0.1", "localhost", "::1", "[::1]"]


def create_app(tm: Thoughtmap, *, require_token: bool = False) -> FastAPI:
    """The API over `tm`. `require_token`: every route but /v1/health needs a bearer token. Without
    one, only requests addressed to a loopback name are served: a web page that rebinds its own
    domain to 127.0.0.1 (DNS rebinding) gets 400, not the runs."""
    # FastAPI's /docs and /redoc load their scripts from a CDN: offline they are blank pages. These
    # serve the same Swagger UI and ReDoc from the package's own copies (/static-offline-docs/...).
    app = FastAPIOffline(
        title="Thoughtmap",
        version="1",
        description="Deep, open-ended research with LLMs: start runs, stream their events, steer "
        "them, get cited reports.",
    )
    tokens = TokenStore(tm.services.db)
    if not require_token:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=LOOPBACK_NAMES)

    sign_in = tm.services.settings.team.sign_in
    if sign_in:
        require_token = True  # each request is someone's: the token says whose
    app.state.door = _Door(tm, tokens, require_token)

    @app.exception_handler(ApiError)
    async def api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=exc.status)

    @app.exception_handler(RunNotFound)
    async def run_not_found(_request: Request, exc: RunNotFound) -> JSONResponse:
        # A run deleted between a request's first read and a later one.
        return JSONResponse({"error": str(exc)}, status_code=404)

    @app.exception_handler(_Unauthorised)
    async def unauthorised(_request: Request, _exc: _Unauthorised) -> JSONResponse:
        return JSONResponse({"error": UNAUTHORISED}, status_code=401, headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": _readable(list(exc.errors()), request.url.path)}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # An unknown path or a method a path does not take: in the API's own shape, saying where to look.
        text = {
            404: f"there is no {request.url.path}; the API's paths are listed at /openapi.json",
            405: f"{request.url.path} does not take {request.method}; see /openapi.json",
        }.get(exc.status_code, str(exc.detail))
        return JSONResponse({"error": text}, status_code=exc.status_code, headers=exc.headers)

    @app.middleware("http")
    async def known_query(request: Request, call_next: Any) -> Response:
        # A misspelled query parameter (?fmt=pdf) is refused, not silently ignored.
        route = next(
            (r for r in app.routes if isinstance(r, APIRoute) and r.matches(request.scope)[0] == Match.FULL), None
        )
        if route is not None:
            known = {p.alias for p in route.dependant.query_params}
            unknown = sorted(set(request.query_params) - known)
            if unknown:
                allowed = ", ".join(sorted(known)) or "none"
                return JSONResponse(
                    {"error": f"unknown query parameter {', '.join(map(repr, unknown))}; this path takes: {allowed}"},
                    status_code=422,
                )
        response: Response = await call_next(request)
        return response

    @app.middleware("http")
    async def limit_body(request: Request, call_next: Any) -> Response:
        length = request.headers.get("content-length")
        if length is None and "chunked" in request.headers.get("transfer-encoding", "").lower():
            # A body of unknown length could be any size: its length must be said first.
            return JSONResponse(
                {"error": f"send the body with a Content-Length (at most {MAX_BODY_BYTES:,} bytes), not chunked"},
                status_code=411,
            )
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            return JSONResponse({"error": f"the request body is over {MAX_BODY_BYTES:,} bytes"}, status_code=413)
        response: Response = await call_next(request)
        return response

    @app.get("/v1/health")
    def health() -> dict[str, Any]:
        return {"ok": True}

    @app.get("/v1/methods")
    def methods(api: Caller) -> list[dict[str, Any]]:
        return [info.__dict__ for info in api.methods()]

    @app.post("/v1/search")
    def search(api: Caller, body: SearchRequest) -> list[dict[str, Any]]:
        return api.search(body.query, body.k)

    @app.post("/v1/runs", status_code=201)
    def create_run(api: Caller, body: NewRun) -> dict[str, Any]:
        run = api.start(
            body.question,
            body.method,
            body.params,
            llm=body.llm,
            search=body.search,
            profile=body.profile,
            max_tokens=body.max_tokens,
            max_cost=body.max_cost,
        )
        return run_view(run)

    @app.get("/v1/runs")
    def list_runs(
        api: Caller,
        status: str | None = None,
        method: str | None = None,
        text: str | None = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        offset: Annotated[int, Query(ge=0)] = 0,
    ) -> list[dict[str, Any]]:
        return [run_view(run) for run in api.runs(status=status, method=method, text=text, limit=limit, offset=offset)]

    @app.get("/v1/runs/{run_id}")
    def get_run(api: Caller, run_id: str, nodes: bool = False) -> dict[str, Any]:
        """The run, its progress, and with ?nodes=true each node's id (the ids commands name)."""
        return api.status(run_id, nodes=nodes)

    @app.get("/v1/runs/{run_id}/graph")
    def graph(api: Caller, run_id: str) -> dict[str, Any]:
        return api.graph(run_id)

    @app.get(
        "/v1/runs/{run_id}/events",
        response_class=StreamingResponse,
        responses={
            200: {
                "content": {"text/event-stream": {}},
                "description": "Server-sent events: log, node, edge, status, end. Resume with "
                "the Last-Event-ID header (or ?after=).",
            }
        },
    )
    async def events(
        api: Caller,
        run_id: str,
        after: Annotated[int | None, Query(ge=0, le=MAX_CURSOR)] = None,
        last_event_id: Annotated[str | None, Header()] = None,
        authorization: Annotated[str | None, Header()] = None,
    ) -> StreamingResponse:
        cursor = after
        if last_event_id is not None:
            value = last_event_id.strip()
            if not value.isdigit() or int(value) > MAX_CURSOR:
                raise _BadCursor(last_event_id)
            cursor = int(value)
        await run_in_threadpool(api.get, run_id)  # 404 before the stream starts

        async def stream() -> AsyncIterator[str]:
            # Subscribed here, not before the response: a client gone before the body starts leaves
            # nothing registered.
            loop = asyncio.get_running_loop()
            wake = asyncio.Event()

            def woken() -> None:  # called on the watch's thread
                loop.call_soon_threadsafe(wake.set)

            def still_allowed() -> bool:
                # A token revoked, its person no longer allowed, or the run unshared: the stream ends.
                if require_token and token_viewer(tm, tokens, authorization) is None:
                    return False
                try:
                    api.get(run_id)
                except (ApiError, RunNotFound):
                    return False
                return True

            subscription = await run_in_threadpool(api.feed.subscribe, run_id, cursor, woken)
            checked = loop.time()
            try:
                while True:
                    wake.clear()
                    if loop.time() - checked >= KEEPALIVE_S:  # busy or quiet, asked as often
                        if not await run_in_threadpool(still_allowed):
                            return
                        checked = loop.time()
                    for event in subscription.poll():
                        yield sse(event)
                        if event.kind == "end":
                            return
                    if subscription.has_new():
                        continue
                    try:
                        await asyncio.wait_for(wake.wait(), KEEPALIVE_S)
                    except TimeoutError:
                        yield ": keepalive\n\n"
            finally:
                subscription.close()

        return StreamingResponse(
            stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        )

    @app.exception_handler(_BadCursor)
    async def bad_cursor(_request: Request, exc: _BadCursor) -> JSONResponse:
        return JSONResponse(
            {
                "error": f"Last-Event-ID must be the id of an event this stream sent (a whole "
                f"number), not {exc.value[:40]!r}"
            },
            status_code=422,
        )

    @app.post("/v1/runs/{run_id}/commands", status_code=202)
    def steer(api: Caller, run_id: str, body: Steer) -> dict[str, Any]:
        command = api.steer(run_id, body.command, body.payload)
        return {"id": command.id, "command": command.kind, "payload": command.payload, "status": command.status}

    @app.post("/v1/runs/{run_id}/pause")
    def pause(api: Caller, run_id: str) -> dict[str, Any]:
        return run_view(api.pause(run_id))

    @app.post("/v1/runs/{run_id}/resume")
    def resume(api: Caller, run_id: str, body: Resume | None = None) -> dict[str, Any]:
        body = body or Resume()
        return run_view(api.resume(run_id, max_tokens=body.max_tokens, max_cost=body.max_cost))

    @app.post("/v1/runs/{run_id}/stop")
    def stop(api: Caller, run_id: str) -> dict[str, Any]:
        return run_view(api.stop(run_id))

    @app.get("/v1/runs/{run_id}/report", responses={200: {"content": {MEDIA[f]: {} for f in REPORT_FORMATS}}})
    def report(api: Caller, run_id: str, format: Literal["md", "json", "pdf", "docx"] = "md") -> Response:
        body = api.report(run_id, format)
        if isinstance(body, dict):
            return JSONResponse(body)
        headers = {}
        if isinstance(body, bytes):
            headers["Content-Disposition"] = f'attachment; filename="thoughtmap-{run_id}.{format}"'
        return Response(body, media_type=MEDIA[format], headers=headers)

    @app.delete("/v1/runs/{run_id}", status_code=204)
    def delete(api: Caller, run_id: str) -> Response:
        api.delete(run_id)
        return Response(status_code=204)

    @app.get("/v1/me")
    def me(api: Caller) -> dict[str, Any]:
        """Whom the token belongs to, and whether people sign in (multi-user mode)."""
        viewer = api.viewer
        return {"name": viewer.name, "email": viewer.email, "admin": viewer.is_admin, "sign_in": sign_in}

    @app.get("/v1/runs/{run_id}/shares")
    def shares(api: Caller, run_id: str) -> list[str]:
        """Whom the run is shared with, read-only: emails, or "everyone" (everyone signed in)."""
        return api.shares(run_id)

    @app.post("/v1/runs/{run_id}/shares")
    def share(api: Caller, run_id: str, body: Share) -> list[str]:
        return api.share(run_id, body.user)

    @app.delete("/v1/runs/{run_id}/shares")
    def unshare(api: Caller, run_id: str, user: str | None = None) -> list[str]:
        """Stop sharing with `user` (an email), or with everyone when no user is named."""
        return api.unshare(run_id, user)

    return app


class _Unauthorised(Exception):
    pass


class _BadCursor(Exception):
    def __init__(self, value: str) -> None:
        super().__init__(value)
        self.value = value


UNAUTHORISED = (
    "a valid bearer token is needed: send 'Authorization: Bearer <token>' (make one with: thoughtmap token create NAME)"
)


def token_viewer(tm: Thoughtmap, tokens: TokenStore, authorization: str | None) -> Viewer | None:
    """Whom a request's bearer token belongs to; None for no token, a wrong or revoked one, or one
    whose person may no longer sign in."""
    scheme, _, presented = (authorization or "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = check_token(tokens, presented.strip())
    return None if token is None else tm.services.access.token_viewer(token)


class BearerGuard:
    """An ASGI wrapper refusing any HTTP request without a valid bearer token of a person who may
    still sign in (the MCP server's streamable HTTP app, which has no dependency system of ours)."""

    def __init__(self, app: Any, tm: Thoughtmap) -> None:
        self.app = app
        self.tm = tm
        self.tokens = TokenStore(tm.services.db)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            header = dict(scope.get("headers") or ()).get(b"authorization", b"").decode("latin-1")
            if await run_in_threadpool(token_viewer, self.tm, self.tokens, header) is None:
                response = JSONResponse(
                    {"error": UNAUTHORISED}, status_code=401, headers={"WWW-Authenticate": "Bearer"}
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
