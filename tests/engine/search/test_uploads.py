"""Uploaded documents (the Settings page's corpus uploads) are indexed and cited by their file
names: no server folder in a source's ref, URL, a report or an export."""

from __future__ import annotations

import json

import pytest

from engine.search.bundled import rebuild_corpus
from engine.search.local import LocalCorpusSearcher
from engine.search.uploads import add_uploads
from storage.corpus_store import CorpusStore


@pytest.fixture
def searcher(tmp_path):
    store = CorpusStore(tmp_path / "corpus.sqlite3")
    yield LocalCorpusSearcher(store)
    store.close()


@pytest.fixture
def uploads(tmp_path):
    return tmp_path / "server" / "home" / "uploads"


def test_an_upload_is_named_by_its_file_name(searcher, uploads):
    report = add_uploads(searcher, uploads, [("quokka notes.md", b"# Quokka notes\n\nQuokkas shelter under shrubs.")])
    assert report.documents_added == 1 and not report.skipped
    [hit] = searcher.search("quokkas shelter shrubs", 3)
    assert hit.ref == "uploads/quokka notes.md#0" and hit.url is None
    assert hit.title == "Quokka notes"
    assert (uploads / "quokka notes.md").exists()


def test_a_jsonl_upload_keeps_its_own_urls_and_drops_the_file_url(searcher, uploads):
    lines = [
        {"title": "Kea", "text": "Kea parrots live in the Southern Alps.", "url": "https://example.org/kea"},
        {"title": "Takahe", "text": "Takahe birds graze alpine tussock."},
    ]
    add_uploads(searcher, uploads, [("birds.jsonl", "\n".join(json.dumps(x) for x in lines).encode())])
    kea = searcher.search("kea parrots Southern Alps", 1)[0]
    takahe = searcher.search("takahe alpine tussock", 1)[0]
    assert kea.url == "https://example.org/kea" and takahe.url is None
    assert kea.ref.startswith("uploads/birds.jsonl::") and takahe.ref.startswith("uploads/birds.jsonl::")


def test_a_skipped_upload_is_reported_by_its_name(searcher, uploads):
    report = add_uploads(searcher, uploads, [("picture.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00binary")])
    assert report.documents_added == 0
    assert [str(s.path) for s in report.skipped] == ["uploads/picture.txt"]
    assert str(uploads) not in report.summary()


def test_a_path_like_name_stays_in_the_uploads_folder(searcher, uploads):
    add_uploads(searcher, uploads, [("../../escape.txt", b"Lighthouse keepers trimmed the wicks.")])
    assert [p.name for p in uploads.iterdir()] == ["_.._escape.txt"]
    assert searcher.search("lighthouse keepers wicks", 1)[0].ref == "uploads/_.._escape.txt#0"


def test_an_upload_sent_again_is_updated_under_the_same_name(searcher, uploads):
    add_uploads(searcher, uploads, [("notes.txt", b"Fjords were carved by glaciers.")])
    report = add_uploads(searcher, uploads, [("notes.txt", b"Fjords were carved by glaciers over ice ages.")])
    assert report.documents_replaced == 1
    assert [h.ref for h in searcher.search("fjords carved glaciers", 5)] == ["uploads/notes.txt#0"]


def test_rebuilding_the_index_keeps_the_file_names(searcher, uploads, monkeypatch):
    import engine.search.bundled as bundled

    monkeypatch.setattr(bundled, "ensure_bundled_corpus", lambda store, progress=None: None)  # no datasets here
    add_uploads(searcher, uploads, [("notes.txt", b"Fjords were carved by glaciers.")])
    rebuild_corpus(searcher, uploads)
    [hit] = searcher.search("fjords carved glaciers", 5)
    assert hit.ref == "uploads/notes.txt#0" and hit.url is None


# ------------------------------------------------------------------ a person's own uploads (teams)


def test_a_persons_uploads_are_found_only_by_their_runs(searcher, uploads):
    from engine.search.exclusion import OwnUploadsOnly

    same = b"Axolotls regrow whole limbs within weeks."
    add_uploads(searcher, uploads, [("notes.md", same)], owner=5)
    # The same file from another person is theirs too: not skipped as a duplicate of the first.
    report = add_uploads(searcher, uploads, [("notes.md", same)], owner=6)
    assert report.documents_added == 1 and report.duplicates_skipped == 0
    add_uploads(searcher, uploads, [("team.md", b"Axolotls are salamanders that keep their gills.")])
    assert (uploads / "u5" / "notes.md").exists() and (uploads / "u6" / "notes.md").exists()
    refs = {uid: [h.ref for h in OwnUploadsOnly(searcher, uid).search("axolotls", 10)] for uid in (5, 6, 7)}
    assert sorted(refs[5]) == ["uploads/team.md#0", "uploads/u5/notes.md#0"]
    assert sorted(refs[6]) == ["uploads/team.md#0", "uploads/u6/notes.md#0"]
    assert refs[7] == ["uploads/team.md#0"]  # the shared corpus only
    page = OwnUploadsOnly(searcher, 7).titled("notes")  # a page by its title: not someone else's either
    assert page is None or not page.ref.startswith(("uploads/u5/", "uploads/u6/"))
    assert set(searcher.store.collections()) == {"files", "uploads-u5", "uploads-u6"}


def test_a_rebuilt_index_keeps_each_persons_uploads_theirs(searcher, uploads, monkeypatch):
    from engine.search import bundled
    from engine.search.exclusion import OwnUploadsOnly

    monkeypatch.setattr(bundled, "ensure_bundled_corpus", lambda store, progress=None: None)  # no datasets here
    add_uploads(searcher, uploads, [("mine.md", b"Pangolins roll into armoured balls.")], owner=5)
    add_uploads(searcher, uploads, [("ours.md", b"Pangolins eat ants and termites.")])
    rebuild_corpus(searcher, uploads)
    assert [h.ref for h in OwnUploadsOnly(searcher, 6).search("pangolins", 10)] == ["uploads/ours.md#0"]
    assert "uploads/u5/mine.md#0" in [h.ref for h in OwnUploadsOnly(searcher, 5).search("pangolins", 10)]
    assert set(searcher.store.collections()) == {"files", "uploads-u5"}


def test_no_shared_knowledge_graph_is_built_of_a_persons_uploads(searcher, uploads):
    from engine.knowledge.build import CollectionBuilder
    from engine.knowledge.stored import KnowledgeError

    add_uploads(searcher, uploads, [("mine.md", b"Okapis are giraffes' closest relatives.")], owner=5)
    builder = CollectionBuilder(None, searcher.store, None, None)  # type: ignore[arg-type]
    with pytest.raises(KnowledgeError, match="is one person's uploads"):
        builder.build("uploads-u5")
