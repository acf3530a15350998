"""Untrusted text never makes structure, in any export (issue 41, point 7).

A Markdown document whose first line is `# Zorblax protocol` was ingested, `rag` answered "What is the
Zorblax protocol?" with `--llm fake`, and the Markdown export began its answer with `## Zorblax
protocol The Zorblax protocol …`: a viewer showed the whole answer as a heading. The report body (the
model's text, a document's in it) now makes no block of its own, whatever form the block takes, in
the Markdown export, the JSON export's `report.markdown` (the app's Report page), the DOCX and PDF
(`build_document`), partial results, the app's node answers and a source's snippet. Each is rendered
by CommonMark (markdown-it-py, raw HTML on) and Python-Markdown, and the only blocks are ours: the
title, the Sources heading, its entries, the paragraphs. The text itself still reads as written.
"""

from __future__ import annotations

import io
import json
from html.parser import HTMLParser

import docx
import pytest

from components.node_text import answer_markdown
from components.safe_markdown import render_source
from engine import cli
from engine.cli import common
from engine.config import load_settings
from engine.export import build_document
from engine.graph import OWN_HEADINGS
from engine.llm.fake import FakeLLM
from engine.report import render_markdown
from engine.services import build_services
from storage import Repository, open_database
from storage.models import NodeStatus, RunStatus
from tests.engine.cli.test_cli import cli_run, run_id_of
from tests.support.markdown_rendering import MARKDOWN_TAGS, RENDERERS

QUESTION = "What is the Zorblax protocol?"
WORD = "zorblax"  # in every line of the document, and in nothing of ours but the question
# Every kind of block a Markdown document can hold, each line naming Zorblax.
DOCUMENT = """# Zorblax protocol
The Zorblax protocol is a handshake that quasar relays use before they exchange keys.

> Zorblax relays quote the protocol in every handshake.

- Zorblax step one opens the channel.
  - Zorblax nested step.
1. Zorblax ordered step.

| Zorblax field | Meaning |
|---|---|
| nonce | a fresh Zorblax number |

```zorblax
ZORBLAX_HANDSHAKE = __init__(relay) * 2  # Zorblax comment
```

    Zorblax indented code line.

<div class="zorblax">Zorblax HTML block</div>

Zorblax setext title
====================

[zorblax]: https://zorblax.example/spec
See [zorblax] for the Zorblax spec.
"""

# The block elements Markdown can make; `p` is the only one the report's text may make.
BLOCKS = frozenset("h1 h2 h3 h4 h5 h6 blockquote ul ol li pre table thead tbody tr th td hr dl dt dd div".split())


class _Elements(HTMLParser):
    """Each element of rendered HTML with the text inside it."""

    VOID = frozenset({"br", "hr", "img", "input"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[list] = []  # [tag, text]
        self._open: list[list] = []

    def handle_starttag(self, tag, attrs):
        element = [tag, ""]
        self.found.append(element)
        if tag not in self.VOID:
            self._open.append(element)

    def handle_endtag(self, tag):
        for index in range(len(self._open) - 1, -1, -1):
            if self._open[index][0] == tag:
                del self._open[index:]
                break

    def handle_data(self, data):
        for element in self._open:
            element[1] += data


def elements(html: str) -> list[tuple[str, str]]:
    parser = _Elements()
    parser.feed(html)
    parser.close()
    return [(tag, " ".join(text.split())) for tag, text in parser.found]


def assert_no_structure_of_its_own(markdown: str, *, ours: dict[str, list[str]], allowed: set[str] = frozenset()):
    """Rendered by every renderer (CommonMark with raw HTML on, Python-Markdown, its `extra`): the
    block elements are exactly `ours` (tag -> their texts) plus `allowed` ones not holding the
    document's words, every other element is one Markdown makes inline, and the document's words
    are there, as text in paragraphs."""
    for name, render in RENDERERS.items():
        found = elements(render(markdown))
        tags = {tag for tag, _ in found}
        assert tags <= MARKDOWN_TAGS, (name, tags - MARKDOWN_TAGS)  # no raw HTML block or tag
        blocks = {tag: [text for t, text in found if t == tag] for tag in BLOCKS if tag in tags}
        made = {
            tag: texts for tag, texts in blocks.items() if tag not in allowed or any(WORD in t.lower() for t in texts)
        }
        assert made == ours, (name, made, markdown)
        assert any(tag == "p" and WORD in text.lower() for tag, text in found), (name, markdown)


def source_entries(count: int) -> list[str]:
    return [f"Source {n}" for n in range(1, count + 1)]


# ---------------------------------------------------------------- the reproduction, end to end


@pytest.fixture
def zorblax_file(tmp_path):
    path = tmp_path / "zorblax.md"
    path.write_text(DOCUMENT, encoding="utf-8")
    return path


def ingest_and_run(capsys, path) -> str:
    code, out, err = cli_run(capsys, "ingest", str(path))
    assert code == cli.EXIT_OK and "1 document(s) added" in out, (out, err)
    code, out, err = cli_run(
        capsys, "run", QUESTION, "--method", "rag", "--llm", "fake", "--search", "local", "--quiet"
    )
    assert code == cli.EXIT_OK, err
    return run_id_of(out)


def assert_every_export_is_prose(capsys, tmp_path, run_id: str) -> None:
    code, markdown, err = cli_run(capsys, "export", run_id, "--format", "md")
    assert code == cli.EXIT_OK, err
    sources = markdown.count("\n###### Source ")
    ours = {"h1": [QUESTION], "h2": ["Sources"], "h6": source_entries(sources)}
    assert_no_structure_of_its_own(markdown, ours=ours)

    # The JSON export's report (what the app's Report page shows) is the same Markdown.
    code, out, err = cli_run(capsys, "export", run_id, "--format", "json")
    assert code == cli.EXIT_OK, err
    assert_no_structure_of_its_own(json.loads(out)["report"]["markdown"], ours=ours)

    # DOCX and PDF are written from `build_document`: the answer is paragraphs, no heading, list,
    # table or code block of the document's.
    out_file = tmp_path / "report.docx"
    code, out, err = cli_run(capsys, "export", run_id, "--format", "docx", "--out", str(out_file))
    assert code == cli.EXIT_OK, err
    document = docx.Document(io.BytesIO(out_file.read_bytes()))
    assert [p.text for p in document.paragraphs if p.style.name.startswith("Heading")] == [QUESTION, "Sources"]
    assert not document.tables and all(
        p.style.name in ("Normal", "Heading 1", "Heading 2") for p in document.paragraphs
    )
    assert any(WORD in p.text.lower() for p in document.paragraphs if p.style.name == "Normal")
    services = build_services(load_settings())
    try:
        blocks = build_document(services.repo, run_id).blocks
    finally:
        services.close()
    assert blocks and {block.kind for block in blocks} == {"paragraph"}, blocks
    code, out, err = cli_run(capsys, "export", run_id, "--format", "pdf", "--out", str(tmp_path / "report.pdf"))
    assert code == cli.EXIT_OK and (tmp_path / "report.pdf").read_bytes().startswith(b"%PDF"), err


def test_a_documents_heading_does_not_become_the_exports_heading(prebuilt_corpus_home, zorblax_file, capsys, tmp_path):
    """The issue's steps: the scripted fake quotes the document's sentences, starting with its heading."""
    run_id = ingest_and_run(capsys, zorblax_file)
    code, markdown, err = cli_run(capsys, "export", run_id, "--format", "md")
    assert "Zorblax protocol The Zorblax protocol is a handshake" in markdown  # the answer quotes the document
    assert_every_export_is_prose(capsys, tmp_path, run_id)


@pytest.fixture
def quoting_model(monkeypatch) -> FakeLLM:
    """A model that answers with the document itself, every line as the file has it, and a citation."""
    scripted = FakeLLM().when(
        prompt="rag.answer", respond={"answer": f"{DOCUMENT}\nAs the document says [1].", "confidence": "high"}
    )
    build = common.services

    def services_with_quoting_model(*args, **kwargs):
        services = build(*args, **kwargs)
        services.use_llm("fake", scripted)
        return services

    monkeypatch.setattr(common, "services", services_with_quoting_model)
    return scripted


def test_no_block_of_a_document_quoted_whole_makes_structure(
    prebuilt_corpus_home, zorblax_file, quoting_model, capsys, tmp_path
):
    run_id = ingest_and_run(capsys, zorblax_file)
    assert quoting_model.calls_for("rag.answer")
    assert_every_export_is_prose(capsys, tmp_path, run_id)

    # In the app: the answer node as its panel shows it, and the source's snippet in the sources list.
    services = build_services(load_settings())
    try:
        [answer] = services.repo.list_nodes(run_id, kind="answer")
        sources = services.repo.list_sources(run_id)
    finally:
        services.close()
    markdown, _numbering = answer_markdown(answer, None, [s.id for s in sources])
    assert_no_structure_of_its_own(markdown, ours={})
    [document] = [s for s in sources if s.title == "Zorblax protocol"]
    shown = Recorder()
    render_source(shown, document.title, document.url or document.ref, document.snippet)
    assert document.snippet.startswith("# Zorblax protocol")
    # Our entry is one list item; the snippet is text in it, not a heading, a quote or a list of its own.
    for name, render in RENDERERS.items():
        found = elements(render(shown.text))
        assert [tag for tag, _ in found if tag in BLOCKS] == ["ul", "li"], (name, shown.text)
        assert any("# Zorblax protocol The Zorblax protocol" in text for _, text in found), (name, shown.text)


class Recorder:
    """Stands in for `streamlit`: keeps the Markdown it is given."""

    text = ""

    def markdown(self, body: str, **_kwargs) -> None:
        self.text += body


# ---------------------------------------------------------------- each block form, in every export path


FORMS = {
    "ATX heading": "# Zorblax protocol",
    "ATX heading, level 6": "###### Zorblax protocol",
    "ATX heading, closed": "## Zorblax protocol ##",
    "ATX heading with no space (Python-Markdown)": "#Zorblax protocol",
    "mid-paragraph hash line (Python-Markdown)": "Zorblax intro\n#Zorblax protocol",
    "fenced C code": "```c\n#include <zorblax.h>\n```",
    "setext heading (=)": "Zorblax protocol\n================",
    "setext heading (-)": "Zorblax protocol\n---",
    "block quote": "> Zorblax quote\n> Zorblax quote, second line",
    "block quote without a space": ">Zorblax quote",
    "nested containers": "> - # Zorblax heading in a list in a quote",
    "bullet list (-)": "- Zorblax one\n- Zorblax two",
    "bullet list (*)": "* Zorblax one\n* Zorblax two",
    "bullet list (+)": "+ Zorblax one\n+ Zorblax two",
    "ordered list (.)": "1. Zorblax one\n2. Zorblax two",
    "ordered list ())": "1) Zorblax one\n2) Zorblax two",
    "nested list": "- Zorblax outer\n  - Zorblax inner\n    1. Zorblax deeper",
    "thematic break": "Zorblax above\n\n***\n\nZorblax below",
    "thematic break (_)": "Zorblax above\n\n___\n\nZorblax below",
    "fenced code": "```python\nzorblax = __init__(a[1]) * b  # <b>Zorblax</b>\n```",
    "fenced code (~)": "~~~\nZorblax code\n~~~",
    "fence never closed": "```\nZorblax code that runs on",
    "indented code": "Zorblax paragraph.\n\n    Zorblax indented code",
    "table": "| Zorblax | b |\n|---|:-:|\n| Zorblax 1 | 2 |",
    "table without edge pipes": "Zorblax | b\n--- | ---\nZorblax 1 | 2",
    "html block": '<div class="zorblax">Zorblax block</div>',
    "html comment": "<!-- Zorblax comment -->",
    "script": "<script>alert('Zorblax')</script>",
    "link reference definition": "[zorblax]: https://zorblax.example/spec\n\nSee [zorblax] for Zorblax.",
    "footnote": "Zorblax claim[^1]\n\n[^1]: Zorblax footnote",
    "abbreviation": "Zorblax HTML\n\n*[HTML]: Zorblax markup",
    "definition list": "Zorblax term\n: Zorblax definition",
    "admonition": "!!! note\n    Zorblax admonition",
}


@pytest.fixture
def repo(tmp_path):
    db = open_database(f"sqlite:///{tmp_path / 'forms.sqlite3'}")
    yield Repository(db)
    db.dispose()


def shown_lines(text: str) -> list[str]:
    """The lines a reader sees: no blank ones, indentation kept (a no-break space is a space)."""
    return [line.replace("\xa0", " ").rstrip() for line in text.split("\n") if line.strip()]


@pytest.mark.parametrize("form", FORMS.values(), ids=FORMS.keys())
def test_no_block_form_in_the_models_text_makes_structure(repo, form):
    run = repo.create_run(question="A question?", method="rag", params={})
    repo.save_report(run.id, form)
    repo.set_status(run.id, RunStatus.DONE)
    markdown = render_markdown(repo, run.id)
    assert_no_structure_of_its_own(markdown, ours={"h1": ["A question?"]})
    # The escaping does not show: the reader sees the text as written, line by line.
    body = markdown.split("\n\n", 2)[2]
    for name, render in RENDERERS.items():
        lines = shown_lines("\n".join(_visible(render(body))))
        assert lines == shown_lines(form), (name, lines, body)
    # DOCX and PDF: paragraphs of the same lines.
    blocks = build_document(repo, run.id).blocks
    assert {block.kind for block in blocks} == {"paragraph"}, blocks
    assert shown_lines("\n".join(part for block in blocks for part in block.parts)) == shown_lines(form)


def _visible(html: str) -> list[str]:
    """Each paragraph's text, its line breaks kept."""
    parser = _Elements()
    parser.feed(html.replace("<br />\n", "<br />").replace("<br />", "\n"))
    parser.close()
    return [text for tag, text in parser.found if tag == "p"]


@pytest.mark.parametrize("form", FORMS.values(), ids=FORMS.keys())
def test_no_block_form_in_a_finished_nodes_answer_makes_structure(repo, form):
    """Partial results: a stopped run's finished answers, each under a heading of ours, its label
    (the model's words, a document's heading here) a line of text."""
    run = repo.create_run(question="A question?", method="rag", params={})
    root = repo.add_node(run.id, kind="question", label="A question?", status=NodeStatus.DONE)
    node = repo.add_node(run.id, kind="answer", label="# Zorblax protocol", parent_id=root.id, depth=1)
    repo.finish_node(node.id, content=form)
    repo.set_status(run.id, RunStatus.STOPPED, stop_reason="stopped by the user")
    markdown = render_markdown(repo, run.id)
    # Ours: the title, the status note, the node's heading.
    assert_no_structure_of_its_own(markdown, ours={"h1": ["A question?"], "h3": ["Node 2"]}, allowed={"blockquote"})
    blocks = build_document(repo, run.id).blocks
    assert [block.kind for block in blocks[:2]] == ["heading", "paragraph"] and blocks[0].parts == ("Node 2",)
    assert {block.kind for block in blocks[1:]} == {"paragraph"}, blocks


def test_only_the_sections_the_method_planned_stay_headings(repo):
    """OmniThink's article: the model writes the outline's sections as `## Title`; those stay
    headings (their words escaped), while a document's heading the model quotes stays prose."""
    run = repo.create_run(question="A question?", method="omnithink", params={})
    article = (
        "## Causes of <b>tilt</b>\n\nThe axis is tilted.\n\n# Zorblax protocol\nThe Zorblax protocol is a handshake.\n\n"
        "### Seasons *by* hemisphere ###\n\nOpposite seasons."
    )
    repo.save_report(run.id, article, data={OWN_HEADINGS: ["Causes of <b>tilt</b>", "Seasons by hemisphere"]})
    repo.set_status(run.id, RunStatus.DONE)
    markdown = render_markdown(repo, run.id)
    assert_no_structure_of_its_own(
        markdown, ours={"h1": ["A question?"], "h2": ["Causes of <b>tilt</b>"], "h3": ["Seasons *by* hemisphere"]}
    )
    blocks = build_document(repo, run.id).blocks
    assert [(b.kind, b.level) for b in blocks if b.kind == "heading"] == [("heading", 2), ("heading", 3)]
    assert any(
        "Zorblax protocol The Zorblax" in " ".join(b.parts) or "Zorblax protocol" in b.parts[0]
        for b in blocks
        if b.kind == "paragraph"
    )


def test_an_article_stored_before_planned_headings_were_named_keeps_its_sections(repo):
    """A report saved before `OWN_HEADINGS` existed names its sections only in `sections` (as
    OmniThink stored them): those stay headings; a quoted document heading stays prose."""
    run = repo.create_run(question="A question?", method="omnithink", params={})
    article = "## Causes\n\nThe axis is tilted.\n\n# Zorblax protocol\nThe Zorblax protocol is a handshake."
    repo.save_report(run.id, article, data={"method": "omnithink", "sections": [{"title": "Causes", "markdown": ""}]})
    repo.set_status(run.id, RunStatus.DONE)
    assert_no_structure_of_its_own(render_markdown(repo, run.id), ours={"h1": ["A question?"], "h2": ["Causes"]})
