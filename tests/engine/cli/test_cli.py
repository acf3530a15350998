"""The `thoughtmap` CLI end to end: commands, outputs, exit codes and every error path.

Commands run in-process through `engine.cli.main` (fast); the OpenAI tests drive the real openai
client against a `FakeOpenAIServer` on 127.0.0.1. Each test has its own THOUGHTMAP_HOME; tests that
search use `prebuilt_corpus_home` so the bundled index is not rebuilt.
"""

from __future__ import annotations

import json
import re
import socket

import pytest

from engine import cli
from engine.cli import common
from engine.config import load_settings
from engine.llm.fake import FakeLLM
from engine.llm.fake_server import FakeOpenAIServer
from engine.services import build_services
from storage.models import NodeStatus, RunStatus

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
BUNDLED_DATASETS = ("hotpotqa", "2wikimultihopqa", "nq", "freshwiki")
RUN_ID_LINE = re.compile(r"^[0-9a-f]{6,40}\n$")
SOURCE_LINE = re.compile(r"^\[(\d+)\] (.+?) — (\S+) \((corpus|web)\)(?: · document `([^`]+)`)?\s*$")


def cli_run(capsys, *argv: str) -> tuple[int, str, str]:
    """Run `thoughtmap <argv>` in-process; returns (exit code, stdout, stderr)."""
    capsys.readouterr()  # drop anything printed before
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_id_of(out: str) -> str:
    assert RUN_ID_LINE.match(out), f"stdout should be exactly the run id line, got {out!r}"
    return out.strip()


def stored_run(run_id: str):
    services = build_services(load_settings())
    try:
        return services.repo.get_run(run_id), services.repo.list_nodes(run_id), services.repo.list_sources(run_id)
    finally:
        services.close()


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def split_report(markdown: str) -> tuple[str, list[str]]:
    """(body, source lines) of a Markdown report (each entry's anchor heading left out)."""
    body, sep, tail = markdown.partition("\n## Sources\n")
    lines = [line for line in tail.splitlines() if line.strip() and not line.startswith("###### ")] if sep else []
    return body, lines


# ====================================================================== the acceptance


@pytest.fixture
def done_rag_run(prebuilt_corpus_home, capsys) -> str:
    code, out, err = cli_run(capsys, "run", QUESTION, "--method", "rag", "--llm", "fake", "--search", "local")
    assert code == cli.EXIT_OK, err
    return run_id_of(out)


def test_run_prints_only_the_run_id_and_exits_0(done_rag_run, capsys):
    run, nodes, sources = stored_run(done_rag_run)
    assert run.status == RunStatus.DONE
    assert run.question == QUESTION and run.method == "rag" and run.search_mode == "local"
    assert {n.kind for n in nodes} >= {"question", "search", "answer"}
    assert all(n.status == NodeStatus.DONE for n in nodes)
    assert sources


def test_export_markdown_citations_all_resolve_to_bundled_sources(done_rag_run, capsys):
    code, out, err = cli_run(capsys, "export", done_rag_run, "--format", "md")
    assert code == cli.EXIT_OK, err
    assert out.startswith(f"# {QUESTION}")
    body, source_lines = split_report(out)

    cited = {int(n) for n in re.findall(r"\[(\d+)\]", body)}
    assert cited, f"the fake's answer quotes its sources with [n]; no citation in:\n{body}"
    listed: dict[int, re.Match[str]] = {}
    for line in source_lines:
        match = SOURCE_LINE.match(line)
        assert match, f"not a source entry: {line!r}"
        listed[int(match.group(1))] = match
    # Every [n] of the body resolves, the list is exactly the cited sources, numbered 1..N.
    assert cited == set(listed)
    assert sorted(listed) == list(range(1, len(listed) + 1))
    # Numbered by first appearance in the body.
    first_seen = list(dict.fromkeys(int(n) for n in re.findall(r"\[(\d+)\]", body)))
    assert first_seen == sorted(first_seen)
    for match in listed.values():
        url, kind, ref = match.group(3), match.group(4), match.group(5)
        assert kind == "corpus"
        assert url.startswith("https://en.wikipedia.org/wiki/"), url
        assert ref and ref.split("/", 1)[0] in BUNDLED_DATASETS, ref


def test_export_json_holds_the_whole_session(done_rag_run, capsys):
    code, out, err = cli_run(capsys, "export", done_rag_run, "--format", "json")
    assert code == cli.EXIT_OK, err
    data = json.loads(out)
    for key in ("nodes", "edges", "sources", "llm_calls", "usage", "params"):
        assert key in data, key
    assert data["run"]["id"] == done_rag_run
    assert data["params"] == {
        "top_k": 5,
        "relevance_floor": 0.35,
        "read_pages": 5,
        "max_answer_tokens": 800,
        "attribute_citations": False,
        "yes_no": False,
    }
    assert {n["kind"] for n in data["nodes"]} >= {"question", "search", "answer"}
    assert len(data["edges"]) >= len(data["nodes"]) - 1
    assert data["sources"] and all(s["ref"].split("/", 1)[0] in BUNDLED_DATASETS for s in data["sources"])
    assert len(data["llm_calls"]) == data["usage"]["llm_calls"] >= 1
    assert data["usage"]["total_tokens"] == data["usage"]["prompt_tokens"] + data["usage"]["completion_tokens"] > 0


@pytest.mark.parametrize("fmt", ["md", "json"])
def test_export_out_writes_the_file(done_rag_run, capsys, tmp_path, fmt):
    target = tmp_path / f"report.{fmt}"
    code, out, err = cli_run(capsys, "export", done_rag_run, "--format", fmt, "--out", str(target))
    assert code == cli.EXIT_OK, err
    assert out == ""
    assert str(target) in err
    text = target.read_text(encoding="utf-8")
    if fmt == "json":
        assert json.loads(text)["run"]["id"] == done_rag_run
    else:
        assert text.startswith(f"# {QUESTION}") and "## Sources" in text


def test_run_out_writes_the_markdown_report(prebuilt_corpus_home, capsys, tmp_path):
    target = tmp_path / "sub-report.md"
    code, out, err = cli_run(capsys, "run", QUESTION, "--llm", "fake", "--quiet", "--out", str(target))
    assert code == cli.EXIT_OK, err
    run_id = run_id_of(out)
    assert f"`{run_id}`" in target.read_text(encoding="utf-8")


# ====================================================================== list, show, methods, ingest


def test_list_and_show_contain_the_run(done_rag_run, capsys):
    code, out, err = cli_run(capsys, "list")
    assert code == cli.EXIT_OK, err
    header, *rows = out.splitlines()
    assert header.split()[:3] == ["ID", "STATUS", "METHOD"]
    row = next(r for r in rows if r.startswith(done_rag_run))
    assert " done " in row and " rag " in row and "Arthur's Magazine" in row

    code, out, _ = cli_run(capsys, "list", "--status", "failed")
    assert code == cli.EXIT_OK and done_rag_run not in out
    code, out, _ = cli_run(capsys, "list", "--search", "Arthur")
    assert code == cli.EXIT_OK and done_rag_run in out

    code, out, err = cli_run(capsys, "show", done_rag_run)
    assert code == cli.EXIT_OK, err
    assert f"run       {done_rag_run}" in out
    assert f"question  {QUESTION}" in out
    assert "status    done" in out
    assert '"top_k": 5' in out
    assert re.search(r"#\d+ \[question\] .*\(done\)", out)
    assert re.search(r"#\d+ \[search\] Retrieve top 5 passages \(done\)", out)
    assert re.search(r"#\d+ \[answer\] Answer \(done\)", out)

    # A unique prefix of the id is accepted too.
    code, out, _ = cli_run(capsys, "show", done_rag_run[:8])
    assert code == cli.EXIT_OK and done_rag_run in out


def test_list_with_no_runs(capsys):
    code, out, err = cli_run(capsys, "list")
    assert code == cli.EXIT_OK
    assert out == "" and "no runs stored yet" in err


def test_methods_lists_direct_and_rag_with_their_params(capsys):
    code, out, err = cli_run(capsys, "methods")
    assert code == cli.EXIT_OK, err
    assert re.search(r"^direct: ", out, re.M) and re.search(r"^rag: ", out, re.M)
    # Each method's section runs from its "name: title" line to the next method's.
    sections = {m.group(1): m.group(0) for m in re.finditer(r"^(\w+): .*?(?=^\w+: |\Z)", out, re.M | re.S)}
    rag_section, direct_section = sections["rag"], sections["direct"]
    assert "--param top_k=5" in rag_section and "--param max_answer_tokens=800" in rag_section
    assert "--param max_answer_tokens=800" in direct_section and "top_k" not in direct_section


def test_methods_says_which_retriever_and_reranker_every_method_searches_with(capsys, monkeypatch):
    code, out, _ = cli_run(capsys, "methods")
    assert code == cli.EXIT_OK
    assert "retriever (THOUGHTMAP_RETRIEVER): hybrid: BM25 and the embedding model's vectors" in out
    assert "reranker (THOUGHTMAP_RERANKER, where a method reranks: the research agent): none:" in out
    # The tests run without the built-in embedding model: said, with why.
    assert "embedding model: none" in out and "THOUGHTMAP_BUILTIN_EMBEDDINGS=0" in out
    monkeypatch.setenv("THOUGHTMAP_RETRIEVER", "bm25")
    monkeypatch.setenv("THOUGHTMAP_RERANKER", "builtin")
    code, out, _ = cli_run(capsys, "methods")
    assert "retriever (THOUGHTMAP_RETRIEVER): bm25: BM25 word match" in out
    assert ": builtin: the first stage's order fused with the embedding model's cosine order" in out


def test_ingest_a_folder_then_a_run_finds_the_document(prebuilt_corpus_home, capsys, tmp_path):
    folder = tmp_path / "my-notes"
    folder.mkdir()
    (folder / "festival.txt").write_text(
        "The Zorblaxian quasar festival is held every spring in the town of Quillmere, famous for its glowing kites.\n",
        encoding="utf-8",
    )
    (folder / "kites.md").write_text(
        "# Quillmere kites\n\nQuillmere kite makers use phosphorescent silk spun by the Vantrell moth.\n",
        encoding="utf-8",
    )

    code, out, err = cli_run(capsys, "ingest", str(folder))
    assert code == cli.EXIT_OK, err
    assert "2 document(s) added" in out

    code, out, err = cli_run(
        capsys,
        "run",
        "When is the Zorblaxian quasar festival held in Quillmere?",
        "--method",
        "rag",
        "--llm",
        "fake",
        "--search",
        "local",
        "--quiet",
    )
    assert code == cli.EXIT_OK, err
    run_id = run_id_of(out)
    _, _, sources = stored_run(run_id)
    refs = [s.ref for s in sources]
    assert any("festival.txt" in ref for ref in refs), refs
    assert sources[0].url == (folder / "festival.txt").as_uri() or any(
        s.url == (folder / "festival.txt").as_uri() for s in sources
    )

    code, out, _ = cli_run(capsys, "export", run_id)
    _, source_lines = split_report(out)
    assert any("festival.txt" in line for line in source_lines), out

    # Ingesting again adds nothing new.
    code, out, _ = cli_run(capsys, "ingest", str(folder / "festival.txt"))
    assert code == cli.EXIT_OK and "0 document(s) added" in out


# ====================================================================== error paths


def test_unknown_method(capsys):
    code, out, err = cli_run(capsys, "run", QUESTION, "--method", "tree-of-nope", "--llm", "fake")
    assert code == cli.EXIT_USAGE
    assert out == ""
    assert "tree-of-nope" in err and "direct" in err and "rag" in err


def test_unknown_parameter_lists_the_valid_ones(capsys):
    code, out, err = cli_run(capsys, "run", QUESTION, "--method", "rag", "--param", "depth=3", "--llm", "fake")
    assert code == cli.EXIT_USAGE and out == ""
    assert "'depth'" in err and "top_k" in err and "max_answer_tokens" in err


@pytest.mark.parametrize(
    "assignment, expected",
    [
        ("top_k=abc", "integer"),
        ("top_k=0", "greater than or equal to 1 (allowed: 1 to 50)"),
        ("top_k=999", "less than or equal to 50"),
        ("max_answer_tokens=-5", "greater than or equal to 32"),
    ],
)
def test_bad_parameter_value_names_the_parameter(capsys, assignment, expected):
    code, out, err = cli_run(capsys, "run", QUESTION, "--method", "rag", "--param", assignment, "--llm", "fake")
    assert code == cli.EXIT_USAGE and out == ""
    name = assignment.split("=")[0]
    assert f"{name}=" in err and expected in err


@pytest.mark.parametrize("assignment", ["foo", "=5", ""])
def test_malformed_param(capsys, assignment):
    code, out, err = cli_run(capsys, "run", QUESTION, "--param", assignment, "--llm", "fake")
    assert code == cli.EXIT_USAGE and out == ""
    assert "key=value" in err


@pytest.mark.parametrize("question", ["", "   ", "\n\t"])
def test_empty_question(capsys, question):
    code, out, err = cli_run(capsys, "run", question, "--llm", "fake")
    assert code == cli.EXIT_USAGE and out == ""
    assert "question is empty" in err


@pytest.mark.parametrize("flag, value", [("--max-tokens", "0"), ("--max-tokens", "-10"), ("--max-cost", "0")])
def test_non_positive_budget(capsys, flag, value):
    code, out, err = cli_run(capsys, "run", QUESTION, flag, value, "--llm", "fake")
    assert code == cli.EXIT_USAGE and out == ""
    assert flag in err and "positive" in err


def test_unreachable_endpoint(capsys, monkeypatch):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    code, out, err = cli_run(capsys, "run", QUESTION, "--llm", "openai", "--search", "none")
    assert code == cli.EXIT_FAILED
    assert out == "", "no run is created when the endpoint is unreachable"
    assert url in err


def test_missing_api_key(capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code, out, err = cli_run(capsys, "run", QUESTION, "--llm", "openai", "--search", "none")
    assert code == cli.EXIT_USAGE and out == ""
    assert "OPENAI_API_KEY" in err


def test_auto_llm_without_configuration_uses_the_fake(prebuilt_corpus_home, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code, out, err = cli_run(capsys, "run", QUESTION)
    assert code == cli.EXIT_OK, err
    assert "scripted fake LLM" in err
    run, _, _ = stored_run(run_id_of(out))
    assert run.llm_info["kind"] == "fake"


@pytest.mark.parametrize("command", [["show"], ["export"], ["export", "--format", "json"], ["resume"]])
def test_unknown_run_id(capsys, command):
    code, out, err = cli_run(capsys, command[0], "feedbeef0000", *command[1:])
    assert code == cli.EXIT_USAGE and out == ""
    assert "feedbeef0000" in err


def test_resume_a_done_run_is_refused(done_rag_run, capsys):
    code, out, err = cli_run(capsys, "resume", done_rag_run, "--quiet")
    assert code == cli.EXIT_USAGE
    assert "already done" in err and done_rag_run in err
    # Refused before anything is changed: neither its model nor its budget.
    code, out, err = cli_run(capsys, "resume", done_rag_run, "--llm", "openai", "--max-tokens", "99", "--quiet")
    assert code == cli.EXIT_USAGE and "already done" in err
    run = stored_run(done_rag_run)[0]
    assert run.llm_info.get("kind") == "fake" and run.max_tokens != 99


def test_ingest_missing_path(capsys, tmp_path):
    missing = tmp_path / "not-there"
    code, out, err = cli_run(capsys, "ingest", str(missing))
    assert code == cli.EXIT_USAGE and out == ""
    assert str(missing) in err


def test_argparse_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", QUESTION, "--llm", "claude"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        cli.main(["frobnicate"])
    assert exc.value.code == 2


# ====================================================================== the real openai client


@pytest.mark.parametrize("method, search", [("rag", "local"), ("direct", "none")])
def test_run_against_an_openai_compatible_server(prebuilt_corpus_home, capsys, monkeypatch, method, search):
    with FakeOpenAIServer() as server:
        base_url = server.base_url
        monkeypatch.setenv("OPENAI_BASE_URL", base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        code, out, err = cli_run(capsys, "run", QUESTION, "--method", method, "--llm", "openai", "--search", search)
        assert code == cli.EXIT_OK, err
        assert f"LLM: gpt-4o-mini at {base_url}" in err
        requests = server.requests
    assert len(requests) >= 1
    assert all(r["model"] == "gpt-4o-mini" for r in requests)
    assert QUESTION in json.dumps(requests[0]["messages"], ensure_ascii=False)

    run_id = run_id_of(out)
    run, nodes, sources = stored_run(run_id)
    assert run.status == RunStatus.DONE
    assert run.llm_info["kind"] == "openai" and run.llm_info["base_url"] == base_url
    assert "api_key" not in run.llm_info and "test" not in json.dumps(run.llm_info)
    assert run.llm_calls == len(requests)
    answer = next(n for n in nodes if n.kind == "answer")
    assert answer.status == NodeStatus.DONE and answer.content.strip()
    assert bool(sources) == (method == "rag")


def test_answer_not_matching_the_schema_fails_the_run_and_resume_retries_it(prebuilt_corpus_home, capsys, monkeypatch):
    responder = FakeLLM().when("Question:", {"wrong": "shape"})
    with FakeOpenAIServer(responder) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        code, out, err = cli_run(capsys, "run", QUESTION, "--method", "rag", "--llm", "openai", "--quiet")
        requests = server.count_chat_requests()
    assert code == cli.EXIT_FAILED, err
    assert "nothing was answered" in err and "thoughtmap resume" in err
    assert ".." not in err.replace("...", "")  # the stored error's own period is not doubled
    assert requests >= 3  # the answer plus the re-asks
    run_id = run_id_of(out)
    run, nodes, _ = stored_run(run_id)
    assert run.status == RunStatus.FAILED and "did not match CitedAnswer" in run.error
    search = next(n for n in nodes if n.kind == "search")
    answer = next(n for n in nodes if n.kind == "answer")
    assert search.status == NodeStatus.DONE
    assert answer.status == NodeStatus.FAILED
    assert "the model's answer did not match" in answer.error

    code, out, _ = cli_run(capsys, "export", run_id)
    assert code == cli.EXIT_OK
    assert "No answer was produced" in out and "did not match" not in out

    # The endpoint works again: resume retries the failed answer and rewrites the report.
    with FakeOpenAIServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        code, _, err = cli_run(capsys, "resume", run_id, "--quiet")
    assert code == cli.EXIT_OK, err
    run, nodes, _ = stored_run(run_id)
    assert run.status == RunStatus.DONE and not run.error and not run.warning
    assert next(n for n in nodes if n.kind == "answer").status == NodeStatus.DONE
    code, out, _ = cli_run(capsys, "export", run_id)
    assert "No answer was produced" not in out and "[1]" in out and "## Sources" in out


# ====================================================================== budget: stop, keep, resume


@pytest.fixture
def invalid_first_answer(monkeypatch) -> FakeLLM:
    """The CLI's "fake" LLM answers the first answer request off-schema, so once the budget lets
    the answer step run, it takes two calls (the answer and the re-ask)."""
    scripted = FakeLLM().when("Question:", {"wrong": "shape"}, times=1)
    build = common.services

    def services_with_scripted_fake():
        services = build()
        services.use_llm("fake", scripted)
        return services

    monkeypatch.setattr(common, "services", services_with_scripted_fake)
    return scripted


def test_budget_stops_the_run_keeps_its_nodes_and_resume_finishes_it(
    prebuilt_corpus_home, capsys, invalid_first_answer
):
    code, out, err = cli_run(capsys, "run", QUESTION, "--method", "rag", "--llm", "fake", "--max-tokens", "50")
    assert code == cli.EXIT_STOPPED, err
    run_id = run_id_of(out)
    assert "token budget reached" in err and f"thoughtmap resume {run_id}" in err

    run, nodes, sources = stored_run(run_id)
    assert run.status == RunStatus.STOPPED
    assert "budget" in run.stop_reason
    assert run.llm_calls == 0 and invalid_first_answer.call_count == 0  # refused before the call
    by_kind = {n.kind: n for n in nodes}
    assert by_kind["search"].status == NodeStatus.DONE and sources
    assert by_kind["answer"].status == NodeStatus.PENDING  # kept, to be continued

    code, out, err = cli_run(capsys, "show", run_id)
    assert code == cli.EXIT_OK
    assert "status    stopped (token budget reached" in out
    assert re.search(rf"#{by_kind['search'].id} \[search\] .*\(done\)", out)
    assert re.search(rf"#{by_kind['answer'].id} \[answer\] Answer \(pending\)", out)

    code, out, _ = cli_run(capsys, "export", run_id)
    assert "> Partial results: the run is stopped (token budget reached" in out

    code, out, err = cli_run(capsys, "resume", run_id, "--max-tokens", "100000", "--quiet")
    assert code == cli.EXIT_OK, err
    assert out == ""
    run, after, after_sources = stored_run(run_id)
    assert run.status == RunStatus.DONE and run.max_tokens == 100000
    assert {n.id: n.kind for n in after} == {n.id: n.kind for n in nodes}  # continued, not redone
    assert [s.id for s in after_sources] == [s.id for s in sources]
    assert all(n.status == NodeStatus.DONE for n in after)
    assert run.llm_calls == 2

    code, out, _ = cli_run(capsys, "export", run_id)
    assert "Partial results" not in out and "## Sources" in out


def test_resume_of_a_run_whose_budget_is_spent_asks_for_a_larger_one(prebuilt_corpus_home, capsys):
    small = ["--method", "deot", "--llm", "fake", "--param", "max_layers=2", "--param", "max_nodes=3"]
    code, out, err = cli_run(capsys, "run", QUESTION, *small, "--quiet")
    assert code == cli.EXIT_OK, err
    services = build_services(load_settings())
    try:
        calls = services.repo.list_llm_calls(run_id_of(out))[:2]
    finally:
        services.close()
    two_calls = str(sum(c.prompt_tokens + c.completion_tokens for c in calls))
    code, out, err = cli_run(capsys, "run", QUESTION + " (budget)", *small, "--max-tokens", two_calls, "--quiet")
    assert code == cli.EXIT_STOPPED, err
    run_id = run_id_of(out)
    calls_before = stored_run(run_id)[0].llm_calls
    # As it is, it would stop again at its first call: refused, saying which flag to raise.
    code, out, err = cli_run(capsys, "resume", run_id, "--quiet")
    assert code != cli.EXIT_OK and "budget is spent" in err and "larger --max-tokens" in err
    assert stored_run(run_id)[0].llm_calls == calls_before
    # The other budget raised leaves the short one short: refused the same, nothing changed.
    code, out, err = cli_run(capsys, "resume", run_id, "--max-cost", "5", "--llm", "openai", "--quiet")
    assert code != cli.EXIT_OK and "larger --max-tokens" in err
    assert stored_run(run_id)[0].max_cost is None and stored_run(run_id)[0].llm_info.get("kind") == "fake"
    code, out, err = cli_run(capsys, "resume", run_id, "--max-tokens", "1000000", "--quiet")
    assert code == cli.EXIT_OK, err
    assert stored_run(run_id)[0].status == RunStatus.DONE


def test_budget_smaller_than_the_first_call_stops_before_it(prebuilt_corpus_home, capsys):
    code, out, err = cli_run(capsys, "run", QUESTION, "--method", "rag", "--llm", "fake", "--max-tokens", "50")
    assert code == cli.EXIT_STOPPED, err


# ====================================================================== MTQA


def test_run_mtqa_on_the_fake_prints_the_run_id_and_stores_a_cited_short_answer(prebuilt_corpus_home, capsys):
    code, out, err = cli_run(
        capsys,
        "run",
        QUESTION,
        "--method",
        "mtqa",
        "--llm",
        "fake",
        "--search",
        "local",
        "--param",
        "rows=2",
        "--param",
        "columns=2",
        "--param",
        "documents=3",
    )
    assert code == cli.EXIT_OK, err
    run, nodes, sources = stored_run(run_id_of(out))
    assert run.status == RunStatus.DONE and sorted(n.kind for n in nodes).count("cell") == 4
    base = next(n for n in nodes if n.kind == "knowledge")
    # The knowledge graph's keywords and one extraction per chunk, then 2 × 2 thoughts and 2 summaries.
    assert run.llm_calls == 1 + base.data["chunks"] + 2 * 2 + 2
    code, out, err = cli_run(capsys, "export", run.id)
    assert code == cli.EXIT_OK, err
    body, source_lines = split_report(out)
    assert "**Answer:**" in body
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", body)}
    assert cited and cited == {int(SOURCE_LINE.match(line).group(1)) for line in source_lines}


def test_run_mtqa_against_an_openai_compatible_server(prebuilt_corpus_home, capsys, monkeypatch):
    """`--llm openai` through the real openai client against the local test server: every LLM call
    of the run (extraction, keywords, thoughts, summaries) is a request the server answered."""
    from engine.llm.fake_server import FakeOpenAIServer

    with FakeOpenAIServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        code, out, err = cli_run(
            capsys,
            "run",
            QUESTION,
            "--method",
            "mtqa",
            "--llm",
            "openai",
            "--search",
            "local",
            "--param",
            "rows=2",
            "--param",
            "columns=2",
            "--param",
            "documents=3",
        )
        requests = server.count_chat_requests()
    assert code == cli.EXIT_OK, err
    run, nodes, sources = stored_run(run_id_of(out))
    base = next(n for n in nodes if n.kind == "knowledge")
    assert run.status == RunStatus.DONE and run.llm_calls == requests == 1 + base.data["chunks"] + 2 * 2 + 2
    assert sources and all(s.kind == "corpus" for s in sources)
    assert any(n.kind == "summary" and n.data["column"] == 1 and n.status == NodeStatus.DONE for n in nodes)


def test_ingest_prints_hostile_file_names_without_terminal_controls(prebuilt_corpus_home, capsys, tmp_path):
    folder = tmp_path / "drop"
    folder.mkdir()
    (folder / "okapi.txt").write_text("The okapi is a giraffid of the Ituri rainforest.\n", encoding="utf-8")
    (folder / "notes\x1b]0;owned\x07\x1b[2J.exe").write_bytes(b"MZ")
    code, out, err = cli_run(capsys, "ingest", str(folder))
    assert code == cli.EXIT_OK, err
    assert "1 document(s) added" in out and "notes.exe: unsupported file type" in out
    assert not any(c in out + err for c in "\x1b\x07")


def test_log_records_reach_the_terminal_without_terminal_controls(capsys):
    import logging

    from engine.terminal_logging import TerminalSafeFormatter, log_to_stderr

    cli.main(["list"])
    capsys.readouterr()
    # A task id a model wrote, in a warning the CLI prints through Python's last-resort handler.
    record = logging.LogRecord(
        "thoughtmap.deot",
        logging.WARNING,
        __file__,
        1,
        "task %s failed: %s",
        ("t1\x1b]0;x\x07\x1b[2J", "boom\rOK"),
        None,
    )
    assert isinstance(logging.lastResort.formatter, TerminalSafeFormatter)
    assert logging.lastResort.format(record) == "task t1 failed: boom\nOK"
    # The worker's log (INFO and up on stderr) is made safe the same way.
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    try:
        log_to_stderr(logging.INFO, "%(levelname)s %(message)s")
        added = [h for h in root.handlers if isinstance(h.formatter, TerminalSafeFormatter)]
        assert len(added) == 1 and added[0].format(record) == "WARNING task t1 failed: boom\nOK"
    finally:
        root.handlers, root.level = before, level
