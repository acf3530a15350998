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
| THOUGHTMAP_DATABASE_URL | a SQLite or PostgreSQL URL (sqlite:///..., postgresql+psycopg://...; postgres:// and postgresql:// mean postgresql+psycopg://) | sqlite in THOUGHTMAP_HOME |
| THOUGHTMAP_EXECUTION | embedded: runs execute in threads of the app or CLI process; queue: they are enqueued and `thoughtmap worker` processes execute them (needs THOUGHTMAP_DATABASE_URL on PostgreSQL) | embedded |
| THOUGHTMAP_SEARCH | local, web, both or none | local |
| THOUGHTMAP_CORPUS_LOCK_TIMEOUT | seconds a write to the corpus index (ingest, bringing it up to date) waits for another process's write before giving up with a message; searching never waits | 30 |
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
| THOUGHTMAP_BUILTIN_EMBEDDINGS | 0 turns the built-in embedding model (all-MiniLM-L6-v2 on the CPU, used when THOUGHTMAP_EMBEDDINGS_URL is unset) off: BM25 ranks wherever embeddings would (a slow machine; the tests, unless they ask for it) | 1 |
| THOUGHTMAP_RERANK_URL | an OpenAI-compatible `/rerank` endpoint (vLLM, llama.cpp, TEI, Infinity) for the research method's `endpoint` reranker | unset |
| THOUGHTMAP_RERANK_MODEL | the model that endpoint reranks with | the server's default |
| THOUGHTMAP_RERANK_API_KEY | bearer key for that endpoint | unset |
| THOUGHTMAP_RETRIEVER | how every method searches the local corpus: bm25 (word match), dense (the built-in embedding model's vectors) or hybrid (both, fused, then following the entities they name to their own documents) | hybrid |
| THOUGHTMAP_RERANKER | what orders a search's top K where a method reranks (the research agent): none, builtin (the first stage's order fused with the embedding model's), llm (the run's model judges each document) or endpoint (THOUGHTMAP_RERANK_URL) | none (endpoint when THOUGHTMAP_RERANK_URL is set) |
| THOUGHTMAP_METHODS | more methods kept outside the package, comma-separated `module:Class` (each a `Method` subclass) | none |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeGuard, get_args

from pydantic import BaseModel, Field

from engine.config_values import choice, endpoint_url, number
from engine.team_config import TeamSettings, load_team_settings

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4o-mini"

StructuredMode = Literal["auto", "json_schema", "json_object", "prompted"]
SearchMode = Literal["local", "web", "both", "none"]
ExecutionMode = Literal["embedded", "queue"]
Retriever = Literal["bm25", "dense", "hybrid"]
RerankerName = Literal["none", "builtin", "llm", "endpoint"]


def is_search_mode(value: str) -> TypeGuard[SearchMode]:
    """Whether a mode from outside the settings (a stored run's, a command line's) is a SearchMode."""
    return value in get_args(SearchMode)


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


class RetrievalSettings(BaseModel):
    """How the local corpus is searched and how a search's top K is reranked (engine/search/retrieval.py).
    The defaults are the best measured (docs/benchmarks.md, "Retrieval")."""

    retriever: Retriever = "hybrid"
    reranker: RerankerName = "none"


class Settings(BaseModel):
    home: Path
    database_url: str
    llm: LLMSettings
    search: SearchMode = "local"
    # Seconds a write to the corpus index waits for another process's write (storage/corpus_store.py).
    corpus_lock_timeout_s: float = 30.0
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
    # Without an endpoint: the built-in embedding model (engine/search/builtin_embedder.py), unless off.
    builtin_embeddings: bool = True
    rerank: RerankSettings = Field(default_factory=RerankSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    # Multi-user mode: sign-in, who may, admins, per-person limits (engine/team_config.py).
    team: TeamSettings = Field(default_factory=TeamSettings)

    @property
    def corpus_index_path(self) -> Path:
        return self.home / "corpus.sqlite3"

    @property
    def database_variable(self) -> str:
        """The variable that says where the database is, for messages about it: THOUGHTMAP_HOME
        holds the default one."""
        return "THOUGHTMAP_HOME" if self.database_url == default_database_url(self.home) else "THOUGHTMAP_DATABASE_URL"


def default_database_url(home: Path) -> str:
    return f"sqlite:///{home / 'thoughtmap.sqlite3'}"


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Build Settings from an environment mapping (os.environ by default); a value that cannot
    work raises ConfigError naming its variable (engine/config_values.py)."""
    env = os.environ if env is None else env
    home = Path(env.get("THOUGHTMAP_HOME") or Path.home() / ".thoughtmap").expanduser()
    # Its form is checked where the database is opened (storage/db.py `open_database`).
    database_url = env.get("THOUGHTMAP_DATABASE_URL") or default_database_url(home)
    prefix = "THOUGHTMAP_MODEL_"
    per_purpose = {key[len(prefix) :].lower(): value for key, value in env.items() if key.startswith(prefix) and value}
    llm = LLMSettings(
        base_url=endpoint_url(
            env, "OPENAI_BASE_URL", DEFAULT_BASE_URL, example="http://127.0.0.1:11434/v1 for Ollama (unset: OpenAI)"
        ),
        api_key=env.get("OPENAI_API_KEY") or None,
        model=env.get("THOUGHTMAP_MODEL") or DEFAULT_MODEL,
        models=per_purpose,
        structured_mode=choice(env, "THOUGHTMAP_STRUCTURED_MODE", get_args(StructuredMode), "auto"),
        timeout_s=number(env, "THOUGHTMAP_LLM_TIMEOUT", float, 120.0, minimum=0, above_minimum=True),
        max_retries=number(env, "THOUGHTMAP_LLM_MAX_RETRIES", int, 5, minimum=0),
        concurrency=number(env, "THOUGHTMAP_LLM_CONCURRENCY", int, 8, minimum=1),
        prices_file=Path(env["THOUGHTMAP_PRICES"]) if env.get("THOUGHTMAP_PRICES") else None,
    )
    return Settings(
        home=home,
        database_url=database_url,
        llm=llm,
        search=choice(env, "THOUGHTMAP_SEARCH", get_args(SearchMode), "local"),
        corpus_lock_timeout_s=number(env, "THOUGHTMAP_CORPUS_LOCK_TIMEOUT", float, 30.0, minimum=0),
        allow_private_fetch=_flag(env.get("THOUGHTMAP_ALLOW_PRIVATE_FETCH")),
        workers=number(env, "THOUGHTMAP_WORKERS", int, 16, minimum=1),
        fake_latency_s=number(env, "THOUGHTMAP_FAKE_LATENCY", float, 0.0, minimum=0),
        llm_choice=choice(env, "THOUGHTMAP_LLM", get_args(LLMChoice), "auto"),
        execution=choice(env, "THOUGHTMAP_EXECUTION", get_args(ExecutionMode), "embedded"),
        method_plugins=env.get("THOUGHTMAP_METHODS") or "",
        local=_local_settings(env),
        embeddings=_embeddings_settings(env, llm),
        builtin_embeddings=choice(env, "THOUGHTMAP_BUILTIN_EMBEDDINGS", ("0", "1"), "1") == "1",
        rerank=RerankSettings(
            url=endpoint_url(env, "THOUGHTMAP_RERANK_URL", example="http://127.0.0.1:8000/v1"),
            model=(env.get("THOUGHTMAP_RERANK_MODEL") or "").strip(),
            api_key=env.get("THOUGHTMAP_RERANK_API_KEY") or None,
        ),
        retrieval=_retrieval_settings(env),
        team=load_team_settings(env),
    )


def _retrieval_settings(env: Mapping[str, str]) -> RetrievalSettings:
    # An endpoint, when one is set, is the default reranker: the user's cross-encoder beats ours.
    # No built-in reranker beats the hybrid first stage on every gold set (docs/benchmarks.md,
    # "Retrieval"): its order is the default.
    default_reranker: RerankerName = "endpoint" if (env.get("THOUGHTMAP_RERANK_URL") or "").strip() else "none"
    return RetrievalSettings(
        retriever=choice(env, "THOUGHTMAP_RETRIEVER", get_args(Retriever), "hybrid"),
        reranker=choice(env, "THOUGHTMAP_RERANKER", get_args(RerankerName), default_reranker),
    )


def _embeddings_settings(env: Mapping[str, str], llm: LLMSettings) -> EmbeddingsSettings | None:
    url = endpoint_url(env, "THOUGHTMAP_EMBEDDINGS_URL", example="http://127.0.0.1:8000/v1")
    if not url:
        return None
    key = env.get("THOUGHTMAP_EMBEDDINGS_KEY") or (llm.api_key if url.rstrip("/") == llm.base_url.rstrip("/") else None)
    return EmbeddingsSettings(
        base_url=url, model=env.get("THOUGHTMAP_EMBEDDINGS_MODEL") or DEFAULT_EMBEDDINGS_MODEL, api_key=key
    )


def _local_settings(env: Mapping[str, str]) -> LocalModelSettings:
    values: dict[str, Any] = {}
    if env.get("THOUGHTMAP_LOCAL_MODEL"):
        values["model_path"] = Path(env["THOUGHTMAP_LOCAL_MODEL"]).expanduser()
    if env.get("THOUGHTMAP_MODELS_DIR"):
        values["models_dir"] = Path(env["THOUGHTMAP_MODELS_DIR"]).expanduser()
    for name, key, minimum, maximum in (
        ("port", "THOUGHTMAP_LOCAL_PORT", 0, 65535),
        ("context_tokens", "THOUGHTMAP_LOCAL_CTX", 1, None),
        ("threads", "THOUGHTMAP_LOCAL_THREADS", 1, None),
    ):
        default = LocalModelSettings.model_fields[name].get_default(call_default_factory=True)
        values[name] = number(env, key, int, default, minimum=minimum, maximum=maximum)
    if env.get("THOUGHTMAP_OLLAMA_URL"):
        values["ollama_url"] = endpoint_url(env, "THOUGHTMAP_OLLAMA_URL", example="http://127.0.0.1:11434").rstrip("/")
    return LocalModelSettings(**values)
