"""The bundled offline corpus: Wikipedia paragraphs shipped in `data/datasets`, indexed once.

Collections (see data/SOURCES.md for origins and licences):
* ``hotpotqa``: the `context` paragraphs of both HotpotQA files;
* ``2wikimultihopqa``: the dev file's `context` plus the HippoRAG 2Wiki passage pool;
* ``nq``: the gold NQ passages (`ctxs`);
* ``freshwiki``: the FreshWiki articles, chunked.

Indexing happens once per index file: a meta key stores the corpus version (a format number plus
the names and sizes of the data files and of the shipped vectors), and a different version
re-indexes the bundled collections while leaving the user's own ingested files alone.

Right after the full-text index, the shipped vectors of the bundled corpus
(`data/vectors/all-MiniLM-L6-v2.npz`, see `engine/search/vectors.py`) are copied to its chunks, so
dense search needs no embedding on a fresh machine.

Several processes may start at once (the app, CLI runs, workers). Checking the version is a read:
an index already built is opened without any write lock. Building is done by one process, the
holder of the index's build lock (engine/search/one_builder.py); the others wait, saying how far
it got, then find the index built. The version is written last, so an index whose build stopped
half-way is never taken as built.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from engine.config import Settings
from engine.search.chunking import OVERLAP_WORDS, TARGET_WORDS, chunk_text
from engine.search.local import LocalCorpusSearcher, content_hash
from engine.search.one_builder import build_lock
from engine.search.protocol import SearchError
from engine.search.uploads import reindex_uploads
from engine.search.vectors import SHIPPED_MODEL, CorpusEmbedding, VectorIndex, shipped_vectors_path
from storage.corpus_lock import CorpusBuildLock
from storage.corpus_store import (
    SCHEMA_KEY,
    SCHEMA_VERSION,
    CorpusLocked,
    CorpusStore,
    CorpusUnavailable,
    NewDocument,
    move_index,
    read_meta,
    remove_index,
)

BUNDLED_DATA_DIR = Path(__file__).resolve().parents[2] / "data" / "datasets"

# Bump when the way documents are built changes (refs, text joining, chunking).
BUNDLED_FORMAT = 1
META_KEY = "bundled_corpus_version"
# What to do when there is no corpus to search now (another process holds its write lock).
NO_CORPUS_HINT = "Meanwhile, choose web search or no search (--search web or none)."

# collection -> ((data file relative to BUNDLED_DATA_DIR, record layout), ...). The order is the
# indexing order, so when the same paragraph appears in two collections the first one keeps it.
# Layouts: "context" = [[title, [sentences]]...] per item; "passage" = {title, text} per line;
# "ctxs" = NQ passages per item; "article" = a FreshWiki article (chunked).
BUNDLED_FILES: dict[str, tuple[tuple[str, str], ...]] = {
    "hotpotqa": (
        ("hotpotqa/hotpotqa_autoact_easy_medium_hard_300.jsonl", "context"),
        ("hotpotqa/hotpotqa_dev_fullwiki_500.jsonl", "context"),
    ),
    "2wikimultihopqa": (
        ("2wikimultihopqa/2wikimultihopqa_dev_500.jsonl", "context"),
        ("2wikimultihopqa/hipporag_2wiki_corpus_6119.jsonl", "passage"),
    ),
    "nq": (("nq/nq_open_oracle_first500.jsonl", "ctxs"),),
    "freshwiki": (("freshwiki/freshwiki_articles_100.jsonl", "article"),),
}
BUNDLED_COLLECTIONS = tuple(BUNDLED_FILES)

# Documents per write transaction: progress is reported between batches, and an index other
# processes have open is never write-locked for long.
BATCH_SIZE = 2000

Progress = Callable[[str, float], None]


@dataclass
class BundledStatus:
    """The state of the bundled corpus after `ensure_bundled_corpus`."""

    version: str
    indexed_now: bool  # False: it was already indexed at this version, nothing was done
    documents: int  # documents in the bundled collections
    chunks: int  # chunks in the whole index
    collections: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    duplicates_skipped: int = 0
    missing_files: list[str] = field(default_factory=list)


def wikipedia_url(title: str) -> str:
    """The English Wikipedia URL of an article title."""
    return "https://en.wikipedia.org/wiki/" + quote(title.replace(" ", "_"), safe="_()',!:/-.~*")


def bundled_version(data_dir: Path = BUNDLED_DATA_DIR) -> str:
    """Format number + chunking parameters + a fingerprint of the data files and the shipped
    vectors (names, sizes): new vectors are imported by the next start."""
    digest = hashlib.sha1()
    for collection, files in BUNDLED_FILES.items():
        for name, layout in files:
            path = data_dir / name
            size = path.stat().st_size if path.is_file() else -1
            digest.update(f"{collection}:{name}:{layout}:{size};".encode())
    vectors = shipped_vectors_path()
    digest.update(f"vectors:{vectors.name}:{vectors.stat().st_size if vectors.is_file() else -1};".encode())
    return f"{BUNDLED_FORMAT}/c{TARGET_WORDS}-{OVERLAP_WORDS}/{digest.hexdigest()[:12]}"


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def _paragraph(sentences: list[str] | str) -> str:
    if isinstance(sentences, str):
        return " ".join(sentences.split())
    # HotpotQA sentences carry their leading space, 2Wiki's do not: normalise both.
    return " ".join(s.strip() for s in sentences if s and s.strip())


def _records(layout: str, path: Path) -> Iterator[tuple[str, str, str | None, bool]]:
    """(title, text, url or None, needs chunking) for every paragraph/article of one data file."""
    for item in _jsonl(path):
        if layout == "context":
            for title, sentences in item.get("context") or []:
                yield title, _paragraph(sentences), None, False
        elif layout == "passage":
            yield item["title"], _paragraph(item["text"]), None, False
        elif layout == "ctxs":
            for ctx in item.get("ctxs") or []:
                yield ctx["title"], _paragraph(ctx["text"]), None, False
        elif layout == "article":
            text = item["text"]
            # The article text starts with its file stem on a line of its own: drop it.
            first, _, rest = text.partition("\n")
            if first.strip() == item.get("file_stem"):
                text = rest
            yield item["topic"], text.strip(), item.get("url"), True
        else:
            raise ValueError(f"unknown bundled layout {layout!r}")


def _count_records(data_dir: Path) -> int:
    """How many records (paragraphs, articles) the bundled files hold, duplicates included: the
    "of M" of the build's progress. A quick pass: no hashing, no chunking."""
    total = 0
    for files in BUNDLED_FILES.values():
        for name, layout in files:
            path = data_dir / name
            if path.is_file():
                total += sum(1 for _title, text, _url, _long in _records(layout, path) if text.strip())
    return total


def _documents(collection: str, data_dir: Path, missing: list[str]) -> Iterator[NewDocument]:
    used: dict[str, str] = {}  # ref -> content hash, to keep refs unique within the build
    for name, layout in BUNDLED_FILES[collection]:
        path = data_dir / name
        if not path.is_file():
            missing.append(name)
            continue
        for title, text, url, long_text in _records(layout, path):
            if not text.strip():
                continue
            digest = content_hash(title, text)
            ref = f"{collection}/{title}"
            # The same article can contribute two different passages (NQ): number the others.
            n = 2
            while used.get(ref, digest) != digest:
                ref = f"{collection}/{title} ({n})"
                n += 1
            used[ref] = digest
            # A Wikipedia paragraph is already chunk-sized; only whole articles are split.
            chunks = chunk_text(text) if long_text else [text]
            yield NewDocument(
                collection=collection,
                ref=ref,
                title=title,
                url=url or wikipedia_url(title),
                chunks=chunks,
                content_hash=digest,
            )


def ensure_bundled_corpus(
    store: CorpusStore,
    progress: Progress | None = None,
    *,
    data_dir: Path = BUNDLED_DATA_DIR,
) -> BundledStatus:
    """Index the bundled datasets into `store` unless this version is already there.

    Idempotent and safe to call at every start, in several processes at once: the check is a read,
    and the indexing is done under the index's build lock, by whoever takes it first (the others
    wait, then find this version there).
    """
    started = time.perf_counter()
    version = bundled_version(data_dir)
    if store.get_meta(META_KEY) == version:
        return _status(store, version, started)
    if str(store.path) == ":memory:":  # nobody else can see it: nothing to lock
        return _index_bundled(store, version, data_dir, progress, None, started)
    with build_lock(store.path, progress) as lock:
        if store.get_meta(META_KEY) == version:  # built by the process we waited for
            return _status(store, version, started)
        return _index_bundled(store, version, data_dir, progress, lock, started)


def _status(
    store: CorpusStore,
    version: str,
    started: float,
    *,
    indexed_now: bool = False,
    duplicates: int = 0,
    missing: list[str] | None = None,
) -> BundledStatus:
    counts = store.collections()
    return BundledStatus(
        version=version,
        indexed_now=indexed_now,
        documents=sum(counts.get(c, 0) for c in BUNDLED_COLLECTIONS),
        chunks=store.count_chunks(),
        collections={c: counts.get(c, 0) for c in BUNDLED_COLLECTIONS},
        seconds=time.perf_counter() - started,
        duplicates_skipped=duplicates,
        missing_files=missing or [],
    )


def _index_bundled(
    store: CorpusStore,
    version: str,
    data_dir: Path,
    progress: Progress | None,
    lock: CorpusBuildLock | None,
    started: float,
) -> BundledStatus:
    """Replace the bundled collections of `store` with this version's, a write transaction per
    batch, reporting progress (to `progress` and, for the processes waiting, through `lock`)."""
    store.delete_meta(META_KEY)  # first: a build that stops half-way must not look built
    for collection in BUNDLED_COLLECTIONS:
        store.delete_collection(collection)
    total = max(_count_records(data_dir), 1)
    done, duplicates = 0, 0
    missing: list[str] = []

    def report(note: str = "") -> None:
        if lock is not None:
            lock.publish(done, total)
        if progress:
            progress(f"indexing the bundled corpus: {done:,} of {total:,} records{note}", done / total)

    def write(batch: list[NewDocument]) -> None:
        nonlocal done, duplicates
        duplicates += store.add_documents(batch).duplicates
        done += len(batch)
        report()

    report(" (once: later starts reuse the index)")
    for collection in BUNDLED_COLLECTIONS:
        batch: list[NewDocument] = []
        for doc in _documents(collection, data_dir, missing):
            batch.append(doc)
            if len(batch) >= BATCH_SIZE:
                write(batch)
                batch = []
        if batch:
            write(batch)
    if progress:
        progress("importing the bundled corpus's shipped vectors", 1.0)
    VectorIndex(store, SHIPPED_MODEL).import_shipped()
    store.set_meta(META_KEY, version)  # last: now the index counts as built
    if progress:
        progress("bundled corpus ready", 1.0)
    return _status(store, version, started, indexed_now=True, duplicates=duplicates, missing=missing)


def open_default_corpus(
    settings: Settings, progress: Progress | None = None, *, embedding: CorpusEmbedding | None = None
) -> LocalCorpusSearcher:
    """The app's default searcher: the index at `settings.corpus_index_path`, bundled data in it.
    `embedding`: the model its vectors are of, which its ingests embed new passages with
    (`LocalCorpusSearcher`); None: no vectors.

    An index already built at this version is opened without any write lock. The first start
    builds it into a scratch file moved into place when complete, so nobody opens half an index;
    processes starting meanwhile wait for that build, saying so. An index of an earlier version is
    brought up to date in place; if another process's write keeps that from going on, the index
    is searched as it is, and the searcher's description says so. Raises `SearchError` (one clear
    line) when there is no index to search and none can be built now.
    """
    path = settings.corpus_index_path
    timeout = settings.corpus_lock_timeout_s
    version = bundled_version()
    notice = ""
    try:
        if not _built(path, version, timeout):
            with build_lock(path, progress) as lock:
                if not _built(path, version, timeout):
                    if path.exists():
                        notice = _update_in_place(path, version, timeout, progress, lock)
                    else:
                        _build_scratch(path, version, progress, lock)
        store = CorpusStore(path, busy_timeout_s=timeout)
    except CorpusLocked as exc:
        raise SearchError(str(exc), hint=NO_CORPUS_HINT) from exc
    except (CorpusUnavailable, OSError) as exc:  # a read-only folder, a full disk, not an index
        reason = str(exc) if isinstance(exc, CorpusUnavailable) else f"the corpus index {path} cannot be built ({exc})"
        raise SearchError(
            reason,
            hint=f"Free space on its disk or make {path.parent} writable, or point THOUGHTMAP_HOME at another folder.",
        ) from exc
    return LocalCorpusSearcher(store, notice=notice, embedding=embedding)


def _built(path: Path, version: str, timeout: float) -> bool:
    """The index at `path` holds this bundled version in this layout (read-only: no write lock)."""
    return (
        read_meta(path, META_KEY, busy_timeout_s=timeout) == version
        and read_meta(path, SCHEMA_KEY, busy_timeout_s=timeout) == SCHEMA_VERSION
    )


def _build_scratch(path: Path, version: str, progress: Progress | None, lock: CorpusBuildLock) -> None:
    """Build the index beside `path` and move it into place (the caller holds the build lock and
    saw no index at `path`). The scratch file is nobody else's: another process's lock on the index
    cannot slow the build, and a build that died leaves only a scratch file the next one discards."""
    scratch = path.with_name(path.name + ".building")
    remove_index(scratch)
    try:
        with CorpusStore(scratch, scratch=True) as store:
            _index_bundled(store, version, BUNDLED_DATA_DIR, progress, lock, time.perf_counter())
    except BaseException:
        remove_index(scratch)  # a half index on a full disk must not keep the space it took
        raise
    move_index(scratch, path)


def _update_in_place(path: Path, version: str, timeout: float, progress: Progress | None, lock: CorpusBuildLock) -> str:
    """Bring an existing index to this version (it keeps the user's files); "" when done, else what
    the searcher's description says: the index is searched as it is."""
    try:
        store = CorpusStore(path, busy_timeout_s=timeout)
    except CorpusLocked as exc:  # an index of an older layout, which must be set up again first
        raise SearchError(str(exc), hint=NO_CORPUS_HINT) from exc
    with store:
        try:
            _index_bundled(store, version, BUNDLED_DATA_DIR, progress, lock, time.perf_counter())
            return ""
        except CorpusLocked as exc:
            documents = store.count_documents()
            if not documents:
                raise SearchError(str(exc), hint=NO_CORPUS_HINT) from exc
            if progress:
                progress(
                    f"the corpus index could not be brought up to date ({exc.reason}): searching the "
                    f"{documents:,} documents it holds now; the update is tried again at the next start",
                    1.0,
                )
            return "not up to date: another process was writing to it"


def main() -> None:  # pragma: no cover - a manual timing tool
    """`python -m engine.search.bundled [index path]`: build the bundled index and time it."""
    import sys
    import tempfile

    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "corpus.sqlite3"
    with CorpusStore(target) as store:
        status = ensure_bundled_corpus(store)
        print(
            f"{target}: {status.documents:,} documents, {status.chunks:,} chunks, "
            f"{status.duplicates_skipped:,} duplicates skipped, {status.seconds:.2f}s "
            f"(indexed now: {status.indexed_now}) {status.collections}"
        )


if __name__ == "__main__":  # pragma: no cover
    main()


def rebuild_corpus(
    searcher: LocalCorpusSearcher, uploads_dir: Path | None = None, progress: Progress | None = None
) -> BundledStatus:
    """Drop the whole index and build it again: the bundled data, then the user's uploaded files.
    Raises `SearchError` when another process's write keeps it from going on (run it again then)."""
    try:
        # Cleared under the build lock, so never under a build another process has under way; once
        # cleared, the index is not built, and whoever takes the lock next (this call, or a process
        # starting meanwhile) builds it once.
        with build_lock(searcher.store.path, progress):
            searcher.store.clear()
        status = ensure_bundled_corpus(searcher.store, progress)
    except CorpusLocked as exc:
        raise SearchError(
            f"could not rebuild the corpus index: {exc.reason}.", hint="Rebuild it again once that process is done."
        ) from exc
    if uploads_dir is not None:
        reindex_uploads(searcher, uploads_dir, progress)
    return status
