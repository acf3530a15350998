"""The bundled offline corpus: Wikipedia paragraphs shipped in `data/datasets`, indexed once.

Collections (see data/SOURCES.md for origins and licences):
* ``hotpotqa``: the `context` paragraphs of both HotpotQA files;
* ``2wikimultihopqa``: the dev file's `context` plus the HippoRAG 2Wiki passage pool;
* ``nq``: the gold NQ passages (`ctxs`);
* ``freshwiki``: the FreshWiki articles, chunked.

Indexing happens once per index file: a meta key stores the corpus version (a format number plus
the names and sizes of the data files), and a different version re-indexes the bundled
collections while leaving the user's own ingested files alone.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from engine.config import Settings
from engine.search.chunking import OVERLAP_WORDS, TARGET_WORDS, chunk_text
from engine.search.local import LocalCorpusSearcher, content_hash
from engine.search.uploads import reindex_uploads
from storage.corpus_store import CorpusStore, NewDocument

BUNDLED_DATA_DIR = Path(__file__).resolve().parents[2] / "data" / "datasets"

# Bump when the way documents are built changes (refs, text joining, chunking).
BUNDLED_FORMAT = 1
META_KEY = "bundled_corpus_version"

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

# Documents per write batch: progress is reported between batches.
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
    """Format number + chunking parameters + a fingerprint of the data files (names, sizes)."""
    digest = hashlib.sha1()
    for collection, files in BUNDLED_FILES.items():
        for name, layout in files:
            path = data_dir / name
            size = path.stat().st_size if path.is_file() else -1
            digest.update(f"{collection}:{name}:{layout}:{size};".encode())
    return f"{BUNDLED_FORMAT}/c{TARGET_WORDS}-{OVERLAP_WORDS}/{digest.hexdigest()[:12]}"


def _jsonl(path: Path) -> Iterator[dict]:
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


def _documents(
    collection: str, data_dir: Path, missing: list[str]
) -> Iterator[NewDocument]:
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

    Idempotent and safe to call at every start: the check and the indexing happen in one write
    transaction, so two processes starting together index once.
    """
    started = time.perf_counter()
    version = bundled_version(data_dir)
    missing: list[str] = []
    duplicates = 0
    indexed_now = False
    with store.transaction():
        if store.get_meta(META_KEY) != version:
            indexed_now = True
            for collection in BUNDLED_COLLECTIONS:
                store.delete_collection(collection)
            for step, collection in enumerate(BUNDLED_COLLECTIONS):
                if progress:
                    progress(f"indexing {collection}", step / len(BUNDLED_COLLECTIONS))
                batch: list[NewDocument] = []
                for doc in _documents(collection, data_dir, missing):
                    batch.append(doc)
                    if len(batch) >= BATCH_SIZE:
                        duplicates += store.add_documents(batch).duplicates
                        batch = []
                duplicates += store.add_documents(batch).duplicates
            store.set_meta(META_KEY, version)
    counts = store.collections()
    status = BundledStatus(
        version=version,
        indexed_now=indexed_now,
        documents=sum(counts.get(c, 0) for c in BUNDLED_COLLECTIONS),
        chunks=store.count_chunks(),
        collections={c: counts.get(c, 0) for c in BUNDLED_COLLECTIONS},
        seconds=time.perf_counter() - started,
        duplicates_skipped=duplicates,
        missing_files=missing,
    )
    if progress:
        progress("bundled corpus ready", 1.0)
    return status


def open_default_corpus(
    settings: Settings, progress: Progress | None = None
) -> LocalCorpusSearcher:
    """The app's default searcher: the index at `settings.corpus_index_path`, bundled data in it."""
    store = CorpusStore(settings.corpus_index_path)
    ensure_bundled_corpus(store, progress)
    return LocalCorpusSearcher(store)


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


def rebuild_corpus(searcher: LocalCorpusSearcher, uploads_dir: Path | None = None,
                   progress: Progress | None = None) -> BundledStatus:
    """Drop the whole index and build it again: the bundled data, then the user's uploaded files."""
    searcher.store.clear()
    status = ensure_bundled_corpus(searcher.store, progress)
    if uploads_dir is not None:
        reindex_uploads(searcher, uploads_dir)
    return status
