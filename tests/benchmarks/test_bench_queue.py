"""benchmarks/bench_queue.py picks the archive to continue: the entry's newest benchmark by when it
was created (a dropped attempt kept beside it won by the order of its random id), and says which
file is not an archive instead of crashing on it."""

from __future__ import annotations

import json

import pytest

from benchmarks import bench_queue


def _archive(folder, name: str, created_at: str | None) -> None:
    (folder / name).write_text(json.dumps({"benchmark": {"created_at": created_at}}), encoding="utf-8")


def test_the_newest_benchmark_of_an_entry_is_continued(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_queue, "RESULTS", tmp_path)
    entry = bench_queue.QUEUE[1]
    assert bench_queue.archive_of(entry) is None
    _archive(tmp_path, f"{entry.name}-ffff00000000.json", "2026-11-26T10:00:00Z")  # dropped, older
    _archive(tmp_path, f"{entry.name}-aaaa00000000.json", "2026-11-27T12:03:00Z")
    _archive(tmp_path, f"{bench_queue.QUEUE[0].name}-bbbb00000000.json", "2026-11-28T00:00:00Z")  # another entry
    assert bench_queue.archive_of(entry).name == f"{entry.name}-aaaa00000000.json"
    _archive(tmp_path, f"{entry.name}-cccc00000000.json", None)  # no date: older than any dated one
    assert bench_queue.archive_of(entry).name == f"{entry.name}-aaaa00000000.json"

    (tmp_path / f"{entry.name}-dddd00000000.json").write_text("not json", encoding="utf-8")
    with pytest.raises(SystemExit, match="is not a benchmark archive"):
        bench_queue.archive_of(entry)
