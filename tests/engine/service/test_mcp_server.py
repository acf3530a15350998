"""`thoughtmap mcp` through the `mcp` SDK's own client: over stdio (the server started by the client,
as Claude Desktop starts it) and over streamable HTTP, with the scripted fake LLM. `research` returns
a cited report, and every tool and the report resource are called."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.engine.service.test_http_api import ROOT, _env, _home
from tests.support.fixtures_corpus import bundled_corpus  # noqa: F401

QUESTION = "Which country is the Eiffel Tower in?"


def _structured(result: Any) -> Any:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        content = result.structured_content
        return content.get("result", content) if isinstance(content, dict) and set(content) == {"result"} else content
    return json.loads(result.content[0].text)


async def _every_tool(client: Client) -> dict[str, Any]:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == {"research", "run_status", "get_report", "list_runs", "steer", "list_methods", "search_corpus"}
    # The agent is told what each method is good for.
    assert "deot:" in tools["research"].description and "omnithink:" in tools["research"].description

    done = _structured(await client.call_tool("research", {"question": QUESTION, "method": "rag", "wait_seconds": 600}))
    assert done["status"] == "done", done
    assert re.search(r"\[\[1\]\]\(#source-1\)", done["report"]) and "source-1" in done["report"]
    run_id = done["run_id"]

    status = _structured(await client.call_tool("run_status", {"run_id": run_id}))
    assert status["id"] == run_id and status["status"] == "done" and status["progress"]
    report = await client.call_tool("get_report", {"run_id": run_id, "format": "md"})
    assert not report.is_error and "source-1" in report.content[0].text
    runs = _structured(await client.call_tool("list_runs", {"limit": 5}))
    assert run_id in [r["id"] for r in runs]
    methods = _structured(await client.call_tool("list_methods", {}))
    assert {"deot", "fgdip", "mtqa", "omnithink", "research"} <= {m["name"] for m in methods}
    assert all(m["good_for"] for m in methods)
    hits = _structured(await client.call_tool("search_corpus", {"query": "Eiffel Tower", "k": 3}))
    assert len(hits) == 3 and all(h["ref"] for h in hits)
    steered = _structured(await client.call_tool("steer", {"run_id": run_id, "command": "regenerate_report"}))
    assert steered["status"] == "queued", steered

    refused = await client.call_tool("research", {"question": QUESTION, "method": "nope", "wait_seconds": 1})
    assert refused.is_error and "unknown method 'nope'" in refused.content[0].text
    missing = await client.call_tool("run_status", {"run_id": "nope"})
    assert missing.is_error and "nope" in missing.content[0].text

    resource = await client.read_resource(f"thoughtmap://runs/{run_id}/report")
    assert "source-1" in resource.contents[0].text
    return done


def _run(session: Callable[[], Awaitable[None]]) -> None:
    """`anyio.run(session)` in a thread of its own: a Playwright test before this one in the same
    process leaves an event loop running in the main thread, where a second loop cannot start."""
    failures: list[BaseException] = []

    def body() -> None:
        try:
            anyio.run(session)
        except BaseException as exc:  # noqa: BLE001 - raised again in the test's thread
            failures.append(exc)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    if failures:
        raise failures[0]


def test_every_tool_over_stdio(tmp_path_factory, bundled_corpus) -> None:  # noqa: F811
    home = _home(tmp_path_factory, bundled_corpus)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "engine.cli", "mcp", "--llm", "fake"], env=_env(home), cwd=str(ROOT)
    )

    async def session() -> None:
        async with Client(params, read_timeout_seconds=600) as client:
            await _every_tool(client)

    _run(session)


def test_research_over_streamable_http(tmp_path_factory, bundled_corpus) -> None:  # noqa: F811
    home: Path = _home(tmp_path_factory, bundled_corpus)
    process = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "mcp", "--transport", "http", "--port", "0", "--llm", "fake"],
        env=_env(home),
        cwd=ROOT,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stderr is not None
        url = None
        said = []
        for line in process.stderr:
            said.append(line)
            if match := re.search(r"(http://127\.0\.0\.1:\d+/mcp)", line):
                url = match.group(1)
                break
        assert url, "".join(said)

        async def session() -> None:
            async with Client(url, read_timeout_seconds=600) as client:
                await _every_tool(client)

        _run(session)
    finally:
        process.terminate()
        process.wait(timeout=60)


@pytest.mark.parametrize("flag", [["--host", "0.0.0.0"], ["--require-token"]])
def test_mcp_over_http_off_loopback_needs_a_token(tmp_path, flag) -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "engine.cli", "mcp", "--transport", "http", "--port", "0", *flag],
        env=_env(tmp_path),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode == 2 and "needs a bearer token" in refused.stderr
