"""Read files and folders into plain-text documents for the local corpus.

Supported: .txt, .md/.markdown, .html/.htm, .pdf, .jsonl (one document per line). Folders are
walked recursively. A file that cannot be read is reported as `Skipped` with a reason; it never
stops the rest of the ingest. So is a file whose first bytes are binary (an image or archive
renamed `.txt`). A text file larger than STREAM_ABOVE_BYTES is not read here but given as a
`TextFileDocument`, read in blocks as it is indexed. Text is made storable (no NUL, no lone
surrogate from a JSON escape; file names that are not UTF-8 shown with \\x escapes).
"""

from __future__ import annotations

import codecs
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from engine.search.extract import ExtractionError, html_to_text, pdf_to_text
from engine.text import storable_text

TEXT_FIELDS = ("text", "contents", "body", "content")
MAX_FILE_BYTES = 200_000_000
# Bad JSONL lines are summarised per file; this many line numbers are listed.
MAX_LISTED_BAD_LINES = 10
# The first bytes of a text file are checked for binary content.
SNIFF_BYTES = 8192
# A binary file decodes to many control characters or, failing UTF-8, to many U+FFFD; text in a
# legacy 8-bit encoding (Latin-1 accents) stays far below these shares.
MAX_CONTROL_SHARE = 0.05
MAX_UNDECODABLE_SHARE = 0.30
_TEXT_CONTROLS = frozenset("\t\n\r\f\v\b\x1b")
# .txt/.md files above this size are streamed: read in blocks of TEXT_BLOCK_CHARS characters as
# they are indexed, never whole (a 50 MB file read whole peaked at 670 MiB).
STREAM_ABOVE_BYTES = 4_000_000
TEXT_BLOCK_CHARS = 1 << 20

_MD_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_SETEXT_HEADING = re.compile(r"^(\S.*)\n(=+|-+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class LoadedDocument:
    """One document read from a file (or one line of a .jsonl file)."""

    ref: str
    title: str
    text: str
    url: str | None
    path: Path


@dataclass(frozen=True)
class Skipped:
    """A file (or part of one) that was not loaded, and why."""

    path: Path
    reason: str


@dataclass(frozen=True)
class TextFileDocument:
    """A text file too large to hold in memory: its text is read in blocks, on demand.

    `blocks()` can be called more than once (the indexer reads the file twice: its content hash
    first, so an already indexed file is not chunked, then its chunks).
    """

    ref: str
    title: str
    url: str | None
    path: Path

    def blocks(self) -> Iterator[str]:
        return read_text_blocks(self.path)


class LoadError(Exception):
    """A file could not be read; the message is shown to the user."""


def binary_reason(head: bytes) -> str | None:
    """Why the first bytes of a file are not text, or None when they look like text."""
    advice = "not a text file; if it is text, save it as UTF-8"
    if b"\x00" in head:
        return f"binary content (NUL bytes): {advice}"
    # An incremental decoder: a character cut at the end of `head` is not counted as undecodable.
    text = codecs.getincrementaldecoder("utf-8")("replace").decode(head, final=False)
    if not text:
        return None
    controls = sum(1 for ch in text if ch < " " and ch not in _TEXT_CONTROLS)
    if controls > len(text) * MAX_CONTROL_SHARE:
        return f"binary content (control bytes): {advice}"
    if text.count("\ufffd") > len(text) * MAX_UNDECODABLE_SHARE:
        return f"binary content (mostly bytes that are not UTF-8): {advice} (e.g. iconv -t UTF-8)"
    return None


def read_text_blocks(path: Path, block_chars: int | None = None) -> Iterator[str]:
    """The text of a file in blocks of `block_chars` characters, storable (see engine.text)."""
    size = block_chars or TEXT_BLOCK_CHARS
    # newline="": keep line ends as they are, like reading the file whole does.
    with path.open("r", encoding="utf-8-sig", errors="replace", newline="") as handle:
        while block := handle.read(size):
            yield storable_text(block)


def path_text(path: Path | str) -> str:
    """A path as storable text: bytes of a file name that are not UTF-8 become \\xNN escapes,
    which keeps two such names distinct (U+FFFD would not)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        # Old files in a legacy encoding: keep the text, mark the odd bytes instead of failing.
        return data.decode("utf-8", errors="replace")


def _file_url(path: Path) -> str:
    return path.resolve().as_uri()  # percent-escapes any byte, so always storable


def _ref(path: Path) -> str:
    return path_text(path.resolve())


def _is_large(path: Path) -> bool:
    return path.stat().st_size > STREAM_ABOVE_BYTES


def load_txt(path: Path) -> list[LoadedDocument | TextFileDocument]:
    if _is_large(path):
        return [TextFileDocument(_ref(path), path_text(path.stem), _file_url(path), path)]
    text = _read_text(path).strip()
    return [LoadedDocument(_ref(path), path_text(path.stem), text, _file_url(path), path)]


def markdown_title(text: str, fallback: str) -> str:
    """The first ATX (`# Title`) or setext (`Title\\n===`) heading, else `fallback`."""
    candidates = [m for m in (_MD_HEADING.search(text), _SETEXT_HEADING.search(text)) if m]
    if not candidates:
        return fallback
    first = min(candidates, key=lambda m: m.start())
    return first.group(1).strip() or fallback


def load_md(path: Path) -> list[LoadedDocument | TextFileDocument]:
    if _is_large(path):
        # The title is the first heading of the first block: a title comes first.
        title = markdown_title(next(read_text_blocks(path), "").strip(), path_text(path.stem))
        return [TextFileDocument(_ref(path), title, _file_url(path), path)]
    text = _read_text(path).strip()
    title = markdown_title(text, path_text(path.stem))
    return [LoadedDocument(_ref(path), title, text, _file_url(path), path)]


def load_html(path: Path) -> list[LoadedDocument]:
    title, text = html_to_text(_read_text(path))
    return [LoadedDocument(_ref(path), title or path_text(path.stem), text, _file_url(path), path)]


def load_pdf(path: Path) -> list[LoadedDocument]:
    try:
        title, text = pdf_to_text(path.read_bytes())
    except ExtractionError as exc:
        raise LoadError(str(exc)) from exc
    return [LoadedDocument(_ref(path), title or path_text(path.stem), text, _file_url(path), path)]


def iter_jsonl(path: Path) -> Iterator[LoadedDocument | Skipped]:
    """One document per JSON line; bad lines are summarised in one `Skipped` at the end."""
    bad: list[int] = []
    base = _ref(path)
    with path.open("r", encoding="utf-8-sig", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                bad.append(number)
                continue
            if not isinstance(record, dict):
                bad.append(number)
                continue
            values = [record.get(f) for f in TEXT_FIELDS]
            texts = [t for t in values if isinstance(t, str) and t.strip()]
            if not texts:
                bad.append(number)
                continue
            text = texts[0]
            doc_id = record.get("id")
            suffix = str(doc_id) if doc_id not in (None, "") else f"line-{number}"
            title = record.get("title")
            title = str(title).strip() if title else f"{path.stem} {suffix}"
            url = record.get("url") if isinstance(record.get("url"), str) else None
            yield LoadedDocument(f"{base}::{suffix}", title, text.strip(), url, path)
    if bad:
        listed = ", ".join(map(str, bad[:MAX_LISTED_BAD_LINES]))
        extra = len(bad) - MAX_LISTED_BAD_LINES
        more = f" and {extra} more" if extra > 0 else ""
        yield Skipped(
            path,
            f"{len(bad)} line(s) skipped: not a JSON object with a text field "
            f"({'/'.join(TEXT_FIELDS)}) - line {listed}{more}",
        )


LOADERS: dict[str, Callable[[Path], Sequence[LoadedDocument | TextFileDocument]]] = {
    ".txt": load_txt,
    ".text": load_txt,
    ".md": load_md,
    ".markdown": load_md,
    ".html": load_html,
    ".htm": load_html,
    ".pdf": load_pdf,
}
SUPPORTED_SUFFIXES = frozenset([*LOADERS, ".jsonl"])


def _sniff(path: Path) -> str | None:
    with path.open("rb") as handle:
        return binary_reason(handle.read(SNIFF_BYTES))


def _storable(doc: LoadedDocument) -> LoadedDocument:
    """The document with text that every database can store (NUL, lone surrogates cleaned)."""
    return replace(
        doc,
        title=storable_text(doc.title),
        text=storable_text(doc.text),
        url=storable_text(doc.url) if doc.url else doc.url,
    )


def load_file(path: Path) -> Iterator[LoadedDocument | TextFileDocument | Skipped]:
    """Documents of one file, or a `Skipped` saying why not."""
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        yield Skipped(path, f"unsupported file type '{suffix or path_text(path.name)}'")
        return
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            yield Skipped(path, f"file is larger than {MAX_FILE_BYTES:,} bytes")
            return
        reason = None if suffix == ".pdf" else _sniff(path)  # a PDF is binary by design
        if reason:
            yield Skipped(path, reason)
            return
        if suffix == ".jsonl":
            for item in iter_jsonl(path):
                yield _storable(item) if isinstance(item, LoadedDocument) else item
            return
        docs = LOADERS[suffix](path)
    except LoadError as exc:
        yield Skipped(path, str(exc))
        return
    except OSError as exc:
        yield Skipped(path, f"cannot read: {exc.strerror or exc}")
        return
    except Exception as exc:  # noqa: BLE001 - one bad file must not abort a folder ingest
        yield Skipped(path, f"cannot read: {type(exc).__name__}: {exc}")
        return
    for doc in docs:
        if isinstance(doc, TextFileDocument):
            yield doc  # read later, in blocks; the indexer finds out whether it holds text
            continue
        doc = _storable(doc)
        yield doc if doc.text.strip() else Skipped(path, "no text found")


def _walk(folder: Path) -> Iterator[Path]:
    # Hidden files and folders (.git, .venv, editor swap files) are never content: skip quietly.
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.startswith("."):
                yield Path(root) / name


def iter_documents(paths: Iterable[Path | str]) -> Iterator[LoadedDocument | TextFileDocument | Skipped]:
    """Load files and (recursively) folders, yielding documents and skipped entries in order."""
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            for file in _walk(path):
                yield from load_file(file)
        elif path.is_file():
            yield from load_file(path)
        else:
            yield Skipped(path, "no such file or folder")


def named_inside(
    items: Iterable[LoadedDocument | TextFileDocument | Skipped], folder: Path, name: str
) -> Iterator[LoadedDocument | TextFileDocument | Skipped]:
    """The documents of files kept in `folder` (the app's uploads), identified by their path inside
    it under `name` (``uploads/notes.md``) and without a file URL. The reader of a citation sees the
    file they uploaded, never the server's folders; the ref stays unique and stable, so a file
    uploaded again under its name is updated in place."""
    root = path_text(folder.resolve())

    def inside(text: str) -> str:
        return name + text[len(root) :] if text == root or text.startswith(root + os.sep) else text

    for item in items:
        if isinstance(item, Skipped):
            yield replace(item, path=Path(inside(path_text(item.path.resolve()))))
            continue
        file_url = item.url is not None and item.url.startswith("file:")  # a .jsonl line may carry its own URL
        yield replace(item, ref=inside(item.ref), url=None if file_url else item.url)
