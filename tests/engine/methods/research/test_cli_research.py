"""`thoughtmap run "<Researchy question>" --method research` through the CLI (issue 16): the offline
fake on the bundled corpus, the fake with web search mocked (ddgs replaced), and the real openai
client against a local OpenAI-compatible server."""

from __future__ import annotations

import re

from engine import cli
from engine.evaluate.datasets import load_items
from engine.llm.fake_server import FakeOpenAIServer
from storage.models import NodeStatus, RunStatus
from tests.engine.cli.test_cli import cli_run, run_id_of, split_report, stored_run
from tests.engine.methods.research.research_scripts import WEB_ROWS, FakeDDGS

# The Researchy Questions sample (DeepResearchGym), the dataset the paper evaluates on.
RESEARCHY = next(i.question for i in load_items("researchy") if "chip shortage" in i.question)


def check_report(text: str) -> None:
    body, source_lines = split_report(text)
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", body)}
    assert cited and cited <= set(range(1, len(source_lines) + 1))
    assert "## Citation check" in body and "Support rate" in body


def test_research_with_the_fake_on_the_bundled_corpus(prebuilt_corpus_home, capsys, tmp_path):
    out_file = tmp_path / "report.md"
    code, out, err = cli_run(
        capsys, "run", RESEARCHY, "--method", "research", "--llm", "fake", "--search", "local", "--out", str(out_file)
    )
    assert code == cli.EXIT_OK, err
    run, nodes, sources = stored_run(run_id_of(out))
    assert run.status == RunStatus.DONE
    kinds = [n.kind for n in sorted(nodes, key=lambda n: n.id)]
    assert kinds == [
        "question",
        "search",
        "rerank",
        "summary",
        "reasoning",
        "search",
        "rerank",
        "summary",
        "reasoning",
        "answer",
    ]
    assert sources and all(s.kind == "corpus" for s in sources)
    answer = next(n for n in nodes if n.kind == "answer")
    assert answer.status == NodeStatus.DONE and answer.data["checked"] and answer.data["search_count"] == 2
    check_report(out_file.read_text())


def test_research_with_web_search_mocked(prebuilt_corpus_home, capsys, monkeypatch):
    web = FakeDDGS(WEB_ROWS)
    monkeypatch.setattr("engine.search.web.default_ddgs_factory", lambda *a, **k: lambda: web)
    code, out, err = cli_run(
        capsys,
        "run",
        RESEARCHY,
        "--method",
        "research",
        "--llm",
        "fake",
        "--search",
        "web",
        "--profile",
        "quick",
        "--param",
        "relevance_floor=0",
    )
    assert code == cli.EXIT_OK, err
    run, nodes, sources = stored_run(run_id_of(out))
    assert run.status == RunStatus.DONE and run.params["max_searches"] == 1
    assert web.queries[0] == RESEARCHY and len(web.queries) == 2
    assert sources and all(s.kind == "web" for s in sources)
    assert any(n.kind == "answer" and n.status == NodeStatus.DONE for n in nodes)


def test_research_against_an_openai_compatible_server(prebuilt_corpus_home, capsys, monkeypatch, tmp_path):
    out_file = tmp_path / "report.md"
    with FakeOpenAIServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        code, out, err = cli_run(
            capsys,
            "run",
            RESEARCHY,
            "--method",
            "research",
            "--llm",
            "openai",
            "--search",
            "local",
            "--param",
            "reranker=llm",
            "--param",
            "search_top_k=8",
            "--param",
            "max_searches=1",
            "--out",
            str(out_file),
        )
        requests = server.requests
    assert code == cli.EXIT_OK, err
    run, nodes, _ = stored_run(run_id_of(out))
    assert run.status == RunStatus.DONE and run.llm_calls == len(requests)
    searches = [n for n in nodes if n.kind == "search"]
    # The LLM reranker judged each document found, over HTTP, scored by the logprobs the server sent.
    assert all(n.data["reranker"].startswith("LLM yes/no") for n in searches)
    judged = [r for r in requests if r.get("logprobs")]
    assert len(judged) == sum(n.data["found"] for n in searches)
    for node in searches:
        scores = [d["score"] for d in node.data["ranked"]]
        assert scores == sorted(scores, reverse=True)
    # Graded scores: P(yes) from the logprobs, not a bare yes/no verdict (1 or 0).
    assert any(0 < d["score"] < 1 for n in searches for d in n.data["ranked"])
    check_report(out_file.read_text())
