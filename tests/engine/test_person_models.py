"""Multi-user mode: a person's own model. Their runs go to their own endpoint with their own key,
which is never written anywhere; the server's key goes only to the server's endpoint; a run whose
key this process does not hold fails saying what to do, and resumes once the key is typed again.
Real OpenAI-compatible servers on 127.0.0.1 (`FakeOpenAIServer`) stand for the endpoints."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine.config import LLMSettings, load_settings
from engine.llm.fake_server import FakeOpenAIServer
from engine.person_models import KeyRing, endpoint_problem, person_llm_info, run_llm_settings
from engine.service.api import Thoughtmap
from engine.services import Services, build_services
from tests.engine.service.test_access_doors import SECRETS

ISSUER = "https://id.example.org"
ADA, BO, ROOT = "ada@example.org", "bo@example.org", "root@example.org"
QUESTION = "Which country is the Eiffel Tower in?"
TEAM_KEY, ADA_KEY = "sk-team-0123456789abcdef", "sk-ada-secret-9876543210"


@dataclass
class Team:
    services: Services
    home: Path
    team_server: FakeOpenAIServer
    ada_id: int
    bo_id: int

    def start(self, user_id: int, settings: LLMSettings, *, own_key: bool) -> str:
        run = self.services.runner.create_run(
            question=QUESTION, method="rag", user_id=user_id, llm_info=person_llm_info(settings, own_key=own_key)
        )
        self.services.runner.start(run.id)
        return run.id

    def wait(self, run_id: str) -> str:
        return Thoughtmap(services=self.services, user=ROOT).wait(run_id, timeout=120).status  # an admin reads all


@pytest.fixture
def team(prebuilt_corpus_home, monkeypatch, tmp_path) -> Iterator[Team]:
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(SECRETS, encoding="utf-8")
    monkeypatch.setenv("THOUGHTMAP_SECRETS_FILE", str(secrets))
    monkeypatch.setenv("THOUGHTMAP_ALLOWED_EMAILS", "@example.org")
    monkeypatch.setenv("THOUGHTMAP_ADMINS", ROOT)
    # The endpoints here are on 127.0.0.1: a person may use them only when private addresses are allowed.
    monkeypatch.setenv("THOUGHTMAP_ALLOW_PRIVATE_FETCH", "1")
    with FakeOpenAIServer(api_key=TEAM_KEY) as team_server:
        monkeypatch.setenv("OPENAI_BASE_URL", team_server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", TEAM_KEY)
        services = build_services(load_settings())
        users = services.access.users
        ada = users.sign_in(issuer=ISSUER, subject="ada-1", email=ADA, name="Ada", is_admin=False)
        bo = users.sign_in(issuer=ISSUER, subject="bo-2", email=BO, name="Bo", is_admin=False)
        users.sign_in(issuer=ISSUER, subject="root-0", email=ROOT, name="Root", is_admin=True)
        yield Team(services, prebuilt_corpus_home, team_server, ada.id, bo.id)
        services.close()


def _written_anywhere(home: Path, secret: str) -> list[Path]:
    """Every file under the home (the database and its journal, preferences, logs) holding `secret`."""
    return [p for p in home.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_a_persons_run_goes_to_their_endpoint_with_their_key_which_is_never_written(team):
    with FakeOpenAIServer(api_key=ADA_KEY) as ada_server:
        team.services.keys.hold(team.ada_id, ada_server.base_url, ADA_KEY)
        run_id = team.start(team.ada_id, LLMSettings(base_url=ada_server.base_url, model="ada-model"), own_key=True)
        assert team.wait(run_id) == "done"
        assert ada_server.requests and {r["model"] for r in ada_server.requests} == {"ada-model"}
        assert set(ada_server.authorizations) == {f"Bearer {ADA_KEY}"}
    assert team.team_server.requests == []  # the team's endpoint served none of it
    info = team.services.reads.get_run(run_id).llm_info
    assert info["endpoint"] == "person" and info["own_key"] is True and ADA_KEY not in repr(info)
    team.services.close()  # everything stored is on disk
    assert _written_anywhere(team.home, ADA_KEY) == []


def test_the_servers_key_never_goes_to_an_address_a_person_typed(team):
    with FakeOpenAIServer() as bo_server:  # needs no key: it takes whatever it is sent
        run_id = team.start(team.bo_id, LLMSettings(base_url=bo_server.base_url, model="bo-model"), own_key=False)
        assert team.wait(run_id) == "done"
        assert bo_server.authorizations and not [a for a in bo_server.authorizations if TEAM_KEY in a]


def test_a_persons_model_on_the_teams_endpoint_is_paid_by_the_teams_key(team):
    settings = LLMSettings(base_url=team.team_server.base_url, model="bigger-model", models={"report": "best-model"})
    run_id = team.start(team.bo_id, settings, own_key=False)
    assert team.wait(run_id) == "done"
    models = {r["model"] for r in team.team_server.requests}
    assert models <= {"bigger-model", "best-model"} and "bigger-model" in models
    assert set(team.team_server.authorizations) == {f"Bearer {TEAM_KEY}"}


def test_a_run_whose_key_is_not_held_fails_saying_so_and_resumes_once_it_is_typed_again(team):
    with FakeOpenAIServer(api_key=ADA_KEY) as ada_server:
        # As after a restart, or Ada signing out: her key is not in this process's memory.
        run_id = team.start(team.ada_id, LLMSettings(base_url=ada_server.base_url, model="m"), own_key=True)
        assert team.wait(run_id) == "failed"
        error = team.services.reads.get_run(run_id).error
        assert "does not hold it" in error and "types the key again in Settings" in error
        assert ada_server.authorizations == []  # nothing was sent without her key
        team.services.keys.hold(team.ada_id, ada_server.base_url, ADA_KEY)
        team.services.runner.start(run_id, retry_failed=True)
        assert team.wait(run_id) == "done"


def test_a_persons_key_serves_only_their_own_runs(team):
    """Bo's run that names Ada's endpoint and says its own key pays gets no key: Ada's is hers."""
    with FakeOpenAIServer(api_key=ADA_KEY) as ada_server:
        team.services.keys.hold(team.ada_id, ada_server.base_url, ADA_KEY)
        run_id = team.start(team.bo_id, LLMSettings(base_url=ada_server.base_url, model="m"), own_key=True)
        assert team.wait(run_id) == "failed"
        assert ada_server.authorizations == []


def test_a_run_on_an_address_of_the_servers_own_network_fails_at_execution(team):
    """Whatever door started it: the address is checked again when the run's adapter is made."""
    team.services.settings = team.services.settings.model_copy(update={"allow_private_fetch": False})
    with FakeOpenAIServer() as bo_server:
        run_id = team.start(team.bo_id, LLMSettings(base_url=bo_server.base_url, model="m"), own_key=False)
        assert team.wait(run_id) == "failed"
        assert "its own network" in team.services.reads.get_run(run_id).error and bo_server.authorizations == []


def test_signing_out_forgets_a_persons_keys():
    ring = KeyRing()
    ring.hold(1, "https://api.example.com/v1/", "k1")
    ring.hold(2, "https://api.example.com/v1", "k2")
    assert ring.get(1, "https://api.example.com/v1").api_key == "k1"  # one endpoint, with or without "/"
    ring.forget(1)
    assert ring.get(1, "https://api.example.com/v1") is None and ring.has_key(2, "https://api.example.com/v1")


def test_a_person_may_not_point_the_server_at_its_own_network():
    team = "https://api.openai.com/v1"
    for url in (
        "http://127.0.0.1:11434/v1",
        "http://localhost:8000/v1",
        "http://10.0.0.5/v1",
        "http://169.254.169.254/latest",
        "http://[::1]:8000/v1",
    ):
        problem = endpoint_problem(url, team_url=team, allow_private=False)
        assert problem and "its own network" in problem, url
        assert endpoint_problem(url, team_url=team, allow_private=True) is None
    assert (
        endpoint_problem("http://127.0.0.1:8000/v1", team_url="http://127.0.0.1:8000/v1/", allow_private=False) is None
    )
    # A name is looked up: one that a DNS server points at the server's network is refused too.
    rebound = endpoint_problem(
        "https://llm.attacker.example/v1",
        team_url=team,
        allow_private=False,
        resolver=lambda host, port: ["192.168.1.10"],
    )
    assert rebound and "a private address" in rebound
    assert (
        endpoint_problem(
            "https://llm.example.com/v1",
            team_url=team,
            allow_private=False,
            resolver=lambda host, port: ["93.184.215.14"],
        )
        is None
    )
    assert "not an http(s) URL" in (endpoint_problem("file:///etc/passwd", team_url=team, allow_private=False) or "")


def test_a_run_on_the_teams_endpoint_never_takes_a_persons_url_credentials():
    """The stored info holds the URL without credentials; the held key restores the full one."""
    ring = KeyRing()
    ring.hold(7, "https://user:pw@llm.example.com/v1", "k")
    info = {"base_url": "https://***@llm.example.com/v1", "own_key": True, "model": "m"}
    settings = run_llm_settings(info, LLMSettings(), ring, 7)
    assert settings.base_url == "https://user:pw@llm.example.com/v1" and settings.api_key == "k"
