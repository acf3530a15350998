"""The bundled offline corpus (data/datasets) and the default corpus searcher."""

from __future__ import annotations

import json

from engine.config import load_settings
from engine.search.bundled import (
    BUNDLED_COLLECTIONS,
    BUNDLED_DATA_DIR,
    META_KEY,
    bundled_version,
    ensure_bundled_corpus,
    open_default_corpus,
    wikipedia_url,
)
from engine.search.local import LocalCorpusSearcher
from storage.corpus_store import CorpusStore
from tests.support.fixtures_corpus import bundled_corpus, no_bundled_reading, prebuilt_corpus_home  # noqa: F401

DATASET_FOLDERS = ["hotpotqa", "2wikimultihopqa", "nq", "freshwiki", "strategyqa", "deepresearchgym"]


def test_datasets_and_licence_file_are_shipped():
    for folder in DATASET_FOLDERS:
        assert any((BUNDLED_DATA_DIR / folder).iterdir()), folder
    sources = (BUNDLED_DATA_DIR.parent / "SOURCES.md").read_text(encoding="utf-8")
    for licence in ["CC BY-SA 4.0", "CC BY-SA 3.0", "Apache-2.0", "MIT", "CDLA-Permissive-2.0"]:
        assert licence in sources


def test_bundled_corpus_is_indexed(bundled_corpus):
    status = bundled_corpus.status
    assert not status.missing_files
    assert set(status.collections) == set(BUNDLED_COLLECTIONS)
    assert all(count > 0 for count in status.collections.values())
    assert status.documents > 10_000
    assert status.chunks > status.documents  # FreshWiki articles are split into several chunks
    if status.indexed_now:  # False when another module's copy of the fixture built it first
        assert status.duplicates_skipped > 0  # paragraphs repeated across questions/files
    assert bundled_corpus.store.get_meta(META_KEY) == bundled_version()


def test_search_finds_hotpotqa_paragraphs_with_wikipedia_urls(bundled_corpus):
    hits = bundled_corpus.searcher.search("Arthur's Magazine First for Women", 5)
    assert hits
    assert all(h.kind == "corpus" for h in hits)
    hotpot = [h for h in hits if h.ref.startswith("hotpotqa/")]
    assert hotpot
    assert all(h.url.startswith("https://en.wikipedia.org/wiki/") for h in hotpot)
    titles = {h.title for h in hits}
    assert {"Arthur's Magazine", "First for Women"} <= titles
    arthur = next(h for h in hits if h.title == "Arthur's Magazine")
    assert arthur.ref == "hotpotqa/Arthur's Magazine#0"
    assert arthur.url == "https://en.wikipedia.org/wiki/Arthur's_Magazine"
    assert "1844" in arthur.text and arthur.snippet


def test_every_collection_is_searchable(bundled_corpus):
    store = bundled_corpus.store
    assert store.search("first Nobel Prize in Physics Röntgen", 1, collections=["nq"])
    assert store.search("Teutberga Lotharingia", 1, collections=["2wikimultihopqa"])
    fresh = store.search("2022 AFL Grand Final Geelong Sydney", 3, collections=["freshwiki"])
    assert fresh[0].url == "https://en.wikipedia.org/wiki/2022_AFL_Grand_Final"
    assert fresh[0].title == "2022 AFL Grand Final"


def test_second_call_reads_nothing_and_adds_nothing(bundled_corpus):
    store = bundled_corpus.store
    documents, chunks = store.count_documents(), store.count_chunks()
    with no_bundled_reading():
        status = ensure_bundled_corpus(store)
    assert not status.indexed_now
    assert (store.count_documents(), store.count_chunks()) == (documents, chunks)


def test_open_default_corpus_reuses_the_index(prebuilt_corpus_home):
    settings = load_settings()
    with no_bundled_reading():
        searcher = open_default_corpus(settings)
    assert isinstance(searcher, LocalCorpusSearcher)
    assert searcher.store.path == prebuilt_corpus_home / "corpus.sqlite3"
    assert "hotpotqa" in searcher.description
    assert searcher.search("First for Women magazine", 1)[0].title == "First for Women"


def test_wikipedia_url():
    assert wikipedia_url("Arthur's Magazine") == "https://en.wikipedia.org/wiki/Arthur's_Magazine"
    assert wikipedia_url("C++ (language)") == "https://en.wikipedia.org/wiki/C%2B%2B_(language)"
    assert wikipedia_url("Björk") == "https://en.wikipedia.org/wiki/Bj%C3%B6rk"
    assert wikipedia_url("AC/DC") == "https://en.wikipedia.org/wiki/AC/DC"
    assert wikipedia_url("Who? What") == "https://en.wikipedia.org/wiki/Who%3F_What"


def _write_tiny_datasets(root, hotpot_extra=""):
    (root / "hotpotqa").mkdir(parents=True)
    (root / "nq").mkdir()
    (root / "freshwiki").mkdir()
    context = [["Kiwi", ["The kiwi is a flightless bird.", " It lives in New Zealand."]]]
    lines = [{"context": context}, {"context": context + [["Emu", ["The emu is tall." + hotpot_extra]]]}]
    (root / "hotpotqa/hotpotqa_autoact_easy_medium_hard_300.jsonl").write_text(
        "\n".join(json.dumps(x) for x in lines), encoding="utf-8"
    )
    nq = {"ctxs": [{"title": "Moa", "text": "Moas were giant birds."}, {"title": "Moa", "text": "Moas went extinct."}]}
    (root / "nq/nq_open_oracle_first500.jsonl").write_text(json.dumps(nq), encoding="utf-8")
    article = {
        "topic": "Big Bird Event",
        "file_stem": "Big_Bird_Event",
        "url": "https://en.wikipedia.org/wiki/Big_Bird_Event",
        "text": "Big_Bird_Event\n\n" + " ".join(f"Sentence {i} about a festival." for i in range(200)),
    }
    (root / "freshwiki/freshwiki_articles_100.jsonl").write_text(json.dumps(article), encoding="utf-8")


def test_layouts_dedup_refs_versions_and_user_documents(tmp_path):
    data = tmp_path / "data"
    _write_tiny_datasets(data)
    progress = []
    with CorpusStore(tmp_path / "c.sqlite3") as store:
        store.add_document("files", "/home/me/notes.txt", "notes", None, ["my own kiwi notes"], "mine")
        status = ensure_bundled_corpus(store, lambda msg, frac: progress.append((msg, frac)), data_dir=data)
        assert status.indexed_now
        assert status.collections == {"hotpotqa": 2, "2wikimultihopqa": 0, "nq": 2, "freshwiki": 1}
        assert status.duplicates_skipped == 1  # the repeated Kiwi paragraph
        assert set(status.missing_files) == {
            "hotpotqa/hotpotqa_dev_fullwiki_500.jsonl",
            "2wikimultihopqa/2wikimultihopqa_dev_500.jsonl",
            "2wikimultihopqa/hipporag_2wiki_corpus_6119.jsonl",
        }
        assert progress[-1] == ("bundled corpus ready", 1.0)
        kiwi = store.search("kiwi flightless", 1)[0]
        assert kiwi.text == "The kiwi is a flightless bird. It lives in New Zealand."
        assert kiwi.url == "https://en.wikipedia.org/wiki/Kiwi"
        # Two different passages of one article get distinct refs.
        assert {h.ref for h in store.search("moas", 5)} == {"nq/Moa", "nq/Moa (2)"}
        fresh = store.search("festival", 10, collections=["freshwiki"])
        assert len(fresh) > 1 and all(h.url.endswith("Big_Bird_Event") for h in fresh)
        assert not any("Big_Bird_Event" in h.text for h in fresh)  # file stem line dropped

        # Same data: nothing to do. Changed data: the bundled collections are rebuilt, the
        # user's own documents stay.
        assert not ensure_bundled_corpus(store, data_dir=data).indexed_now
        (data / "hotpotqa/hotpotqa_autoact_easy_medium_hard_300.jsonl").unlink()
        _write_tiny_datasets(tmp_path / "data2", hotpot_extra=" Emus run fast.")
        again = ensure_bundled_corpus(store, data_dir=tmp_path / "data2")
        assert again.indexed_now and again.version != status.version
        assert "fast" in store.search("emu", 1)[0].text
        assert store.collections()["files"] == 1
        assert store.collections()["hotpotqa"] == 2
