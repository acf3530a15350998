"""Shared corpus fixtures and helpers.

Reuse in a test module with::

    from tests.support.fixtures_corpus import bundled_corpus, prebuilt_corpus_home  # noqa: F401

* ``bundled_corpus`` (session scope): the bundled datasets indexed once per test session into
  ``<basetemp>/bundled-corpus/corpus.sqlite3``; gives ``.store`` (CorpusStore), ``.searcher`` (LocalCorpusSearcher), ``.status``
  and ``.path``. Treat it as read-only: other tests share it.
* ``prebuilt_corpus_home`` (per test): copies that index to this test's
  ``$THOUGHTMAP_HOME/corpus.sqlite3``, so ``load_settings()`` + ``open_default_corpus`` /
  ``build_searcher("local", ...)`` start instantly instead of re-indexing (about 1.5 s).
* ``no_bundled_reading()``: a context in which reading the bundled data files fails the test, so a
  test can show an index is reused without timing it.
* ``make_pdf(lines, title=None)``: bytes of a small real PDF whose text pypdf can extract.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest

from engine.search import bundled
from engine.search.bundled import BundledStatus, ensure_bundled_corpus
from engine.search.local import LocalCorpusSearcher
from storage.corpus_store import CorpusStore


@dataclass
class BundledCorpus:
    path: Path
    store: CorpusStore
    searcher: LocalCorpusSearcher
    status: BundledStatus


@pytest.fixture(scope="session")
def bundled_corpus(tmp_path_factory) -> BundledCorpus:
    # Each test module that imports this fixture gets its own fixture definition, so pytest may
    # run it more than once per session. A fixed path under the session's base temp folder makes
    # every run after the first open the already-built index (ensure_bundled_corpus is then a
    # no-op) instead of indexing again.
    folder = tmp_path_factory.getbasetemp() / "bundled-corpus"
    folder.mkdir(exist_ok=True)
    path = folder / "corpus.sqlite3"
    store = CorpusStore(path)
    status = ensure_bundled_corpus(store)
    yield BundledCorpus(path=path, store=store, searcher=LocalCorpusSearcher(store), status=status)
    store.close()


@pytest.fixture
def prebuilt_corpus_home(bundled_corpus, _isolated_home) -> Path:
    """This test's THOUGHTMAP_HOME, holding a copy of the session's bundled index."""
    bundled_corpus.store.backup_to(_isolated_home / "corpus.sqlite3")
    return _isolated_home


@contextmanager
def no_bundled_reading() -> Iterator[None]:
    """Fail the test if the bundled data files are read (the index would be rebuilt)."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("the bundled data was read again: the index was not reused")

    with mock.patch.object(bundled, "_documents", refuse):
        yield


def _pdf_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(lines: list[str], title: str | None = None) -> bytes:
    """A minimal one-page PDF (Helvetica text), written by hand with a correct xref table."""
    ops = ["BT", "/F1 12 Tf", "14 TL", "72 720 Td"]
    for line in lines:
        ops.append(f"({_pdf_escape(line)}) Tj T*")
    ops.append("ET")
    stream = "\n".join(ops).encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    if title:
        objects.append(b"<< /Title (" + _pdf_escape(title).encode("latin-1") + b") >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    info = b" /Info %d 0 R" % len(objects) if title else b""
    out += b"trailer\n<< /Size %d /Root 1 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        info,
        xref,
    )
    return bytes(out)
