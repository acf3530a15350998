"""What the user chose in the app's Settings, stored as JSON in THOUGHTMAP_HOME.

Never holds an API key: keys come from the environment, Streamlit secrets, or are typed for the
session only."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from engine.config import DEFAULT_BASE_URL, DEFAULT_MODEL, LLMChoice, LLMSettings, SearchMode, Settings, StructuredMode
from engine.redact import redact_url

PRESETS: dict[str, dict[str, str]] = {
    "OpenAI": {"base_url": DEFAULT_BASE_URL, "model": DEFAULT_MODEL, "structured_mode": "auto"},
    "Ollama (local)": {"base_url": "http://127.0.0.1:11434/v1", "model": "llama3.1", "structured_mode": "json_object"},
    "vLLM server": {
        "base_url": "http://127.0.0.1:8000/v1",
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "structured_mode": "json_schema",
    },
    "llama.cpp server": {"base_url": "http://127.0.0.1:8080/v1", "model": "local", "structured_mode": "json_object"},
    "Custom endpoint": {},
}


class Preferences(BaseModel):
    llm: LLMChoice = Field(
        default="auto",
        description="auto: the endpoint when one is configured, else the built-in "
        "local model when installed, else the offline fake.",
    )
    preset: str = "OpenAI"
    base_url: str = DEFAULT_BASE_URL
    model: str = DEFAULT_MODEL
    models: dict[str, str] = Field(default_factory=dict, description="Model per purpose, e.g. report, judge.")
    structured_mode: StructuredMode = "auto"
    search: SearchMode = "local"
    # Multi-user mode: True when the person runs on their own endpoint and models (engine/person_models.py)
    # rather than the team's; a single-user app's choices are always its own.
    own_model: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> Preferences:
        cfg = settings.llm
        return cls(
            llm=settings.llm_choice,
            base_url=cfg.base_url,
            model=cfg.model,
            models=dict(cfg.models),
            structured_mode=cfg.structured_mode,
            search=settings.search,
        )

    def llm_settings(self, base: LLMSettings, api_key: str | None) -> LLMSettings:
        return base.model_copy(
            update={
                "base_url": self.base_url.strip() or DEFAULT_BASE_URL,
                "model": self.model.strip() or DEFAULT_MODEL,
                "models": {k: v for k, v in self.models.items() if v.strip()},
                "structured_mode": self.structured_mode,
                "api_key": api_key or None,
            }
        )

    def resolved_llm(self, api_key: str | None, *, local_ready: bool = False) -> str:
        """The LLM kind runs will use. auto: the endpoint when it is usable without asking (a key, or
        a URL other than OpenAI's), else the built-in model when it is installed, else the fake."""
        if self.llm != "auto":
            return self.llm
        if api_key or self.base_url.rstrip("/") != DEFAULT_BASE_URL:
            return "openai"
        return "local" if local_ready else "fake"


def preferences_path(settings: Settings, user_id: int | None = None) -> Path:
    """The app's choices; `user_id`: one person's own (multi-user mode: where they search)."""
    return settings.home / ("preferences.json" if user_id is None else f"preferences-user-{user_id}.json")


def load_preferences(settings: Settings, user_id: int | None = None) -> Preferences:
    path = preferences_path(settings, user_id)
    if path.exists():
        try:
            return Preferences.model_validate(json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, ValidationError):
            pass  # a damaged file falls back to the environment's settings
    return Preferences.from_settings(settings)


def save_preferences(settings: Settings, preferences: Preferences, user_id: int | None = None) -> None:
    """Write the choices to disk. Like the API key, credentials inside the endpoint URL are never
    written: they are masked (the session that entered them keeps using the full URL)."""
    path = preferences_path(settings, user_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    stored = preferences.model_copy(update={"base_url": redact_url(preferences.base_url)})
    path.write_text(stored.model_dump_json(indent=2), encoding="utf-8")
