"""Ingest of hostile or large files (issue 10, finding 7).

* `thoughtmap ingest` that adds nothing fails (exit 2) and says why;
* binary files renamed `.txt`/`.md` are skipped with a reason instead of being indexed;
* a large text file is read in blocks: streaming gives exactly the chunks and the content hash of
  reading it whole (memory is measured by benchmarks/bench_ingest_memory.py, not here);
* text that cannot be stored (lone surrogates from JSON escapes, NUL, file names that are not
  UTF-8) is cleaned instead of failing the ingest.
"""

from __future__ import annotations

import json
import os
import random

import pytest

from engine import cli
from engine.search import chunking, loaders
from engine.search.chunking import chunk_text, iter_chunks
from engine.search.loaders import Skipped, iter_documents
from engine.search.local import LocalCorpusSearcher, content_hash, content_hash_of_blocks
from storage.corpus_store import CorpusStore

PROSE = (
    "The okapi lives in the Ituri rainforest. It is related to the giraffe! Is it shy? "
    "Very shy, say the rangers.\" Its stripes (like a zebra's) help it hide.)\n"
)


def cli_run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def store(tmp_path):
    opened = CorpusStore(tmp_path / "corpus.sqlite3")
    yield opened
    opened.close()


def varied_text(seed: int, paragraphs: int = 30) -> str:
    """Paragraphs of sentences, run-on sentences far longer than a chunk, odd whitespace."""
    rng = random.Random(seed)
    words = ["okapi", "giraffe.", "forest!", "why?", "stripe", 'quote."', "paren.)", "end.”", "ituri"]
    parts = []
    for _ in range(paragraphs):
        count = rng.choice([0, 3, 12, 40, 90, 600])
        separators = [" ", "  ", "\n", " \t "]
        parts.append("".join(rng.choice(words) + rng.choice(separators) for _ in range(count)))
    return "".join(p + rng.choice(["\n\n", "\n \n", "\r\n\r\n", "\n\n\n\n"]) for p in parts)


def random_blocks(text: str, seed: int, max_size: int) -> list[str]:
    rng = random.Random(seed)
    blocks, position = [], 0
    while position < len(text):
        size = rng.randint(1, max_size)
        blocks.append(text[position : position + size])
        position += size
    return blocks


# ====================================================================== exit codes


def test_ingest_of_only_unusable_files_fails_with_the_reasons(capsys, tmp_path):
    folder = tmp_path / "drop"
    folder.mkdir()
    (folder / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    (folder / "renamed.txt").write_bytes(b"\x7fELF\x02\x01\x01" + bytes(300) + b"\x03\x00\x3e")

    code, out, err = cli_run(capsys, "ingest", str(folder))

    assert code == cli.EXIT_USAGE
    assert "0 document(s) added" in out and "2 skipped" in out
    assert "photo.png: unsupported file type '.png'" in out
    assert "renamed.txt: binary" in out
    assert "nothing was ingested" in err and ".txt" in err


def test_ingest_of_an_empty_folder_fails(capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / ".hidden.txt").write_text("hidden files are never content", encoding="utf-8")
    code, out, err = cli_run(capsys, "ingest", str(tmp_path / "empty"))
    assert code == cli.EXIT_USAGE
    assert "nothing was ingested" in err and "no files found" in err


def test_ingest_with_some_files_skipped_succeeds_and_lists_them(capsys, tmp_path):
    (tmp_path / "good.txt").write_text(PROSE, encoding="utf-8")
    (tmp_path / "bad.txt").write_bytes(bytes(range(256)) * 4)
    code, out, err = cli_run(capsys, "ingest", str(tmp_path / "good.txt"), str(tmp_path / "bad.txt"))
    assert code == cli.EXIT_OK, err
    assert "1 document(s) added" in out and "bad.txt: binary" in out


# ====================================================================== binary content


@pytest.mark.parametrize(
    "name, data",
    [
        ("nul.txt", b"looks like text at first\x00\x00\x00\x01\x02 then binary"),
        ("zip.md", b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + bytes(range(256)) * 8),
        ("utf16.txt", "Text saved as UTF-16 by an old editor.".encode("utf-16")),
        ("high-bytes.txt", random.Random(3).randbytes(4000).translate(bytes(range(128, 256)) * 2)),
        ("controls.html", bytes(range(1, 32)) * 100),
        ("nul.jsonl", b'{"text": "a"}\n' + bytes(500)),
    ],
)
def test_binary_content_is_skipped_with_a_reason(tmp_path, name, data):
    (tmp_path / name).write_bytes(data)
    items = list(iter_documents([tmp_path / name]))
    assert len(items) == 1 and isinstance(items[0], Skipped), items
    assert items[0].reason.startswith("binary content")
    assert "UTF-8" in items[0].reason  # what to do if it is text after all


def test_text_in_a_legacy_encoding_is_still_read(tmp_path):
    text = "Le café de la gare sert un thé très chaud à l'entrée du musée, près de l'hôtel. " * 20
    (tmp_path / "latin1.txt").write_bytes(text.encode("latin-1"))
    (doc,) = list(iter_documents([tmp_path / "latin1.txt"]))
    assert not isinstance(doc, Skipped)
    assert "caf\ufffd de la gare" in doc.text


# ====================================================================== streaming a large file


@pytest.mark.parametrize("seed", range(12))
def test_chunks_of_a_text_read_in_blocks_equal_chunks_of_the_whole_text(monkeypatch, seed):
    # A small hold limit makes the streaming cut paragraphs, sentences and word windows early.
    monkeypatch.setattr(chunking, "_PENDING_CHARS", 300)
    text = varied_text(seed)
    expected = chunk_text(text)
    assert len(expected) > 3
    for block_seed, max_size in ((seed, 7), (seed + 100, 400), (seed + 200, 5000)):
        assert list(iter_chunks(random_blocks(text, block_seed, max_size))) == expected


@pytest.mark.parametrize("text", ["", "   \n\n ", "One short note.", PROSE])
def test_short_texts_read_in_blocks_are_one_chunk_like_the_whole_text(text):
    assert list(iter_chunks(random_blocks(text, 1, 5))) == chunk_text(text)


@pytest.mark.parametrize("seed", range(4))
def test_content_hash_of_blocks_equals_the_hash_of_the_whole_text(seed):
    text = varied_text(seed) + " tail-word"
    for max_size in (3, 50, 10_000):
        assert content_hash_of_blocks(random_blocks(text, seed, max_size)) == content_hash(text)
    assert content_hash_of_blocks(["  ", "\n"]) is None


def test_a_large_text_file_is_streamed_into_the_same_chunks(monkeypatch, tmp_path, store):
    body = "\n\n".join(varied_text(seed, paragraphs=10) for seed in range(8))
    text = "# Okapi field notes\n\n" + body + "\n\nThe very last word is zanzibarine.\n"
    path = tmp_path / "notes.md"
    path.write_text(text, encoding="utf-8")
    # Stream anything over 1 KB, in 500-character blocks.
    monkeypatch.setattr(loaders, "STREAM_ABOVE_BYTES", 1_000)
    monkeypatch.setattr(loaders, "TEXT_BLOCK_CHARS", 500)
    searcher = LocalCorpusSearcher(store)

    report = searcher.ingest([path])

    assert (report.documents_added, report.skipped) == (1, [])
    assert report.chunks_added == store.count_chunks() == len(chunk_text(text))
    (hit,) = searcher.search("zanzibarine", k=1)
    assert hit.title == "Okapi field notes" and "zanzibarine" in hit.text
    # Read whole (no streaming), the same file is recognised as already indexed.
    monkeypatch.setattr(loaders, "STREAM_ABOVE_BYTES", 10_000_000)
    again = searcher.ingest([path])
    assert (again.documents_added, again.duplicates_skipped) == (0, 1)


def test_a_large_file_of_blanks_has_no_text(monkeypatch, tmp_path, store):
    (tmp_path / "blank.txt").write_text(" \n" * 2_000, encoding="utf-8")
    monkeypatch.setattr(loaders, "STREAM_ABOVE_BYTES", 1_000)
    report = LocalCorpusSearcher(store).ingest([tmp_path / "blank.txt"])
    assert report.documents_added == 0
    assert [s.reason for s in report.skipped] == ["no text found"]


# ====================================================================== text that cannot be stored


def test_jsonl_with_lone_surrogates_and_nul_is_ingested_clean(tmp_path, store):
    lines = [
        {"id": "a", "title": "Okapi \ud800 notes", "text": "The okapi\u0000 lives in the Ituri \udfff forest."},
        {"id": "b", "title": "Giraffe", "text": "Giraffes are tall.", "url": "https://example.org/\ud800"},
    ]
    path = tmp_path / "docs.jsonl"
    # json.dumps writes the surrogates and NUL as \ud800 / \u0000 escapes: valid JSON, valid UTF-8.
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    searcher = LocalCorpusSearcher(store)

    report = searcher.ingest([path])

    assert report.documents_added == 2 and report.skipped == []
    (hit,) = searcher.search("okapi ituri", k=1)
    assert hit.title == "Okapi \ufffd notes"
    assert hit.text == "The okapi lives in the Ituri \ufffd forest."
    (giraffe,) = searcher.search("giraffes tall", k=1)
    assert giraffe.url == "https://example.org/\ufffd"


@pytest.mark.skipif(os.uname().sysname == "Darwin", reason="macOS refuses file names that are not UTF-8")
def test_a_file_name_that_is_not_utf8_is_ingested(tmp_path, store):
    folder = tmp_path / "notes"
    folder.mkdir()
    raw_name = os.fsencode(folder) + b"/caf\xe9-menu.txt"  # Latin-1 "café", as old archives have
    with open(raw_name, "wb") as handle:
        handle.write(PROSE.encode("utf-8"))
    (folder / "plain.txt").write_text("Giraffes are tall and eat acacia leaves.", encoding="utf-8")
    searcher = LocalCorpusSearcher(store)

    report = searcher.ingest([folder])

    assert report.documents_added == 2 and report.skipped == []
    (hit,) = searcher.search("okapi ituri", k=1)
    assert hit.title == "caf\\xe9-menu"
    assert hit.url.endswith("/caf%E9-menu.txt")
