"""Read files and folders into plain-text documents for the local corpus.

Supported: .txt, .md/.markdown, .html/.htm, .pdf, .jsonl (one document per line). Folders are
walked recursively. A file that cannot be read is reported as `Skipped` with a reason; it never
stops the rest of the ingest.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from engine.search.extract import ExtractionError, html_to_text, pdf_to_text

TEXT_FIELDS = ("text", "contents", "body", "content")
MAX_FILE_BYTES = 200_000_000
# Bad JSONL lines are summarised per file; this many line numbers are listed.
MAX_LISTED_BAD_LINES = 10

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


class LoadError(Exception):
    """A file could not be read; the message is shown to the user."""


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        # Old files in a legacy encoding: keep the text, mark the odd bytes instead of failing.
        return data.decode("utf-8", errors="replace")


def _file_url(path: Path) -> str:
    return path.resolve().as_uri()


def load_txt(path: Path) -> list[LoadedDocument]:
    text = _read_text(path).strip()
    return [LoadedDocument(str(path.resolve()), path.stem, text, _file_url(path), path)]


def markdown_title(text: str, fallback: str) -> str:
    """The first ATX (`# Title`) or setext (`Title\\n===`) heading, else `fallback`."""
    candidates = [m for m in (_MD_HEADING.search(text), _SETEXT_HEADING.search(text)) if m]
    if not candidates:
        return fallback
    first = min(candidates, key=lambda m: m.start())
    return first.group(1).strip() or fallback


def load_md(path: Path) -> list[LoadedDocument]:
    text = _read_text(path).strip()
    title = markdown_title(text, path.stem)
    return [LoadedDocument(str(path.resolve()), title, text, _file_url(path), path)]


def load_html(path: Path) -> list[LoadedDocument]:
    title, text = html_to_text(_read_text(path))
    return [LoadedDocument(str(path.resolve()), title or path.stem, text, _file_url(path), path)]


def load_pdf(path: Path) -> list[LoadedDocument]:
    try:
        title, text = pdf_to_text(path.read_bytes())
    except ExtractionError as exc:
        raise LoadError(str(exc)) from exc
    return [LoadedDocument(str(path.resolve()), title or path.stem, text, _file_url(path), path)]


def iter_jsonl(path: Path) -> Iterator[LoadedDocument | Skipped]:
    """One document per JSON line; bad lines are summarised in one `Skipped` at the end."""
    bad: list[int] = []
    base = str(path.resolve())
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
            texts = [record.get(f) for f in TEXT_FIELDS]
            texts = [t for t in texts if isinstance(t, str) and t.strip()]
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


LOADERS = {
    ".txt": load_txt,
    ".text": load_txt,
    ".md": load_md,
    ".markdown": load_md,
    ".html": load_html,
    ".htm": load_html,
    ".pdf": load_pdf,
}
SUPPORTED_SUFFIXES = frozenset([*LOADERS, ".jsonl"])


def load_file(path: Path) -> Iterator[LoadedDocument | Skipped]:
    """Documents of one file, or a `Skipped` saying why not."""
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        yield Skipped(path, f"unsupported file type '{suffix or path.name}'")
        return
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            yield Skipped(path, f"file is larger than {MAX_FILE_BYTES:,} bytes")
            return
        if suffix == ".jsonl":
            yield from iter_jsonl(path)
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
        if doc.text.strip():
            yield doc
        else:
            yield Skipped(path, "no text found")


def _walk(folder: Path) -> Iterator[Path]:
    # Hidden files and folders (.git, .venv, editor swap files) are never content: skip quietly.
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.startswith("."):
                yield Path(root) / name


def iter_documents(paths: Iterable[Path | str]) -> Iterator[LoadedDocument | Skipped]:
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
