"""Multi-user mode: someone else's run is refused through every door but the web app's pages
(tests/pages/test_team_pages.py) and the browser (tests/e2e/test_team_browser.py): the Python
API, the HTTP API (with tokens), the MCP server (on stdio as --user, over HTTP with a token) and the
CLI (--user). Each action is tried by Bo on Ada's run and must be refused, saying why; sharing then
lets Bo read, never change; an admin reads everything and changes nothing.

The (door × action) pairs tried are counted in `TRIED`, and the last test checks that every door
tried every action it has."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from fastapi.testclient import TestClient
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from engine.config import load_settings
from engine.config_values import ConfigError
from engine.llm.fake import FAKE_MODEL
from engine.llm.pricing import ModelPrice, PriceTable
from engine.service.api import Conflict, Forbidden, Thoughtmap
from engine.service.http import create_app
from engine.service.tokens import create_token
from engine.services import Services, build_services
from storage.tokens import TokenStore
from tests.engine.service.test_mcp_server import _run
from tests.support.fixtures_engine import fake_llm  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[3]
QUESTION = "Which country is the Eiffel Tower in?"
ISSUER = "https://id.example.org"
ADA, BO, CAROL, ROOT_ADMIN = "ada@example.org", "bo@example.org", "carol@example.org", "root@example.org"
SECRETS = """
[auth]
redirect_uri = "http://localhost:8501/oauth2callback"
cookie_secret = "a-test-secret-of-some-length-0123456789"
client_id = "thoughtmap"
client_secret = "not-a-real-secret"
server_metadata_url = "https://id.example.org/.well-known/openid-configuration"
"""

# The actions on a run, and which change it (only its owner may).
READ_ACTIONS = ("read", "graph", "events", "export")
CHANGE_ACTIONS = ("steer", "pause", "resume", "stop", "delete", "share", "judge", "benchmark")
# door -> the actions it has (the MCP server has no pause/resume/stop/delete/share tools).
DOORS = {
    "python": ("read", "graph", "events", "export", "steer", "pause", "resume", "stop", "delete", "share"),
    "http": ("read", "graph", "events", "export", "steer", "pause", "resume", "stop", "delete", "share"),
    "mcp-stdio": ("read", "export", "steer"),
    "mcp-http": ("read", "export", "steer"),
    "cli": ("read", "export", "steer", "pause", "resume", "stop", "delete", "judge", "benchmark", "upload"),
}
TRIED: set[tuple[str, str]] = set()


@dataclass
class Team:
    services: Services
    home: Path
    env: dict[str, str]
    ada: Thoughtmap
    bo: Thoughtmap
    run_id: str
    benchmark_id: str

    def api(self, email: str) -> Thoughtmap:
        return Thoughtmap(services=self.services, user=email)

    def token(self, email: str, name: str) -> str:
        user = self.services.access.users.find_user(email)
        token, _row = create_token(TokenStore(self.services.db), name, user.id)
        return token


def _sign_in(services: Services, email: str, subject: str) -> None:
    services.access.users.sign_in(
        issuer=ISSUER,
        subject=subject,
        email=email,
        name=email.split("@")[0].title(),
        is_admin=services.settings.team.is_admin(email),
    )


@pytest.fixture
def team(prebuilt_corpus_home, fake_llm, monkeypatch, tmp_path) -> Iterator[Team]:  # noqa: F811
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(SECRETS, encoding="utf-8")
    env = {
        "THOUGHTMAP_SECRETS_FILE": str(secrets),
        "THOUGHTMAP_ADMINS": ROOT_ADMIN,
        "THOUGHTMAP_ALLOWED_EMAILS": "@example.org",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    services = build_services(load_settings())
    services.use_llm("fake", fake_llm)
    assert services.settings.team.sign_in
    for email, subject in ((ROOT_ADMIN, "root-0"), (ADA, "ada-1"), (BO, "bo-2"), (CAROL, "carol-3")):
        _sign_in(services, email, subject)
    ada, bo = Thoughtmap(services=services, user=ADA), Thoughtmap(services=services, user=BO)
    run = ada.start(QUESTION, "rag", llm="fake")
    assert ada.wait(run.id, timeout=120).status == "done"
    from engine.evaluate.runner import BenchmarkRunner, BenchmarkSpec

    bench = BenchmarkRunner(services).create(
        BenchmarkSpec(dataset="hotpotqa-fullwiki", methods=["direct"], limit=1, user_id=ada.viewer.user_id)
    )
    process_env = {
        **env,
        "THOUGHTMAP_HOME": str(prebuilt_corpus_home),
        "THOUGHTMAP_LLM": "fake",
        "THOUGHTMAP_BUILTIN_EMBEDDINGS": "0",
        "PYTHONPATH": str(ROOT),
        "PATH": "/usr/bin:/bin",
    }
    yield Team(services, prebuilt_corpus_home, process_env, ada, bo, run.id, bench.id)
    services.close()


# ---------------------------------------------------------------------------------------- helpers


def _python_action(tm: Thoughtmap, action: str, run_id: str) -> Callable[[], Any]:
    return {
        "read": lambda: tm.status(run_id),
        "graph": lambda: tm.graph(run_id),
        "events": lambda: list(tm.events(run_id, timeout=1)),
        "export": lambda: tm.report(run_id, "md"),
        "steer": lambda: tm.steer(run_id, "regenerate_report"),
        "pause": lambda: tm.pause(run_id),
        "resume": lambda: tm.resume(run_id),
        "stop": lambda: tm.stop(run_id),
        "delete": lambda: tm.delete(run_id),
        "share": lambda: tm.share(run_id, None),
    }[action]


def _http_request(client: TestClient, action: str, run_id: str) -> httpx.Response:
    base = f"/v1/runs/{run_id}"
    return {
        "read": lambda: client.get(base),
        "graph": lambda: client.get(f"{base}/graph"),
        "events": lambda: client.get(f"{base}/events"),
        "export": lambda: client.get(f"{base}/report", params={"format": "md"}),
        "steer": lambda: client.post(f"{base}/commands", json={"command": "regenerate_report"}),
        "pause": lambda: client.post(f"{base}/pause"),
        "resume": lambda: client.post(f"{base}/resume"),
        "stop": lambda: client.post(f"{base}/stop"),
        "delete": lambda: client.delete(base),
        "share": lambda: client.post(f"{base}/shares", json={"user": None}),
    }[action]()


def _cli(team: Team, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args], env=team.env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def _cli_args(team: Team, action: str) -> list[str]:
    return {
        "read": ["show", team.run_id],
        "export": ["export", team.run_id],
        "steer": ["steer", team.run_id, "regenerate_report"],
        "pause": ["pause", team.run_id],
        "resume": ["resume", team.run_id, "--quiet"],
        "stop": ["stop", team.run_id],
        "delete": ["delete", team.run_id],
        "judge": ["judge", team.run_id, "--llm", "fake", "--quiet"],
        "benchmark": ["bench", "--resume", team.benchmark_id, "--quiet"],
        "upload": ["ingest", str(team.home / "notes.md")],
    }[action]


MCP_CALLS = {
    "read": ("run_status", {}),
    "export": ("get_report", {"format": "md"}),
    "steer": ("steer", {"command": "regenerate_report"}),
}


async def _mcp_refusals(client: Client, run_id: str, door: str) -> None:
    for action, (tool, extra) in MCP_CALLS.items():
        result = await client.call_tool(tool, {"run_id": run_id, **extra})
        text = result.content[0].text if result.content else ""
        assert result.is_error and "not yours" in text, (door, action, text)
        TRIED.add((door, action))
    runs = await client.call_tool("list_runs", {})
    assert run_id not in json.dumps(runs.structured_content or runs.content[0].text)


def _unchanged(team: Team) -> None:
    """Ada's run is as it was: done, not deleted, not shared, no command from Bo."""
    run = team.ada.get(team.run_id)
    assert run.status == "done" and team.ada.shares(team.run_id) == []
    assert team.services.reads.list_commands(team.run_id) == []


# ---------------------------------------------------------------------------------------- the doors


def test_the_python_api_refuses_someone_elses_run(team):
    for action in DOORS["python"]:
        with pytest.raises(Forbidden, match="not yours and was not shared with you"):
            _python_action(team.bo, action, team.run_id)()
        TRIED.add(("python", action))
    assert team.run_id not in [r.id for r in team.bo.runs()]
    assert [r.id for r in team.ada.runs()] == [team.run_id]
    _unchanged(team)


def test_the_http_api_refuses_someone_elses_run(team):
    app = create_app(Thoughtmap(services=team.services, anonymous=True))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        assert client.get("/v1/runs").status_code == 401  # sign-in on: every request is someone's
        client.headers["Authorization"] = f"Bearer {team.token(BO, 'bo-laptop')}"
        assert client.get("/v1/me").json() == {"name": "Bo", "email": BO, "admin": False, "sign_in": True}
        for action in DOORS["http"]:
            response = _http_request(client, action, team.run_id)
            assert response.status_code == 403, (action, response.text)
            assert "not yours and was not shared with you" in response.json()["error"]
            TRIED.add(("http", action))
        assert client.get("/v1/runs").json() == []
        # Bo's own run is Bo's.
        mine = client.post("/v1/runs", json={"question": QUESTION, "method": "direct", "llm": "fake"})
        assert mine.status_code == 201, mine.text
        assert [r["id"] for r in client.get("/v1/runs").json()] == [mine.json()["id"]]
    _unchanged(team)


def test_the_mcp_server_on_stdio_acts_for_its_user(team):
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "engine.cli", "--user", BO, "mcp", "--llm", "fake"],
        env=team.env,
        cwd=str(ROOT),
    )

    async def session() -> None:
        async with Client(params, read_timeout_seconds=300) as client:
            await _mcp_refusals(client, team.run_id, "mcp-stdio")

    _run(session)
    _unchanged(team)


def test_the_mcp_server_over_http_acts_for_the_tokens_user(team):
    token = team.token(BO, "bo-agent")
    process = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "mcp", "--transport", "http", "--port", "0", "--llm", "fake"],
        env=team.env,
        cwd=ROOT,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stderr is not None
        said = []
        url = None
        for line in process.stderr:
            said.append(line)
            if match := re.search(r"(http://127\.0\.0\.1:\d+/mcp)", line):
                url = match.group(1)
                break
        assert url and "bearer token required" in said[-1], "".join(said)
        assert httpx.post(url, json={}).status_code == 401

        async def session() -> None:
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=300)
            async with http, Client(streamable_http_client(url, http_client=http), read_timeout_seconds=300) as client:
                await _mcp_refusals(client, team.run_id, "mcp-http")

        _run(session)
    finally:
        process.terminate()
        process.wait(timeout=60)
    _unchanged(team)


def test_the_cli_refuses_someone_elses_run(team):
    (team.home / "notes.md").write_text("# Notes\n\nBo's notes on the tower.\n", encoding="utf-8")
    refused = _cli(team, "show", team.run_id)
    assert refused.returncode == 2 and "--user EMAIL" in refused.stderr  # who is asking must be said
    for action in DOORS["cli"]:
        result = _cli(team, "--user", BO, *_cli_args(team, action))
        assert result.returncode == 2, (action, result.stdout, result.stderr)
        assert ("only an admin adds files" if action == "upload" else "not yours") in result.stderr, (
            action,
            result.stderr,
        )
        TRIED.add(("cli", action))
    listed = _cli(team, "--user", BO, "list")
    assert listed.returncode == 0 and team.run_id not in listed.stdout + listed.stderr
    assert team.run_id in _cli(team, "--user", ADA, "list").stdout
    stranger = _cli(team, "--user", "eve@elsewhere.net", "list")
    assert stranger.returncode == 2 and "once they have signed in" in stranger.stderr
    _unchanged(team)


# ---------------------------------------------------------------------------------------- sharing


def test_a_share_lets_them_read_and_never_change(team):
    assert team.ada.share(team.run_id, BO) == [BO]
    for action in READ_ACTIONS:
        _python_action(team.bo, action, team.run_id)()
    assert [r.id for r in team.bo.runs()] == [team.run_id]
    for action in ("steer", "pause", "resume", "stop", "delete", "share"):
        with pytest.raises(Forbidden, match=r"only the owner of run .* \(Ada\) can change it"):
            _python_action(team.bo, action, team.run_id)()
    carol = team.api(CAROL)
    with pytest.raises(Forbidden):
        carol.get(team.run_id)
    # Shared with everyone signed in: Carol reads it too; unshared, she no longer does.
    assert team.ada.share(team.run_id, None) == [BO, "everyone"]
    assert carol.get(team.run_id).id == team.run_id
    assert team.ada.unshare(team.run_id, None) == [BO]
    with pytest.raises(Forbidden):
        carol.get(team.run_id)
    with pytest.raises(Exception, match="nobody with the email 'zed@example.org' has signed in"):
        team.ada.share(team.run_id, "zed@example.org")


def test_a_share_names_one_address_exactly(team):
    """`_` and `%` in an address are letters, not wildcards: a share never reaches someone else."""
    with pytest.raises(Exception, match="nobody with the email 'b_@example.org' has signed in"):
        team.ada.share(team.run_id, "b_@example.org")
    with pytest.raises(Exception, match="nobody with the email '%' has signed in"):
        team.ada.share(team.run_id, "%")
    assert team.ada.shares(team.run_id) == []


def test_an_open_event_stream_ends_when_the_run_is_unshared(team, monkeypatch):
    from engine.service import http

    monkeypatch.setattr(http, "KEEPALIVE_S", 0.3)
    run = team.ada.start(QUESTION, "deot", llm="fake")
    team.ada.pause(run.id)  # a run that stays open: its stream does not end by itself
    team.ada.share(run.id, BO)
    app = create_app(Thoughtmap(services=team.services, anonymous=True))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        client.headers["Authorization"] = f"Bearer {team.token(BO, 'bo-stream')}"
        with client.stream("GET", f"/v1/runs/{run.id}/events") as response:
            assert response.status_code == 200
            lines = response.iter_lines()
            assert any(line.startswith("event:") for line in (next(lines) for _ in range(3)))
            team.ada.unshare(run.id, BO)
            rest = list(lines)  # ends: the server closes the stream at its next check
        assert not any(f'"{run.id}"' in line and "event: end" in line for line in rest)
    team.ada.stop(run.id)


def test_an_admin_reads_everything_and_changes_nothing_of_others(team):
    admin = team.api(ROOT_ADMIN)
    assert admin.viewer.is_admin and [r.id for r in admin.runs()] == [team.run_id]
    run = admin.get(team.run_id)
    assert team.services.access.reads_as_admin(admin.viewer, run)  # the app says so
    with pytest.raises(Forbidden, match="only the owner"):
        admin.delete(team.run_id)
    assert team.ada.get(team.run_id).status == "done"


def test_each_persons_limits(team, monkeypatch):
    monkeypatch.setenv("THOUGHTMAP_USER_MAX_COST", "0.25")
    monkeypatch.setenv("THOUGHTMAP_USER_MAX_ACTIVE_RUNS", "1")
    limited = build_services(load_settings())
    try:
        bo = Thoughtmap(services=limited, user=BO)
        limited.access.repo.create_run(
            question="an active one", method="direct", params={}, user_id=bo.viewer.user_id
        )  # queued, never started
        with pytest.raises(Conflict, match="you have 1 runs queued or running, your limit is 1"):
            bo.start(QUESTION, "direct", llm="fake")
        carol = Thoughtmap(services=limited, user=CAROL)
        # A run's budget is capped to what is left of the person's 30 days.
        assert limited.access.budget_for_new_run(carol.viewer, None) == pytest.approx(0.25)
        assert limited.access.budget_for_new_run(carol.viewer, 0.1) == pytest.approx(0.1)
        spent = limited.access.repo.create_run(
            question="spent", method="direct", params={}, user_id=carol.viewer.user_id
        )
        limited.repo.set_status(spent.id, "done")
        limited.repo.record_llm_call(
            spent.id,
            node_id=None,
            purpose="summarizer",
            model="m",
            prompt_tokens=10,
            completion_tokens=10,
            cost=0.3,
            latency_s=0.1,
        )
        with pytest.raises(Conflict, match=r"you have spent \$0.30 in the last 30 days, your limit is \$0.25"):
            carol.start(QUESTION, "direct", llm="fake")
    finally:
        limited.close()


def test_a_resumed_run_spends_no_more_than_its_person_has_left(team, monkeypatch):
    """The cap holds on every execution, not only at start: Carol's run resumed with a large budget
    still stops at what is left of her 30 days (runner.person_cost_cap)."""
    monkeypatch.setenv("THOUGHTMAP_USER_MAX_COST", "0.05")
    capped = build_services(load_settings())
    try:
        capped.use_llm("fake", team.services.llm("fake"))
        # The fake's calls priced at $100 per million tokens: a DEoT run costs several dollars.
        capped.runner.prices = PriceTable({FAKE_MODEL: ModelPrice(input=100.0, output=100.0)})
        carol = Thoughtmap(services=capped, user=CAROL)
        run = carol.start(QUESTION, "deot", llm="fake")
        first = carol.wait(run.id, timeout=120)
        assert first.status == "stopped" and "budget" in first.stop_reason, (first.status, first.stop_reason)
        assert first.max_cost == pytest.approx(0.05)
        # Resumed past every door's check, with a budget of $100: the execution itself is capped.
        capped.runner.resume(run.id, max_cost=100.0)
        again = capped.runner.wait(run.id, timeout=120)
        assert again.max_cost == pytest.approx(100.0)  # what was asked is stored; what was spent is capped
        assert again.status == "stopped" and "budget" in again.stop_reason
        assert again.cost <= 0.05 + 0.01, (again.cost, first.cost)  # at most one call's output over
    finally:
        capped.close()


def test_starts_at_the_same_moment_cannot_pass_the_active_run_limit_together(team, monkeypatch):
    """Eight starts race (a barrier lets them go at once): each passed the first check before any
    run was stored, yet at most one is admitted, and the refused ones leave nothing behind."""
    import threading

    monkeypatch.setenv("THOUGHTMAP_USER_MAX_ACTIVE_RUNS", "1")
    monkeypatch.setenv("THOUGHTMAP_FAKE_LATENCY", "0.5")  # the admitted run stays active meanwhile
    limited = build_services(load_settings())
    try:
        bo = Thoughtmap(services=limited, user=BO)
        checked = threading.Barrier(8)
        first_check = limited.access.budget_for_new_run

        def check_then_wait(*args, **kwargs):  # all pass the first check before any stores its run
            result = first_check(*args, **kwargs)
            checked.wait(timeout=60)
            return result

        monkeypatch.setattr(limited.access, "budget_for_new_run", check_then_wait)
        started, refused = [], []

        def start() -> None:
            try:
                started.append(bo.start(QUESTION, "direct", llm="fake").id)
            except Conflict as exc:
                refused.append(str(exc))

        threads = [threading.Thread(target=start) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert len(started) <= 1 and len(started) + len(refused) == 8, (started, refused)
        assert all("your limit is 1" in why for why in refused)
        assert [r.id for r in bo.runs()] == started  # nothing of the refused starts is stored
        for run_id in started:
            bo.wait(run_id, timeout=120)
    finally:
        limited.close()


def test_runs_of_one_person_at_once_share_one_spending_remainder(team, monkeypatch):
    """Two runs of Carol's execute at once, each with no budget of its own: together they spend what
    her limit leaves, not that twice over."""
    monkeypatch.setenv("THOUGHTMAP_USER_MAX_COST", "0.05")
    capped = build_services(load_settings())
    try:
        capped.use_llm("fake", team.services.llm("fake"))
        capped.runner.prices = PriceTable({FAKE_MODEL: ModelPrice(input=100.0, output=100.0)})
        carol_id = capped.access.users.find_user(CAROL).id
        runs = [
            capped.runner.create_run(
                question=QUESTION, method="deot", user_id=carol_id, llm_info=capped.llm_info("fake")
            )
            for _ in range(2)
        ]
        for run in runs:  # past every door's check: the execution itself shares the limit
            capped.runner.start(run.id)
        ended = [capped.runner.wait(run.id, timeout=300) for run in runs]
        assert all(r.status == "stopped" for r in ended), [(r.status, r.stop_reason) for r in ended]
        assert any("your spending limit of $0.05 over 30 days" in r.stop_reason for r in ended)
        # DEoT sends up to 16 calls at once: at most those calls' outputs past the limit, together.
        total = sum(r.cost for r in ended)
        assert total <= 0.05 + 0.02, [r.cost for r in ended]
    finally:
        capped.close()


def test_a_persons_uploads_reach_only_their_own_runs(team):
    from engine.search.uploads import add_uploads

    ada_id = team.ada.viewer.user_id
    add_uploads(
        team.services.corpus(),
        team.services.uploads_dir,
        [("ada-plan.md", b"# Plan\n\nThe quetzalcoatlus migration plan is confidential to Ada.")],
        owner=ada_id,
    )
    query = "quetzalcoatlus migration plan"
    assert any(h["ref"].startswith(f"uploads/u{ada_id}/ada-plan.md") for h in team.ada.search(query, 5))
    assert not any("ada-plan" in h["ref"] for h in team.bo.search(query, 50))  # the API's and MCP's search
    bo_run = team.bo.start(f"What is the {query}?", "rag", llm="fake")
    assert team.bo.wait(bo_run.id, timeout=120).status == "done"
    assert not any("ada-plan" in s.ref for s in team.services.reads.list_sources(bo_run.id))
    ada_run = team.ada.start(f"What is the {query}?", "rag", llm="fake")
    assert team.ada.wait(ada_run.id, timeout=120).status == "done"
    assert any("ada-plan" in s.ref for s in team.services.reads.list_sources(ada_run.id))


def test_a_teams_database_is_never_opened_single_user(team, monkeypatch):
    """A process that finds no [auth] (started from another folder, a worker without the file) would
    serve everyone's runs as the local user: it refuses to start instead, saying what to set."""
    monkeypatch.delenv("THOUGHTMAP_SECRETS_FILE")
    with pytest.raises(ConfigError, match="this database is a team's"):
        build_services(load_settings())
    env = {k: v for k, v in team.env.items() if k != "THOUGHTMAP_SECRETS_FILE"}
    listed = subprocess.run(
        [sys.executable, "-m", "engine.cli", "list"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert listed.returncode == 2 and "THOUGHTMAP_SECRETS_FILE" in listed.stderr and team.run_id not in listed.stdout


def test_every_door_tried_every_action_it_has():
    """Runs last in this file: the doors above each tried all their actions."""
    expected = {(door, action) for door, actions in DOORS.items() for action in actions}
    if not expected <= TRIED:
        pytest.skip("run with the whole file: the door tests fill TRIED")
    assert TRIED >= expected
    assert len(expected) == 36
