"""Hybrid retrieval end to end on both databases: a run on the bundled corpus finds the bridge page
that word match cannot, and what it found and how it searched are stored on SQLite and on
PostgreSQL alike (the corpus index is the same SQLite file either way; the run, its sources and its
step log are in the run database)."""

from __future__ import annotations

from engine.config import load_settings
from engine.llm.fake import FakeLLM
from engine.services import build_services
from storage.models import RunStatus
from tests.support.db_backends import database_url  # noqa: F401  (fixture)
from tests.support.fixtures_engine import run_to_end

# A bundled HotpotQA two-hop question: the project is named, the president only on its page.
QUESTION = "The Developing Communities Project's first executive director was which former President?"
NAMED = "Developing Communities Project"
BRIDGE = "Barack Obama"


def services_on(database_url, monkeypatch, retriever: str):
    monkeypatch.setenv("THOUGHTMAP_DATABASE_URL", database_url)
    monkeypatch.setenv("THOUGHTMAP_RETRIEVER", retriever)
    services = build_services(load_settings())
    services.use_llm("fake", FakeLLM())
    return services


def test_a_run_on_hybrid_retrieval_stores_the_bridge_page_on_either_database(
    database_url, prebuilt_corpus_home, builtin_embeddings, monkeypatch
):  # noqa: F811
    services = services_on(database_url, monkeypatch, "hybrid")
    try:
        run_id = run_to_end(services, QUESTION, "rag", {"top_k": 5})
        run = services.repo.get_run(run_id)
        assert run.status == RunStatus.DONE, run.error
        titles = [source.title for source in services.repo.list_sources(run_id)]
        assert BRIDGE in titles and NAMED in titles
        # The run's start says what searched: word match, the built-in model and the hops.
        started = services.repo.list_events(run_id, kinds=["run"])[-1]
        assert started.data["phase"] == "started"
        assert "BM25 + built-in all-MiniLM-L6-v2 (CPU) + hops" in started.data["searcher"]
    finally:
        services.close()


def test_word_match_alone_does_not_reach_the_bridge_page(prebuilt_corpus_home, monkeypatch):
    # The contrast that makes the test above mean something: BM25's five hits miss his page.
    services = services_on(f"sqlite:///{prebuilt_corpus_home / 'bm25.sqlite3'}", monkeypatch, "bm25")
    try:
        run_id = run_to_end(services, QUESTION, "rag", {"top_k": 5})
        assert BRIDGE not in [source.title for source in services.repo.list_sources(run_id)]
        started = services.repo.list_events(run_id, kinds=["run"])[-1]
        assert started.data["searcher"].startswith("local corpus (") and "MiniLM" not in started.data["searcher"]
    finally:
        services.close()
