"""`thoughtmap serve` in queue mode (PostgreSQL, THOUGHTMAP_EXECUTION=queue): the API only enqueues,
a `thoughtmap worker` process executes, and the event stream, which reads the database, follows the
run there as it follows one executing in the server; a steered finished run goes back to a worker."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.engine.service.test_http_api import QUESTION, ROOT, Server, _events, _start, _stop
from tests.support.db_backends import _fresh_postgres_database, _postgres_url
from tests.support.fixtures_corpus import bundled_corpus  # noqa: F401


def test_a_run_created_through_the_api_is_executed_and_streamed_from_a_worker(
    tmp_path_factory, bundled_corpus, monkeypatch
) -> None:  # noqa: F811
    base = _postgres_url()
    if not base:
        pytest.skip("no PostgreSQL test server (run the tests through scripts/test)")
    home = tmp_path_factory.mktemp("queue-home")
    bundled_corpus.store.backup_to(home / "corpus.sqlite3")
    database = _fresh_postgres_database(base)
    for name, value in (("THOUGHTMAP_DATABASE_URL", database), ("THOUGHTMAP_EXECUTION", "queue")):
        monkeypatch.setenv(name, value)  # _start and the worker copy this process's environment
    worker_log = (home / "worker.log").open("w")
    env = {
        **os.environ,
        "THOUGHTMAP_HOME": str(home),
        "THOUGHTMAP_LLM": "fake",
        "THOUGHTMAP_FAKE_LATENCY": "0.05",
        "THOUGHTMAP_BUILTIN_EMBEDDINGS": "0",
        "PYTHONPATH": str(ROOT),
    }
    worker = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "worker", "--heartbeat", "0.5"],
        env=env,
        cwd=ROOT,
        stdout=worker_log,
        stderr=subprocess.STDOUT,
    )
    server: Server | None = None
    try:
        server = _start(home)
        with server.client() as client:
            created = client.post("/v1/runs", json={"question": QUESTION, "method": "deot", "params": {"max_nodes": 3}})
            assert created.status_code == 201, created.text
            run_id = created.json()["id"]
            events = _events(client, run_id)
            assert events[-1][2]["status"] == "done"
            assert any(d.get("text") == "the run started" for _i, k, d in events if k == "log")
            root = next(n for n in client.get(f"/v1/runs/{run_id}/graph").json()["nodes"] if n["parent_id"] is None)
            steered = client.post(
                f"/v1/runs/{run_id}/commands",
                json={
                    "command": "ask",
                    "payload": {"node_id": root["id"], "question": "How did the plague of 165 matter?"},
                },
            )
            assert steered.status_code == 202, steered.text
            again = _events(client, run_id, last_event_id=events[-1][0])
            assert again[-1][2]["status"] == "done"
            asked = [d for _i, k, d in again if k == "node" and d["label"] == "How did the plague of 165 matter?"]
            assert asked and asked[-1]["status"] == "done"
        assert run_id in (home / "worker.log").read_text()  # executed by the worker, not the server
    finally:
        if server is not None:
            _stop(server)
        worker.terminate()
        worker.wait(timeout=60)
        worker_log.close()
