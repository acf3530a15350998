"""The app's uploaded documents: saved in one folder and indexed under their file names.

A citation of an uploaded file names the file (``uploads/notes.md``), never the folder it was saved
in on the server: that path means nothing to the reader and tells them about the server."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from engine.search.local import IngestProgress, IngestReport, LocalCorpusSearcher

UPLOADS_NAME = "uploads"


def _file_name(name: str) -> str:
    # A browser sends a bare name; anything path-like is flattened, so a file stays in the folder.
    return name.replace("/", "_").replace("\\", "_").lstrip(".") or "upload"


def add_uploads(searcher: LocalCorpusSearcher, folder: Path, files: Iterable[tuple[str, bytes]],
                progress: IngestProgress | None = None) -> IngestReport:
    """Save (name, content) pairs in `folder` and index them (their passages embedded when the
    searcher embeds, `progress` saying how far); a file uploaded again under its name replaces the
    earlier one."""
    folder.mkdir(parents=True, exist_ok=True)
    saved = []
    for name, content in files:
        target = folder / _file_name(name)
        target.write_bytes(content)
        saved.append(target)
    return searcher.ingest(saved, inside=(folder, UPLOADS_NAME), progress=progress)


def reindex_uploads(searcher: LocalCorpusSearcher, folder: Path,
                    progress: IngestProgress | None = None) -> IngestReport | None:
    """Index every file in the uploads folder again (after the index was cleared); None if there are none."""
    if not folder.exists() or not any(folder.iterdir()):
        return None
    return searcher.ingest([folder], inside=(folder, UPLOADS_NAME), progress=progress)
