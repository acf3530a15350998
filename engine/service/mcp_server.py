"""`thoughtmap mcp`: Thoughtmap as an MCP server (the official `mcp` SDK), on stdio or streamable
HTTP. Its tools are the Python API's functions (`engine/service/api.py`):

- `research`: start a run and wait up to `wait_seconds` for it; the cited report, or the run's id
  to ask about later;
- `run_status`, `get_report`, `list_runs`, `steer`, `list_methods`, `search_corpus`.

Each run's report is also a resource, `thoughtmap://runs/{run_id}/report`. The tool descriptions
list every method with what it is good for (each method's `good_for`), so an agent can choose.
A bad request is a tool error whose text says what was wrong and what to do."""

# No `from __future__ import annotations`: the tools' annotations name this module's locals (the
# method names in `research`'s description), which the SDK could not resolve from strings.
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from engine.methods.registry import DEFAULT_METHOD
from engine.service.api import ApiError, Thoughtmap, run_view
from engine.service.http import UNAUTHORISED, token_viewer
from storage.tokens import TokenStore

T = TypeVar("T")

MAX_WAIT_S = 3600.0
WAIT_SLICE_S = 2.0


def methods_guide(tm: Thoughtmap) -> str:
    return "\n".join(f"- {info.name}: {info.good_for or info.summary}" for info in tm.methods())


def build_mcp(tm: Thoughtmap) -> MCPServer:
    guide = methods_guide(tm)
    names = sorted(tm.services.methods)
    mcp: MCPServer = MCPServer(
        name="thoughtmap",
        title="Thoughtmap",
        instructions="Deep research with LLM reasoning methods over a local corpus and the web. Start with "
        "`research`; it returns a Markdown report whose [n] markers cite the numbered sources at "
        "its end. Methods:\n" + guide,
    )

    tokens = TokenStore(tm.services.db)

    async def caller(ctx: Context) -> Thoughtmap:
        """The API serving whom the request's bearer token belongs to (over HTTP: the token was
        checked before the request got here, and is checked again here); on stdio, `tm`'s person."""
        authorization = (ctx.headers or {}).get("authorization")
        if authorization is None or not tm.services.settings.team.sign_in:
            return tm  # stdio, or single-user mode: one person, whatever the header says
        viewer = await anyio.to_thread.run_sync(token_viewer, tm, tokens, authorization)
        if viewer is None:
            raise ToolError(UNAUTHORISED)
        return tm.as_viewer(viewer)

    async def call(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            return await anyio.to_thread.run_sync(lambda: function(*args, **kwargs))
        except ApiError as exc:
            raise ToolError(str(exc)) from exc

    @mcp.tool(
        description="Research a question with one of Thoughtmap's methods and return its cited report "
        "(Markdown, [n] markers citing numbered sources). Waits up to wait_seconds; a run "
        "still going then is left running, and its run_id can be given to run_status and "
        "get_report later. Methods (method=...):\n" + guide
    )
    async def research(
        ctx: Context,
        question: Annotated[str, Field(description="The question to research (at most 2,000 characters).")],
        method: Annotated[
            str, Field(description="One of: " + ", ".join(names) + ". See the list above.")
        ] = DEFAULT_METHOD,
        params: Annotated[
            dict[str, Any] | None,
            Field(
                description="The method's parameters by name (list_methods gives each, with its default and "
                "range); others keep their defaults."
            ),
        ] = None,
        wait_seconds: Annotated[
            float, Field(description="How long to wait for the report, 0 to 3600; a run still going then keeps going.")
        ] = 120.0,
        search: Annotated[
            Literal["local", "web", "both", "none"] | None,
            Field(
                description="Where sources come from: the local corpus, the web, both, or none; default: the server's."
            ),
        ] = None,
        llm: Annotated[
            Literal["auto", "local", "openai", "fake"] | None, Field(description="The model; default: the server's.")
        ] = None,
        max_cost: Annotated[
            float | None, Field(description="A cost budget in dollars; the run stops cleanly when it is spent.")
        ] = None,
    ) -> dict[str, Any]:
        api = await caller(ctx)
        if not 0 <= wait_seconds <= MAX_WAIT_S:
            raise ToolError(f"wait_seconds must be from 0 to {MAX_WAIT_S:.0f} (got {wait_seconds})")
        run = await call(api.start, question, method, params, search=search, llm=llm, max_cost=max_cost)
        # Waited for in slices: a worker thread is held a few seconds at a time, not for the whole
        # wait, and a cancelled call stops waiting at the next slice.
        deadline = anyio.current_time() + wait_seconds
        while True:
            final = await call(api.wait, run.id, max(0.0, min(WAIT_SLICE_S, deadline - anyio.current_time())))
            if final.status not in ("queued", "running", "paused") or anyio.current_time() >= deadline:
                break
        outcome: dict[str, Any] = {"run_id": final.id, "status": final.status}
        if final.status in ("queued", "running", "paused"):
            outcome["note"] = (
                f"still {final.status} after {wait_seconds:.0f} s; ask run_status or get_report "
                f"with run_id {final.id} later"
            )
            return outcome
        if final.stop_reason:
            outcome["stop_reason"] = final.stop_reason
        if final.error:
            outcome["error"] = final.error
        outcome["report"] = await call(api.report, final.id, "md")
        return outcome

    @mcp.tool(
        description="A run's status and progress (status, nodes by status, LLM calls, tokens, cost) and "
        "its nodes: id, parent_id, kind, label, status. steer names nodes by these ids."
    )
    async def run_status(ctx: Context, run_id: str) -> dict[str, Any]:
        api = await caller(ctx)
        return await call(api.status, run_id, nodes=True)

    @mcp.tool(
        description="A run's report: md (Markdown with numbered, resolving sources) or json (its "
        "structure: sections, claims, sources). A run still going gives its partial report."
    )
    async def get_report(ctx: Context, run_id: str, format: Literal["md", "json"] = "md") -> str | dict[str, Any]:
        api = await caller(ctx)
        report = await call(api.report, run_id, format)
        assert not isinstance(report, bytes)
        return report

    @mcp.tool(
        description="Stored runs, newest first: id, question, method, status, usage. Filter by status "
        "(queued, running, paused, done, failed, stopped, interrupted), method or text."
    )
    async def list_runs(
        ctx: Context, status: str | None = None, method: str | None = None, text: str | None = None, limit: int = 20
    ) -> list[dict[str, Any]]:
        api = await caller(ctx)
        runs = await call(api.runs, status=status, method=method, text=text, limit=limit)
        return [run_view(run) for run in runs]

    @mcp.tool(
        description="Steer a run with one of its method's commands (list_methods gives each method's "
        "commands and their payload schemas), e.g. command='ask', payload={'node_id': <a node id "
        "from run_status>, 'question': '...'}, or 'expand', 'deepen', 'prune' on a node. A "
        "finished run is reopened to apply it."
    )
    async def steer(ctx: Context, run_id: str, command: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        api = await caller(ctx)
        queued = await call(api.steer, run_id, command, payload)
        return {
            "command_id": queued.id,
            "command": queued.kind,
            "status": queued.status,
            "note": "queued: the run applies it at its next step; run_status shows the run's progress",
        }

    @mcp.tool(
        description="The methods: name, what each is good for, its parameters (name, type, default, "
        "help) and its steering commands."
    )
    async def list_methods(ctx: Context) -> list[dict[str, Any]]:
        api = await caller(ctx)
        infos = await call(api.methods)
        return [
            {
                "name": i.name,
                "title": i.title,
                "good_for": i.good_for,
                "summary": i.summary,
                "params": i.params,
                "params_schema": i.params_schema,
                "commands": [{k: c[k] for k in ("name", "help", "targets_node", "payload_schema")} for c in i.commands],
            }
            for i in infos
        ]

    @mcp.tool(
        description="Search the local corpus (the bundled datasets and ingested files) as the methods "
        "search it: title, reference, snippet and score of the top k passages."
    )
    async def search_corpus(ctx: Context, query: str, k: int = 10) -> list[dict[str, Any]]:
        api = await caller(ctx)
        return await call(api.search, query, k)

    @mcp.resource(
        "thoughtmap://runs/{run_id}/report",
        name="report",
        mime_type="text/markdown",
        description="A run's report in Markdown, with numbered sources.",
    )
    async def report_resource(ctx: Context, run_id: str) -> str:
        api = await caller(ctx)
        report = await call(api.report, run_id, "md")
        assert isinstance(report, str)
        return report

    return mcp
