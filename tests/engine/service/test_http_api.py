"""`thoughtmap serve` as a client uses it: the real server process on 127.0.0.1, a real HTTP client
(httpx), the scripted fake LLM slowed to 0.05 s a call so a run is still going when it is paused or
stopped. Create, stream, steer, pause, resume, stop, report, delete; a dropped stream resumed by
Last-Event-ID; every bad input; tokens."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.fixtures_corpus import bundled_corpus  # noqa: F401

ROOT = Path(__file__).resolve().parents[3]
QUESTION = "What caused the decline of the Roman Empire?"
# A failsafe only: every wait below ends on what the server says, long before this.
PATIENCE_S = 300.0


@dataclass
class Server:
    url: str
    home: Path
    process: subprocess.Popen[str]

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=120)


def _env(home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "THOUGHTMAP_HOME": str(home),
        "THOUGHTMAP_LLM": "fake",
        "THOUGHTMAP_FAKE_LATENCY": "0.05",
        "THOUGHTMAP_BUILTIN_EMBEDDINGS": "0",
        "PYTHONPATH": str(ROOT),
    }


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args],
        env=_env(home),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=PATIENCE_S,
    )


def _start(home: Path, *args: str) -> Server:
    process = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "serve", "--port", "0", *args],
        env=_env(home),
        cwd=ROOT,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    said = []
    assert process.stderr is not None
    for line in process.stderr:  # the server says where it listens once the socket is bound
        said.append(line)
        if match := re.search(r"API on (http://127\.0\.0\.1:\d+)/v1", line):
            return Server(match.group(1), home, process)
    raise AssertionError("the server ended without listening:\n" + "".join(said))


def _stop(server: Server) -> None:
    server.process.terminate()
    server.process.wait(timeout=60)


def _home(tmp_path_factory: pytest.TempPathFactory, corpus) -> Path:
    home = tmp_path_factory.mktemp("serve-home")
    corpus.store.backup_to(home / "corpus.sqlite3")  # no index build in the server
    return home


@pytest.fixture(scope="module")
def server(tmp_path_factory, bundled_corpus) -> Iterator[Server]:  # noqa: F811
    started = _start(_home(tmp_path_factory, bundled_corpus))
    yield started
    _stop(started)


def _events(
    client: httpx.Client, run_id: str, *, last_event_id: str | None = None, stop_after_logs: int | None = None
) -> list[tuple[str, str, dict]]:
    """(id, event, data) of the run's stream until `end`, or until `stop_after_logs` log events (the
    connection is then dropped)."""
    headers = {"Last-Event-ID": last_event_id} if last_event_id is not None else {}
    got: list[tuple[str, str, dict]] = []
    logs = 0
    with client.stream("GET", f"/v1/runs/{run_id}/events", headers=headers) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        fields: dict[str, str] = {}
        for line in response.iter_lines():
            if line.startswith(":"):
                continue
            if line:
                name, _, value = line.partition(": ")
                fields[name] = value
                continue
            if not fields:
                continue
            got.append((fields["id"], fields["event"], json.loads(fields["data"])))
            fields = {}
            if got[-1][1] == "log":
                logs += 1
            if got[-1][1] == "end" or (stop_after_logs is not None and logs >= stop_after_logs):
                break
    return got


def _create(client: httpx.Client, **body) -> dict:
    response = client.post(
        "/v1/runs", json={"question": QUESTION, "method": "deot", "params": {"max_nodes": 4}, **body}
    )
    assert response.status_code == 201, response.text
    return response.json()


def _wait_status(client: httpx.Client, run_id: str, wanted: set[str]) -> dict:
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        run = client.get(f"/v1/runs/{run_id}").json()
        if run["status"] in wanted:
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} never became {wanted}: {run['status']}")


def test_a_run_is_created_streamed_reported_listed_and_deleted(server: Server) -> None:
    with server.client() as client:
        run = _create(client)
        assert run["method"] == "deot" and run["params"]["max_nodes"] == 4 and run["status"] in ("queued", "running")
        events = _events(client, run["id"])
        kinds = [kind for _id, kind, _data in events]
        assert kinds[-1] == "end" and events[-1][2]["status"] == "done"
        assert {"log", "node", "status"} <= set(kinds)
        lines = [data["text"] for _id, kind, data in events if kind == "log"]
        assert lines[0] == "the run started" and any("finished" in line for line in lines)
        # The stream's last word on each node is the stored node.
        last: dict[int, dict] = {}
        for _id, kind, data in events:
            if kind == "node":
                last[data["id"]] = data
        graph = client.get(f"/v1/runs/{run['id']}/graph").json()
        assert {n["id"]: n["status"] for n in graph["nodes"]} == {i: n["status"] for i, n in last.items()}
        assert len(graph["nodes"]) >= 4 and graph["sources"]

        status = client.get(f"/v1/runs/{run['id']}").json()
        assert status["status"] == "done" and status["progress"].get("done", 0) >= 4 and status["llm_calls"] > 0

        md = client.get(f"/v1/runs/{run['id']}/report", params={"format": "md"})
        assert md.status_code == 200 and md.headers["content-type"].startswith("text/markdown")
        cited = set(re.findall(r"\[\[(\d+)\]\]\(#source-\1\)", md.text))
        assert cited and all(f'id="source-{n}"' in md.text or f"source-{n}" in md.text for n in cited)
        report = client.get(f"/v1/runs/{run['id']}/report", params={"format": "json"}).json()
        assert report["run"]["id"] == run["id"] if "run" in report else report
        pdf = client.get(f"/v1/runs/{run['id']}/report", params={"format": "pdf"})
        assert pdf.content.startswith(b"%PDF") and "attachment" in pdf.headers["content-disposition"]
        docx = client.get(f"/v1/runs/{run['id']}/report", params={"format": "docx"})
        assert docx.content.startswith(b"PK")

        assert run["id"] in [r["id"] for r in client.get("/v1/runs").json()]
        assert run["id"] in [
            r["id"] for r in client.get("/v1/runs", params={"status": "done", "method": "deot"}).json()
        ]
        assert client.delete(f"/v1/runs/{run['id']}").status_code == 204
        assert client.get(f"/v1/runs/{run['id']}").status_code == 404
        assert run["id"] not in [r["id"] for r in client.get("/v1/runs").json()]


def test_a_run_is_paused_steered_resumed_and_another_stopped(server: Server) -> None:
    with server.client() as client:
        run = _create(client, params={"max_nodes": 6})
        paused = client.post(f"/v1/runs/{run['id']}/pause")
        assert paused.status_code == 200, paused.text
        _wait_status(client, run["id"], {"paused"})
        root = next(n for n in client.get(f"/v1/runs/{run['id']}/graph").json()["nodes"] if n["parent_id"] is None)
        queued = client.post(
            f"/v1/runs/{run['id']}/commands",
            json={
                "command": "ask",
                "payload": {"node_id": root["id"], "question": "How did the plague of 165 matter?"},
            },
        )
        assert queued.status_code == 202, queued.text
        assert queued.json()["command"] == "ask" and queued.json()["status"] == "queued"
        resumed = client.post(f"/v1/runs/{run['id']}/resume")
        assert resumed.status_code == 200, resumed.text
        events = _events(client, run["id"])
        assert events[-1][2]["status"] == "done"
        steer_lines = [d for _i, k, d in events if k == "log" and d["kind"] == "steer"]
        assert any(d["data"].get("phase") == "applied" and d["data"].get("command") == "ask" for d in steer_lines)
        labels = [n["label"] for n in client.get(f"/v1/runs/{run['id']}/graph").json()["nodes"]]
        assert "How did the plague of 165 matter?" in labels

        other = _create(client, params={"max_nodes": 6})
        stopped = client.post(f"/v1/runs/{other['id']}/stop")
        assert stopped.status_code == 200, stopped.text
        ended = _events(client, other["id"])
        assert ended[-1][2]["status"] == "stopped"
        again = client.post(f"/v1/runs/{other['id']}/stop")
        assert again.status_code == 409 and "already stopped" in again.json()["error"]


def test_a_dropped_stream_resumed_by_last_event_id_misses_no_event(server: Server) -> None:
    with server.client() as client:
        run = _create(client)
        first = _events(client, run["id"], stop_after_logs=5)
        assert first[-1][1] == "log"
        rest = _events(client, run["id"], last_event_id=first[-1][0])
        assert rest[-1][1] == "end"
        # Everything stored, read again from the start once the run ended.
        full = _events(client, run["id"])
        ids = [d["id"] for _i, k, d in first + rest if k == "log"]
        assert ids == [d["id"] for _i, k, d in full if k == "log"]
        assert len(ids) == len(set(ids)) > 5
        # And every node as stored.
        last: dict[int, dict] = {}
        for _id, kind, data in first + rest:
            if kind == "node":
                last[data["id"]] = data
        stored = {
            n["id"]: {k: n[k] for k in ("status", "label", "content")}
            for n in client.get(f"/v1/runs/{run['id']}/graph").json()["nodes"]
        }
        assert {i: {k: n[k] for k in ("status", "label", "content")} for i, n in last.items()} == stored


def test_bad_input_gets_a_clear_4xx_and_stores_nothing(server: Server) -> None:
    with server.client() as client:
        before = len(client.get("/v1/runs", params={"limit": 500}).json())

        def refused(response: httpx.Response, status: int, words: str) -> None:
            assert response.status_code == status, response.text
            assert words in response.json()["error"], response.json()

        refused(client.post("/v1/runs", json={"question": QUESTION, "method": "nope"}), 422, "unknown method 'nope'")
        refused(
            client.post("/v1/runs", json={"question": QUESTION, "params": {"max_nodez": 3}}),
            422,
            "unknown parameter 'max_nodez'",
        )
        refused(client.post("/v1/runs", json={"question": QUESTION, "params": {"max_nodes": -1}}), 422, "max_nodes")
        refused(client.post("/v1/runs", json={"question": "   "}), 422, "question")
        refused(client.post("/v1/runs", json={"question": "x" * 2001}), 422, "2,000")
        refused(client.post("/v1/runs", json={"question": QUESTION, "max_cost": -2}), 422, "max_cost")
        refused(client.post("/v1/runs", json={"question": QUESTION, "colour": "red"}), 422, "colour")
        refused(client.post("/v1/runs", json={"question": QUESTION, "llm": "gpt"}), 422, "llm")
        refused(
            client.post("/v1/runs", content=b"{", headers={"content-type": "application/json"}), 422, "not valid JSON"
        )
        refused(
            client.post("/v1/runs", content=b'{"question": "Why?",}', headers={"content-type": "application/json"}),
            422,
            "commas",
        )
        refused(client.get("/v1/nowhere"), 404, "/openapi.json")
        refused(client.put("/v1/runs"), 405, "does not take PUT")
        refused(
            client.post("/v1/runs", content=b"x" * 1_000_001, headers={"content-type": "application/json"}),
            413,
            "over 1,000,000 bytes",
        )
        chunks = iter([b'{"question": "', b"Why?", b'"}'])
        refused(
            client.post("/v1/runs", content=chunks, headers={"content-type": "application/json"}), 411, "Content-Length"
        )
        assert len(client.get("/v1/runs", params={"limit": 500}).json()) == before  # nothing stored half-way

        for method, path in (
            ("GET", "/v1/runs/nope"),
            ("GET", "/v1/runs/nope/graph"),
            ("GET", "/v1/runs/nope/events"),
            ("GET", "/v1/runs/nope/report"),
            ("POST", "/v1/runs/nope/pause"),
            ("POST", "/v1/runs/nope/resume"),
            ("POST", "/v1/runs/nope/stop"),
            ("DELETE", "/v1/runs/nope"),
        ):
            refused(client.request(method, path), 404, "nope")
        refused(client.post("/v1/runs/nope/commands", json={"command": "ask"}), 404, "nope")

        run = _create(client, params={"max_nodes": 2})
        refused(client.post(f"/v1/runs/{run['id']}/commands", json={"command": "fly"}), 422, "no command 'fly'")
        refused(
            client.post(f"/v1/runs/{run['id']}/commands", json={"command": "prune", "payload": {"node_id": 99999}}),
            422,
            "99999",
        )
        refused(client.get(f"/v1/runs/{run['id']}/report", params={"format": "odt"}), 422, "format")
        refused(client.get(f"/v1/runs/{run['id']}/report", params={"fmt": "pdf"}), 422, "unknown query parameter 'fmt'")
        refused(
            client.post(f"/v1/runs/{run['id']}/commands", json={"command": "prune", "node_id": 1}),
            422,
            'go under "payload"',
        )
        listed = client.get(f"/v1/runs/{run['id']}", params={"nodes": "true"}).json()["nodes"]
        assert listed and listed[0]["parent_id"] is None and {"id", "label", "status"} <= set(listed[0])
        refused(client.get(f"/v1/runs/{run['id']}/events", headers={"Last-Event-ID": "abc"}), 422, "Last-Event-ID")
        refused(client.get(f"/v1/runs/{run['id']}/events", headers={"Last-Event-ID": "9" * 30}), 422, "Last-Event-ID")
        refused(client.get(f"/v1/runs/{run['id']}/events", params={"after": -1}), 422, "after")
        # A page that rebinds its own domain to 127.0.0.1 is not served (no token on loopback).
        rebound = client.get("/v1/runs", headers={"Host": "evil.example"})
        assert rebound.status_code == 400
        refused(client.delete(f"/v1/runs/{run['id']}"), 409, "stop it before deleting it")
        _events(client, run["id"])
        refused(client.post(f"/v1/runs/{run['id']}/pause"), 409, "only a queued or running run can be paused")
        refused(client.post(f"/v1/runs/{run['id']}/resume"), 409, "nothing to resume")
        refused(client.post("/v1/search", json={"query": "", "k": 5}), 422, "empty")
        refused(client.post("/v1/search", json={"query": "Rome", "k": 500}), 422, "k")
        hits = client.post("/v1/search", json={"query": "Roman Empire", "k": 3}).json()
        assert len(hits) == 3 and all(h["ref"] and h["title"] for h in hits)


def test_methods_and_the_openapi_document_are_served(server: Server) -> None:
    with server.client() as client:
        methods = {m["name"]: m for m in client.get("/v1/methods").json()}
        assert {"deot", "omnithink", "mtqa", "fgdip", "research"} <= set(methods)
        deot = methods["deot"]
        assert "max_nodes" in deot["params_schema"]["properties"] and deot["summary"]
        assert "ask" in {c["name"] for c in deot["commands"]}
        spec = client.get("/openapi.json").json()
        assert {"/v1/runs", "/v1/runs/{run_id}/events", "/v1/runs/{run_id}/commands"} <= set(spec["paths"])
        # The reader's pages load nothing from another site: offline they work as online.
        for page in ("/docs", "/redoc"):
            html = client.get(page).text
            scripts = re.findall(r'(?:src|href)="([^"]+)"', html) + re.findall(r"url: '([^']+)'", html)
            assert scripts and all(url.startswith("/") for url in scripts), (page, scripts)
            for url in scripts:
                assert client.get(url).status_code == 200, url


def test_tokens_guard_the_api_and_a_public_address_needs_one(tmp_path_factory, bundled_corpus) -> None:  # noqa: F811
    home = _home(tmp_path_factory, bundled_corpus)
    refused = _cli(home, "serve", "--host", "0.0.0.0", "--port", "0")
    assert refused.returncode == 2 and "needs a bearer token" in refused.stderr and "token create" in refused.stderr
    refused = _cli(home, "serve", "--require-token", "--port", "0")
    assert refused.returncode == 2 and "needs a bearer token" in refused.stderr

    made = _cli(home, "token", "create", "ci script")
    assert made.returncode == 0, made.stderr
    twice = _cli(home, "token", "create", "ci script")
    assert twice.returncode == 2 and "exists already" in twice.stderr
    token = made.stdout.strip()
    assert token.startswith("tm_") and len(token) > 40
    listed = _cli(home, "token", "list")
    assert "ci script" in listed.stdout and token[:9] in listed.stdout and token not in listed.stdout
    stored = b"".join(p.read_bytes() for p in home.glob("thoughtmap.sqlite3*"))  # the WAL too
    assert stored and token.encode() not in stored

    server = _start(home, "--require-token")
    try:
        with server.client() as anonymous:
            response = anonymous.get("/v1/runs")
            assert response.status_code == 401 and "bearer token" in response.json()["error"]
            assert response.headers["www-authenticate"] == "Bearer"
            assert anonymous.get("/v1/health").status_code == 200
        with server.client("tm_wrong") as wrong:
            assert wrong.get("/v1/runs").status_code == 401
            assert wrong.post("/v1/runs", json={"question": QUESTION}).status_code == 401
        with server.client(token) as client:
            assert client.get("/v1/runs").status_code == 200
            assert _cli(home, "token", "revoke", "ci script").returncode == 0
            assert client.get("/v1/runs").status_code == 401
    finally:
        _stop(server)


def test_a_server_stopped_mid_run_leaves_it_interrupted_and_resumable(tmp_path_factory, bundled_corpus) -> None:  # noqa: F811
    home = _home(tmp_path_factory, bundled_corpus)
    server = _start(home)
    try:
        with server.client() as client:
            run = _create(client, params={"max_nodes": 6})
            _events(client, run["id"], stop_after_logs=3)  # it is under way
    finally:
        _stop(server)  # SIGTERM: the server shuts down as Ctrl-C does
    shown = _cli(home, "show", run["id"])
    assert "status    interrupted" in shown.stdout, shown.stdout
    server = _start(home)
    try:
        with server.client() as client:
            assert client.post(f"/v1/runs/{run['id']}/resume").status_code == 200
            assert _events(client, run["id"])[-1][2]["status"] == "done"
    finally:
        _stop(server)
