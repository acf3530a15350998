"""The dense vector index over the corpus (engine/search/vectors.py, storage `chunk_vectors`).

The mechanics use a small deterministic encoder that is a real function of the text (a hashed bag
of words); one test compares the shipped vectors of the bundled corpus with the real
all-MiniLM-L6-v2 where the prepared model is installed.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3

import numpy as np
import pytest

from engine.search.bundled import open_default_corpus
from engine.search.local import LocalCorpusSearcher
from engine.search.uploads import add_uploads
from engine.search.vectors import (
    SHIPPED_MODEL,
    CorpusEmbedding,
    VectorIndex,
    embedded_text,
    shipped_vectors_path,
    text_key,
)
from storage.corpus_store import SCHEMA_VERSION, CorpusStore, NewDocument

MODEL = "hashed-words"
DIMENSIONS = 48


def hashed_words(texts):
    """Each word adds ±1 to one of 48 dimensions chosen by its hash: texts sharing words point the
    same way, and the vector changes with any word of the text."""
    out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in re.findall(r"\w+", text.lower()):
            digest = hashlib.sha1(word.encode()).digest()
            out[row, digest[0] % DIMENSIONS] += 1.0 if digest[1] % 2 else -1.0
    return out


class CountingEncoder:
    """`hashed_words`, remembering every text it was given."""

    def __init__(self):
        self.seen: list[str] = []

    def __call__(self, texts):
        self.seen.extend(texts)
        return hashed_words(texts)


ANIMALS = {
    "Quokka": ["Quokkas are small marsupials of Rottnest Island.", "They shelter under dense shrubs by day."],
    "Kea": ["The kea is an alpine parrot of the Southern Alps.", "Kea are known for curiosity with cars."],
    "Takahe": ["The takahe is a flightless bird that grazes tussock."],
    "Wombat": [
        "Wombats dig burrows with strong claws.",
        "Their droppings are cube shaped.",
        "Wombats are marsupials of Australia.",
    ],
}
RIVERS = {
    "Danube": ["The Danube flows through ten countries to the Black Sea."],
    "Rhine": ["The Rhine rises in the Swiss Alps and meets the North Sea.", "Barges carry coal on the Rhine."],
}
QUERIES = ["marsupials of Australia", "alpine parrot", "rivers to the sea", "Swiss Alps", "burrows claws"]


def document(collection, title, chunks, version=""):
    return NewDocument(
        collection=collection,
        ref=f"{collection}/{title}",
        title=title,
        url=None,
        chunks=[c + version for c in chunks],
        content_hash=f"{collection}/{title}{version}",
    )


def add(store, collection, docs, version=""):
    store.add_documents([document(collection, title, chunks, version) for title, chunks in docs.items()])


def snapshot(store, index):
    stored = store.load_vectors(index.model)
    return (
        stored.ids.tolist(),
        stored.matrix.copy(),
        [index.search(hashed_words([q])[0], 4) for q in QUERIES],
        [index.search(hashed_words([q])[0], 3, ["rivers"]) for q in QUERIES],
    )


@pytest.fixture
def store(tmp_path):
    with CorpusStore(tmp_path / "corpus.sqlite3") as opened:
        yield opened


def test_an_index_grown_in_steps_equals_one_embedded_from_scratch(store, tmp_path):
    index = VectorIndex(store, MODEL)
    add(store, "animals", ANIMALS)
    index.update(hashed_words, batch=3)
    add(store, "rivers", RIVERS)
    index.update(hashed_words, batch=3)
    # An edited file replaces its document (new chunk ids, perhaps reused ones); a collection goes.
    add(store, "animals", {"Kea": ANIMALS["Kea"]}, version=" Edited.")
    add(store, "birds", {"Kaka": ["The kaka is a forest parrot."]})
    index.update(hashed_words, batch=2)
    store.delete_collection("birds")
    grown = snapshot(store, index)

    store.delete_vectors()
    assert index.missing() == store.count_chunks()
    index.update(hashed_words, batch=100)
    rebuilt = snapshot(store, index)
    assert grown[0] == rebuilt[0] == sorted(row[0] for row in store.chunks_lacking_vectors("another model", limit=1000))
    np.testing.assert_array_equal(grown[1], rebuilt[1])
    assert grown[2:] == rebuilt[2:]

    # And a new index of the same documents, added at once, scores every chunk the same (its chunk
    # ids differ: ties, ordered by id, may come in another order).
    with CorpusStore(tmp_path / "fresh.sqlite3") as fresh:
        add(fresh, "animals", {**ANIMALS, "Kea": [c + " Edited." for c in ANIMALS["Kea"]]})
        add(fresh, "rivers", RIVERS)
        fresh_index = VectorIndex(fresh, MODEL)
        fresh_index.update(hashed_words)

        def scored(of_store, ranked):
            return sorted(
                (-round(score, 6), hit.ref, hit.ordinal)
                for hit, (_, score) in zip(of_store.chunk_hits([i for i, _ in ranked]), ranked)
            )

        for query in QUERIES:
            vector = hashed_words([query])[0]
            assert scored(store, index.search(vector, 100)) == scored(fresh, fresh_index.search(vector, 100))


def test_update_embeds_only_what_lacks_a_vector_and_says_how_far(store):
    index = VectorIndex(store, MODEL)
    add(store, "animals", ANIMALS)
    encoder, progress = CountingEncoder(), []
    assert index.update(encoder, lambda done, total: progress.append((done, total)), batch=3) == 8
    assert progress == [(0, 8), (3, 8), (6, 8), (8, 8)]
    assert encoder.seen[0] == embedded_text("Quokka", ANIMALS["Quokka"][0]) == f"Quokka\n{ANIMALS['Quokka'][0]}"

    encoder.seen.clear()
    assert index.update(encoder) == 0 and encoder.seen == []
    add(store, "rivers", RIVERS)
    assert index.missing() == 3
    index.update(encoder)
    assert sorted(encoder.seen) == sorted(embedded_text(t, c) for t, cs in RIVERS.items() for c in cs)
    assert index.missing() == 0


def test_deleting_documents_removes_their_vectors(store):
    index = VectorIndex(store, MODEL)
    add(store, "animals", ANIMALS)
    add(store, "rivers", RIVERS)
    index.update(hashed_words)
    river_ids = {hit_id for hit_id, _ in index.search(hashed_words(["rivers"])[0], 10, ["rivers"])}
    assert len(river_ids) == 3

    store.delete_collection("rivers")
    assert set(store.load_vectors(MODEL).ids.tolist()).isdisjoint(river_ids)
    assert all(store.chunk_hits([i]) == [] for i in river_ids)
    assert index.search(hashed_words(["rivers"])[0], 10, ["rivers"]) == []
    assert len(store.load_vectors(MODEL).ids) == store.count_chunks() == 8

    add(store, "animals", {"Wombat": ["Wombats sleep all day."]}, version=" Again.")  # replaces its 3 chunks
    assert len(store.load_vectors(MODEL).ids) == 5 and index.missing() == 1
    store.clear()
    assert len(store.load_vectors(MODEL).ids) == 0 and index.search(hashed_words(["wombat"])[0], 3) == []


def test_a_vector_computed_for_a_chunk_that_changed_meanwhile_is_not_stored(store):
    add(store, "animals", {"Kea": ["Kea are parrots."]})
    [(chunk_id, title, text)] = store.chunks_lacking_vectors(MODEL)
    vector = hashed_words([embedded_text(title, text)])[0]
    # While it was embedded, the document was edited: its new chunk may reuse the id.
    add(store, "animals", {"Kea": ["Kea are parrots."]}, version=" Edited.")
    assert store.put_vectors(MODEL, [(chunk_id, text, vector)]) == 0
    assert VectorIndex(store, MODEL).missing() == 1


def test_search_ranks_by_cosine_and_filters_collections(store):
    add(store, "animals", ANIMALS)
    add(store, "rivers", RIVERS)
    index = VectorIndex(store, MODEL)
    index.update(hashed_words)
    query = hashed_words(["The Rhine rises in the Swiss Alps"])[0] * 7.0  # any length: cosine
    ranked = index.search(query, 3)
    [best] = store.chunk_hits([ranked[0][0]], [ranked[0][1]])
    assert (best.title, best.ordinal, best.collection) == ("Rhine", 0, "rivers")
    assert [score for _, score in ranked] == sorted((score for _, score in ranked), reverse=True)
    assert ranked[0][1] == pytest.approx(
        np.dot(
            *(
                v / np.linalg.norm(v)
                for v in hashed_words(["The Rhine rises in the Swiss Alps", embedded_text("Rhine", RIVERS["Rhine"][0])])
            )
        ),
        abs=1e-3,
    )  # float16 storage
    assert {h.collection for h in store.chunk_hits([i for i, _ in index.search(query, 9, ["animals"])])} == {"animals"}
    assert index.search(query, 3, ["no such collection"]) == []
    assert len(index.search(query, 100)) == store.count_chunks()
    # Hits come back in the order asked, and an id no longer there is left out.
    ids = [i for i, _ in ranked]
    assert [h.text for h in store.chunk_hits([ids[2], 999_999, ids[0]])] == [
        h.text for h in (store.chunk_hits([ids[2]]) + store.chunk_hits([ids[0]]))
    ]


def test_shipped_vectors_are_copied_to_the_chunks_they_were_computed_from(store):
    add(store, "animals", ANIMALS)
    chunks = store.chunks_lacking_vectors(MODEL)
    shipped = {
        text_key(title, text): hashed_words([embedded_text(title, text)])[0]
        for _id, title, text in chunks
        if title != "Wombat"
    }
    index = VectorIndex(store, MODEL)
    assert index.import_vectors(list(shipped), np.stack(list(shipped.values())).astype(np.float16)) == 5
    assert index.missing() == 3  # Wombat's chunks had no shipped vector: an update embeds them
    index.update(hashed_words)
    imported = store.load_vectors(MODEL).matrix
    index_again = VectorIndex(store, MODEL)
    store.delete_vectors(MODEL)
    index_again.update(hashed_words)
    np.testing.assert_array_equal(imported, store.load_vectors(MODEL).matrix)


def test_an_ingest_embeds_the_new_passages_with_progress(tmp_path):
    encoder, progress = CountingEncoder(), []
    with CorpusStore(tmp_path / "corpus.sqlite3") as store:
        searcher = LocalCorpusSearcher(store, embedding=CorpusEmbedding(MODEL, encoder))
        report = add_uploads(
            searcher,
            tmp_path / "uploads",
            [("kea.md", b"# Kea\n\nKea are alpine parrots.")],
            lambda message, fraction: progress.append((message, fraction)),
        )
        assert report.chunks_embedded == 1 and "1 passages embedded" in report.summary()
        assert progress[-1] == ("embedding passages for vector search: 1 of 1", 1.0)
        assert encoder.seen == ["Kea\n# Kea\n\nKea are alpine parrots."]  # the title, then the chunk
        assert searcher.vectors.missing() == 0

        def broken(texts):
            from engine.search.embeddings import EmbeddingError

            raise EmbeddingError("the model file is damaged")

        failing = LocalCorpusSearcher(store, embedding=CorpusEmbedding(MODEL, broken))
        report = add_uploads(failing, tmp_path / "uploads", [("takahe.md", b"# Takahe\n\nTakahe graze tussock.")])
        assert report.documents_added == 1 and report.chunks_embedded == 0
        assert "not embedded (the model file is damaged" in report.summary()
        assert failing.search("takahe tussock", 1)[0].title == "Takahe"  # word search has it
        assert searcher.ingest([tmp_path / "uploads" / "kea.md"]).chunks_embedded == 1  # the next ingest


def _downgrade_to_layout_1(path):
    """Make the index at `path` what this release's predecessor wrote: no vectors table, layout 1."""
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE chunk_vectors")
    conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()


def test_an_index_of_the_previous_layout_keeps_its_documents(tmp_path):
    path = tmp_path / "corpus.sqlite3"
    with CorpusStore(path) as store:
        add(store, "animals", ANIMALS)
        store.set_meta("bundled_corpus_version", "kept")
    _downgrade_to_layout_1(path)

    with CorpusStore(path) as store:
        assert store.get_meta("schema_version") == SCHEMA_VERSION == "2"
        assert store.get_meta("bundled_corpus_version") == "kept"
        assert store.count_documents() == 4 and store.count_chunks() == 8
        assert store.search("marsupials Rottnest", 1)[0].title == "Quokka"
        index = VectorIndex(store, MODEL)
        assert index.missing() == 8
        index.update(hashed_words)
        assert store.chunk_hits([index.search(hashed_words(["alpine parrot"])[0], 1)[0][0]])[0].title == "Kea"


def test_the_default_corpus_of_the_previous_layout_keeps_the_users_files(prebuilt_corpus_home, tmp_path):
    from engine.config import load_settings

    settings = load_settings()
    with CorpusStore(settings.corpus_index_path) as store:
        add_uploads(LocalCorpusSearcher(store), tmp_path / "uploads", [("kea.md", b"# Kea\n\nKea are alpine parrots.")])
        documents = store.count_documents()
    _downgrade_to_layout_1(settings.corpus_index_path)

    corpus = open_default_corpus(settings)
    try:
        assert corpus.store.count_documents() == documents
        assert corpus.search("kea alpine parrots", 1)[0].ref == "uploads/kea.md#0"
        if shipped_vectors_path().is_file():  # the bundled chunks have their vectors again
            assert VectorIndex(corpus.store, SHIPPED_MODEL).missing() == 1  # only the upload lacks one
    finally:
        corpus.store.close()


def _prepared_minilm():
    from engine.config import load_settings

    folder = load_settings().local.models_dir / "all-MiniLM-L6-v2"
    if not (folder / "model.safetensors").is_file() or not (folder / "tokenizer.json").is_file():
        pytest.skip(f"the built-in embedding model is not prepared in {folder}")
    from engine.search.minilm import MiniLMEncoder

    return MiniLMEncoder(folder)


def test_the_shipped_vectors_match_the_model_on_a_sample_of_bundled_chunks(bundled_corpus):
    if not shipped_vectors_path().is_file():
        pytest.skip("no shipped vectors in data/vectors")
    store = bundled_corpus.store
    index = VectorIndex(store, SHIPPED_MODEL)
    assert index.missing() == 0  # every bundled chunk got its shipped vector when the index was built
    stored = store.load_vectors(SHIPPED_MODEL)
    assert len(stored.ids) == store.count_chunks() == 17_927
    rows = np.linspace(0, len(stored.ids) - 1, 20).astype(int)  # spread over every collection
    hits = store.chunk_hits(stored.ids[rows].tolist())
    fresh = _prepared_minilm().encode([embedded_text(hit.title, hit.text) for hit in hits])
    shipped = stored.matrix[rows] / np.linalg.norm(stored.matrix[rows], axis=1, keepdims=True)
    cosines = (fresh * shipped).sum(axis=1)
    assert cosines.min() > 0.999, cosines


def test_a_long_bundled_chunks_search_hit_is_looked_up_through_the_shipped_aliases(bundled_corpus):
    """A hit's embedded text is its chunk's first 2,000 characters (`embeddings.hit_text`); for the
    chunks longer than that, the shipped aliases name the chunk's vector, so the built-in embedder
    looks the hit up instead of running the model (which reads only the first 256 tokens anyway:
    the vector of the cut text is the chunk's, checked on a sample with the real model)."""
    from engine.search.builtin_embedder import BuiltinEmbedder
    from engine.search.embeddings import HIT_CHARS, hit_text
    from engine.search.vectors import shipped_aliases_path

    if not shipped_vectors_path().is_file():
        pytest.skip("no shipped vectors in data/vectors")
    store = bundled_corpus.store
    stored = store.load_vectors(SHIPPED_MODEL)
    longer = [
        hit for hit in store.chunk_hits(stored.ids.tolist()) if len(embedded_text(hit.title, hit.text)) > HIT_CHARS
    ]
    aliases = json.loads(shipped_aliases_path(shipped_vectors_path()).read_text())
    assert len(aliases) == len(longer) > 300  # one per long chunk: written from the bundled data as it is

    def no_model(folder):
        raise AssertionError("the model was run for a text whose vector is shipped")

    embedder = BuiltinEmbedder(shipped_vectors_path().parent, load=no_model)
    sample = longer[:: max(1, len(longer) // 12)]
    texts = [hit_text(h) for h in sample]
    assert all(len(text) == HIT_CHARS for text in texts)
    looked_up = np.array(embedder.embed(texts))
    own = np.array(embedder.embed([embedded_text(h.title, h.text) for h in sample]))
    np.testing.assert_allclose(looked_up, own)  # the alias names the chunk's own vector
    fresh = _prepared_minilm().encode(texts)  # and that is the vector of the cut text
    assert (fresh * looked_up).sum(axis=1).min() > 0.999
