"""`thoughtmap run ... --method deot` through the CLI: the offline fake, the real openai client
against a local OpenAI-compatible server, parameters, search modes, budget, export, resume."""

from __future__ import annotations

import json

from engine import cli
from engine.llm.fake_server import FakeOpenAIServer
from storage.models import NodeStatus, RunStatus
from tests.engine.cli.test_cli import cli_run, run_id_of, split_report, stored_run

QUESTION = "How will rising sea levels affect coastal cities?"
SMALL = ["--param", "max_nodes=4", "--param", "max_layers=2"]


def test_deot_with_the_fake_and_local_search(prebuilt_corpus_home, capsys, tmp_path):
    out_file = tmp_path / "report.md"
    code, out, err = cli_run(
        capsys,
        "run",
        QUESTION,
        "--method",
        "deot",
        "--llm",
        "fake",
        "--search",
        "local",
        *SMALL,
        "--out",
        str(out_file),
    )
    assert code == cli.EXIT_OK, err
    run, nodes, sources = stored_run(run_id_of(out))
    questions = [n for n in nodes if n.kind == "question"]
    assert run.status == RunStatus.DONE
    assert run.params["max_nodes"] == 4 and run.params["max_layers"] == 2
    assert 1 < len(questions) <= 4 and max(n.depth for n in questions) <= 1
    assert sources and all(s.kind == "corpus" for s in sources)
    body, source_lines = split_report(out_file.read_text())
    assert "## Analysis metrics" in body
    cited = {int(n) for n in __import__("re").findall(r"\[(\d+)\]", body)}
    assert cited and cited <= set(range(1, len(source_lines) + 1))


def test_deot_against_an_openai_compatible_server(prebuilt_corpus_home, capsys, monkeypatch):
    with FakeOpenAIServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        code, out, err = cli_run(capsys, "run", QUESTION, "--method", "deot", "--llm", "openai", *SMALL)
        requests = server.requests
    assert code == cli.EXIT_OK, err
    run, nodes, _ = stored_run(run_id_of(out))
    assert run.status == RunStatus.DONE and run.llm_calls == len(requests)
    # Structured calls carried a JSON schema through the real client.
    assert any((r.get("response_format") or {}).get("type") == "json_schema" for r in requests)
    assert all(n.status == NodeStatus.DONE for n in nodes)


def test_deot_without_search_and_with_tools_switched_off(prebuilt_corpus_home, capsys):
    code, out, err = cli_run(
        capsys,
        "run",
        QUESTION,
        "--method",
        "deot",
        "--llm",
        "fake",
        "--search",
        "none",
        *SMALL,
        "--param",
        "news_search=false",
        "--param",
        "info_search=false",
        "--param",
        "validate_results=false",
        "--param",
        "optimize_query=no",
    )
    assert code == cli.EXIT_OK, err
    run, nodes, sources = stored_run(run_id_of(out))
    assert sources == []
    for node in nodes:
        assert {t["tool"] for t in node.data["tasks"]} <= {"event_extractor", "history_analyzer", "direct_reasoning"}
        assert "validation" not in node.data
    assert "query_optimization" not in nodes[0].data


def test_deot_rejects_switching_every_tool_off(capsys):
    flags = [
        a
        for tool in ("news_search", "info_search", "event_extractor", "history_analyzer", "direct_reasoning")
        for a in ("--param", f"{tool}=false")
    ]
    code, _, err = cli_run(capsys, "run", QUESTION, "--method", "deot", "--llm", "fake", *flags)
    assert code == cli.EXIT_USAGE
    assert "at least one tool" in err


def test_deot_budget_stop_then_resume(prebuilt_corpus_home, capsys):
    code, out, err = cli_run(
        capsys, "run", QUESTION, "--method", "deot", "--llm", "fake", *SMALL, "--max-tokens", "6000", "--quiet"
    )
    run_id = run_id_of(out)
    assert code == cli.EXIT_STOPPED, err
    run, nodes, _ = stored_run(run_id)
    assert run.status == RunStatus.STOPPED and "budget" in run.stop_reason
    finished_before = {n.id for n in nodes if n.status == NodeStatus.DONE}
    calls_before = run.llm_calls

    code, _, err = cli_run(capsys, "resume", run_id, "--max-tokens", "10000000", "--quiet")
    assert code == cli.EXIT_OK, err
    run, nodes, _ = stored_run(run_id)
    assert run.status == RunStatus.DONE
    assert finished_before <= {n.id for n in nodes if n.status == NodeStatus.DONE}
    assert run.llm_calls > calls_before

    code, out, _ = cli_run(capsys, "export", run_id, "--format", "json")
    exported = json.loads(out)
    assert exported["run"]["method"] == "deot" and exported["usage"]["llm_calls"] == run.llm_calls


def test_deot_against_a_server_that_rejects_json_schema(prebuilt_corpus_home, capsys, monkeypatch):
    """llama.cpp's server answers 500 to `json_schema`: auto mode steps down to `json_object` once,
    remembers it, and the whole run completes."""
    with FakeOpenAIServer(reject_json_schema=True) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        code, out, err = cli_run(capsys, "run", QUESTION, "--method", "deot", "--llm", "openai", *SMALL, "--quiet")
        requests = server.requests
    assert code == cli.EXIT_OK, err
    run, nodes, _ = stored_run(run_id_of(out))
    assert run.status == RunStatus.DONE and all(n.status == NodeStatus.DONE for n in nodes)
    kinds = [(r.get("response_format") or {}).get("type") for r in requests]
    assert kinds.count("json_schema") == 1  # tried once, rejected, never again
    assert kinds.count("json_object") >= 5
