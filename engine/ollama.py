"""Finding a running Ollama, so the app can offer it as a preset (it speaks the OpenAI API at /v1)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request


def detect_ollama(url: str, timeout_s: float = 0.5) -> list[str] | None:
    """The model names an Ollama at `url` serves, or None when no Ollama answers there.

    Asks Ollama's own /api/tags (not /v1/models), so another OpenAI-compatible server on the same
    port is not mistaken for Ollama."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/api/tags", timeout=timeout_s) as response:
            body = json.loads(response.read(1_000_000).decode("utf-8", "replace"))
    except (OSError, urllib.error.URLError, ValueError):
        return None
    models = body.get("models") if isinstance(body, dict) else None
    if not isinstance(models, list):
        return None
    return [
        str(m.get("name") or m.get("model"))
        for m in models
        if isinstance(m, dict) and (m.get("name") or m.get("model"))
    ]


def ollama_preset(url: str, models: list[str]) -> dict[str, str]:
    """Settings preset for a detected Ollama: its OpenAI-compatible endpoint and first model."""
    return {
        "base_url": f"{url.rstrip('/')}/v1",
        "model": models[0] if models else "llama3.1",
        "structured_mode": "json_object",
    }
