"""The embeddings seam (engine/search/embeddings.py) against a real OpenAI-compatible server on
127.0.0.1 (`FakeOpenAIServer`'s deterministic /v1/embeddings): the client, its failures, the
reranker, `top_for_each` with and without an embedder, and the configuration."""

from __future__ import annotations

import openai
import pytest

from engine.config import load_settings
from engine.llm.fake_server import FakeOpenAIServer, fake_embedding
from engine.search.embedders import build_embedder
from engine.search.embeddings import (
    EmbeddingError,
    EmbeddingReranker,
    EmbeddingsSettings,
    OpenAIEmbeddings,
    RememberingEmbedder,
    cosine,
    remembering,
    top_for_each,
)
from engine.search.protocol import Hit

HITS = [
    Hit(title="Grand Final attendance", ref="a", snippet="", text="crowd attendance record stadium", kind="corpus"),
    Hit(title="Broadcast", ref="b", snippet="", text="television broadcast ratings radio", kind="corpus"),
    Hit(title="Weather", ref="c", snippet="", text="rain wind weather on the day", kind="corpus"),
]


def test_the_client_returns_one_vector_per_text_in_order_and_batches():
    with FakeOpenAIServer() as server:
        embedder = OpenAIEmbeddings(EmbeddingsSettings(base_url=server.base_url, model="fake-embed"))
        texts = [f"text number {i}" for i in range(70)]
        vectors = embedder.embed(texts)
        assert vectors == [pytest.approx(fake_embedding(t)) for t in texts]
        requests = server.embedding_requests
        assert [len(r["input"]) for r in requests] == [64, 6]
        assert all(r["model"] == "fake-embed" and r["encoding_format"] == "float" for r in requests)
        assert server.count_chat_requests() == 0
        assert embedder.description == f"embeddings fake-embed at {server.base_url}"
        # The openai client's own default (base64) is served too.
        raw = openai.OpenAI(api_key="x", base_url=server.base_url).embeddings.create(model="m", input="hello world")
        assert raw.data[0].embedding == pytest.approx(fake_embedding("hello world"), abs=1e-6)


def test_a_remembering_embedder_embeds_each_text_once_and_forgets_the_oldest():
    """What the knowledge layer wraps the run's embedder in, so keys embedded as the chunks' answers
    come are not embedded again by retrieval (over the real client and server)."""
    with FakeOpenAIServer() as server:
        inner = OpenAIEmbeddings(EmbeddingsSettings(base_url=server.base_url, model="fake-embed"))
        embedder = RememberingEmbedder(inner, limit=3)
        assert embedder.description == inner.description and remembering(embedder) is embedder
        first = embedder.embed(["alpha", "beta", "alpha"])
        assert first == [pytest.approx(fake_embedding(t)) for t in ["alpha", "beta", "alpha"]]
        assert embedder.embed(["beta", "gamma"]) == [pytest.approx(fake_embedding(t)) for t in ["beta", "gamma"]]
        embedder.embed(["delta"])  # four texts seen, three kept: "alpha", the least recently used, goes
        embedder.embed(["alpha", "beta"])
        assert [r["input"] for r in server.embedding_requests] == [
            ["alpha", "beta"],
            ["gamma"],
            ["delta"],
            ["alpha"],
        ]


def test_a_remembering_embedder_refuses_vectors_of_the_wrong_count():
    class Short:
        description = "short test embedder"

        def embed(self, texts):
            return [[1.0, 0.0]] * (len(texts) - 1)

    embedder = remembering(Short())
    with pytest.raises(EmbeddingError, match="returned 1 vectors for 2 texts"):
        embedder.embed(["one", "two"])
    with pytest.raises(EmbeddingError):
        embedder.embed(["one"])  # nothing of the failed call was remembered


def test_a_remembering_embedder_refuses_vectors_of_unequal_or_changed_size_and_keeps_none():
    class Sized:
        description = "sized test embedder"

        def __init__(self) -> None:
            self.sizes = [[2, 3], [4], [2]]  # per call: the size of each vector it returns
            self.calls: list[list[str]] = []

        def embed(self, texts):
            self.calls.append(list(texts))
            return [[1.0] * size for size in self.sizes.pop(0)]

    inner = Sized()
    embedder = remembering(inner)
    with pytest.raises(EmbeddingError, match="unequal or non-numeric size"):
        embedder.embed(["one", "two"])
    assert embedder.embed(["three"]) == [[1.0] * 4]
    with pytest.raises(EmbeddingError, match="2 dimensions, before of 4"):
        embedder.embed(["one"])
    assert embedder.embed(["three"]) == [[1.0] * 4]  # remembered: not asked again
    assert inner.calls == [["one", "two"], ["three"], ["one"]]


def test_a_failing_endpoint_is_an_embedding_error():
    with FakeOpenAIServer(api_key="secret") as server:
        embedder = OpenAIEmbeddings(EmbeddingsSettings(base_url=server.base_url, api_key="wrong"))
        with pytest.raises(EmbeddingError) as raised:
            embedder.embed(["anything"])
        assert "AuthenticationError" in str(raised.value) and raised.value.hint


def test_similarity_ranks_by_meaning_and_bm25_without_an_embedder():
    with FakeOpenAIServer() as server:
        embedder = OpenAIEmbeddings(EmbeddingsSettings(base_url=server.base_url))
        ranked = top_for_each(["television broadcast", "weather rain"], HITS, 2, embedder)
        assert ranked.by.startswith("embeddings: ")
        assert [h.ref for h in ranked.per_query[0]][0] == "b" and [h.ref for h in ranked.per_query[1]][0] == "c"
        assert len(ranked.per_query[0]) == 2  # similarity ranks every hit, as Sentence-BERT retrieval does
        expected = cosine(
            fake_embedding("television broadcast"), fake_embedding("Broadcast\ntelevision broadcast ratings radio")
        )
        assert ranked.per_query[0][0].score == pytest.approx(expected)
        assert [h.ref for h in EmbeddingReranker(embedder).rerank("weather rain", HITS, 1)] == ["c"]
    bm25 = top_for_each(["television broadcast", "weather rain"], HITS, 2)
    assert bm25.by == "bm25" and [[h.ref for h in q] for q in bm25.per_query] == [["b"], ["c"]]


def test_embeddings_that_fail_fall_back_to_bm25_and_say_so():
    told = []
    with FakeOpenAIServer(api_key="secret") as server:
        embedder = OpenAIEmbeddings(EmbeddingsSettings(base_url=server.base_url))
        ranked = top_for_each(["weather"], HITS, 1, embedder, on_error=told.append)
    assert ranked.by.startswith("bm25 (embeddings failed") and [h.ref for h in ranked.per_query[0]] == ["c"]
    assert len(told) == 1 and isinstance(told[0], EmbeddingError)


def test_configuration_from_the_environment(tmp_path):
    assert load_settings({"THOUGHTMAP_HOME": str(tmp_path)}).embeddings is None
    assert build_embedder(None) is None
    settings = load_settings(
        {
            "THOUGHTMAP_HOME": str(tmp_path),
            "THOUGHTMAP_EMBEDDINGS_URL": "http://127.0.0.1:9/v1",
            "THOUGHTMAP_EMBEDDINGS_MODEL": "nomic-embed-text",
            "THOUGHTMAP_EMBEDDINGS_KEY": "k",
        }
    )
    assert (settings.embeddings.base_url, settings.embeddings.model, settings.embeddings.api_key) == (
        "http://127.0.0.1:9/v1",
        "nomic-embed-text",
        "k",
    )
    assert "k" not in repr(settings.embeddings)
    shared = load_settings(
        {
            "THOUGHTMAP_HOME": str(tmp_path),
            "OPENAI_BASE_URL": "http://h/v1",
            "OPENAI_API_KEY": "o",
            "THOUGHTMAP_EMBEDDINGS_URL": "http://h/v1/",
        }
    )
    assert shared.embeddings.api_key == "o" and shared.embeddings.model == "text-embedding-3-small"
    assert isinstance(build_embedder(settings.embeddings), OpenAIEmbeddings)
