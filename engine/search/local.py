"""The local corpus searcher: BM25 over the CorpusStore, plus ingest of user files.

A searcher given a `CorpusEmbedding` keeps the corpus's `VectorIndex` (`engine/search/vectors.py`,
`.vectors`: one loaded matrix per corpus for whoever searches it by vectors), and an ingest embeds
the passages it added once they are written, with progress: word search finds them at once, dense
search once embedded. An embedder that fails leaves them unembedded, said in the report; the next
ingest embeds them (it embeds every passage lacking a vector).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from engine.search.chunking import chunk_text, iter_chunks
from engine.search.loaders import LoadedDocument, Skipped, TextFileDocument, iter_documents, named_inside, path_text
from engine.search.protocol import SNIPPET_LATER, Candidates, Hit, Ranking, SearchError
from engine.search.vectors import CorpusEmbedding, VectorIndex
from storage.corpus_store import AddStats, ChunkHit, CorpusLocked, CorpusStore, NewDocument

DEFAULT_COLLECTION = "files"
# Documents are written in batches: one transaction per batch keeps ingest fast while letting
# searches from other threads get in between batches.
BATCH_SIZE = 200
MAX_LISTED_SKIPS = 20

# progress(message, fraction): what the CLI prints and the app's bar shows.
IngestProgress = Callable[[str, float], None]


def content_hash(*parts: str) -> str:
    """Stable hash of whitespace-normalised text, used to skip documents already indexed."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(" ".join(part.split()).encode("utf-8"))
        digest.update(b"\x00")
    return digest.hexdigest()


def content_hash_of_blocks(blocks: Iterable[str]) -> str | None:
    """`content_hash` of the text the blocks make up, without holding it; None if it has no words."""
    digest = hashlib.sha256()
    seen_words = False
    carry = ""  # the last word of a block, which may continue in the next one
    for block in blocks:
        words = (carry + block).split()
        carry = words.pop() if words and not block[-1:].isspace() else ""
        if words:
            digest.update(((" " if seen_words else "") + " ".join(words)).encode("utf-8"))
            seen_words = True
    if carry:
        digest.update(((" " if seen_words else "") + carry).encode("utf-8"))
        seen_words = True
    if not seen_words:
        return None
    digest.update(b"\x00")
    return digest.hexdigest()


@dataclass
class IngestReport:
    """What `LocalCorpusSearcher.ingest` did."""

    documents_added: int = 0
    duplicates_skipped: int = 0
    documents_replaced: int = 0
    chunks_added: int = 0
    chunks_embedded: int = 0
    embedding_failed: str = ""  # why the new passages were not embedded, when they were not
    skipped: list[Skipped] = field(default_factory=list)
    seconds: float = 0.0

    def merge(self, other: IngestReport) -> None:
        """Add what another ingest did (one report for several)."""
        self.documents_added += other.documents_added
        self.duplicates_skipped += other.duplicates_skipped
        self.documents_replaced += other.documents_replaced
        self.chunks_added += other.chunks_added
        self.chunks_embedded += other.chunks_embedded
        self.embedding_failed = self.embedding_failed or other.embedding_failed
        self.skipped.extend(other.skipped)
        self.seconds += other.seconds

    def count(self, stats: AddStats) -> None:
        self.documents_added += stats.added
        self.duplicates_skipped += stats.duplicates
        self.documents_replaced += stats.replaced
        self.chunks_added += stats.chunks_added

    def summary(self) -> str:
        text = (
            f"{self.documents_added} document(s) added ({self.chunks_added} chunks), "
            f"{self.duplicates_skipped} already indexed, {len(self.skipped)} skipped, "
            f"in {self.seconds:.1f}s"
        )
        if self.documents_replaced:
            text += f"; {self.documents_replaced} updated"
        if self.chunks_embedded:
            text += f"; {self.chunks_embedded} passages embedded"
        if self.embedding_failed:
            text += (
                f"\n  passages not embedded ({self.embedding_failed}): word search finds them; "
                "the next ingest embeds them"
            )
        # Say why files were skipped: the user can fix the file or its type.
        for item in self.skipped[:MAX_LISTED_SKIPS]:
            text += f"\n  skipped {path_text(item.path)}: {item.reason}"
        if len(self.skipped) > MAX_LISTED_SKIPS:
            text += f"\n  ... and {len(self.skipped) - MAX_LISTED_SKIPS} more skipped"
        return text


class IngestLocked(SearchError):
    """An ingest gave up: another process held the index's write lock for longer than it waits."""


class LocalCorpusSearcher:
    """`Searcher` over the local full-text index (bundled datasets and ingested files).

    `notice`: what a reader should know about the index (it could not be brought up to date), said
    in the description every run and the app show."""

    def __init__(self, store: CorpusStore, *, notice: str = "", embedding: CorpusEmbedding | None = None) -> None:
        self.store = store
        self.notice = notice
        self.embedding = embedding
        self.vectors = VectorIndex(store, embedding.model) if embedding else None
        self._description: tuple[int, str] | None = None

    @property
    def description(self) -> str:
        # Cached per store generation: counting documents is a GROUP BY over the corpus.
        generation = self.store.generation
        if self._description is None or self._description[0] != generation:
            collections = self.store.collections()
            total = sum(collections.values())
            names = ", ".join(collections) or "empty"
            notice = f"; {self.notice}" if self.notice else ""
            self._description = (generation, f"local corpus ({total:,} documents: {names}{notice})")
        return self._description[1]

    def search(self, query: str, k: int = 5) -> list[Hit]:
        return [corpus_hit(hit) for hit in self.store.search(query, k)]

    def candidates(self, query: str, k: int) -> Candidates:
        """`search`'s hits with their snippets to come (`Candidates`): `finish` makes FTS5's snippet
        for the hits kept, the same as `search` gives them."""
        chunks, _first, finish = self._ranked(query, k)
        return Candidates([corpus_hit(chunk, SNIPPET_LATER) for chunk in chunks], finish)

    def ranking(self, query: str, k: int) -> Ranking:
        """`search`'s order as refs (`Ranking`): the hits kept are made with their snippets to come,
        which `finish` makes as `candidates`' does."""
        chunks, first, finish = self._ranked(query, k)

        def hits(refs: Sequence[str], scores: Sequence[float]) -> list[Hit]:
            return [corpus_hit(first[ref], SNIPPET_LATER, score) for ref, score in zip(refs, scores)]

        return Ranking([corpus_ref(chunk) for chunk in chunks], hits, finish)

    def _ranked(
        self, query: str, k: int
    ) -> tuple[list[ChunkHit], dict[str, ChunkHit], Callable[[list[Hit]], list[Hit]]]:
        """BM25's top `k` chunks without snippets, the first chunk of each ref, and the `finish`
        that makes FTS5's snippets of the kept hits."""
        chunks = self.store.search(query, k, snippets=False)
        first: dict[str, ChunkHit] = {}
        for chunk in chunks:  # a ref twice (one document in two collections): fusion keeps the first
            first.setdefault(corpus_ref(chunk), chunk)

        def finish(kept: list[Hit]) -> list[Hit]:
            later = [first[hit.ref].chunk_id for hit in kept if hit.snippet == SNIPPET_LATER and hit.ref in first]
            made = self.store.snippets(query, later) if later else {}
            return [
                replace(hit, snippet=made.get(first[hit.ref].chunk_id) or hit.text[:300])
                if hit.snippet == SNIPPET_LATER and hit.ref in first
                else hit
                for hit in kept
            ]

        return chunks, first, finish

    def titled(self, title: str) -> Hit | None:
        """The document titled `title` as one hit: its first chunk's reference, its whole text (an
        agent's Lookup reads the page, not the one chunk a ranking picked)."""
        chunks = self.store.titled(title)
        if not chunks:
            return None
        hit = corpus_hit(chunks[0])
        text = "\n\n".join(c.text for c in chunks)[:TITLED_PAGE_CHARS]
        return Hit(title=hit.title, ref=hit.ref, snippet=hit.snippet, text=text, kind=hit.kind, url=hit.url)

    def ingest(
        self,
        paths: Iterable[Path | str],
        *,
        collection: str = DEFAULT_COLLECTION,
        inside: tuple[Path, str] | None = None,
        progress: IngestProgress | None = None,
        owner: str = "",
    ) -> IngestReport:
        """Index files and folders. Already-indexed content is skipped; edited files are updated.
        `inside=(folder, name)`: the files live in that folder (the app's uploads) and are named by
        their path inside it under `name`, with no file URL (see `named_inside`). Then, with an
        embedding, the passages lacking a vector are embedded, `progress` saying how far.

        Written a batch per transaction, each waiting at most the store's busy timeout for another
        process's write; past it, `IngestLocked` says so, and what was written before stays.
        `owner`: a person's own uploads ("u5"), deduplicated only against their own documents."""
        try:
            report = self._ingest(paths, collection, inside, owner)
            self._embed(report, progress)
            return report
        except CorpusLocked as exc:
            raise IngestLocked(
                f"could not add to the corpus index: {exc.reason} (THOUGHTMAP_CORPUS_LOCK_TIMEOUT sets this wait).",
                hint="What was added before stays; run the same ingest again to add the rest "
                "(files already indexed are skipped).",
            ) from exc

    def _ingest(
        self, paths: Iterable[Path | str], collection: str, inside: tuple[Path, str] | None, owner: str = ""
    ) -> IngestReport:
        started = time.perf_counter()
        report = IngestReport()
        batch: list[NewDocument] = []

        def flush() -> None:
            if not batch:
                return
            report.count(self.store.add_documents(batch))
            batch.clear()

        items = iter_documents(paths)
        if inside is not None:
            items = named_inside(items, *inside)
        for item in items:
            if isinstance(item, Skipped):
                report.skipped.append(item)
                continue
            if isinstance(item, TextFileDocument):
                flush()  # keeps documents in order; a large file is written alone
                self._ingest_large_file(item, collection, report, owner)
                continue
            batch.append(to_new_document(item, collection, owner))
            if len(batch) >= BATCH_SIZE:
                flush()
        flush()
        report.seconds = time.perf_counter() - started
        return report

    def _embed(self, report: IngestReport, progress: IngestProgress | None) -> None:
        if self.embedding is None or self.vectors is None:
            return
        started = time.perf_counter()

        def say(done: int, total: int) -> None:
            if progress and total:
                progress(f"embedding passages for vector search: {done:,} of {total:,}", done / total)

        try:
            report.chunks_embedded = self.vectors.update(self.embedding.encode, say)
        except SearchError as exc:  # the embedder failed (EmbeddingError): the documents stay
            report.embedding_failed = exc.user_message
        report.seconds += time.perf_counter() - started

    def _ingest_large_file(self, doc: TextFileDocument, collection: str, report: IngestReport, owner: str = "") -> None:
        """Index a large text file in one pass per purpose, never holding its text: its content
        hash first (an already indexed file is not chunked), then its chunks as they are written."""
        try:
            digest = content_hash_of_blocks(doc.blocks())
            if digest is None:
                report.skipped.append(Skipped(doc.path, "no text found"))
                return
            if owner:
                digest = content_hash(owner, digest)
            new = NewDocument(collection, doc.ref, doc.title, doc.url, iter_chunks(doc.blocks()), digest, owner)
            report.count(self.store.add_documents([new]))
        except OSError as exc:  # the file went away or became unreadable; its rows are rolled back
            report.skipped.append(Skipped(doc.path, f"cannot read: {exc.strerror or exc}"))


# The most of a document `titled` gives as one page: a long Wikipedia article's text.
TITLED_PAGE_CHARS = 20_000


def corpus_hit(hit: ChunkHit, snippet: str | None = None, score: float | None = None) -> Hit:
    """A corpus chunk as a search hit: its ref is the document's ref and the chunk's ordinal, the
    id a run stores as a Source (the knowledge layer's collection graphs use the same). `snippet`,
    `score`: in place of the chunk's."""
    return Hit(
        title=hit.title,
        ref=corpus_ref(hit),
        snippet=hit.snippet if snippet is None else snippet,
        text=hit.text,
        kind="corpus",
        url=hit.url,
        score=hit.score if score is None else score,
    )


def corpus_ref(hit: ChunkHit) -> str:
    return f"{hit.ref}#{hit.ordinal}"


def to_new_document(doc: LoadedDocument, collection: str, owner: str = "") -> NewDocument:
    return NewDocument(
        collection=collection,
        ref=doc.ref,
        title=doc.title,
        url=doc.url,
        chunks=chunk_text(doc.text),
        content_hash=content_hash(owner, doc.text) if owner else content_hash(doc.text),
        owner=owner,
    )
