"""Multi-user mode through the web app's pages (AppTest, signed in with `at.user`): someone else's
run, opened by its address on every page that takes one, says it is not theirs and shows nothing
of it; their lists hold only their own runs; a run shared with them is read, never changed; the
Settings page keeps the model and the corpus to admins. Single-user mode is the rest of the suite.

The pages door's actions are counted in `PAGE_ACTIONS` and all checked."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from components import app_state
from engine.evaluate.runner import BenchmarkSpec
from engine.service.api import Thoughtmap
from tests.pages.test_app_pages import APP, TIMEOUT, assert_no_exception, texts

ISSUER = "https://id.example.org"
ADA, BO, ROOT_ADMIN = "ada@example.org", "bo@example.org", "root@example.org"
QUESTION = "Which country is the Eiffel Tower in?"
AUTH = {
    "redirect_uri": "http://localhost:8501/oauth2callback",
    "cookie_secret": "a-test-secret-0123456789abcdef",
    "client_id": "thoughtmap",
    "client_secret": "x",
    "server_metadata_url": f"{ISSUER}/.well-known/openid-configuration",
}
SECRETS = "[auth]\n" + "".join(f'{k} = "{v}"\n' for k, v in AUTH.items())
# The actions someone else's run is refused for on the pages, each checked below.
PAGE_ACTIONS = {
    "read",
    "export",
    "compare",
    "benchmark",
    "steer",
    "pause",
    "stop",
    "resume",
    "delete",
    "share",
    "upload",
    "judge",
}
CHECKED: set[str] = set()
REFUSED = "is not yours and was not shared with you"


@pytest.fixture
def team(prebuilt_corpus_home, monkeypatch, tmp_path):
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(SECRETS, encoding="utf-8")
    monkeypatch.setenv("THOUGHTMAP_SECRETS_FILE", str(secrets))
    monkeypatch.setenv("THOUGHTMAP_ADMINS", ROOT_ADMIN)
    monkeypatch.setenv("THOUGHTMAP_ALLOWED_EMAILS", "@example.org")
    app_state.get_services.clear()
    services = app_state.get_services()
    assert services.settings.team.sign_in
    for email, sub in ((ADA, "ada-1"), (BO, "bo-2"), (ROOT_ADMIN, "root-0")):
        services.access.users.sign_in(
            issuer=ISSUER, subject=sub, email=email, name=email.split("@")[0].title(), is_admin=email == ROOT_ADMIN
        )
    ada = Thoughtmap(services=services, user=ADA)
    run = ada.start(QUESTION, "rag", llm="fake")
    assert ada.wait(run.id, timeout=120).status == "done"
    bench = services.benchmarks.create(
        BenchmarkSpec(dataset="hotpotqa-fullwiki", methods=["direct"], limit=1, user_id=ada.viewer.user_id)
    )
    yield services, ada, run.id, bench.id
    services.close()
    app_state.get_services.clear()


def signed_in(email: str, sub: str, *, page: str | None = None, query: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.user = {
        "is_logged_in": True,
        "email": email,
        "sub": sub,
        "iss": ISSUER,
        "name": email.split("@")[0].title(),
        "email_verified": True,
    }
    at.secrets["auth"] = AUTH
    for key, value in (query or {}).items():
        at.query_params[key] = value
    if page is not None:
        at.switch_page(page)
    at.run()
    assert_no_exception(at)
    return at


def bo(**kwargs) -> AppTest:
    return signed_in(BO, "bo-2", **kwargs)


def joined(elements) -> str:
    return "\n".join(texts(elements))


def test_not_signed_in_shows_only_the_sign_in_page(team):
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.user = {"is_logged_in": False}
    at.secrets["auth"] = AUTH
    at.query_params["run"] = team[2]
    at.run()
    assert_no_exception(at)
    assert [b.label for b in at.button] == ["Sign in"]
    assert QUESTION not in joined(at.markdown) + joined(at.caption)


def test_someone_elses_run_by_its_address_shows_nothing_of_it(team):
    services, _ada, run_id, bench_id = team
    explore = bo(query={"run": run_id})
    assert REFUSED in joined(explore.error) and QUESTION not in joined(explore.markdown)
    CHECKED.add("read")
    assert not any(b.label in ("Pause", "Resume", "Stop", "Rewrite report") for b in explore.button)
    CHECKED.update({"steer", "pause", "stop"})
    report = bo(page="pages/report.py", query={"run": run_id})
    assert REFUSED in joined(report.error) and not report.get("download_button")
    CHECKED.add("export")
    compare = bo(page="pages/compare.py", query={"runs": f"{run_id},{run_id}"})
    assert REFUSED in joined(compare.error) and "Judges" not in texts(compare.subheader)
    CHECKED.update({"compare", "judge"})
    evaluate = bo(page="pages/evaluate.py", query={"benchmark": bench_id})
    assert f"Benchmark `{bench_id}` is not one of yours" in joined(evaluate.error)
    CHECKED.add("benchmark")
    sessions = bo(page="pages/sessions.py")
    assert "No runs match" in joined(sessions.info)
    assert not [b for b in sessions.button if b.key and run_id in b.key]  # no Resume, Rename, Delete, Share
    CHECKED.update({"resume", "delete", "share"})
    settings = bo(page="pages/settings.py")
    # Bo's uploads are his own (only his runs find them): never added to the team's corpus.
    assert "Files you add here are yours" in joined(settings.caption)
    assert not [c for c in settings.checkbox if c.key == "settings-upload-shared"]
    assert "settings-rebuild" not in [b.key for b in settings.button]
    assert settings.radio(key="settings-own-model").value == "team"  # the team's model until Bo picks his own
    assert "settings-llm" not in [r.key for r in settings.radio]  # the team's model is the admins' to choose
    CHECKED.add("upload")
    assert services.reads.get_run(run_id).status == "done" and services.reads.list_commands(run_id) == []


def test_a_shared_run_is_read_and_never_changed(team):
    _services, ada, run_id, _bench = team
    ada.share(run_id, BO)
    explore = bo(query={"run": run_id})
    assert not explore.error
    assert "**Ada** shared this run with you" in joined(explore.info)
    assert not any(
        b.label in ("Pause", "Resume", "Stop", "Rewrite report", "Expand", "Deepen", "Ask") for b in explore.button
    )
    sessions = bo(page="pages/sessions.py")
    assert any(QUESTION in text for text in texts(sessions.markdown))
    assert "Ada's" in joined(sessions.caption)
    assert not [b for b in sessions.button if b.key and b.key != f"open-{run_id}" and run_id in b.key]
    report = bo(page="pages/report.py", query={"run": run_id})
    assert not report.error and "regenerate" not in [b.key for b in report.button]
    assert f"check-citations-{run_id}" not in [b.key for b in report.button]  # a verdict is the owner's to store


def test_the_admin_reads_and_is_told(team):
    _services, _ada, run_id, _bench = team
    admin = signed_in(ROOT_ADMIN, "root-0", query={"run": run_id})
    assert "You are reading **Ada**'s run as an admin" in joined(admin.warning)
    assert not any(b.label in ("Resume", "Rewrite report") for b in admin.button)
    # An admin's Sessions is theirs until they ask for everyone's.
    sessions = signed_in(ROOT_ADMIN, "root-0", page="pages/sessions.py")
    assert "No runs match" in joined(sessions.info)
    sessions.radio(key="sessions-shown").set_value("Everyone's (admin)").run()
    assert any(QUESTION in text for text in texts(sessions.markdown)) and "Ada's" in joined(sessions.caption)


def test_sessions_show_mine_or_shared_with_me(team):
    _services, ada, run_id, _bench = team
    ada.share(run_id, BO)
    sessions = bo(page="pages/sessions.py")
    assert [o for o in sessions.radio(key="sessions-shown").options] == [
        "Mine and shared with me",
        "Mine",
        "Shared with me",
    ]  # no "Everyone's": Bo is no admin
    assert any(QUESTION in text for text in texts(sessions.markdown))
    sessions.radio(key="sessions-shown").set_value("Mine").run()
    assert "No runs match" in joined(sessions.info)
    sessions.radio(key="sessions-shown").set_value("Shared with me").run()
    assert any(QUESTION in text for text in texts(sessions.markdown))


def test_a_person_the_configuration_does_not_allow_is_told_why(team):
    at = signed_in("eve@elsewhere.net", "eve-9")
    assert "cannot use this Thoughtmap" in joined(at.error) and [b.label for b in at.button] == ["Sign out"]


def test_a_persons_tokens_are_their_own(team):
    services, _ada, _run_id, _bench = team
    from engine.service.tokens import check_token, create_for

    create_for(services.tokens, services.access.viewer_for(services.access.users.find_user(ADA).id), "ada-cli")
    at = bo(page="pages/settings.py")
    assert "ada-cli" not in joined(at.markdown)  # Ada's token is not Bo's to see or revoke
    at.text_input(key="api-token-name").input("bo-agent")
    at.button(key="FormSubmitter:api-token-form-Create token").click().run()
    [shown] = [c.value for c in at.code]
    token = check_token(services.tokens, shown)
    assert token is not None and token.user_id == services.access.users.find_user(BO).id
    assert "acts as you" in joined(at.caption)


def test_a_person_runs_on_their_own_model_and_key_kept_only_in_memory(team):
    services, _ada, _run_id, _bench = team
    from engine.llm.fake_server import FakeOpenAIServer
    from engine.preferences import preferences_path

    bo_key = "sk-bo-own-key-5550123"
    bo_id = services.access.users.find_user(BO).id
    with FakeOpenAIServer(api_key=bo_key) as server:
        at = bo(page="pages/settings.py")
        at.radio(key="settings-own-model").set_value("own").run()
        at.button(key="settings-save").click().run()  # OpenAI's preset, with no key of his
        assert "OpenAI's API needs a key" in joined(at.error)
        at.text_input(key="settings-base-url").input(server.base_url)
        at.text_input(key="settings-model").input("bo-model")
        at.selectbox(key="settings-mode").set_value("json_schema")
        at.text_input(key="settings-api-key").input(bo_key)
        at.button(key="settings-save").click().run()
        # The server's own network is not Bo's to point it at, unless the admins allow it.
        assert "its own network" in joined(at.error) and not services.keys.has_key(bo_id, server.base_url)
        services.settings = services.settings.model_copy(update={"allow_private_fetch": True})
        at.button(key="settings-save").click().run()
        assert_no_exception(at)
        assert "Saved" in joined(at.success)
        assert services.keys.has_key(bo_id, server.base_url)
        saved = preferences_path(services.settings, bo_id).read_text(encoding="utf-8")
        assert '"own_model": true' in saved and "bo-model" in saved and bo_key not in saved
        at.button(key="settings-test").click().run()
        assert f"Connected to {server.base_url}" in joined(at.success)

        at.switch_page("pages/explore.py").run()
        assert "your own model, bo-model at" in joined(at.caption)
        at.selectbox(key="method").set_value("rag").run()
        at.text_area(key="question").input(QUESTION)
        at.button(key="start").click().run()
        assert_no_exception(at)
        run = services.reads.get_run(at.query_params["run"])
        assert run.llm_info["endpoint"] == "person" and run.llm_info["own_key"] is True
        assert bo_key not in repr(run.llm_info)
        assert Thoughtmap(services=services, user=BO).wait(run.id, timeout=120).status == "done"
        assert server.requests and set(server.authorizations) == {f"Bearer {bo_key}"}


def test_an_admins_new_team_model_reaches_sessions_already_open(team):
    """Bo's page was open before the admins chose another model: his next rerun shows and uses the new
    one, and does not put the shared adapter back to what his session first read."""
    services, _ada, _run_id, _bench = team
    from engine.preferences import Preferences, save_preferences

    at = bo()
    save_preferences(services.settings, Preferences(llm="openai", base_url="http://127.0.0.1:9/v1", model="team-new"))
    at.run()
    assert "LLM: team-new at http://127.0.0.1:9/v1" in joined(at.caption)
    assert services.settings.llm.model == "team-new"


def test_every_page_action_was_checked():
    if not PAGE_ACTIONS <= CHECKED:
        pytest.skip("run with the whole file: the tests above fill CHECKED")
    assert CHECKED == PAGE_ACTIONS
