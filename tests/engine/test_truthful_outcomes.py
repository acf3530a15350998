"""The reliability issue's findings 2 (truthful outcome, resume retries failures), 5 (no credentials
from endpoint URLs) and 6 (unrelated passages are not evidence), each reproduced as a test."""

from __future__ import annotations

import json
import re

import pytest

from engine import cli
from engine.config import load_settings
from engine.llm.fake import FakeLLM
from engine.llm.fake_server import FakeOpenAIServer
from engine.redact import redact_secrets, redact_url
from engine.report import export_json, render_markdown
from engine.search.protocol import Hit
from engine.search.relevance import judge, relevant_hits
from engine.services import build_services
from storage.models import NodeStatus, RunStatus
from tests.engine.methods.deot.deot_scripts import (
    BREADTH,
    CONTROLLER,
    INVALID,
    PLANNER,
    SMALL,
    SUMMARY,
    aspect,
    aspects,
    controller_by_layer,
    plan,
    task,
)
from tests.support.fixtures_engine import run_to_end

DEOT_QUESTION = "How did the Apollo program shape later space exploration?"


# ---------------------------------------------------------------- finding 2: the outcome


def test_deot_run_whose_every_question_node_failed_is_failed_and_resume_retries(services, fake_llm):
    fake_llm.when(PLANNER, INVALID)  # every plan fails to parse: every node fails
    run_id = run_to_end(services, DEOT_QUESTION, "deot", SMALL)
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.FAILED
    assert "nothing was answered" in run.error and "TaskPlan" in run.error
    assert {n.status for n in services.repo.list_nodes(run_id, kind="question")} == {NodeStatus.FAILED}

    # The planner works again: resume retries the failed nodes, and the run is done with answers.
    fake_llm._rules.clear()
    services.runner.resume(run_id)
    run = services.runner.wait(run_id, timeout=60)
    assert run.status == RunStatus.DONE, run.error
    questions = services.repo.list_nodes(run_id, kind="question")
    assert questions and all(q.status == NodeStatus.DONE for q in questions)
    assert "No question node was answered" not in services.repo.latest_report(run_id).markdown


def test_a_run_with_some_failed_nodes_is_done_with_a_warning_and_resume_retries_them(services, fake_llm):
    # One child's summary fails (three times: the first try and the re-asks); the others succeed.
    children = [
        "How did Apollo change NASA budgets?",
        "How did Apollo change lunar science?",
        "How did Apollo influence private spaceflight?",
    ]
    fake_llm.when(CONTROLLER, controller_by_layer(lambda layer: "BREADTH" if layer == 1 else "STOP"))
    fake_llm.when(BREADTH, aspects(*(aspect(q) for q in children)), times=1)
    fake_llm.when(SUMMARY.where(re.compile(r"Question: " + re.escape(children[1]))), INVALID, times=3)
    run_id = run_to_end(services, DEOT_QUESTION, "deot", SMALL)
    run = services.repo.get_run(run_id)
    failed = services.repo.list_nodes(run_id, status=NodeStatus.FAILED)
    assert run.status == RunStatus.DONE and len(failed) == 1
    assert run.warning == "1 node failed; resume the run to retry them"
    assert services.runner.retryable(run)  # the app offers "Retry failed nodes", the CLI `thoughtmap resume`

    services.runner.resume(run_id)  # a done run with failures is resumable
    run = services.runner.wait(run_id, timeout=60)
    assert run.status == RunStatus.DONE and not run.warning
    assert not services.repo.list_nodes(run_id, status=NodeStatus.FAILED)
    # The report was rewritten after the retried node.
    reports = [r for r in services.repo.list_reports(run_id) if r.kind == "final"]
    assert len(reports) >= 2


def test_resume_of_a_done_run_without_failures_is_still_refused(services):
    from engine.runner import RunnerError

    run_id = run_to_end(services, "Which magazine was started first?", "rag")
    with pytest.raises(RunnerError, match="none of its nodes failed"):
        services.runner.resume(run_id)


# ---------------------------------------------------------------- finding 5: credentials in URLs


SECRET_URLS = [
    ("http://alice:hunter2secret@127.0.0.1:{port}/v1", "hunter2secret"),
    ("http://127.0.0.1:{port}/v1?api-key=topsecret123", "topsecret123"),
]


@pytest.mark.parametrize(
    "url", ["http://bob:pw12345@example.com/v1?api_key=abc12345&x=1", "https://h/v1?token=abcdef123&sig=zzz999"]
)
def test_redact_url_hides_users_passwords_and_secret_parameters(url):
    redacted = redact_url(url)
    for secret in ("bob", "pw12345", "abc12345", "abcdef123", "zzz999"):
        assert secret not in redacted
    assert "***" in redacted
    assert redact_secrets(f"cannot reach {url} (refused)") == f"cannot reach {redacted} (refused)"


@pytest.mark.parametrize("template,secret", SECRET_URLS)
def test_credentials_in_the_endpoint_url_are_never_stored_or_shown(
    prebuilt_corpus_home, capsys, monkeypatch, template, secret
):
    # Every answer fails the node's schema, so the run fails and its error mentions the endpoint.
    with FakeOpenAIServer(FakeLLM().when("Question:", {"wrong": "shape"})) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", template.format(port=server.port))
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-0123456789")
        code = cli.main(["run", "Which magazine was started first?", "--method", "rag", "--llm", "openai"])
        out, err = capsys.readouterr()
    run_id = out.strip().splitlines()[-1]
    assert code == cli.EXIT_FAILED
    assert secret not in err
    # A connection error quotes the URL too: the endpoint is gone now.
    code = cli.main(["resume", run_id])
    out2, err2 = capsys.readouterr()
    assert code == cli.EXIT_FAILED and secret not in out2 + err2

    services = build_services(load_settings())
    try:
        run = services.repo.get_run(run_id)
        stored = json.dumps(export_json(services.repo, run_id)) + render_markdown(services.repo, run_id)
        stored += json.dumps(run.llm_info) + run.error
        stored += "".join(n.error for n in services.repo.list_nodes(run_id))
        stored += "".join(c.error for c in services.repo.list_llm_calls(run_id))
        assert run.llm_info["base_url"].count("***") == 1
    finally:
        services.close()
    assert secret not in stored
    assert "sk-test-key-0123456789" not in stored
    cli.main(["show", run_id])
    shown, _ = capsys.readouterr()
    assert secret not in shown and "***" in shown


# ---------------------------------------------------------------- finding 6: relevance


def _hit(title: str, text: str) -> Hit:
    return Hit(title=title, ref=f"t/{title}#0", snippet=text[:80], text=text, kind="corpus")


def test_an_unrelated_nearest_match_is_dropped_and_a_related_one_kept():
    query = "When did the 1973 OPEC oil embargo start?"
    opec = _hit("1973 oil crisis", "The 1973 oil crisis began in October 1973 when OPEC proclaimed an oil embargo.")
    chavez = _hit("Hugo Chávez", "Hugo Chávez was a Venezuelan politician who served as President of Venezuela.")
    result = relevant_hits(query, [chavez, opec])
    assert result.kept == [opec]
    assert [d.hit.title for d in result.dropped] == ["Hugo Chávez"]
    assert result.dropped_summary()[0]["score"] < 0.35
    assert relevant_hits(query, [chavez], floor=0.0).kept == [chavez]  # 0 keeps everything
    scores = {j.hit.title: j.score for j in judge(query, [chavez, opec])}
    assert scores["1973 oil crisis"] > 0.7 and scores["Hugo Chávez"] == 0.0


def test_a_deot_node_with_no_relevant_source_says_so_and_cites_nothing(services, fake_llm):
    # The bundled corpus holds nothing on this; BM25 still returns its nearest passages.
    question = "Which quantum error correction codes suit superconducting qubit arrays?"
    fake_llm.when(
        PLANNER,
        plan(
            task("task1", "news_search", "quantum error correction codes for superconducting qubits"),
            task("task2", "info_search", "superconducting qubit array error rates"),
        ),
    )
    run_id = run_to_end(
        services,
        question,
        "deot",
        {
            "max_layers": 1,
            "max_nodes": 1,
            "event_extractor": False,
            "history_analyzer": False,
            "direct_reasoning": False,
        },
    )
    root = services.repo.list_nodes(run_id, kind="question")[0]
    outputs = " ".join(t["output"] for t in root.data["tasks"])
    assert "No relevant source was found" in outputs
    assert root.data["dropped_as_unrelated"], "the dropped hits are named in the node's data"
    assert services.repo.sources_for_node(root.id) == []
    assert "[[S" not in root.content


def test_rag_with_no_relevant_passage_tells_the_reader(services):
    run_id = run_to_end(services, "Which quantum error correction codes suit superconducting qubit arrays?", "rag")
    retrieval = services.repo.list_nodes(run_id, kind="search")[0]
    assert "No relevant source was found" in retrieval.content
    assert retrieval.data["dropped_as_unrelated"]
    assert services.repo.list_sources(run_id) == []
    report = render_markdown(services.repo, run_id)
    assert "No relevant source was found" in report and "## Sources" not in report
