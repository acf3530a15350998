"""All configuration, resolved in one place from the environment (and explicit overrides).

Environment variables (a public interface, keep them stable):

| variable | meaning | default |
| --- | --- | --- |
| OPENAI_API_KEY | key for the OpenAI-compatible endpoint | unset |
| OPENAI_BASE_URL | endpoint URL (OpenAI, Ollama, vLLM, llama.cpp server...) | https://api.openai.com/v1 |
| THOUGHTMAP_MODEL | default model name | gpt-4o-mini |
| THOUGHTMAP_MODEL_<PURPOSE> | model for one purpose, e.g. THOUGHTMAP_MODEL_JUDGE; a purpose with a role after `_` (THOUGHTMAP_MODEL_JUDGE_PAIRWISE, _JUDGE_RUBRIC, _JUDGE_CLAIMS) falls back to its family (JUDGE) | THOUGHTMAP_MODEL |
| THOUGHTMAP_STRUCTURED_MODE | auto, json_schema, json_object or prompted | auto |
| THOUGHTMAP_LLM_TIMEOUT | seconds per LLM call | 120 |
| THOUGHTMAP_LLM_MAX_RETRIES | retries on 429/5xx/connection errors/timeouts | 5 |
| THOUGHTMAP_LLM_CONCURRENCY | LLM calls in flight, shared by all runs of the process | 8 |
| THOUGHTMAP_WORKERS | threads for node-level work, shared by all runs of the process | 16 |
| THOUGHTMAP_PRICES | JSON file: {"model": {"input": $/1M tokens, "output": $/1M tokens}} | built-in table |
| THOUGHTMAP_HOME | folder for the default database and the corpus index | ~/.thoughtmap |
| THOUGHTMAP_DATABASE_URL | any SQLAlchemy URL (sqlite:///..., postgresql+psycopg://...) | sqlite in THOUGHTMAP_HOME |
| THOUGHTMAP_EXECUTION | embedded: runs execute in threads of the app or CLI process; queue: they are enqueued and `thoughtmap worker` processes execute them (needs THOUGHTMAP_DATABASE_URL on PostgreSQL) | embedded |
| THOUGHTMAP_SEARCH | local, web, both or none | local |
| THOUGHTMAP_ALLOW_PRIVATE_FETCH | 1 lets page fetch reach private/loopback addresses | 0 |
| THOUGHTMAP_FAKE_LATENCY | seconds each call of the offline fake LLM takes (demos, UI tests) | 0 |
| THOUGHTMAP_LLM | which LLM the app and `thoughtmap run` use: auto, local, openai or fake | auto |
| THOUGHTMAP_LOCAL_MODEL | a GGUF file for the built-in llama.cpp server instead of the bundled model | bundled model |
| THOUGHTMAP_MODELS_DIR | where the bundled model is assembled from its packages | ~/.cache/thoughtmap/models |
| THOUGHTMAP_LOCAL_PORT | port the built-in model server prefers on 127.0.0.1 (a free one if taken) | any free port |
| THOUGHTMAP_LOCAL_CTX | context window of the built-in model, in tokens | 8192 |
| THOUGHTMAP_LOCAL_THREADS | CPU threads of the built-in model | all cores |
| THOUGHTMAP_LOCAL_GRAMMAR_FIRST | 1 gives the built-in model's JSON grammar llama-cpp-python's own order (the whole vocabulary every token, slower; for benchmarks/bench_grammar.py) | 0 |
| THOUGHTMAP_OLLAMA_URL | where the app looks for a running Ollama | http://127.0.0.1:11434 |
| THOUGHTMAP_EMBEDDINGS_URL | an OpenAI-compatible endpoint serving `/embeddings` (OmniThink's section evidence by similarity); unset: BM25 | unset |
| THOUGHTMAP_EMBEDDINGS_MODEL | the embedding model at that endpoint | text-embedding-3-small |
| THOUGHTMAP_EMBEDDINGS_KEY | its key (OPENAI_API_KEY when the URL is OPENAI_BASE_URL) | unset |
| THOUGHTMAP_RERANK_URL | an OpenAI-compatible `/rerank` endpoint (vLLM, llama.cpp, TEI, Infinity) for the research method's `endpoint` reranker | unset |
| THOUGHTMAP_RERANK_MODEL | the model that endpoint reranks with | the server's default |
| THOUGHTMAP_RERANK_API_KEY | bearer key for that endpoint | unset |
| THOUGHTMAP_METHODS | more methods kept outside the package, comma-separated `module:Class` (each a `Method` subclass) | none |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4o-mini"

StructuredMode = Literal["auto", "json_schema", "json_object", "prompted"]
SearchMode = Literal["local", "web", "both", "none"]
ExecutionMode = Literal["embedded", "queue"]


class LLMSettings(BaseModel):
    base_url: str = DEFAULT_BASE_URL
    api_key: str | None = Field(default=None, repr=False, exclude=True)
    model: str = DEFAULT_MODEL
    # purpose -> model, e.g. {"judge": "gpt-4o"}; purposes not listed use `model`.
    models: dict[str, str] = Field(default_factory=dict)
    structured_mode: StructuredMode = "auto"
    timeout_s: float = 120.0
    max_retries: int = 5
    concurrency: int = 8
    prices_file: Path | None = None

    def model_for(self, purpose: str) -> str:
        """The model of a purpose; a role within a family (`judge_pairwise`) falls back to the
        family's model (`judge`), then to the default: one judge model can serve every judge role
        while any role can still have its own."""
        while purpose:
            if purpose in self.models:
                return self.models[purpose]
            purpose = purpose.rpartition("_")[0]
        return self.model

    @property
    def is_default_openai(self) -> bool:
        return self.base_url.rstrip("/") == DEFAULT_BASE_URL


LLMChoice = Literal["auto", "local", "openai", "fake"]
DEFAULT_EMBEDDINGS_MODEL = "text-embedding-3-small"


class EmbeddingsSettings(BaseModel):
    """Where embeddings come from (`engine/search/embeddings.py`); none configured: BM25 instead."""

    base_url: str
    model: str = DEFAULT_EMBEDDINGS_MODEL
    api_key: str | None = Field(default=None, repr=False, exclude=True)
    timeout_s: float = 60.0


def _default_models_dir() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "thoughtmap" / "models"


class LocalModelSettings(BaseModel):
    """The built-in llama.cpp model server (see engine.llm.local_model and local_server)."""

    model_path: Path | None = None  # None: the bundled model, assembled into models_dir
    models_dir: Path = Field(default_factory=_default_models_dir)
    port: int = 0  # 0: any free port
    context_tokens: int = 8192
    threads: int = Field(default_factory=lambda: os.cpu_count() or 2)
    # Seconds the server may take to load the model and answer its health check.
    start_timeout_s: float = 120.0
    # MiB of RAM for llama-cpp-python's prompt cache (0: none): the model's state after each request,
    # so a later prompt that starts like an earlier one (not only like the last) skips that part.
    # Off, and no environment variable: on FGDIP's prompts it saved 9 % of the time for 11x the
    # memory (benchmarks/bench_prompt_cache.py, docs/benchmarks.md); the benchmark sets it.
    prompt_cache_mb: int = 0
    ollama_url: str = "http://127.0.0.1:11434"


class RerankSettings(BaseModel):
    """An OpenAI-compatible `/rerank` endpoint (engine/search/rerankers.py), when configured."""

    url: str = ""
    model: str = ""
    api_key: str | None = Field(default=None, repr=False, exclude=True)


class Settings(BaseModel):
    home: Path
    database_url: str
    llm: LLMSettings
    search: SearchMode = "local"
    allow_private_fetch: bool = False
    workers: int = 16
    fake_latency_s: float = 0.0
    llm_choice: LLMChoice = "auto"
    # Where runs execute: in this process's threads, or on `thoughtmap worker` processes.
    execution: ExecutionMode = "embedded"
    # Methods kept outside the package ("module:Class,..."), loaded beside the built-in ones.
    method_plugins: str = ""
    local: LocalModelSettings = Field(default_factory=LocalModelSettings)
    embeddings: EmbeddingsSettings | None = None
    rerank: RerankSettings = Field(default_factory=RerankSettings)

    @property
    def corpus_index_path(self) -> Path:
        return self.home / "corpus.sqlite3"


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Build Settings from an environment mapping (os.environ by default)."""
    env = os.environ if env is None else env
    home = Path(env.get("THOUGHTMAP_HOME") or Path.home() / ".thoughtmap").expanduser()
    database_url = env.get("THOUGHTMAP_DATABASE_URL") or f"sqlite:///{home / 'thoughtmap.sqlite3'}"
    prefix = "THOUGHTMAP_MODEL_"
    per_purpose = {
        key[len(prefix) :].lower(): value
        for key, value in env.items()
        if key.startswith(prefix) and value
    }
    llm = LLMSettings(
        base_url=env.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL,
        api_key=env.get("OPENAI_API_KEY") or None,
        model=env.get("THOUGHTMAP_MODEL") or DEFAULT_MODEL,
        models=per_purpose,
        structured_mode=env.get("THOUGHTMAP_STRUCTURED_MODE") or "auto",
        timeout_s=float(env.get("THOUGHTMAP_LLM_TIMEOUT") or 120),
        max_retries=int(env.get("THOUGHTMAP_LLM_MAX_RETRIES") or 5),
        concurrency=int(env.get("THOUGHTMAP_LLM_CONCURRENCY") or 8),
        prices_file=Path(env["THOUGHTMAP_PRICES"]) if env.get("THOUGHTMAP_PRICES") else None,
    )
    return Settings(
        home=home,
        database_url=database_url,
        llm=llm,
        search=env.get("THOUGHTMAP_SEARCH") or "local",
        allow_private_fetch=_flag(env.get("THOUGHTMAP_ALLOW_PRIVATE_FETCH")),
        workers=int(env.get("THOUGHTMAP_WORKERS") or 16),
        fake_latency_s=float(env.get("THOUGHTMAP_FAKE_LATENCY") or 0),
        llm_choice=(env.get("THOUGHTMAP_LLM") or "auto").strip().lower(),
        execution=(env.get("THOUGHTMAP_EXECUTION") or "embedded").strip().lower(),
        method_plugins=env.get("THOUGHTMAP_METHODS") or "",
        local=_local_settings(env),
        embeddings=_embeddings_settings(env, llm),
        rerank=RerankSettings(url=(env.get("THOUGHTMAP_RERANK_URL") or "").strip(),
                              model=(env.get("THOUGHTMAP_RERANK_MODEL") or "").strip(),
                              api_key=env.get("THOUGHTMAP_RERANK_API_KEY") or None),
    )


def _embeddings_settings(env: Mapping[str, str], llm: LLMSettings) -> EmbeddingsSettings | None:
    url = (env.get("THOUGHTMAP_EMBEDDINGS_URL") or "").strip()
    if not url:
        return None
    key = env.get("THOUGHTMAP_EMBEDDINGS_KEY") or (
        llm.api_key if url.rstrip("/") == llm.base_url.rstrip("/") else None)
    return EmbeddingsSettings(base_url=url, model=env.get("THOUGHTMAP_EMBEDDINGS_MODEL") or DEFAULT_EMBEDDINGS_MODEL,
                              api_key=key)


def _local_settings(env: Mapping[str, str]) -> LocalModelSettings:
    values: dict[str, object] = {}
    if env.get("THOUGHTMAP_LOCAL_MODEL"):
        values["model_path"] = Path(env["THOUGHTMAP_LOCAL_MODEL"]).expanduser()
    if env.get("THOUGHTMAP_MODELS_DIR"):
        values["models_dir"] = Path(env["THOUGHTMAP_MODELS_DIR"]).expanduser()
    for name, key in (("port", "THOUGHTMAP_LOCAL_PORT"), ("context_tokens", "THOUGHTMAP_LOCAL_CTX"),
                      ("threads", "THOUGHTMAP_LOCAL_THREADS")):
        if env.get(key):
            values[name] = int(env[key])
    if env.get("THOUGHTMAP_OLLAMA_URL"):
        values["ollama_url"] = env["THOUGHTMAP_OLLAMA_URL"].rstrip("/")
    return LocalModelSettings(**values)
