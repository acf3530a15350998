"""The local corpus: chunking, loaders for every file type, dedup, incremental ingest, FTS/BM25."""

from __future__ import annotations

import io
import json
import re
import threading

import pytest
from pypdf import PdfReader, PdfWriter

from engine.search.chunking import chunk_text
from engine.search.loaders import Skipped, iter_documents, markdown_title
from engine.search.local import LocalCorpusSearcher
from engine.search.protocol import Searcher
from storage.corpus_store import CorpusStore, fts_query
from tests.support.fixtures_corpus import make_pdf

NASTY_QUERIES = [
    '"AND OR ( * :',
    "NEAR(a b",
    "title:zebra",
    "zeb*",
    '"unbalanced',
    "-zebra ^giraffe",
    "AND",
    "OR NOT",
    "()",
    "{col1 col2}: x",
    "'; DROP TABLE documents; --",
    "a\x00b",
    "c++ && || !",
    "🦓 zebra 🦒",
]


@pytest.fixture
def store(tmp_path):
    s = CorpusStore(tmp_path / "corpus.sqlite3")
    yield s
    s.close()


@pytest.fixture
def searcher(store):
    return LocalCorpusSearcher(store)


def _sentences(n: int, word: str = "alpha") -> str:
    return " ".join(f"Sentence {i} mentions {word} and nothing much else at all." for i in range(n))


# -- chunking ----------------------------------------------------------------------------------


def test_short_text_is_one_chunk():
    assert chunk_text("A short note.") == ["A short note."]
    assert chunk_text("   ") == []


def test_long_text_is_split_with_overlap_and_nothing_is_dropped():
    paragraphs = [_sentences(12, f"topic{p}") for p in range(6)]  # ~720 words
    text = "\n\n".join(paragraphs)
    chunks = chunk_text(text)
    assert len(chunks) >= 3
    for chunk in chunks:
        assert len(chunk.split()) <= 180 * 1.6
    # Every sentence of the input is somewhere in the output.
    for sentence in re.split(r"(?<=\.)\s+", text.replace("\n\n", " ")):
        assert any(sentence.strip() in c for c in chunks), sentence
    # Consecutive chunks share some text (the overlap).
    assert any(set(a.split(". ")[-2:]) & set(b.split(". ")[:3]) for a, b in zip(chunks, chunks[1:]))


def test_run_on_text_without_punctuation_is_cut_but_kept():
    words = [f"w{i}" for i in range(1000)]
    chunks = chunk_text(" ".join(words))
    assert len(chunks) > 3
    joined = set(" ".join(chunks).split())
    assert joined == set(words)


# -- FTS query sanitising ----------------------------------------------------------------------


def test_fts_query_quotes_words_and_drops_stopwords():
    assert fts_query("What is the capital of France?") == '"capital" OR "france"'
    assert fts_query("") == ""
    assert fts_query('"AND OR ( * :') == '"and" OR "or"'  # operators become plain words
    assert fts_query("the of") == '"the" OR "of"'  # only stopwords: keep them


@pytest.mark.parametrize("query", NASTY_QUERIES)
def test_nasty_queries_never_raise(store, query):
    store.add_document("t", "z", "Zebra", None, ["The zebra and the giraffe."], "h1")
    hits = store.search(query, 5)
    assert isinstance(hits, list)


def test_empty_query_returns_nothing(store):
    store.add_document("t", "z", "Zebra", None, ["The zebra."], "h1")
    assert store.search("", 5) == []
    assert store.search("  ?!  ", 5) == []
    assert store.search("zebra", 0) == []


# -- BM25 ranking --------------------------------------------------------------------------------


def test_bm25_ranks_relevant_document_first(store):
    store.add_document("t", "a", "Cooking pasta", None, [_sentences(3, "pasta")], "a")
    store.add_document(
        "t", "b", "Volcanoes", None,
        ["Volcanoes erupt magma. A volcano's magma chamber feeds eruptions of lava."], "b",
    )  # fmt: skip
    store.add_document("t", "c", "Gardening", None, ["Tomatoes need sun; magma is not needed."], "c")
    hits = store.search("volcano magma eruption", 3)
    assert hits[0].ref == "b"
    assert hits[0].score > hits[-1].score
    assert "magma" in hits[0].snippet.lower()


def test_title_weighs_more_than_text(store):
    store.add_document("t", "in-title", "Okapi", None, ["An animal of the Congo forest."], "x")
    store.add_document("t", "in-text", "Forest animals", None, ["The okapi is one animal of the forest."], "y")
    assert store.search("okapi", 2)[0].ref == "in-title"


def test_collection_filter(store):
    store.add_document("one", "1", "Lynx", None, ["lynx"], "1")
    store.add_document("two", "2", "Lynx two", None, ["lynx again"], "2")
    assert [h.ref for h in store.search("lynx", 5, collections=["two"])] == ["2"]


# -- store bookkeeping ---------------------------------------------------------------------------


def test_dedup_replace_counts_meta_clear(store):
    assert store.add_document("c", "r1", "T", "https://x", ["one", "two"], "hash1") is True
    assert store.add_document("c", "r2", "T", None, ["one", "two"], "hash1") is False  # same hash
    assert store.count_documents() == 1 and store.count_chunks() == 2
    # Same ref, new content: the document is replaced, not duplicated.
    assert store.add_document("c", "r1", "T2", None, ["three"], "hash2") is True
    assert store.count_documents() == 1 and store.count_chunks() == 1
    assert store.search("two", 5) == []
    assert store.search("three", 5)[0].title == "T2"
    store.add_document("other", "r3", "U", None, ["four"], "hash3")
    assert store.collections() == {"c": 1, "other": 1}
    assert store.delete_collection("other") == 1
    assert store.search("four", 5) == []
    store.set_meta("k", "v")
    assert store.get_meta("k") == "v" and store.get_meta("missing", "d") == "d"
    store.clear()
    assert store.count_documents() == 0 and store.count_chunks() == 0
    assert store.get_meta("k") is None and store.search("three", 5) == []


def test_identical_chunks_are_stored_once(store):
    store.add_document("c", "a", "A", None, ["shared paragraph", "only in a"], "ha")
    store.add_document("c", "b", "B", None, ["shared paragraph", "only in b"], "hb")
    assert store.count_chunks() == 3
    assert len(store.search("shared paragraph", 5)) == 1


def test_reopen_keeps_the_index(tmp_path):
    path = tmp_path / "c.sqlite3"
    with CorpusStore(path) as s:
        s.add_document("c", "a", "Persist", None, ["kept across opens"], "h")
    with CorpusStore(path) as s:
        assert s.search("kept", 1)[0].ref == "a"


def test_concurrent_searches_and_writes(store):
    errors: list[BaseException] = []

    def writer():
        try:
            for i in range(50):
                store.add_document("c", f"d{i}", f"Doc {i}", None, [f"quokka number {i}"], f"h{i}")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def reader():
        try:
            for _ in range(100):
                store.search("quokka", 3)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert store.count_documents() == 50


def test_titled_opens_the_first_document_with_the_title_as_nocase_compares_it(store):
    store.add_document("c", "first", "Grand Final", None, ["The first one."], "h1")
    store.add_document("c", "second", "grand final", None, ["The second one."], "h2")
    store.add_document("c", "accent", "Élan", None, ["With an accent."], "h3")
    store.add_document("c", "spaced", "Two  spaces", None, ["Spaced out."], "h4")
    # ASCII letters in any case, as SQLite's NOCASE compares titles; runs of spaces in what is
    # asked count as one, while the stored title is matched as it is written.
    assert [hit.text for hit in store.titled("GRAND \n final ")] == ["The first one."]
    assert store.titled("Two  spaces") == []
    assert store.titled("Élan")[0].ref == "accent"
    assert store.titled("élan") == []  # NOCASE folds ASCII letters only
    assert store.titled("   ") == [] and store.titled("No such page") == []


def test_titled_sees_every_change_to_the_index(store, tmp_path):
    assert store.titled("Okapi") == []
    store.add_document("c", "okapi", "Okapi", None, ["An animal of the Congo forest."], "h1")
    assert store.titled("okapi")[0].text == "An animal of the Congo forest."
    store.add_document("c", "okapi", "Okapi", None, ["Replaced: a forest giraffe."], "h2")
    assert [hit.text for hit in store.titled("okapi")] == ["Replaced: a forest giraffe."]
    assert [title for _collection, title in store.titles()] == ["Okapi"]
    # A change committed through another connection (another process: the CLI next to the app).
    with CorpusStore(store.path) as other:
        other.add_document("d", "lynx", "Lynx", None, ["A wild cat."], "h3")
    assert store.titled("LYNX")[0].collection == "d"
    assert store.titles() == [("c", "Okapi"), ("d", "Lynx")]
    store.delete_collection("c")
    assert store.titled("Okapi") == [] and store.titles() == [("d", "Lynx")]


# -- loaders and ingest --------------------------------------------------------------------------


def _write_files(folder):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "notes.txt").write_text("Capybaras are the largest living rodents.", encoding="utf-8")
    (folder / "guide.md").write_text(
        "Intro line\n\n# Axolotl care\n\nAxolotls are salamanders that keep larval features.\n",
        encoding="utf-8",
    )
    (folder / "page.html").write_text(
        "<html><head><title>Pangolin facts</title><script>var x='scriptword';</script></head>"
        "<body><nav>Home | About</nav><article><p>Pangolins are scaly mammals that eat ants "
        "and termites.</p></article></body></html>",
        encoding="utf-8",
    )
    (folder / "paper.pdf").write_bytes(make_pdf(["Narwhals have a long spiral tusk."], "Narwhal paper"))
    sub = folder / "sub"
    sub.mkdir(exist_ok=True)
    lines = [
        json.dumps({"id": "q1", "title": "Quoll", "text": "Quolls are carnivorous marsupials.", "url": "https://example.org/quoll"}),
        "{not json",
        json.dumps({"id": "q2", "contents": "Tarsiers have enormous eyes."}),
        json.dumps({"id": "q3", "title": "No text here"}),
        json.dumps({"body": "Wombats produce cube-shaped droppings.", "title": "Wombat"}),
    ]  # fmt: skip
    (sub / "records.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (sub / "image.png").write_bytes(b"\x89PNG\r\n")
    (sub / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    (folder / ".hidden.txt").write_text("hidden file", encoding="utf-8")


def test_loaders_read_every_file_type(tmp_path):
    _write_files(tmp_path / "docs")
    items = list(iter_documents([tmp_path / "docs", tmp_path / "missing.txt"]))
    docs = {d.title: d for d in items if not isinstance(d, Skipped)}
    skipped = {s.path.name: s.reason for s in items if isinstance(s, Skipped)}
    assert set(docs) == {
        "notes", "Axolotl care", "Pangolin facts", "Narwhal paper", "Quoll", "records q2", "Wombat",
    }  # fmt: skip
    assert "Pangolins are scaly mammals" in docs["Pangolin facts"].text
    assert "scriptword" not in docs["Pangolin facts"].text
    assert "spiral tusk" in docs["Narwhal paper"].text
    assert docs["Quoll"].url == "https://example.org/quoll"
    assert docs["Quoll"].ref.endswith("records.jsonl::q1")
    assert docs["notes"].url.startswith("file://")
    assert "unsupported" in skipped["image.png"]
    assert "PDF" in skipped["broken.pdf"]
    assert "2 line(s) skipped" in skipped["records.jsonl"] and "line 2, 4" in skipped["records.jsonl"]
    assert "no such file" in skipped["missing.txt"]
    assert ".hidden.txt" not in skipped and "hidden" not in docs


def test_encrypted_pdf_is_reported(tmp_path):
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf(["secret text"]))))
    writer.encrypt(user_password="pw", owner_password="owner", algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    (tmp_path / "locked.pdf").write_bytes(buffer.getvalue())
    (skipped,) = list(iter_documents([tmp_path / "locked.pdf"]))
    assert isinstance(skipped, Skipped) and "password" in skipped.reason


def test_markdown_title():
    assert markdown_title("Some text\n\n## Real title ##\n", "f") == "Real title"
    assert markdown_title("Setext title\n=====\nbody", "f") == "Setext title"
    assert markdown_title("no heading", "file") == "file"


def test_ingest_search_dedup_and_incremental(tmp_path, searcher, store):
    folder = tmp_path / "docs"
    _write_files(folder)
    assert isinstance(searcher, Searcher)
    report = searcher.ingest([folder])
    assert report.documents_added == 7
    assert report.duplicates_skipped == 0
    assert report.chunks_added >= 7
    assert {s.path.name for s in report.skipped} == {"image.png", "broken.pdf", "records.jsonl"}
    assert report.seconds >= 0 and "7 document(s) added" in report.summary()
    assert "image.png: unsupported file type '.png'" in report.summary()
    assert store.collections() == {"files": 7}

    for query, title in [
        ("capybara rodents", "notes"),
        ("axolotl salamander", "Axolotl care"),
        ("pangolin termites", "Pangolin facts"),
        ("narwhal tusk", "Narwhal paper"),
        ("quoll marsupials", "Quoll"),
        ("cube droppings wombat", "Wombat"),
    ]:
        hits = searcher.search(query, 3)
        assert hits and hits[0].title == title, query
        assert hits[0].kind == "corpus" and hits[0].ref.endswith("#0") and hits[0].text

    # Re-ingesting the same files adds nothing.
    again = searcher.ingest([folder])
    assert again.documents_added == 0 and again.duplicates_skipped == 7
    assert store.count_documents() == 7

    # Incremental: a new file is added, an edited file is updated in place.
    (folder / "new.txt").write_text("Okapis are related to giraffes.", encoding="utf-8")
    (folder / "notes.txt").write_text("Capybaras love water and swim well.", encoding="utf-8")
    third = searcher.ingest([folder])
    assert third.documents_added == 2 and third.documents_replaced == 1
    assert third.duplicates_skipped == 6
    assert store.count_documents() == 8
    assert searcher.search("okapi giraffes", 1)[0].title == "new"
    assert "swim" in searcher.search("capybara", 1)[0].text
    assert all("largest" not in h.text for h in searcher.search("largest living rodents", 5))


def test_long_document_is_chunked_on_ingest(tmp_path, searcher, store):
    text = "\n\n".join(_sentences(15, f"subject{p}") for p in range(5))
    (tmp_path / "long.md").write_text("# Long one\n\n" + text, encoding="utf-8")
    report = searcher.ingest([tmp_path / "long.md"])
    assert report.chunks_added >= 3
    hits = searcher.search("subject4", 2)
    assert hits[0].title == "Long one" and not hits[0].ref.endswith("#0")


def test_description_mentions_collections(searcher, store):
    assert "empty" in searcher.description
    store.add_document("mine", "r", "T", None, ["x y"], "h")
    assert "mine" in searcher.description and "1 documents" in searcher.description
