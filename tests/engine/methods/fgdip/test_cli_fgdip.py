"""`thoughtmap run "<HotpotQA question>" --method fgdip` through the CLI (issue 15): the offline fake
on the bundled corpus, and the real openai client against a local OpenAI-compatible server."""

from __future__ import annotations

from engine import cli
from engine.config import load_settings
from engine.llm.fake_server import FakeOpenAIServer
from engine.services import build_services
from storage.models import NodeStatus, RunStatus
from tests.engine.cli.test_cli import cli_run, run_id_of, split_report, stored_run

# A HotpotQA question whose paragraphs are in the bundled corpus.
QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"


def short_answer(run_id: str) -> dict:
    services = build_services(load_settings())
    try:
        return services.repo.latest_report(run_id).data
    finally:
        services.close()


def test_fgdip_with_the_fake_on_the_bundled_corpus(prebuilt_corpus_home, capsys, tmp_path):
    out_file = tmp_path / "report.md"
    code, out, err = cli_run(
        capsys, "run", QUESTION, "--method", "fgdip", "--llm", "fake", "--search", "local", "--out", str(out_file)
    )
    assert code == cli.EXIT_OK, err
    run_id = run_id_of(out)
    run, nodes, sources = stored_run(run_id)
    assert run.status == RunStatus.DONE
    branches = [n.data["entity"] for n in nodes if n.kind == "entity"]
    assert branches == ["Arthur's Magazine", "First for Women"]
    answer = next(n for n in nodes if n.kind == "answer")
    assert answer.status == NodeStatus.DONE and answer.data["verdict"] == "accepted"
    assert sources and all(s.kind == "corpus" for s in sources)
    assert any(s.title == "Arthur's Magazine" for s in sources)
    assert short_answer(run_id)["short_answer"] == "Arthur's Magazine"
    body, source_lines = split_report(out_file.read_text())
    assert "**Answer: Arthur's Magazine**" in body
    cited = {int(n) for n in __import__("re").findall(r"\[(\d+)\]", body)}
    assert cited and cited <= set(range(1, len(source_lines) + 1))


def test_fgdip_parameters_reach_the_run(prebuilt_corpus_home, capsys):
    code, out, err = cli_run(
        capsys,
        "run",
        "Are Arthur's Magazine and First for Women both magazines?",
        "--method",
        "fgdip",
        "--llm",
        "fake",
        "--search",
        "local",
        "--param",
        "yes_no=true",
        "--param",
        "siblings=2",
        "--param",
        "step_evaluator=false",
    )
    assert code == cli.EXIT_OK, err
    run_id = run_id_of(out)
    run, nodes, _ = stored_run(run_id)
    assert run.params["siblings"] == 2 and run.params["step_evaluator"] is False
    assert all(n.data.get("verdict") is None for n in nodes if n.kind in ("entity", "step"))
    assert short_answer(run_id)["short_answer"] in ("yes", "no")


def test_fgdip_against_an_openai_compatible_server(prebuilt_corpus_home, capsys, monkeypatch):
    with FakeOpenAIServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        code, out, err = cli_run(
            capsys,
            "run",
            QUESTION,
            "--method",
            "fgdip",
            "--llm",
            "openai",
            "--search",
            "local",
            "--param",
            "siblings=2",
        )
        requests = server.requests
    assert code == cli.EXIT_OK, err
    run, nodes, _ = stored_run(run_id_of(out))
    assert run.status == RunStatus.DONE and run.llm_calls == len(requests)
    assert any(n.kind == "answer" and n.status == NodeStatus.DONE for n in nodes)
