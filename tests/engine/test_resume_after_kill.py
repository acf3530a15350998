"""Crash recovery: a `thoughtmap run` process killed (SIGKILL) mid-run is resumed by another process.

The fake OpenAI-compatible server holds the answer call open, so the kill lands while that call is
in flight, after the retrieval node is done. Nobody can update the run after a SIGKILL: it stays
`running`, owned by a dead pid. `thoughtmap resume` must notice the owner is gone, mark the run
interrupted, and continue it: the finished nodes are kept (same ids, same sources, no second
search) and only the unfinished answer is asked again.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from engine import cli
from engine.citations import cited_source_ids
from engine.config import load_settings
from engine.llm.fake import FakeLLM
from engine.llm.fake_server import FakeOpenAIServer
from engine.runner import Runner
from engine.services import build_services
from storage.models import NodeStatus, RunStatus
from tests.engine.methods.deot.deot_scripts import (
    DIRECT_REASONING,
    INFO_SEARCH,
    PLAN_VALIDATOR,
    PLANNER,
    Gate,
    plan,
    task,
)

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
_SCRIPT = Path(sys.executable).with_name("thoughtmap")
THOUGHTMAP = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "engine.cli"]
START_TIMEOUT_S = 60  # process start-up, imports and retrieval, on a slow CI machine
ANSWER_HOLD_S = 60  # the first answer call is held this long: the kill comes well before


def wait_for(condition: Callable[[], object], timeout: float, what: str, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the run process exited ({proc.returncode}) while waiting for {what}")
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def read_lines(stream, into: queue.Queue) -> None:
    for line in iter(stream.readline, ""):
        into.put(line)
    into.put(None)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def start_deot_cli_run(home, server, question: str, *params: str) -> tuple[subprocess.Popen, str]:
    """`thoughtmap run QUESTION --method deot` as a real process against `server`: (process, run id)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "THOUGHTMAP_"))}
    env.update(THOUGHTMAP_HOME=str(home), OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="test", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [
            *THOUGHTMAP,
            "run",
            question,
            "--method",
            "deot",
            "--llm",
            "openai",
            "--search",
            "local",
            *(arg for param in params for arg in ("--param", param)),
            "--quiet",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=read_lines, args=(proc.stdout, lines), daemon=True).start()
    run_id = (lines.get(timeout=START_TIMEOUT_S) or "").strip()
    assert run_id, f"no run id: {proc.communicate()[1]}"
    return proc, run_id


def test_killed_run_is_resumed_without_redoing_finished_nodes(prebuilt_corpus_home, capsys, monkeypatch, request):
    services = build_services(load_settings())
    request.addfinalizer(services.close)
    repo = services.repo
    proc: subprocess.Popen | None = None
    with FakeOpenAIServer() as server:
        server.enqueue(delay_s=ANSWER_HOLD_S)  # the killed process's answer call never returns
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "THOUGHTMAP_"))}
        env.update(
            THOUGHTMAP_HOME=str(prebuilt_corpus_home),
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="test",
            PYTHONUNBUFFERED="1",
        )
        try:
            proc = subprocess.Popen(
                [*THOUGHTMAP, "run", QUESTION, "--method", "rag", "--llm", "openai", "--search", "local"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            lines: queue.Queue = queue.Queue()
            threading.Thread(target=read_lines, args=(proc.stdout, lines), daemon=True).start()
            try:
                first = lines.get(timeout=START_TIMEOUT_S)
            except queue.Empty:
                raise AssertionError("the run process printed no run id") from None
            assert first, f"the run process exited without a run id: {proc.communicate()[1]}"
            run_id = first.strip()
            assert run_id and " " not in run_id

            def retrieval_done_and_answer_in_flight():
                nodes = repo.list_nodes(run_id)
                kinds = {(n.kind, n.status) for n in nodes}
                return (
                    ("search", NodeStatus.DONE) in kinds
                    and ("answer", NodeStatus.RUNNING) in kinds
                    and server.count_chat_requests() >= 1
                )

            wait_for(
                retrieval_done_and_answer_in_flight,
                START_TIMEOUT_S,
                "the retrieval to finish and the answer call to reach the server",
                proc,
            )
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)  # reaped: its pid no longer exists
            assert proc.returncode == -signal.SIGKILL
            requests_at_kill = server.count_chat_requests()
            assert requests_at_kill == 1

            # Nobody updated the run: it still says running, owned by the dead process.
            run = repo.get_run(run_id)
            assert run.status == RunStatus.RUNNING
            assert f":{proc.pid}:" in run.owner
            before = repo.list_nodes(run_id)
            before_sources = [(s.id, s.ref) for s in repo.list_sources(run_id)]
            search_before = [n for n in before if n.kind == "search"]
            assert len(search_before) == 1 and before_sources
            answer_before = next(n for n in before if n.kind == "answer")
            assert answer_before.status == NodeStatus.RUNNING

            # Resume in another "process" (in-process CLI), spying on the recovery.
            recovered: list[str] = []
            original = Runner.recover_interrupted

            def spy(self):
                found = original(self)
                recovered.extend(found)
                return found

            monkeypatch.setattr(Runner, "recover_interrupted", spy)
            for key in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
                monkeypatch.setenv(key, env[key])
            capsys.readouterr()
            code = cli.main(["resume", run_id, "--quiet"])
            out, err = capsys.readouterr()
            assert code == cli.EXIT_OK, err
            assert recovered == [run_id], "resume must mark the dead run interrupted first"
            requests_after = server.count_chat_requests() - requests_at_kill
        finally:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
            if proc is not None:
                for stream in (proc.stdout, proc.stderr):
                    if stream is not None:
                        stream.close()

    run = repo.get_run(run_id)
    assert run.status == RunStatus.DONE and not run.error
    after = repo.list_nodes(run_id)
    # Finished nodes kept: same ids, one search node, same sources; the answer node is continued.
    assert [(n.id, n.kind) for n in after] == [(n.id, n.kind) for n in before]
    assert [n for n in after if n.kind == "search"][0].id == search_before[0].id
    assert [(s.id, s.ref) for s in repo.list_sources(run_id)] == before_sources
    answer = next(n for n in after if n.kind == "answer")
    assert answer.id == answer_before.id and answer.status == NodeStatus.DONE and answer.content.strip()
    assert all(n.status == NodeStatus.DONE for n in after)
    # Only the unfinished answer was asked again: one chat request, nothing for finished nodes.
    assert requests_after == 1
    assert run.llm_calls == 1  # the killed call was never recorded; the resumed one was


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_killed_deot_run_resumes_without_calling_the_llm_for_finished_nodes(prebuilt_corpus_home, request):
    """A many-node run: killed once the first layer is finished, resumed in another process. The
    LLM is never asked again for a node that was done before the kill (counted per node)."""
    services = build_services(load_settings())
    request.addfinalizer(services.close)
    repo = services.repo
    proc: subprocess.Popen | None = None
    # Every call takes 0.1 s, so the kill lands mid-run (layer 1 done, later layers in progress).
    with FakeOpenAIServer(latency_s=0.1) as server:
        try:
            proc, run_id = start_deot_cli_run(
                prebuilt_corpus_home, server, "How will rising sea levels affect coastal cities?"
            )

            def first_layer_done():
                nodes = repo.list_nodes(run_id, kind="question")
                layer1 = [n for n in nodes if n.depth == 1]
                return len(layer1) >= 2 and all(n.status == NodeStatus.DONE for n in layer1)

            wait_for(first_layer_done, START_TIMEOUT_S, "the first layer to be done", proc)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)

        before = {n.id: n for n in repo.list_nodes(run_id) if n.status == NodeStatus.DONE}
        solving_before = solving_calls(repo, run_id)
        total_before = len(repo.list_llm_calls(run_id))
        assert repo.get_run(run_id).status == RunStatus.RUNNING  # nobody could update it
        assert len(before) >= 3

        os.environ.update(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="test")
        try:
            assert cli.main(["resume", run_id, "--quiet"]) == cli.EXIT_OK
        finally:
            os.environ.pop("OPENAI_BASE_URL", None)
            os.environ.pop("OPENAI_API_KEY", None)

    run = repo.get_run(run_id)
    assert run.status == RunStatus.DONE
    solving_after = solving_calls(repo, run_id)
    for node_id, node in before.items():
        after = repo.get_node(node_id)
        assert after.status == NodeStatus.DONE and after.finished_at == node.finished_at
        # Solving a node (plan, plan review, tools, summary, fact check) is never repeated; a node
        # done before the kill may still get its expansion calls (controller, engines) afterwards.
        assert solving_after.get(node_id, 0) == solving_before.get(node_id, 0), f"node {node_id} was solved again"
    assert len(repo.list_llm_calls(run_id)) > total_before


SOLVING = ("prompter", "planner", "validator", "tool", "summarizer")


def solving_calls(repo, run_id: str) -> dict[int, int]:
    counts: dict[int, int] = {}
    for call in repo.list_llm_calls(run_id):
        if call.purpose in SOLVING and call.node_id is not None:
            counts[call.node_id] = counts.get(call.node_id, 0) + 1
    return counts


# The root's planner prompt is the only one whose context is the user's own question.
ROOT_PLANNER = PLANNER.where("(this is the user's own question)")
ROOT_SEARCH = "Arthur's Magazine First for Women founding year"
ROOT_REASONING = "Which of the two magazines was started first, given the founding years found?"


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_killed_deot_node_resumes_from_its_plan_and_finished_tasks(prebuilt_corpus_home, request):
    """Killed while the root's second task is in flight (its query optimised, its plan reviewed, its
    first task done): the resumed run asks no second prompter, planner or validator call for the
    root, does not run its first task again, and finishes with a complete, cited report."""
    services = build_services(load_settings())
    request.addfinalizer(services.close)
    repo = services.repo
    fake = FakeLLM()
    fake.when(
        ROOT_PLANNER,
        plan(task("task1", "info_search", ROOT_SEARCH), task("task2", "direct_reasoning", ROOT_REASONING, ["task1"])),
    )
    fake.when(
        PLAN_VALIDATOR, {"verdict": "approve", "completeness_issues": [], "redundancy_issues": [], "feedback": ""}
    )
    held = Gate()  # the root's second task: held until the process is killed, then answered normally
    fake.when(DIRECT_REASONING, held, times=1)
    proc: subprocess.Popen | None = None
    with FakeOpenAIServer(fake) as server:
        try:
            proc, run_id = start_deot_cli_run(prebuilt_corpus_home, server, QUESTION, "max_nodes=4", "max_layers=2")
            wait_for(held.reached.is_set, START_TIMEOUT_S, "the root's second task to reach the LLM", proc)
            # A run's writes are stored together a moment after they are made (engine/write_behind.py):
            # the kill comes once task1's checkpoint is stored, as it is long before a real call ends.
            wait_for(lambda: first_task_stored(repo, run_id), START_TIMEOUT_S, "task1's checkpoint to be stored", proc)
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            held.opened.set()  # the killed process's request gets its answer nowhere
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
            if proc is not None:
                for stream in (proc.stdout, proc.stderr):
                    if stream is not None:
                        stream.close()

        root_before = next(n for n in repo.list_nodes(run_id, kind="question") if n.parent_id is None)
        assert root_before.status == NodeStatus.RUNNING
        calls_before = calls_by_purpose(repo, run_id)
        # Before the kill the root had its query optimised, its plan reviewed and task1 done.
        assert [calls_before[(root_before.id, p)] for p in ("prompter", "planner", "validator", "tool")] == [1, 1, 1, 1]

        os.environ.update(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="test")
        try:
            assert cli.main(["resume", run_id, "--quiet"]) == cli.EXIT_OK
        finally:
            os.environ.pop("OPENAI_BASE_URL", None)
            os.environ.pop("OPENAI_API_KEY", None)

    assert repo.get_run(run_id).status == RunStatus.DONE
    calls_after = calls_by_purpose(repo, run_id)
    root = repo.get_node(root_before.id)
    for purpose in ("prompter", "planner"):
        assert calls_after[(root.id, purpose)] == calls_before[(root.id, purpose)], f"{purpose} asked again"
    # The one new validator call is the fact check of the answer, not a second plan review.
    assert calls_after[(root.id, "validator")] == calls_before[(root.id, "validator")] + 1
    assert len(fake.calls_for(PLAN_VALIDATOR.where(ROOT_SEARCH))) == 1
    # Only task2 ran again: task1's search and answer were kept as they were before the kill.
    assert calls_after[(root.id, "tool")] == calls_before[(root.id, "tool")] + 1
    task1, task2 = root.data["tasks"]
    assert (task1["id"], task1["status"], task2["status"]) == ("task1", "success", "success")
    assert len(fake.calls_for(INFO_SEARCH.where(ROOT_SEARCH))) == 1

    # The resumed run is complete: every question node answered, all of them in the report, which
    # cites sources the run really stored (and so does the resumed root).
    questions = repo.list_nodes(run_id, kind="question")
    assert len(questions) == 4 and all(n.status == NodeStatus.DONE for n in questions)
    report = repo.latest_report(run_id)
    assert sorted(node_id for node_id, _ in report.data["signature"]) == [n.id for n in questions]
    stored = {s.id for s in repo.list_sources(run_id)}
    assert cited_source_ids(report.markdown) and set(cited_source_ids(report.markdown)) <= stored
    root_sources = {s.id for s in repo.sources_for_node(root.id)}
    assert cited_source_ids(root.content) and set(cited_source_ids(root.content)) <= root_sources
    assert set(cited_source_ids(task1["output"])) <= root_sources


def first_task_stored(repo, run_id: str) -> bool:
    """The root's first task is stored as done, with the calls before it."""
    root = next((n for n in repo.list_nodes(run_id, kind="question") if n.parent_id is None), None)
    tasks = (root.data or {}).get("tasks") if root is not None else None
    return (
        bool(tasks) and tasks[0].get("status") == "success" and calls_by_purpose(repo, run_id)[(root.id, "tool")] == 1
    )


def calls_by_purpose(repo, run_id: str) -> Counter[tuple[int, str]]:
    """How many LLM calls each (node, purpose) made, from the llm_calls table."""
    return Counter((call.node_id, call.purpose) for call in repo.list_llm_calls(run_id) if call.node_id is not None)


def message_text(body: dict) -> str:
    """The text of a chat request's messages, as the fake server received them."""
    return "\n".join(str(m.get("content") or "") for m in body["messages"])
