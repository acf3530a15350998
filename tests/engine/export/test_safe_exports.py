"""Exports and terminal output are safe by construction (issue 10, finding 4).

A real run over an ingested JSONL corpus full of HTML/JS payloads, answered by a model that adds
its own, exported as Markdown and rendered by real Markdown renderers: nothing in the HTML can run,
load or navigate to a script URL, and every citation still resolves. Runs whose stored text holds
terminal escape sequences print none of them from `list`, `show`, `export` or the live progress.
"""

from __future__ import annotations

import json
import re

import pytest

from engine import cli
from engine.cli import common
from engine.config import load_settings
from engine.llm.fake import FakeLLM, default_answer
from engine.report import export_json, render_markdown
from engine.services import build_services
from storage.models import RunStatus
from storage.repository import SourceInput
from tests.engine.cli.test_cli import cli_run, run_id_of, split_report
from tests.support.markdown_rendering import RENDERERS, assert_inert, links, tag_names, visible_text

HTML_PAYLOADS = (
    "<script>alert('s')</script> <img src=x onerror=alert('i')> <iframe src=https://evil.example/f></iframe> "
    "<svg onload=alert('v')> [click](javascript:alert('l')) [[nested]](javascript:alert('n')) "
    "[ent](&#106;avascript:alert('e')) [angle](<javascript:alert('a')>) ![pixel](https://evil.example/p.png) "
    "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==) <https://evil.example/auto>"
)
QUESTION = f"When is the Zorblaxian quasar festival held in Quillmere? {HTML_PAYLOADS}"
MODEL_PAYLOAD = (
    "\n\n## Model notes <script>alert('m')</script>\n\n"
    "<div onclick=alert('d')>click</div>\n\n[ref]: javascript:alert('r')\n\n[see][ref] and "
    "![tracker](https://evil.example/t.gif) and [ok](https://example.org/ok)"
)
CORPUS = [
    {
        "id": "fest",
        "title": "Zorblaxian festival <script>alert('t')</script> [t](javascript:alert('t'))",
        "url": "javascript:alert(document.cookie)",
        "text": "The Zorblaxian quasar festival is held every spring in Quillmere. "
        f"Quillmere festival guide: {HTML_PAYLOADS}",
    },
    {
        "id": "kites",
        "title": "<img src=x onerror=alert('k')>Quillmere kites",
        "url": "data:text/html,<script>alert('u')</script>",
        "text": f"Quillmere kites glow at the Zorblaxian quasar festival every spring. Kite notes: {HTML_PAYLOADS}",
    },
    {
        "id": "map",
        "title": "Quillmere map",
        "url": "https://maps.example/quillmere?q=<script>&x=`y`",
        "text": "The Zorblaxian quasar festival map of Quillmere shows the spring kite field.",
    },
]


@pytest.fixture
def hostile_model(monkeypatch) -> FakeLLM:
    """The CLI's "fake" LLM answers as usual (quoting its numbered sources, payloads included)
    and appends HTML/JS of its own, as a compromised or prompt-injected model would."""

    def answer_with_payload(request):
        answer = json.loads(default_answer(request))
        answer["answer"] += MODEL_PAYLOAD
        return answer

    scripted = FakeLLM().when("Question:", answer_with_payload)
    build = common.services

    def services_with_hostile_model():
        services = build()
        services.use_llm("fake", scripted)
        return services

    monkeypatch.setattr(common, "services", services_with_hostile_model)
    return scripted


@pytest.fixture
def hostile_run(prebuilt_corpus_home, tmp_path, capsys, hostile_model) -> str:
    corpus = tmp_path / "hostile.jsonl"
    corpus.write_text("".join(json.dumps(doc) + "\n" for doc in CORPUS), encoding="utf-8")
    code, out, err = cli_run(capsys, "ingest", str(corpus))
    assert code == cli.EXIT_OK and "3 document(s) added" in out, (out, err)
    code, out, err = cli_run(
        capsys, "run", QUESTION, "--method", "rag", "--llm", "fake", "--search", "local", "--quiet"
    )
    assert code == cli.EXIT_OK, err
    return run_id_of(out)


def test_markdown_export_of_a_hostile_run_is_inert_in_real_renderers(hostile_run, capsys):
    code, markdown, err = cli_run(capsys, "export", hostile_run, "--format", "md")
    assert code == cli.EXIT_OK, err

    # The payloads did reach the report (as text): the test is not vacuous.
    body, source_lines = split_report(markdown)
    assert "onerror" in body and "javascript:alert" in body and "iframe" in body and "Model notes" in body
    assert any("javascript:alert(document.cookie)" in line for line in source_lines), source_lines

    assert_inert(markdown)
    for name, render in RENDERERS.items():
        html = render(markdown)
        assert "img" not in tag_names(html), name
        assert all(href.startswith(("https://", "mailto:", "#")) for href in links(html)), (name, links(html))
        # Raw HTML shows as text, where a reader can see it.
        assert "<script>alert('m')</script>" in visible_text(html), name
        # The question is the heading, on one line, however many payloads it holds.
        assert tag_names(html).count("h1") == 1, name

    # Every [n] of the body still resolves to the Sources list, numbered 1..N.
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", body)}
    listed = {int(re.match(r"\[(\d+)\] ", line).group(1)) for line in source_lines}
    assert cited and cited == listed == set(range(1, len(listed) + 1))


def test_json_export_carries_the_same_safe_markdown(hostile_run, capsys):
    code, out, err = cli_run(capsys, "export", hostile_run, "--format", "json")
    assert code == cli.EXIT_OK, err
    data = json.loads(out)
    assert_inert(data["report"]["markdown"])
    code, markdown, _ = cli_run(capsys, "export", hostile_run, "--format", "md")
    assert data["report"]["markdown"].rstrip("\n") == markdown.rstrip("\n")
    # The raw stored answer is kept as data: the JSON export is an archive, not a page.
    assert "<script>alert('m')</script>" in data["report"]["raw"]


def test_partial_report_of_hostile_nodes_is_inert(services):
    """A run without a final report shows its finished nodes: labels and bodies are untrusted too."""
    repo = services.repo
    run = repo.create_run(question=QUESTION, method="deot", params={}, llm_info={"model": "<b onmouseover=x>m</b>"})
    root = repo.add_node(run.id, kind="question", label=QUESTION)
    (source,) = repo.add_sources(
        run.id,
        [SourceInput(ref="doc`<script>`1", title="[s](javascript:alert(1)) <svg onload=x>", url="javascript:alert(1)")],
    )
    label = f"Sub-question {{x=1}} {HTML_PAYLOADS}\n# fake heading"
    child = repo.add_node(run.id, kind="question", label=label, parent_id=root.id, depth=1)
    repo.finish_node(child.id, content=f"Answer [[S{source.id}]] {HTML_PAYLOADS}{MODEL_PAYLOAD}")
    repo.set_status(run.id, RunStatus.STOPPED, stop_reason="<script>alert('stop')</script>")

    markdown = render_markdown(repo, run.id)
    assert "Partial results" in markdown and "onerror" in markdown
    assert_inert(markdown)
    for name, render in RENDERERS.items():
        html = render(markdown)
        assert tag_names(html).count("h1") == 1 and tag_names(html).count("h3") == 1, name
        # The heading is ours ("Node 2"); the label is the line under it, shown exactly as stored (on
        # one line), not as escapes.
        heading, label_line = re.search(r"<h3[^>]*>(.*?)</h3>\s*<p>(.*?)</p>", html, re.S).groups()
        assert visible_text(heading) == "Node 2", (name, heading)
        assert visible_text(label_line) == " ".join(label.split()), (name, label_line)
    assert "[1]" in split_report(markdown)[0] and split_report(markdown)[1][0].startswith("[1] ")
    assert_inert(export_json(repo, run.id)["report"]["markdown"])


# ---------------------------------------------------------------- terminals

# Clear screen + home, an OSC-8 hyperlink, NUL, BEL, an 8-bit CSI colour, a bidi override, a bare CR.
HOSTILE_TEXT = (
    "Clear\x1b[2J\x1b[Hthe \x1b]8;;https://evil.example/\x1b\\link\x1b]8;;\x1b\\"
    " nul\x00 bell\x07 \x9b31mred \u202eevil cr\rend"
)


def assert_no_terminal_controls(text: str, *, escaped_data: bool = False) -> None:
    for char in text:
        code = ord(char)
        assert char in "\n\t" or not (code < 0x20 or 0x7F <= code <= 0x9F or 0x202A <= code <= 0x202E), (
            f"control {char!r} in output:\n{text!r}"
        )
    if not escaped_data:  # JSON keeps the stored text, with its controls written as \u escapes
        assert "evil.example" not in text  # the OSC-8 link target is gone with its sequence


@pytest.fixture
def run_with_escapes() -> str:
    """A finished run whose stored question, labels, report, errors and model description hold
    terminal escape sequences (written through the repository, as a model's output would be)."""
    services = build_services(load_settings())
    try:
        repo = services.repo
        # The repository refuses a NUL in a question (engine/questions.py); the rest stays hostile.
        run = repo.create_run(
            question=f"Question {HOSTILE_TEXT}".replace("\x00", ""),
            method="rag",
            params={},
            llm_info={"kind": "fake", "model": f"m {HOSTILE_TEXT}", "description": f"d {HOSTILE_TEXT}"},
        )
        root = repo.add_node(run.id, kind="question", label=f"Root {HOSTILE_TEXT}")
        child = repo.add_node(run.id, kind="answer", label=f"Child {HOSTILE_TEXT}", parent_id=root.id, depth=1)
        repo.finish_node(root.id, content="")
        repo.finish_node(child.id, content=f"Body {HOSTILE_TEXT}\nsecond line")
        repo.save_report(run.id, f"Report {HOSTILE_TEXT}\n\nsecond paragraph")
        repo.set_status(run.id, RunStatus.DONE, stop_reason=f"reason {HOSTILE_TEXT}", error=f"error {HOSTILE_TEXT}")
        return run.id
    finally:
        services.close()


@pytest.mark.parametrize(
    "argv", [["list"], ["show", "{id}"], ["export", "{id}"], ["export", "{id}", "--format", "json"]]
)
def test_cli_output_holds_no_terminal_controls(run_with_escapes, capsys, argv):
    code, out, err = cli_run(capsys, *[a.format(id=run_with_escapes) for a in argv])
    assert code == cli.EXIT_OK, err
    assert_no_terminal_controls(out, escaped_data="json" in argv)
    assert_no_terminal_controls(err)
    assert "Clear" in out and "link" in out  # the text itself is still shown
    if argv[0] == "export" and "json" in argv:
        data = json.loads(out)  # the JSON still parses, with the data as stored
        assert data["run"]["question"] == f"Question {HOSTILE_TEXT}".replace("\x00", "")
    if argv[0] == "show":
        assert "Root Clear" in out and "Child Clear" in out and "error: error Clear" in out


@pytest.mark.parametrize("fmt", ["md", "json"])
def test_export_out_file_holds_no_terminal_controls(run_with_escapes, capsys, tmp_path, fmt):
    target = tmp_path / f"report.{fmt}"
    code, out, err = cli_run(capsys, "export", run_with_escapes, "--format", fmt, "--out", str(target))
    assert code == cli.EXIT_OK, err
    text = target.read_text(encoding="utf-8")
    assert_no_terminal_controls(text, escaped_data=fmt == "json")
    if fmt == "md":
        assert "second paragraph" in text and "\n\n" in text  # newlines kept: still Markdown


def test_live_progress_lines_hold_no_terminal_controls(run_with_escapes, capsys):
    services = build_services(load_settings())
    try:
        capsys.readouterr()
        common.watch(services, run_with_escapes, quiet=False)
        services.repo.set_status(run_with_escapes, RunStatus.FAILED)  # so the summary shows the stored error
        code = common.finish(services, run_with_escapes, None)
    finally:
        services.close()
    out, err = capsys.readouterr()
    assert code == cli.EXIT_FAILED
    assert "[question] Root Clear" in err and "[answer] Child Clear" in err and "error Clear" in err
    assert_no_terminal_controls(err)
    assert_no_terminal_controls(out)
