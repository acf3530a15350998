"""The app's uploaded documents: saved in one folder and indexed under their file names.

A citation of an uploaded file names the file (``uploads/notes.md``), never the folder it was saved
in on the server: that path means nothing to the reader and tells them about the server.

With sign-in on (docs/teams.md), a person's uploads are theirs: saved in `uploads/u<id>/`, indexed in
their own collection (`uploads-u<id>`) under refs `uploads/u<id>/<file>`, deduplicated only against
their own documents, and found only by their runs (`engine/search/exclusion.py` `OwnUploadsOnly`). Uploads in the folder itself
are everyone's (single-user mode, and what admins add for the team)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from engine.search.local import DEFAULT_COLLECTION, IngestProgress, IngestReport, LocalCorpusSearcher

UPLOADS_NAME = "uploads"
# A person's uploads: their folder under the uploads folder, and the refs of its files.
_PERSONAL = re.compile(r"^u(\d+)$")
_PERSONAL_REF = re.compile(rf"^{UPLOADS_NAME}/u(\d+)/")


def _file_name(name: str) -> str:
    # A browser sends a bare name; anything path-like is flattened, so a file stays in the folder.
    return name.replace("/", "_").replace("\\", "_").lstrip(".") or "upload"


def person_key(user_id: int) -> str:
    return f"u{user_id}"


def person_collection(user_id: int) -> str:
    return f"{UPLOADS_NAME}-{person_key(user_id)}"


def is_personal_collection(collection: str) -> bool:
    return re.fullmatch(rf"{UPLOADS_NAME}-u\d+", collection) is not None


def _place(folder: Path, owner: int | None) -> tuple[Path, str, str, str]:
    """Where `owner`'s uploads go (None: everyone's): folder, ref name, collection, dedup owner."""
    if owner is None:
        return folder, UPLOADS_NAME, DEFAULT_COLLECTION, ""
    key = person_key(owner)
    return folder / key, f"{UPLOADS_NAME}/{key}", person_collection(owner), key


def add_uploads(
    searcher: LocalCorpusSearcher,
    folder: Path,
    files: Iterable[tuple[str, bytes]],
    progress: IngestProgress | None = None,
    *,
    owner: int | None = None,
) -> IngestReport:
    """Save (name, content) pairs in `folder` (a person's own part of it, `owner`) and index them
    (their passages embedded when the searcher embeds, `progress` saying how far); a file uploaded
    again under its name replaces the earlier one."""
    place, name, collection, key = _place(folder, owner)
    place.mkdir(parents=True, exist_ok=True)
    saved = []
    for file_name, content in files:
        target = place / _file_name(file_name)
        target.write_bytes(content)
        saved.append(target)
    return searcher.ingest(saved, inside=(place, name), collection=collection, owner=key, progress=progress)


def reindex_uploads(
    searcher: LocalCorpusSearcher, folder: Path, progress: IngestProgress | None = None
) -> IngestReport | None:
    """Index every file in the uploads folder again (after the index was cleared): everyone's, then
    each person's in their own collection; None if there are none."""
    if not folder.exists() or not any(folder.iterdir()):
        return None
    shared = [p for p in folder.iterdir() if not (p.is_dir() and _PERSONAL.match(p.name))]
    report = searcher.ingest(shared, inside=(folder, UPLOADS_NAME), progress=progress) if shared else IngestReport()
    for personal in sorted(p for p in folder.iterdir() if p.is_dir() and _PERSONAL.match(p.name)):
        owner = int(_PERSONAL.match(personal.name).group(1))  # type: ignore[union-attr]
        place, name, collection, key = _place(folder, owner)
        more = searcher.ingest([place], inside=(place, name), collection=collection, owner=key, progress=progress)
        report.merge(more)
    return report


def uploaded_by_someone_else(ref: str, user_id: int | None) -> bool:
    """Whether a hit's ref is another person's upload (`user_id` None: every person's is)."""
    match = _PERSONAL_REF.match(ref)
    return match is not None and (user_id is None or int(match.group(1)) != user_id)
