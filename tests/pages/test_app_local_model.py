"""The web app on the built-in local model, under Streamlit's AppTest: what it says it runs on, the
quick profile in the form, the clear message when the model cannot start, Ollama detection in
Settings."""

from __future__ import annotations

import pytest

from components import app_state
from engine.llm import local_model, local_server
from tests.engine.llm.test_local_model_files import ollama_url  # noqa: F401  (fixture)
from tests.pages.test_app_pages import assert_no_exception, joined, open_page, texts

QUESTION = "Which river flows through the capital of France?"


@pytest.fixture
def fresh_services(prebuilt_corpus_home):
    """Services are built by the first page run, from the environment the test has set by then;
    closed (stopping any model server) after the test."""
    app_state.get_services.clear()
    yield
    app_state.get_services().close()
    app_state.get_services.clear()


def test_the_app_says_it_runs_on_the_built_in_model_and_how_to_connect_another(monkeypatch, fresh_services):
    monkeypatch.setenv("THOUGHTMAP_LLM", "local")
    notice = joined(open_page().info)
    assert "Running on the built-in local model: Qwen2.5-Coder-0.5B-Instruct" in notice
    assert "0.5B model: answers are weak" in notice and "quick profile" in notice
    assert "OpenAI, Ollama, vLLM" in notice and "Settings" in notice


def test_the_form_starts_with_the_quick_profile_on_the_built_in_model(monkeypatch, fresh_services):
    monkeypatch.setenv("THOUGHTMAP_LLM", "local")
    at = open_page()
    assert at.number_input(key="params-deot-quick.max_nodes").value == 5
    assert at.checkbox(key="params-deot-quick.validate_plans").value is False
    assert any("Quick profile for the small built-in model" in t for t in texts(at.caption))


def test_a_model_that_cannot_start_gives_a_clear_message_and_starts_nothing(monkeypatch, fresh_services, tmp_path):
    missing = tmp_path / "my-model.gguf"
    monkeypatch.setattr(local_server, "runtime_installed", lambda: True)  # the file is what is wrong here
    monkeypatch.setenv("THOUGHTMAP_LLM", "local")
    monkeypatch.setenv("THOUGHTMAP_LOCAL_MODEL", str(missing))
    at = open_page()
    assert "my-model.gguf (your GGUF file)" in joined(at.info)
    at.text_area(key="question").input(QUESTION)
    at.button(key="start").click().run()
    assert_no_exception(at)
    error = joined(at.error)
    assert "The built-in model cannot start" in error
    assert str(missing) in error and "does not exist" in error and "THOUGHTMAP_LOCAL_MODEL" in error
    assert "Offline fake" in error  # the way out, offline
    assert app_state.get_services().repo.list_runs() == []


def test_auto_without_the_local_runtime_says_the_model_is_not_installed(monkeypatch, fresh_services):
    monkeypatch.setenv("THOUGHTMAP_LLM", "auto")
    monkeypatch.setattr(local_model, "runtime_installed", lambda: False)
    notice = joined(open_page().info)
    assert "Running offline on the scripted fake LLM" in notice
    assert "the built-in local model is not installed: scripts/setup installs it" in notice


def test_settings_detects_a_running_ollama_and_offers_it_as_a_preset(monkeypatch, fresh_services, ollama_url):  # noqa: F811
    monkeypatch.setenv("THOUGHTMAP_OLLAMA_URL", ollama_url)
    at = open_page("pages/settings.py")
    assert f"Ollama is running at {ollama_url} with qwen2.5:7b, llama3.1:8b" in joined(at.success)
    preset = at.selectbox(key="settings-preset")
    assert preset.options[0] == "Ollama (detected)"
    preset.select("Ollama (detected)").run()
    assert_no_exception(at)
    assert at.text_input(key="settings-base-url").value == f"{ollama_url}/v1"
    assert at.text_input(key="settings-model").value == "qwen2.5:7b"
    # Explore mentions it too, while running on the fake.
    at.switch_page("pages/explore.py").run()
    assert "Ollama is running on this machine" in joined(at.info)
