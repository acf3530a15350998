"""The local full-text corpus index: its own SQLite file with FTS5 and BM25 ranking.

It is separate from the app database (which may be PostgreSQL) because FTS5 is SQLite-only and the
index is a rebuildable cache of files and bundled datasets, not user state.

Schema:
* ``documents``: one row per source document (``ref`` unique, ``content_hash`` unique: dedup).
* ``chunks``: the searchable pieces of a document; ``text_hash`` is unique across the whole index,
  so a paragraph that appears in several sources is stored (and returned) once.
* ``chunks_fts``: an FTS5 *external-content* table over the ``chunk_content`` view (document title
  + chunk text), so the text is stored once; we keep it in sync by hand inside each transaction.
* ``chunk_vectors``: one dense vector per chunk (float16 bytes) and the model that made it
  (`engine/search/vectors.py` searches them); removed with their chunk. A chunk whose vector is
  another model's counts as lacking one: one embedder is in use at a time.
* ``meta``: key/value pairs (schema version, bundled-corpus version, ...).

Layout versions: 1 had no ``chunk_vectors``; opening a version-1 index adds the table and keeps
everything else (`_MIGRATIONS`). Any other layout is rebuilt empty: the index is a cache.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, cast

import numpy as np

SCHEMA_VERSION = "2"
SCHEMA_KEY = "schema_version"  # the meta row that holds it

# BM25 column weights for (title, text): a query term in the title counts twice as much.
TITLE_WEIGHT = 2.0
TEXT_WEIGHT = 1.0

# A query is cut to this many terms, so a pasted page cannot make a huge FTS expression.
MAX_QUERY_TERMS = 48

# Full-text rows are written this many at a time, so a document's chunks need not all be held.
FTS_WRITE_BATCH = 500

# How long a write waits for another process's write to the index before giving up
# (THOUGHTMAP_CORPUS_LOCK_TIMEOUT). Reads never wait: the index is in WAL mode.
DEFAULT_BUSY_TIMEOUT_S = 30.0

# Documents removed per write transaction, so a large removal never holds the write lock long.
DELETE_BATCH = 2000

# Vectors are stored as float16: half of float32's bytes (384 dimensions: 768 bytes a chunk), and
# for unit vectors a cosine error of about 1e-4, far below what separates neighbours in a ranking.
VECTOR_DTYPE = np.float16
# Rows per page when vectors or the chunks lacking them are read.
VECTOR_PAGE = 4096

# Dense vectors (layout version 2). A chunk's vector goes with it (ON DELETE CASCADE).
_VECTORS_SCHEMA = """
CREATE TABLE IF NOT EXISTS chunk_vectors (
    chunk_id INTEGER PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    model TEXT NOT NULL,
    vector BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS chunk_vectors_model ON chunk_vectors(model);
"""

_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS documents (
    id INTEGER PRIMARY KEY,
    collection TEXT NOT NULL,
    ref TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    url TEXT,
    content_hash TEXT NOT NULL UNIQUE,
    added_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS documents_collection ON documents(collection);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,
    doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    text TEXT NOT NULL,
    text_hash TEXT NOT NULL UNIQUE
);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id);
CREATE VIEW IF NOT EXISTS chunk_content AS
    SELECT c.id AS id, d.title AS title, c.text AS text
    FROM chunks c JOIN documents d ON d.id = c.doc_id;
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    title, text,
    content='chunk_content', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
"""
    + _VECTORS_SCHEMA
)

# Older layout version -> the statements that bring it to SCHEMA_VERSION, keeping its rows.
_MIGRATIONS: dict[str, str] = {"1": _VECTORS_SCHEMA}

# Words that carry no retrieval signal; dropping them keeps OR-queries from matching everything.
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own s same she should so some such t than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves d ll m o re ve y near
    """.split()
)

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def fts_query(query: str) -> str:
    """Turn free text into a safe FTS5 expression: quoted word tokens joined with OR.

    Operators, quotes, brackets, colons and stars in the input become plain separators, so no user
    query can raise a syntax error. Stopwords are dropped unless nothing else is left. Returns ""
    when the query has no words.
    """
    words = [w.lower() for w in _WORD.findall(query)]
    kept = [w for w in words if w not in STOPWORDS] or words
    unique = list(dict.fromkeys(kept))[:MAX_QUERY_TERMS]
    # Tokens contain only letters/digits, but double any quote anyway: quoting is the escape rule.
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in unique)


class CorpusLocked(Exception):
    """Another process held the index's write lock for longer than this store waits."""

    def __init__(self, path: Path, waited_s: float) -> None:
        # Why, in words that fit after "could not ...:", and the whole sentence as the message.
        self.reason = f"another process has been writing to it for more than {waited_s:g} s"
        super().__init__(
            f"the corpus index {path} is locked: {self.reason} (THOUGHTMAP_CORPUS_LOCK_TIMEOUT sets "
            f"this wait); try again when it is done."
        )
        self.path = path
        self.waited_s = waited_s


class CorpusUnavailable(Exception):
    """The corpus index cannot be opened or written (a read-only folder: its write-ahead log needs
    one it can write; a full disk; a file that is not an index). The message names the file and the cause."""

    def __init__(self, path: Path, cause: Exception) -> None:
        super().__init__(f"the corpus index {path} cannot be used ({cause})")
        self.path = path


@dataclass(frozen=True)
class _TitleCatalogue:
    """Every document's (collection, title) in id order, and each title as NOCASE compares it
    (`_nocase`) to the first document with it, as of `signature` (`CorpusStore.change_signature`)."""

    signature: tuple[int, int]
    titles: list[tuple[str, str]]
    ids: dict[str, int]


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _nocase(text: str) -> str:
    """`text` as SQLite's NOCASE collation compares it: ASCII letters lower-cased, nothing else."""
    return text.translate(_ASCII_LOWER)


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    return getattr(exc, "sqlite_errorname", "") in ("SQLITE_BUSY", "SQLITE_LOCKED") or "locked" in str(exc)


def read_meta(path: Path | str, key: str, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> str | None:
    """A meta value of the index at `path`, read through a read-only connection; None when the file,
    its meta table or the key is missing. Never creates the file and never takes the write lock, so
    checking "is it built?" works while another process writes (WAL) or holds the build lock."""
    path = Path(path)
    if not path.is_file():
        return None
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=busy_timeout_s)
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None  # created but never set up (a build that died before its schema)
        if _is_busy(exc):  # a writer that is no WAL writer (an exclusive lock) held it past the wait
            raise CorpusLocked(path, busy_timeout_s) from exc
        raise CorpusUnavailable(path, exc) from exc
    except sqlite3.DatabaseError as exc:  # not a SQLite file at all
        raise CorpusUnavailable(path, exc) from exc
    finally:
        conn.close()
    return row[0] if row else None


_SIDE_FILES = ("-wal", "-shm", "-journal")


def remove_index(path: Path) -> None:
    """Delete an index file and SQLite's files beside it. Only for a file nobody has open: a dead
    build's scratch file, found by the holder of the build lock."""
    for name in (str(path), *(str(path) + suffix for suffix in _SIDE_FILES)):
        Path(name).unlink(missing_ok=True)


def move_index(scratch: Path, path: Path) -> None:
    """Put a complete, closed scratch index in place at `path`, where there is none, in one atomic
    rename: a process opening `path` finds no file or the whole index, never part of it.

    The file is switched to WAL mode first (stored in it: nobody opening it then needs a lock to
    set it) and synced, as its build never synced it. A WAL or shared-memory file left at `path`
    belongs to an index deleted by hand: SQLite would replay it into this one, so it goes first.
    """
    conn = sqlite3.connect(str(scratch), isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
    finally:
        conn.close()  # the last connection: its empty WAL and shared memory go with it
    if any(Path(str(scratch) + suffix).exists() for suffix in ("-wal", "-journal")):
        raise RuntimeError(f"{scratch} is still open: close it before moving it into place")
    fd = os.open(scratch, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    for suffix in _SIDE_FILES:
        Path(str(path) + suffix).unlink(missing_ok=True)
    os.replace(scratch, path)


def text_hash(text: str, owner: str = "") -> str:
    """The hash used to deduplicate chunks (whitespace-normalised text). A person's own document
    (`owner`) is deduplicated only against their own: a passage Ada uploaded must not keep Bo's copy
    of it out of Bo's searches."""
    normalised = " ".join(text.split())
    return hashlib.sha1((f"{owner}\x00{normalised}" if owner else normalised).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class NewDocument:
    """A document to add: its chunks are already split (see engine.search.chunking).

    `chunks` is read once, while the document is written, and only if it is not a duplicate: a
    large file's chunks can stream from disk. If reading them raises, the write is rolled back.
    """

    collection: str
    ref: str
    title: str
    url: str | None
    chunks: Iterable[str]
    content_hash: str
    owner: str = ""  # a person's own upload ("u5"): deduplicated only against their own documents


@dataclass
class AddStats:
    """What one `add_documents` call did."""

    added: int = 0
    duplicates: int = 0
    replaced: int = 0
    chunks_added: int = 0
    added_flags: list[bool] = field(default_factory=list)


@dataclass(frozen=True)
class StoredVectors:
    """One model's vectors as loaded for search: row i is chunk `ids[i]`, of collection
    `collections[collection_of[i]]`."""

    ids: np.ndarray  # int64, ascending
    matrix: np.ndarray  # float32, (rows, dimensions)
    collection_of: np.ndarray  # int32 per row
    collections: tuple[str, ...]


class ChunkHit(NamedTuple):
    """One search result: a chunk and the document it belongs to. Higher `score` is better.

    A named tuple, not a frozen dataclass: a hybrid search makes about 100 of these and keeps
    half, and a tuple is made in half the time (1.2 against 2.3 µs)."""

    title: str
    ref: str
    url: str | None
    collection: str
    ordinal: int
    text: str
    snippet: str
    score: float
    chunk_id: int = 0  # the chunk's row in the index (0 where a caller made a hit itself)


class CorpusStore:
    """A thread-safe SQLite FTS5 index of documents split into chunks.

    One connection shared under a re-entrant lock: every call is short (searches take
    milliseconds, writes are batched into one transaction per call), and the lock lets a caller
    hold a whole check-then-index sequence with `transaction()`. WAL lets other processes (the CLI
    next to the app) read while one writes, and reads never take the write lock. A write waits
    `busy_timeout_s` for another process's write, then raises `CorpusLocked`.
    """

    def __init__(
        self, path: Path | str, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S, scratch: bool = False
    ) -> None:
        """`scratch`: a file only its builder opens, then put in place by `move_index`: written
        with no journal and no syncs (each batch is written once: no WAL copy, checkpoint or
        fsync). A failed write cannot be rolled back then: a build that fails is thrown away whole."""
        self.path = Path(path)
        self.busy_timeout_s = busy_timeout_s
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._depth = 0
        # Bumped by every change made through this object, so readers can cache derived values.
        self.generation = 0
        self._titles: _TitleCatalogue | None = None  # `_catalogue`
        # isolation_level=None: we issue BEGIN/COMMIT ourselves so batches are one transaction.
        self._conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=busy_timeout_s)
        self._conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        if scratch:
            self._conn.execute("PRAGMA journal_mode=OFF")
            self._conn.execute("PRAGMA synchronous=OFF")
        else:
            # A no-op without any lock once the file is in WAL mode (the mode is stored in the file).
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._init_schema()

    # -- lifecycle -----------------------------------------------------------------------------

    def _schema_version(self) -> str | None:
        has_meta = self._conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
        row = has_meta and self._conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return row[0] if row else None

    def _init_schema(self) -> None:
        if self._schema_version() == SCHEMA_VERSION:
            return  # already set up: opening an index must not need the write lock
        with self.transaction():
            version = self._schema_version()
            if version == SCHEMA_VERSION:
                return  # brought up to date by another process while we waited for the lock
            if version in _MIGRATIONS:
                for stmt in _split_sql(_MIGRATIONS[version]):
                    self._conn.execute(stmt)
                self._conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (SCHEMA_VERSION,))
                return
            if version is not None:
                # The index is a cache of files and bundled data: an old layout is rebuilt.
                for stmt in (
                    "DROP TABLE IF EXISTS chunk_vectors",
                    "DROP TABLE IF EXISTS chunks_fts",
                    "DROP VIEW IF EXISTS chunk_content",
                    "DROP TABLE IF EXISTS chunks",
                    "DROP TABLE IF EXISTS documents",
                    "DROP TABLE IF EXISTS meta",
                ):
                    self._conn.execute(stmt)
            for stmt in _split_sql(_SCHEMA):
                self._conn.execute(stmt)
            self._conn.execute(
                "INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('rank', ?)",
                (f"bm25({TITLE_WEIGHT}, {TEXT_WEIGHT})",),
            )
            self._conn.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)",
                (SCHEMA_VERSION,),
            )

    def backup_to(self, target: Path | str) -> None:
        """Write a consistent copy of the index to `target` (SQLite online backup).

        Lets tests (and tools) reuse one built index instead of re-indexing per copy.
        """
        target = Path(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            destination = sqlite3.connect(str(target))
            try:
                self._conn.backup(destination)
            finally:
                destination.close()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> CorpusStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Hold the store for a sequence of calls and run them in one write transaction.

        Re-entrant: store methods called inside join the outer transaction. BEGIN IMMEDIATE takes
        the write lock up front, so another process doing the same check-then-write waits for us.
        """
        with self._lock:
            outer = self._depth == 0
            if outer:
                try:
                    self._conn.execute("BEGIN IMMEDIATE")
                except sqlite3.OperationalError as exc:
                    if _is_busy(exc):
                        raise CorpusLocked(self.path, self.busy_timeout_s) from exc
                    raise
            self._depth += 1
            try:
                yield
                if outer:
                    self._conn.execute("COMMIT")
                    # Also after: a reader that cached something between a writer's first bump
                    # and its commit sees a new generation once the change is there.
                    self.generation += 1
            except BaseException as exc:
                if outer:
                    try:
                        self._conn.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass  # SQLite rolled it back itself (a full disk, an I/O error)
                if isinstance(exc, sqlite3.OperationalError) and outer:
                    # A full disk or an I/O error: one typed error that says which index and why.
                    if _is_busy(exc):
                        raise CorpusLocked(self.path, self.busy_timeout_s) from exc
                    raise CorpusUnavailable(self.path, exc) from exc
                raise
            finally:
                self._depth -= 1

    # -- writes --------------------------------------------------------------------------------

    def add_document(
        self,
        collection: str,
        ref: str,
        title: str,
        url: str | None,
        chunks: list[str],
        content_hash: str,
    ) -> bool:
        """Add one document. False if a document with this content hash is already indexed.

        A document with the same `ref` but different content replaces the old one (re-ingesting
        an edited file updates it).
        """
        stats = self.add_documents([NewDocument(collection, ref, title, url, chunks, content_hash)])
        return stats.added_flags[0]

    def add_documents(self, docs: Iterable[NewDocument]) -> AddStats:
        """Add many documents in one transaction (much faster than one commit each)."""
        stats = AddStats()
        now = time.time()
        self.generation += 1
        with self.transaction():
            cur = self._conn.cursor()
            for doc in docs:
                if cur.execute("SELECT 1 FROM documents WHERE content_hash = ?", (doc.content_hash,)).fetchone():
                    stats.duplicates += 1
                    stats.added_flags.append(False)
                    continue
                old = cur.execute("SELECT id FROM documents WHERE ref = ?", (doc.ref,)).fetchone()
                if old:
                    self._delete_documents([old[0]])
                    stats.replaced += 1
                cur.execute(
                    "INSERT INTO documents(collection, ref, title, url, content_hash, added_at)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (doc.collection, doc.ref, doc.title, doc.url, doc.content_hash, now),
                )
                doc_id = cur.lastrowid
                fts_rows: list[tuple[int, str, str]] = []
                for ordinal, chunk in enumerate(doc.chunks):
                    if not chunk.strip():
                        continue
                    cur.execute(
                        "INSERT OR IGNORE INTO chunks(doc_id, ordinal, text, text_hash) VALUES (?, ?, ?, ?)",
                        (doc_id, ordinal, chunk, text_hash(chunk, doc.owner)),
                    )
                    if cur.rowcount == 1:  # 0: the same text is already indexed elsewhere
                        # The row was just inserted, so sqlite3 has set its id.
                        fts_rows.append((cast(int, cur.lastrowid), doc.title, chunk))
                        stats.chunks_added += 1
                    if len(fts_rows) >= FTS_WRITE_BATCH:
                        self._index_chunks(fts_rows)
                self._index_chunks(fts_rows)
                stats.added += 1
                stats.added_flags.append(True)
        return stats

    def _index_chunks(self, rows: list[tuple[int, str, str]]) -> None:
        """Add (chunk id, title, text) rows to the full-text index and empty `rows`."""
        self._conn.executemany("INSERT INTO chunks_fts(rowid, title, text) VALUES (?, ?, ?)", rows)
        rows.clear()

    def _delete_documents(self, doc_ids: Sequence[int]) -> None:
        """Remove documents, their chunks and their FTS entries (call inside a transaction)."""
        cur = self._conn.cursor()
        for start in range(0, len(doc_ids), 500):
            batch = list(doc_ids[start : start + 500])
            marks = ",".join("?" * len(batch))
            # External-content FTS needs the old values to remove its index entries.
            rows = cur.execute(
                f"SELECT c.id, d.title, c.text FROM chunks c JOIN documents d ON d.id = c.doc_id"
                f" WHERE c.doc_id IN ({marks})",
                batch,
            ).fetchall()
            cur.executemany(
                "INSERT INTO chunks_fts(chunks_fts, rowid, title, text) VALUES ('delete', ?, ?, ?)",
                rows,
            )
            cur.execute(f"DELETE FROM chunks WHERE doc_id IN ({marks})", batch)
            cur.execute(f"DELETE FROM documents WHERE id IN ({marks})", batch)

    def delete_collection(self, collection: str) -> int:
        """Remove every document of one collection; returns how many were removed. A transaction
        per `DELETE_BATCH` documents (one, inside the caller's `transaction()`), so removing a large
        collection never holds the write lock for long."""
        self.generation += 1
        removed = 0
        while True:
            with self.transaction():
                ids = [
                    row[0]
                    for row in self._conn.execute(
                        "SELECT id FROM documents WHERE collection = ? LIMIT ?", (collection, DELETE_BATCH)
                    )
                ]
                self._delete_documents(ids)
            removed += len(ids)
            if len(ids) < DELETE_BATCH:
                return removed

    def clear(self) -> None:
        """Remove all documents, chunks and meta keys (the schema version is kept)."""
        self.generation += 1
        with self.transaction():
            self._conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('delete-all')")
            self._conn.execute("DELETE FROM chunk_vectors")  # first: one statement, not a cascade per chunk
            self._conn.execute("DELETE FROM chunks")
            self._conn.execute("DELETE FROM documents")
            self._conn.execute("DELETE FROM meta WHERE key != 'schema_version'")

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction():
            self._conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def delete_meta(self, key: str) -> None:
        with self.transaction():
            self._conn.execute("DELETE FROM meta WHERE key = ?", (key,))

    # -- dense vectors -------------------------------------------------------------------------

    def chunks_lacking_vectors(
        self, model: str, *, after_id: int = 0, limit: int = VECTOR_PAGE
    ) -> list[tuple[int, str, str]]:
        """A page of (chunk id, document title, chunk text), by id, of the chunks with no vector of
        `model` (none, or another model's), ids above `after_id`: the next page starts after the
        last id returned, so a caller embedding page by page never holds the whole corpus."""
        with self._lock:
            return self._conn.execute(
                "SELECT c.id, d.title, c.text FROM chunks c JOIN documents d ON d.id = c.doc_id"
                " LEFT JOIN chunk_vectors v ON v.chunk_id = c.id"
                " WHERE c.id > ? AND (v.model IS NULL OR v.model != ?) ORDER BY c.id LIMIT ?",
                (after_id, model, limit),
            ).fetchall()

    def count_lacking_vectors(self, model: str) -> int:
        return self._count(
            "SELECT COUNT(*) FROM chunks c LEFT JOIN chunk_vectors v ON v.chunk_id = c.id"
            " WHERE v.model IS NULL OR v.model != ?",
            (model,),
        )

    def put_vectors(self, model: str, rows: Iterable[tuple[int, str, np.ndarray]]) -> int:
        """Store (chunk id, the chunk text that was embedded, vector) rows of `model` in one
        transaction, as float16, replacing the chunk's vector of any model. Returns how many were
        stored. A row is skipped when its chunk no longer holds that text: deleted, or its id reused
        by a replaced document's chunk while the vector was being computed."""
        self.generation += 1
        stored = 0
        with self.transaction():
            cur = self._conn.cursor()
            for chunk_id, text, vector in rows:
                cur.execute(
                    "INSERT OR REPLACE INTO chunk_vectors(chunk_id, model, vector)"
                    " SELECT id, ?, ? FROM chunks WHERE id = ? AND text = ?",
                    (model, np.asarray(vector, dtype=VECTOR_DTYPE).tobytes(), int(chunk_id), text),
                )
                stored += cur.rowcount
        return stored

    def delete_vectors(self, model: str | None = None) -> None:
        """Remove the vectors of `model`, or every vector (the next update embeds them again)."""
        self.generation += 1
        with self.transaction():
            if model is None:
                self._conn.execute("DELETE FROM chunk_vectors")
            else:
                self._conn.execute("DELETE FROM chunk_vectors WHERE model = ?", (model,))

    def change_signature(self) -> tuple[int, int]:
        """A value that differs after any change to the index: by this object (`generation`) or
        committed by another connection (SQLite's `data_version`). One cheap call, so a cached
        matrix of vectors can be checked before every search, whatever the corpus size."""
        with self._lock:
            return self.generation, self._conn.execute("PRAGMA data_version").fetchone()[0]

    def load_vectors(self, model: str) -> StoredVectors:
        """Every vector of `model` as one float32 matrix, rows in chunk id order, with each row's
        collection. One read transaction (one snapshot), two scans that never read a chunk's text:
        the vectors, then the chunks' documents through the `chunks_doc` index."""
        ids: list[np.ndarray] = []
        blocks: list[np.ndarray] = []
        with self._lock, self._read_snapshot():
            cursor = self._conn.execute(
                "SELECT chunk_id, vector FROM chunk_vectors WHERE model = ? ORDER BY chunk_id", (model,)
            )
            while rows := cursor.fetchmany(VECTOR_PAGE):
                ids.append(np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows)))
                blocks.append(
                    np.frombuffer(b"".join(row[1] for row in rows), dtype=VECTOR_DTYPE).reshape(len(rows), -1)
                )
            names: dict[str, int] = {}
            chunk_collection = {
                chunk_id: names.setdefault(collection, len(names))
                for chunk_id, collection in self._conn.execute(
                    "SELECT c.id, d.collection FROM documents d JOIN chunks c INDEXED BY chunks_doc ON c.doc_id = d.id"
                )
            }
        if not ids:
            return StoredVectors(np.zeros(0, np.int64), np.zeros((0, 0), np.float32), np.zeros(0, np.int32), ())
        all_ids = np.concatenate(ids)
        codes = np.fromiter((chunk_collection[i] for i in all_ids.tolist()), dtype=np.int32, count=len(all_ids))
        return StoredVectors(all_ids, np.concatenate(blocks).astype(np.float32), codes, tuple(names))

    @contextmanager
    def _read_snapshot(self) -> Iterator[None]:
        """Several reads that see the index as it was at the first (a deferred transaction takes no
        write lock); inside a write transaction, that transaction is the snapshot."""
        if self._depth:
            yield
            return
        self._conn.execute("BEGIN")
        try:
            yield
        finally:
            self._conn.execute("COMMIT")

    # -- reads ---------------------------------------------------------------------------------

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        with self._lock:
            row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    def _count(self, sql: str, params: tuple[object, ...] = ()) -> int:
        with self._lock:
            # sqlite3 types a row as Any; a COUNT(*) query returns one row, holding an int.
            return cast(int, self._conn.execute(sql, params).fetchone()[0])

    def count_documents(self) -> int:
        return self._count("SELECT COUNT(*) FROM documents")

    def count_chunks(self) -> int:
        return self._count("SELECT COUNT(*) FROM chunks")

    def count_collection_chunks(self, collection: str) -> int:
        return self._count(
            "SELECT COUNT(*) FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.collection = ?",
            (collection,),
        )

    def collections(self) -> dict[str, int]:
        """Collection name -> number of documents."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT collection, COUNT(*) FROM documents GROUP BY collection ORDER BY collection"
            ).fetchall()
        return {name: count for name, count in rows}

    def iter_collection_chunks(self, collection: str, limit: int | None = None) -> Iterator[ChunkHit]:
        """Every chunk of a collection in index order (documents as added, chunks in order), at most
        `limit`; read in pages, so a large collection is never held whole (score 0, no snippet)."""
        sql = (
            "SELECT c.id, d.title, d.ref, d.url, d.collection, c.ordinal, c.text"
            " FROM chunks c JOIN documents d ON d.id = c.doc_id"
            " WHERE d.collection = ? AND c.id > ? ORDER BY c.id LIMIT ?"
        )
        last, given = 0, 0
        while limit is None or given < limit:
            page = FTS_WRITE_BATCH if limit is None else min(FTS_WRITE_BATCH, limit - given)
            with self._lock:
                rows = self._conn.execute(sql, (collection, last, page)).fetchall()
            if not rows:
                return
            for chunk_id, title, ref, url, name, ordinal, text in rows:
                yield ChunkHit(
                    title=title,
                    ref=ref,
                    url=url,
                    collection=name,
                    ordinal=ordinal,
                    text=text,
                    snippet="",
                    score=0.0,
                    chunk_id=chunk_id,
                )
                last, given = chunk_id, given + 1

    def chunk_hits(
        self,
        ids: Sequence[int],
        scores: Sequence[float] | None = None,
        snippets: Sequence[str] | None = None,
        *,
        fill: bool = True,
    ) -> list[ChunkHit]:
        """The chunks with these ids as hits, in the order given, each with its score (0 without
        `scores`) and snippet (its text's start without `snippets`, or where one is empty; "" when
        not `fill`); an id no longer in the index is left out."""
        wanted = [int(i) for i in ids]
        found: dict[int, tuple[str, str, str | None, str, int, str]] = {}
        with self._lock:
            for start in range(0, len(wanted), 500):
                batch = wanted[start : start + 500]
                marks = ",".join("?" * len(batch))
                for row in self._conn.execute(
                    "SELECT c.id, d.title, d.ref, d.url, d.collection, c.ordinal, c.text"
                    f" FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.id IN ({marks})",
                    batch,
                ):
                    found[row[0]] = row[1:]
        hits = []
        for position, chunk_id in enumerate(wanted):
            if chunk_id in found:
                title, ref, url, collection, ordinal, text = found[chunk_id]
                snippet = snippets[position] if snippets is not None else ""
                hits.append(
                    ChunkHit(
                        title=title,
                        ref=ref,
                        url=url,
                        collection=collection,
                        ordinal=ordinal,
                        text=text,
                        snippet=snippet or (text[:300] if fill else ""),
                        score=float(scores[position]) if scores is not None else 0.0,
                        chunk_id=chunk_id,
                    )
                )
        return hits

    def titles(self) -> list[tuple[str, str]]:
        """Every document's (collection, title), in index order: what the hop linker recognises in
        a text (`engine/search/hops.py`). From the title catalogue (`_catalogue`): one scan per
        change to the index, which `titled` uses too."""
        with self._lock:
            return list(self._catalogue().titles)

    def titled(self, title: str) -> list[ChunkHit]:
        """The chunks, in order, of the first document titled `title` (case and runs of spaces
        ignored), or []: the page an agent's Search[entity] opens, and a hop's page.

        The title is looked up in the title catalogue (`_catalogue`), which the hop linker's scan
        builds. The table has no index on titles (an existing index file is used as it is), and a
        scan per page opened cost 3 ms at the bundled corpus's size, twice per search that names a
        page."""
        wanted = " ".join(title.split())
        if not wanted:
            return []
        with self._lock:
            doc_id = self._catalogue().ids.get(_nocase(wanted))
            if doc_id is None:
                return []
            row = self._conn.execute(
                "SELECT title, ref, url, collection FROM documents WHERE id = ?", (doc_id,)
            ).fetchone()
            if row is None:
                return []
            found, ref, url, collection = row
            chunks = self._conn.execute(
                "SELECT id, ordinal, text FROM chunks WHERE doc_id = ? ORDER BY ordinal", (doc_id,)
            ).fetchall()
        return [
            ChunkHit(
                title=found,
                ref=ref,
                url=url,
                collection=collection,
                ordinal=ordinal,
                text=text,
                snippet=text[:300],
                score=0.0,
                chunk_id=chunk_id,
            )
            for chunk_id, ordinal, text in chunks
        ]

    def _catalogue(self) -> _TitleCatalogue:
        """Every title, scanned once and kept while the index is unchanged (`change_signature`).
        Call under the lock."""
        signature = self.change_signature()
        if self._titles is None or self._titles.signature != signature:
            titles: list[tuple[str, str]] = []
            ids: dict[str, int] = {}
            for doc_id, collection, name in self._conn.execute(
                "SELECT id, collection, title FROM documents ORDER BY id"
            ):
                titles.append((collection, name))
                ids.setdefault(_nocase(name), doc_id)
            self._titles = _TitleCatalogue(signature, titles, ids)
        return self._titles

    def search(
        self, query: str, k: int = 5, *, collections: Sequence[str] | None = None, snippets: bool = True
    ) -> list[ChunkHit]:
        """BM25-ranked chunks for free text `query` (sanitised; never raises on syntax).

        `collections` limits the search to those collections. `snippets=False`: every hit's
        snippet is "", for a caller that keeps a few of many hits and asks `snippets` for those (a
        snippet is most of a search's time in SQLite: 50 of them cost 3 ms, ranking 4 ms).
        """
        expression = fts_query(query)
        if not expression or k <= 0:
            return []
        # Stage 1: the top-k chunk ids. ORDER BY rank (configured as weighted bm25) + LIMIT is
        # FTS5's fast top-k path. A collection filter is a join scanned from the FTS side (CROSS
        # JOIN fixes the order): a "rowid IN (subquery)" constraint would make FTS5 rerun the
        # full-text query once per candidate rowid.
        # Without a filter FTS5 consumes the ORDER BY itself, so a snippet in the same SELECT is
        # made for the k rows returned only: half the time of asking for each row's snippet with a
        # second MATCH (measured on HotpotQA's questions, top 50: p50 12.6 -> 6.8 ms). With the
        # join, SQLite sorts, and a snippet column would be made for every matching row.
        if collections:
            marks = ",".join("?" * len(collections))
            ranked_sql = (
                "SELECT f.rowid, f.rank, NULL FROM chunks_fts f"
                " CROSS JOIN chunks c ON c.id = f.rowid"
                " CROSS JOIN documents d ON d.id = c.doc_id"
                f" WHERE chunks_fts MATCH ? AND d.collection IN ({marks})"
                " ORDER BY f.rank LIMIT ?"
            )
            params: list[object] = [expression, *collections, k]
        else:
            column = _SNIPPET if snippets else "NULL"
            ranked_sql = f"SELECT rowid, rank, {column} FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?"
            params = [expression, k]
        with self._lock:  # (re-entrant) the rows ranked are still indexed when they are read
            ranked = self._conn.execute(ranked_sql, params).fetchall()
            made = [text or "" for _id, _rank, text in ranked]
            if collections and snippets:
                found = self._snippets(expression, [chunk_id for chunk_id, _rank, _none in ranked])
                made = [found.get(chunk_id, "") for chunk_id, _rank, _none in ranked]
            # Stage 2: the rows' documents in one query; bm25 is negative, lower is better: flipped.
            return self.chunk_hits(
                [chunk_id for chunk_id, _rank, _s in ranked],
                [-float(rank) for _id, rank, _s in ranked],
                made,
                fill=snippets,
            )

    def snippets(self, query: str, chunk_ids: Sequence[int]) -> dict[int, str]:
        """FTS5's snippet of each of these chunks for `query`, as `search` makes them; a chunk the
        query does not match (or no longer indexed) is left out. One lookup per chunk, about 0.2 ms."""
        expression = fts_query(query)
        if not expression:
            return {}
        with self._lock:
            return self._snippets(expression, chunk_ids)

    def _snippets(self, expression: str, chunk_ids: Sequence[int]) -> dict[int, str]:
        sql = f"SELECT {_SNIPPET} FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid = ?"
        made = {}
        for chunk_id in chunk_ids:
            found = self._conn.execute(sql, (expression, int(chunk_id))).fetchone()
            if found is not None:
                made[int(chunk_id)] = found[0] or ""
        return made


# The passage of a chunk around the query's words, as FTS5 makes it (at most 32 tokens).
_SNIPPET = "snippet(chunks_fts, 1, '', '', '…', 32)"


def _split_sql(script: str) -> list[str]:
    """Split the schema script into statements (sqlite3.executescript would COMMIT our tx)."""
    return [stmt.strip() for stmt in script.split(";") if stmt.strip()]
