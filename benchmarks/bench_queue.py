"""The open issues' built-in-model benchmarks as one queue that any session (or machine) continues.

They take about 20 CPU-hours on a 2-core machine, far longer than one sitting, and a fresh machine
has none of the last one's databases. So every benchmark of the queue lives in
`benchmarks/results/<name>-<id>.json` (`thoughtmap bench --export`): this script imports each one
(merging, so nothing finished runs twice), resumes the first unfinished one, starts the next when
one is done, and writes the archive back every few minutes and when it stops. Only the CLI's public
commands are used.

    export THOUGHTMAP_HOME=/tmp/benchhome                    # scratch: the runs are kept there
    .venv/bin/python benchmarks/bench_queue.py               # Ctrl-C (or SIGTERM) stops and exports
    .venv/bin/python benchmarks/bench_queue.py --status      # each benchmark's items finished so far

Commit the archives it writes, and `benchmarks/results/traces/` (an FGDIP benchmark's search-tree
readings, `bench_fgdip_trace.py --keep`, which the archive does not carry); `thoughtmap bench --show
ID` prints a table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
THOUGHTMAP = [sys.executable, "-m", "engine.cli"]
EXPORT_EVERY_S = 600.0
TRACES_TIMEOUT_S = 300.0  # reading 90 stored search trees takes seconds


@dataclass(frozen=True)
class Entry:
    name: str  # the archive's name before its id
    issue: int
    arguments: tuple[str, ...]  # `thoughtmap bench` arguments that create it
    # Its FGDIP runs' search-tree readings (bench_fgdip_trace.py --keep) are kept beside the archive,
    # which carries scores, not runs: a benchmark continued on another machine is then read whole.
    fgdip_traces: bool = False


QUEUE = (
    Entry(
        "issue14-2wiki-rag-mtqa",
        14,
        ("--dataset", "2wiki", "--methods", "rag,mtqa", "--limit", "100", "--param", "documents=10", "--llm", "local"),
    ),
    Entry(
        "issue14-hotpotqa-direct-rag-mtqa",
        14,
        (
            "--dataset",
            "hotpotqa-autoact",
            "--methods",
            "direct,rag,mtqa",
            "--limit",
            "100",
            "--param",
            "documents=10",
            "--llm",
            "local",
        ),
    ),
    Entry(
        "issue15-hotpotqa-levels-direct-rag-fgdip",
        15,
        (
            "--dataset",
            "hotpotqa-autoact",
            "--methods",
            "direct,rag,fgdip",
            "--limit",
            "90",
            "--by",
            "level",
            "--llm",
            "local",
        ),
        fgdip_traces=True,
    ),
    Entry(
        "issue15-strategyqa-direct-rag-fgdip",
        15,
        (
            "--dataset",
            "strategyqa",
            "--methods",
            "direct,rag,fgdip",
            "--limit",
            "50",
            "--param",
            "yes_no=true",
            "--llm",
            "local",
        ),
        fgdip_traces=True,
    ),
)


def _created_at(path: Path) -> str:
    try:
        return json.loads(path.read_text(encoding="utf-8"))["benchmark"].get("created_at") or ""
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SystemExit(f"bench_queue: {path} is not a benchmark archive ({exc}); move it out of {RESULTS}") from exc


def archive_of(entry: Entry) -> Path | None:
    """The entry's newest benchmark: by when it was created, then by name (an archive dropped but
    kept would win by the order of its random id, and file times are a clone's)."""
    return max(RESULTS.glob(f"{entry.name}-*.json"), key=lambda path: (_created_at(path), path.name), default=None)


def benchmark_id(archive: Path) -> str:
    return archive.stem.rsplit("-", 1)[1]


def thoughtmap(*arguments: str) -> str:
    result = subprocess.run([*THOUGHTMAP, "bench", *arguments], cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"thoughtmap bench {' '.join(arguments)} failed:\n{result.stderr.strip()}")
    return result.stdout


def left_after_import(archive: Path) -> int:
    """Import (merge) the archive; the item runs it still has to do here."""
    said = thoughtmap("--import", str(archive))
    match = re.search(r"(\d+) left", said)
    return int(match.group(1)) if match else 0


def traces_of(archive: Path) -> Path:
    """Where an archive's kept FGDIP traces are: a folder of their own, out of the archives' glob."""
    return archive.parent / "traces" / archive.name


def export(identifier: str, archive: Path, entry: Entry) -> None:
    print(thoughtmap("--export", identifier, str(archive)).strip(), flush=True)
    if entry.fgdip_traces:
        traces_of(archive).parent.mkdir(exist_ok=True)
        # Its own session: a Ctrl-C meant for the benchmark does not cut it short (it writes whole anyway).
        try:
            kept = subprocess.run(
                [
                    sys.executable,
                    str(ROOT / "benchmarks" / "bench_fgdip_trace.py"),
                    identifier,
                    "--keep",
                    str(traces_of(archive)),
                ],
                cwd=ROOT,
                capture_output=True,
                text=True,
                start_new_session=True,
                timeout=TRACES_TIMEOUT_S,
            )
            failed = kept.stderr.strip()[-500:] if kept.returncode != 0 else ""
        except subprocess.TimeoutExpired:
            failed = f"no answer in {TRACES_TIMEOUT_S:.0f} s"
        if failed:  # the scores are safe in the archive: said, and the queue goes on
            print(f"bench_queue: keeping the FGDIP traces failed: {failed}", flush=True)


class Stopping:
    """SIGINT/SIGTERM: pass a clean stop to the running benchmark, then export and end."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.child: subprocess.Popen | None = None
        signal.signal(signal.SIGINT, self._stop)
        signal.signal(signal.SIGTERM, self._stop)

    def _stop(self, _signum, _frame) -> None:
        self.requested.set()
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signal.SIGINT)


def run_one(entry: Entry, stopping: Stopping) -> bool:
    """Work on one benchmark until it is finished (True) or a stop was asked for (False)."""
    archive = archive_of(entry)
    if archive is not None:
        if left_after_import(archive) == 0:
            return True
        identifier = benchmark_id(archive)
        command = [*THOUGHTMAP, "bench", "--resume", identifier]
    else:
        identifier = ""
        command = [*THOUGHTMAP, "bench", *entry.arguments]
    print(f"bench_queue: issue {entry.issue}, {entry.name}: {' '.join(command[3:])}", flush=True)
    child = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True, start_new_session=True)
    stopping.child = child
    found = threading.Event()
    exporting = threading.Event()

    def read_progress() -> None:
        nonlocal identifier, archive
        for line in child.stderr:
            sys.stderr.write(line)
            match = re.match(r"thoughtmap: benchmark ([0-9a-f]{12}):", line)
            if match and not identifier:
                identifier = match.group(1)
                archive = RESULTS / f"{entry.name}-{identifier}.json"
            if identifier:
                found.set()

    def export_now_and_then() -> None:
        found.wait()
        while not exporting.wait(EXPORT_EVERY_S):
            export(identifier, archive, entry)

    reader = threading.Thread(target=read_progress, daemon=True)
    exporter = threading.Thread(target=export_now_and_then, daemon=True)
    reader.start()
    exporter.start()
    child.wait()
    reader.join()
    exporting.set()
    found.set()
    exporter.join()  # never two exports writing the archive at once
    stopping.child = None
    if identifier:
        export(identifier, archive, entry)
    if stopping.requested.is_set():
        return False
    if child.returncode != 0:
        raise SystemExit(f"bench_queue: {entry.name} ended with exit code {child.returncode}; see its output above")
    return archive is not None and left_after_import(archive) == 0


def status() -> None:
    for entry in QUEUE:
        archive = archive_of(entry)
        if archive is None:
            print(f"issue {entry.issue}  {entry.name}: not started")
            continue
        print(
            f"issue {entry.issue}  {entry.name} ({benchmark_id(archive)}): {left_after_import(archive)} item runs left"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--status", action="store_true", help="import every archive (merging) and print the item runs each has left"
    )
    args = parser.parse_args()
    if not os.environ.get("THOUGHTMAP_HOME"):
        raise SystemExit("set THOUGHTMAP_HOME to a scratch folder: every item is a stored run, kept there")
    if args.status:
        status()
        return
    stopping = Stopping()
    for entry in QUEUE:
        if not run_one(entry, stopping):
            print("bench_queue: stopped; run it again to continue", flush=True)
            return
    print("bench_queue: every benchmark of the queue is finished", flush=True)


if __name__ == "__main__":
    main()
