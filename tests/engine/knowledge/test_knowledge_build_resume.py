"""A collection build killed half-way (SIGKILL) resumes without re-extracting finished chunks.

`thoughtmap kg build` runs as a real process against the fake OpenAI-compatible server, whose every
answer takes a while, so the kill lands with some chunks merged and others in flight. Nobody can
update the graph after a SIGKILL: it still says `building`, owned by a dead process, which
`kg status` shows as interrupted. `kg build` again (another process) continues: it asks the model
only for the chunks that were not done, and ends with every chunk extracted once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from engine import cli
from engine.config import load_settings
from engine.knowledge.build import shown_status
from engine.knowledge.prompts import EXTRACT
from engine.llm.fake import FakeLLM, request_text
from engine.llm.fake_server import FakeOpenAIServer
from engine.services import build_services
from storage.models import KnowledgeChunkStatus
from tests import REPO_ROOT
from tests.engine.test_resume_after_kill import START_TIMEOUT_S, wait_for
from tests.support.contract_helpers import stop

ROOT = REPO_ROOT
CHUNKS = 24  # one and a half batches of 16
GRAPH_KEY = "collection:hotpotqa:1200"


def extracted_passages(fake: FakeLLM, start: int = 0) -> list[str]:
    """The passage text of each extraction request the server received, from the `start`-th on."""
    out = []
    for request in fake.calls_for(EXTRACT.name)[start:]:
        text = request_text(request)
        out.append(text.split("<<<PASSAGE\n", 1)[1].split("\nPASSAGE>>>", 1)[0])
    return out


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_killed_collection_build_resumes_without_reextracting_finished_chunks(
    prebuilt_corpus_home, request, monkeypatch, capsys
):
    services = build_services(load_settings())
    request.addfinalizer(services.close)
    store = services.knowledge.store
    fake = FakeLLM()
    proc: subprocess.Popen | None = None
    # 0.6 s an answer, 8 at a time: the first batch is merged after about a second, the second is
    # in flight when the process is killed.
    with FakeOpenAIServer(fake, latency_s=0.6) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "THOUGHTMAP_"))}
        env.update(
            THOUGHTMAP_HOME=str(prebuilt_corpus_home),
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="test",
            PYTHONUNBUFFERED="1",
            PYTHONPATH=str(ROOT),
        )
        try:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "engine.cli",
                    "kg",
                    "build",
                    "--collection",
                    "hotpotqa",
                    "--limit",
                    str(CHUNKS),
                    "--llm",
                    "openai",
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )

            def some_done_some_not():
                graph = store.find_graph(GRAPH_KEY)
                if graph is None:
                    return False
                counts = store.counts(graph.id)
                return counts.chunks_total == CHUNKS and 16 <= counts.chunks_done < CHUNKS

            wait_for(some_done_some_not, START_TIMEOUT_S, "the first batch to be merged", proc)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            assert proc.returncode == -signal.SIGKILL
        finally:
            if proc is not None:
                stop(proc)

        graph = store.find_graph(GRAPH_KEY)
        assert graph.status == "building" and f":{proc.pid}:" in graph.owner  # nobody could update it
        assert shown_status(graph) == "interrupted"
        done_before = {c.text for c in store.list_chunks(graph.id, status=KnowledgeChunkStatus.DONE)}
        assert 16 <= len(done_before) < CHUNKS
        # `kg stop` on a build whose process died marks it stopped at once (nothing else would).
        assert cli.main(["kg", "stop", "--collection", "hotpotqa"]) == cli.EXIT_OK
        assert "its build process had died" in capsys.readouterr().out
        assert store.find_graph(GRAPH_KEY).status == "stopped"

    # Resume in another process (the in-process CLI), against a server of its own: requests the
    # killed process had sent can still reach the first server's handlers after the kill (a loaded
    # machine reads them late), and counted there they read as asked again.
    resumed_fake = FakeLLM()
    with FakeOpenAIServer(resumed_fake, latency_s=0.6) as resume_server:
        monkeypatch.setenv("OPENAI_BASE_URL", resume_server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", env["OPENAI_API_KEY"])
        code = cli.main(
            ["kg", "build", "--collection", "hotpotqa", "--limit", str(CHUNKS), "--llm", "openai", "--quiet"]
        )
        assert code == cli.EXIT_OK
        asked_after = extracted_passages(resumed_fake)

    counts = store.counts(graph.id)
    assert (counts.chunks_total, counts.chunks_done, counts.chunks_failed) == (CHUNKS, CHUNKS, 0)
    # Only the unfinished chunks were asked again: none that was done before the kill, each once.
    assert not set(asked_after) & done_before
    assert len(asked_after) == len(set(asked_after)) == CHUNKS - len(done_before)
    resumed = store.find_graph(GRAPH_KEY)
    assert resumed.status == "done" and resumed.id == graph.id
    # What the resumed build cost is on the graph; the killed process's last batch was never recorded.
    assert resumed.calls >= CHUNKS - len(done_before)


def test_a_dead_builders_pid_taken_by_another_process_does_not_lock_the_graph(services, capsys):
    """A build killed for good leaves its claim; when its pid later belongs to another process (a
    container restarted), the claim must not hold: the owner names the builder's start time too."""
    import socket

    from engine.knowledge.build import owner_alive, process_started

    store = services.knowledge.store
    graph = store.open_graph("collection:hotpotqa:1200", scope="collection", collection="hotpotqa", chunk_tokens=1200)
    living = os.getppid()  # alive, and not the builder: its start time differs from the one recorded
    stale = f"{socket.gethostname()}:{living}:deadbeef:{int(process_started(living) or 0) + 1}"
    assert store.claim_graph(graph.id, stale, owner_alive) is not None
    assert not owner_alive(store.get_graph(graph.id)) and shown_status(store.get_graph(graph.id)) == "interrupted"
    assert (
        cli.main(["kg", "build", "--collection", "hotpotqa", "--limit", "3", "--llm", "fake", "--quiet"]) == cli.EXIT_OK
    )
    # The builder's own claim, with its real start time, is alive; an older owner without one still counts.
    assert owner_alive(
        store.get_graph(graph.id).model_copy(
            update={"owner": f"{socket.gethostname()}:{living}:cafe0000:{process_started(living)}"}
        )
    )
    assert owner_alive(
        store.get_graph(graph.id).model_copy(update={"owner": f"{socket.gethostname()}:{living}:cafe0000"})
    )
