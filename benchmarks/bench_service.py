"""The HTTP API under load (issue 45): how long a stored node takes to reach an event-stream
subscriber, with 1 and with 50 subscribers on one run; requests per second for a run's status; the
server's memory.

A script, not a test: it measures and prints, it never asserts. `thoughtmap serve` runs as its own
process on a fresh home (SQLite, the scripted fake LLM). This process is the writer: like a worker,
it stores nodes in the same database through `Repository.add_node`, one every `--gap` seconds, and
notes the moment each commit returned; its subscribers (threads with an httpx stream each) note the
moment the node's event arrived. Both clocks are this process's. The runner's group commit is not
in the path: the nodes are stored at once, so the figure is the stream's own latency.

    .venv/bin/python benchmarks/bench_service.py                  # 200 nodes, 1 and 50 subscribers
    .venv/bin/python benchmarks/bench_service.py --write          # also into docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import ROOT, facts_block, machine_facts, percentile, publish, table  # noqa: E402


def _rss_mib(pid: int) -> tuple[float, float]:
    status = Path(f"/proc/{pid}/status").read_text()
    value = {k: int(v.split()[0]) / 1024 for k, v in re.findall(r"^(VmRSS|VmHWM):\s+(.*)$", status, re.M)}
    return value.get("VmRSS", 0.0), value.get("VmHWM", 0.0)


def _start(home: Path) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "THOUGHTMAP_HOME": str(home), "THOUGHTMAP_LLM": "fake", "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "serve", "--port", "0"],
        env=env,
        cwd=ROOT,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert process.stderr is not None
    for line in process.stderr:
        if match := re.search(r"API on (http://127\.0\.0\.1:\d+)/v1", line):
            threading.Thread(target=process.stderr.read, daemon=True).start()  # keep its pipe drained
            return process, match.group(1)
    raise SystemExit("the server did not start")


def _subscriber(
    url: str, run_id: str, arrivals: dict[str, float], ready: threading.Event, done: threading.Event, wanted: int
) -> None:
    seen = 0
    with (
        httpx.Client(base_url=url, timeout=None) as client,
        client.stream("GET", f"/v1/runs/{run_id}/events") as response,
    ):
        event = ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "status" and not ready.is_set():
                ready.set()
            elif line.startswith("data: ") and event == "node":
                label = json.loads(line[6:])["label"]
                if label.startswith("bench-") and label not in arrivals:
                    arrivals[label] = time.perf_counter()
                    seen += 1
                    if seen >= wanted:
                        break
    done.set()


def _latency(url: str, repo, subscribers: int, nodes: int, gap_s: float) -> dict[str, float]:
    run = repo.create_run(question="bench", method="deot", params={})
    arrivals = [dict[str, float]() for _ in range(subscribers)]
    ready = [threading.Event() for _ in range(subscribers)]
    done = [threading.Event() for _ in range(subscribers)]
    for i in range(subscribers):
        threading.Thread(
            target=_subscriber, args=(url, run.id, arrivals[i], ready[i], done[i], nodes), daemon=True
        ).start()
    for event in ready:
        event.wait(120)
    stored: dict[str, float] = {}
    for n in range(nodes):
        label = f"bench-{n}"
        repo.add_node(run.id, kind="question", label=label)
        stored[label] = time.perf_counter()
        time.sleep(gap_s)
    for event in done:
        event.wait(120)
    delays = [(got[label] - stored[label]) * 1000 for got in arrivals for label in stored if label in got]
    missing = subscribers * nodes - len(delays)
    return {"p50": percentile(delays, 50), "p95": percentile(delays, 95), "max": max(delays), "missing": missing}


def _status_rps(url: str, run_id: str, seconds: float, clients: int) -> float:
    count = [0] * clients
    stop = time.perf_counter() + seconds

    def hammer(i: int) -> None:
        with httpx.Client(base_url=url) as client:
            while time.perf_counter() < stop:
                client.get(f"/v1/runs/{run_id}").raise_for_status()
                count[i] += 1

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(count) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--gap", type=float, default=0.02, help="seconds between two stored nodes")
    parser.add_argument("--subscribers", type=int, nargs="+", default=[1, 50])
    parser.add_argument("--rps-seconds", type=float, default=10.0)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        os.environ["THOUGHTMAP_HOME"] = str(home)
        from engine.config import load_settings
        from storage.db import open_database
        from storage.repository import Repository

        process, url = _start(home)
        repo = Repository(open_database(load_settings().database_url))
        try:
            idle = _rss_mib(process.pid)[0]
            rows = []
            for subscribers in args.subscribers:
                result = _latency(url, repo, subscribers, args.nodes, args.gap)
                rss, peak = _rss_mib(process.pid)
                rows.append(
                    [
                        subscribers,
                        args.nodes,
                        f"{result['p50']:.1f}",
                        f"{result['p95']:.1f}",
                        f"{result['max']:.1f}",
                        result["missing"],
                        f"{rss:.0f} / {peak:.0f}",
                    ]
                )
                print(rows[-1], file=sys.stderr)
            run = repo.create_run(question="bench", method="deot", params={})
            rps = {clients: _status_rps(url, run.id, args.rps_seconds, clients) for clients in (1, 8)}
            rss, peak = _rss_mib(process.pid)
        finally:
            process.terminate()
            process.wait(30)

    facts = machine_facts()
    command = "python benchmarks/bench_service.py" + (" --write" if args.write else "")
    body = (
        "## HTTP API: event latency, subscribers, status requests (bench_service.py)\n\n"
        + facts_block(command, facts)
        + f"\n`thoughtmap serve` on a fresh home (SQLite); a writer process stores {args.nodes} nodes, one every "
        f"{args.gap * 1000:.0f} ms; each subscriber's stream notes when each node's event arrives. Latency is from "
        "the node's commit to its event at the subscriber.\n\n"
        + table(["subscribers", "nodes", "p50 ms", "p95 ms", "max ms", "events missed", "server RSS / peak MiB"], rows)
        + f"\nRun status (`GET /v1/runs/ID`): {rps[1]:.0f} requests/s from 1 client, {rps[8]:.0f} from 8 "
        f"(each {args.rps_seconds:.0f} s). Server memory: {idle:.0f} MiB idle, {rss:.0f} MiB at the end "
        f"(peak {peak:.0f}).\n"
    )
    publish("service", body, args.write)


if __name__ == "__main__":
    main()
