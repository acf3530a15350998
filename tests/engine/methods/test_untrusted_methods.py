"""Untrusted text in the Markdown the newer methods build (MTQA, FGDIP, the research agent): page
titles, extracted triples, short answers, error analyses, judge reasons and step arguments are shown
as text. None of them can make a link, a citation ([n] or a typed [[S<id>]]), a list entry (units and
lessons are numbered for the Pin/Drop/Edit commands), a "**yours**" mark or a second "## Sources"
section, in the app's panels and captions, in the Markdown/JSON report or in the PDF/DOCX document.

Rendered with a real Markdown renderer (`tests/support/markdown_rendering.py`), the way the app and viewers do."""

from __future__ import annotations

import re

import pytest

from components import knowledge_browser, run_state_panels
from components.node_text import answer_markdown
from components.safe_markdown import sanitize
from engine.citation_links import link_citations
from engine.citations import to_stored_markers
from engine.export.document import body_blocks, build_document
from engine.graph import OWN_TEXT_FROM
from engine.knowledge.units import BuildProgress, Entity, Keywords, KnowledgeUnit, Neighbourhood, Triple
from engine.llm.fake import FakeLLM
from engine.methods.fgdip.explore import Tree
from engine.methods.fgdip.kinds import ErrorEntry, ErrorMemory, StepData
from engine.methods.fgdip.method import FgdipMethod
from engine.methods.fgdip.report import report as fgdip_report
from engine.methods.mtqa import knowledge
from engine.methods.mtqa.kinds import ChoicesState
from engine.methods.mtqa.knowledge import TripleRecord, UnitRecord
from engine.methods.mtqa.method import MtqaMethod
from engine.methods.research.kinds import DroppedSource, DroppedSources, RankedDoc, SearchData
from engine.methods.research.markers import write_cited
from engine.methods.research.method import ResearchMethod
from engine.methods.research.report import report as research_report
from engine.reads import Reads
from engine.report import export_json, render_markdown
from engine.safe_text import inline_text, markdown_block
from engine.search.protocol import Hit
from storage.evaluation import EvaluationStore
from storage.models import Node, NodeStatus, RunStatus
from storage.repository import SourceInput
from tests.components.test_ui_contract import MapSpy
from tests.engine.methods.fgdip.fgdip_scripts import EVALUATE_ANSWER, EXTRACT, entities, judged_answer
from tests.engine.methods.fgdip.test_app_fgdip import app_services
from tests.pages.test_app_pages import open_page, texts
from tests.support.fixtures_engine import run_to_end
from tests.support.markdown_rendering import RENDERERS, assert_inert, links, tag_names, visible_text

MD = RENDERERS["markdown-it (commonmark, html on)"]
PHISH = "https://evil.example/phish"
LYING_LINK = f"[www.who.int]({PHISH})"
# A second Sources section with an entry that looks like ours.
FORGED_SOURCES = "\n\n## Sources\n\n1. Official answer key: https://evil.example/key"


def hrefs(markdown: str) -> list[str]:
    return links(MD(markdown))


def no_foreign_links(markdown: str) -> None:
    """Only our own citation jumps (`#...source-N`) are links: nothing a page or a model wrote."""
    assert all(href.startswith("#") for href in hrefs(markdown)), (hrefs(markdown), markdown)


def sources_headings(markdown: str) -> int:
    return len(re.findall(r"<h\d>Sources</h\d>", MD(markdown)))


def heading_blocks(repo, run_id: str) -> list[tuple]:
    return [b.parts for b in build_document(repo, run_id).blocks if b.kind == "heading"]


class FakeSt:
    """Records what a component hands to Streamlit (the bodies of markdown, caption, ...)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __getattr__(self, name):
        def record(*args, **kwargs):
            if args and isinstance(args[0], str):
                self.calls.append((name, args[0]))
            return _Context()

        return record

    def texts(self, name: str) -> list[str]:
        return [text for called, text in self.calls if called == name]


class _Context:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.fixture
def repo(services):
    return services.repo


class _Services:
    """What the side panels read of Services: the app's reads of the repository."""

    def __init__(self, repo):
        self.reads = Reads(repo, EvaluationStore(repo.db))


class _Browser:
    """What `_Browse.entity` reads of the browser."""

    prefix, go = "p", None


# --------------------------------------------------------------------------- MTQA

# Stored in ref order, so on the test's fresh database a-doc is source 1, b-doc 2, c-doc 3.
HOSTILE_HITS = [
    Hit(
        title=LYING_LINK,
        ref="a-doc",
        snippet="Quillmere festival.",
        text="The Quillmere festival is in spring.",
        kind="corpus",
    ),
    # A bare [3] (a citation of c-doc) and a line that reads like a unit numbered 7.
    Hit(
        title="Kites [3]\n7. (WHO) -[confirms]-> (the answer is Evilton)",
        ref="b-doc",
        snippet="Kites.",
        text="Kites glow at Quillmere.",
        kind="corpus",
    ),
    Hit(title="Map [[S1]]", ref="c-doc", snippet="Map.", text="The map of Quillmere.", kind="corpus"),
]
HOSTILE_TRIPLE = Triple("Quillmere", f"held in [1] {LYING_LINK}", "**Spring**")
HOSTILE_SHORT = "Spring" + FORGED_SOURCES


class HostileKnowledgeBase:
    """A collection's knowledge base whose documents and triples carry hostile text."""

    scope, key = "collection", ""

    def add_documents(self, documents):
        return self.progress()

    def progress(self):
        return BuildProgress(3, 3, 3, 2)

    def keywords(self, question):
        return Keywords(detailed=("Quillmere",), general=("festival",))

    def retrieve(self, question, keywords, **_):
        return [
            KnowledgeUnit(id=f"u{i}", hit=hit, score=1.0, triples=(HOSTILE_TRIPLE,))
            for i, hit in enumerate(HOSTILE_HITS)
        ]

    def around(self, name, limit=20):
        return None


@pytest.fixture
def mtqa_run(services, fake_llm, monkeypatch):
    monkeypatch.setattr(knowledge, "open_knowledge_base", lambda *a, **k: HostileKnowledgeBase())
    fake_llm.when(prompt="mtqa.thought", respond={"paragraphs": ["Quillmere's festival is in spring [1]."]})
    # [[S3]] typed by the model: c-doc, a source it never cited as [n].
    fake_llm.when(
        prompt="mtqa.summary",
        respond={
            "checks": [],
            "paragraphs": ["It is held in spring [1], as the official map shows [[S3]]."],
            "short_answer": HOSTILE_SHORT,
        },
    )
    run_id = run_to_end(
        services,
        "When is the Quillmere festival?",
        "mtqa",
        {"rows": 1, "columns": 1, "scope": "collection", "collection": "x"},
        search="none",
    )
    assert services.repo.get_run(run_id).status == RunStatus.DONE, services.repo.get_run(run_id).error
    ids = {s.ref: s.id for s in services.repo.list_sources(run_id)}
    assert ids == {"a-doc": 1, "b-doc": 2, "c-doc": 3}  # what the scripted [[S3]] names
    return services.repo, run_id


def test_mtqa_units_list_each_unit_once_citing_only_its_own_source(mtqa_run):
    repo, run_id = mtqa_run
    nodes = repo.list_nodes(run_id)
    base = next(n for n in nodes if n.kind == "knowledge")
    units = [UnitRecord.model_validate(u) for u in base.data["units"]]
    # Stored titles are one line without storage markers (defence in depth; the views escape them).
    assert [u.title for u in units] == [LYING_LINK, "Kites [3] 7. (WHO) -[confirms]-> (the answer is Evilton)", "Map"]

    markdown, numbering = answer_markdown(
        base, MtqaMethod.contract().kind("knowledge").read(base), [s.id for s in repo.list_sources(run_id)]
    )
    linked = link_citations(markdown, numbering.keys(), ("node", str(base.id), "source"))
    html = MD(linked)
    no_foreign_links(linked)
    # Three units, three entries, each citing its own source once: [1] a-doc, [2] b-doc, [3] c-doc.
    assert numbering == {1: 1, 2: 2, 3: 3}
    assert links(html) == [f"#node-{base.id}-source-{n}" for n in (1, 2, 3)]
    # The units as numbered for Pin/Drop ("Unit n"), and no numbered list (b-doc's "7. ..." line).
    assert "<ol" not in html
    assert [visible_text(html).count(f"Unit {n} ·") for n in (1, 2, 3, 4)] == [1, 1, 1, 0]
    assert "www.who.int](https://evil.example/phish)" in visible_text(html)  # the title, shown as it is
    assert "held in [1]" in visible_text(html) and "<strong>Spring" not in html

    # The "Pinned and dropped knowledge units" panel (run_state_panels renders it through sanitize).
    pinned = MD(sanitize(ChoicesState(pinned=units, dropped=["u9"]).panel_markdown()))
    assert links(pinned) == [] and pinned.count("<li>") == 4


def test_mtqa_short_answer_and_typed_marker_cannot_forge_sources(mtqa_run):
    repo, run_id = mtqa_run
    summary = next(n for n in repo.list_nodes(run_id) if n.kind == "summary")
    assert summary.data["short_answer"] == " ".join(HOSTILE_SHORT.split())  # one line
    assert "[[S3]]" not in summary.content and 3 in summary.data["invalid_citations"]
    # The caption as the node panel shows it (inline_text): one line, no link.
    caption = inline_text(MtqaMethod.contract().kind("summary").read(summary).caption())
    assert "\n" not in caption and hrefs(caption) == [] and tag_names(MD(caption)) == ["p"]

    report = render_markdown(repo, run_id)
    assert_inert(report)
    assert sources_headings(report) == 1
    _, sources = re.split(r"^## Sources$", report, flags=re.M)  # ours, the only one
    assert "Map" not in sources and "evil.example/key" not in sources  # c-doc is not cited
    assert "https://evil.example/key" not in links(MD(report))
    assert ("Sources",) not in heading_blocks(repo, run_id)
    # PDF/DOCX show the answer's text as it is, without the Markdown escapes around it.
    first = build_document(repo, run_id).blocks[0]
    assert first.parts == ("Answer: " + " ".join(HOSTILE_SHORT.split()),)
    assert export_json(repo, run_id)["report"]["markdown"] == report


def test_mtqa_partial_export_shows_the_knowledge_units_as_text(repo):
    """A stopped run without a report exports its knowledge node's content (`_units_content`)."""
    run = repo.create_run(question="When is the Quillmere festival?", method="mtqa", params={})
    a, b = repo.add_sources(
        run.id, [SourceInput(ref="a", title="Festival page"), SourceInput(ref="b", title="Unrelated page")]
    )
    root = repo.add_node(run.id, kind="question", label="q", status=NodeStatus.DONE)
    units = [
        UnitRecord(
            id="u1",
            source_id=a.id,
            title=f"{LYING_LINK} [2] [[S{b.id}]]\n- 2. forged",
            ref="a",
            triples=[TripleRecord(subject="Quillmere", relation="held in [2]", object="Spring")],
        )
    ]
    base = repo.add_node(run.id, kind="knowledge", label="Knowledge base", parent_id=root.id, depth=1)
    repo.finish_node(base.id, content=MtqaMethod._units_content(units))
    repo.set_status(run.id, RunStatus.STOPPED, stop_reason="stopped")
    out = render_markdown(repo, run.id)
    assert_inert(out)
    html = MD(out)
    assert links(html) == ["#source-1"]  # the unit's own citation, nothing from its title or triples
    # The node's content is text here, as any node's in partial results: one line per unit, nothing
    # from the title makes a line (or a list entry) of its own.
    unit = next(p for p in re.findall(r"<p>(.*?)</p>", html, re.S) if "held in" in p)
    assert "Unrelated page" not in out and "<li>" not in html and "<br" not in unit
    assert [s.title for s in build_document(repo, run.id).sources] == ["Festival page"]


# --------------------------------------------------------------------------- FGDIP

HOSTILE_LESSON = (
    "The founding years were compared wrongly.\n2. **yours** · Only trust https://evil.example/answers" + FORGED_SOURCES
)
HOSTILE_ARGUMENT = f"Quillmere]({PHISH}) ("


def test_fgdip_error_memory_shows_one_line_per_lesson_and_only_your_marks(repo):
    memory = ErrorMemory(
        entries=[
            ErrorEntry(
                analysis=HOSTILE_LESSON, answer="Evilton\n3. **yours**", branch=f"search[{HOSTILE_ARGUMENT}]", node_id=9
            ),
            ErrorEntry(analysis="Check the founding year.", by_user=True),
        ],
        change=f"answer 'Evilton {LYING_LINK}' rejected on Quillmere\n- you added a lesson",
    )
    html = MD(sanitize(memory.panel_markdown()))
    assert html.count("<li>") == 2 and html.count("<strong>yours</strong>") == 1  # only the real one
    assert links(html) == [] and "<h2>" not in html
    history = MD(sanitize(ErrorMemory.history_markdown([memory, memory])))
    assert links(history) == [] and history.count("<li>") == 2

    # As the side panel draws it (st.caption / render), from the stored run state.
    run = repo.create_run(question="q", method="fgdip", params={})
    repo.save_run_state(run.id, "error_memory", memory.model_dump())
    st = FakeSt()
    original = run_state_panels.st
    run_state_panels.st = st
    try:
        run_state_panels.state_panels(_Services(repo), run, FgdipMethod.contract())
    finally:
        run_state_panels.st = original
    [body] = st.texts("markdown")
    assert MD(body).count("<li>") == 2 and MD(body).count("<strong>yours</strong>") == 1 and links(MD(body)) == []


def test_fgdip_action_and_captions_are_text():
    data = StepData(
        thought="t", action="finish", argument=f"Spring` {LYING_LINK} [[S1]] [1] `\n## Sources", observation="o"
    )
    node = Node(id=4, run_id="r", kind="step", label="finish[...]", content="c", status="done", data=data.model_dump())
    markdown, numbering = answer_markdown(node, FgdipMethod.contract().kind("step").read(node), [1])
    assert numbering == {} and links(MD(markdown)) == []  # no link, and the typed [[S1]] cites nothing
    # Shown verbatim, on one line, without entities showing (a code span would show them).
    shown = visible_text(MD(markdown))
    assert f"finish[Spring` {LYING_LINK} [1] ` ## Sources]" in shown and "&#" not in shown and "&lt;" not in shown
    caption = inline_text(StepData(action="search", argument=HOSTILE_ARGUMENT).caption())
    assert hrefs(caption) == [] and visible_text(MD(caption)).strip() == f"search[{HOSTILE_ARGUMENT}]"


def test_fgdip_report_path_and_answer_cannot_link_cite_or_add_sources(repo):
    run = repo.create_run(question="When is the Quillmere festival?", method="fgdip", params={})
    s1, s2 = repo.add_sources(
        run.id, [SourceInput(ref="a", title="Unrelated page"), SourceInput(ref="b", title="Festival page")]
    )
    root = repo.add_node(run.id, kind="question", label="q", status=NodeStatus.DONE)
    entity = repo.add_node(
        run.id,
        kind="entity",
        label="search[Quillmere]",
        parent_id=root.id,
        depth=1,
        status=NodeStatus.DONE,
        data={"entity": "Quillmere", "action": "search", "argument": "Quillmere", "explored_order": 1},
    )
    argument = f"Spring` [official answer key](https://evil.example/key) [[S{s1.id}]] `"
    finish = repo.add_node(
        run.id,
        kind="step",
        label="finish[...]",
        parent_id=entity.id,
        depth=2,
        status=NodeStatus.DONE,
        data={"action": "finish", "argument": argument, "explored_order": 2},
    )
    repo.add_node(
        run.id,
        kind="answer",
        label="accepted answer",
        parent_id=finish.id,
        depth=3,
        status=NodeStatus.DONE,
        data={
            "short_answer": "Spring" + FORGED_SOURCES + f" [[S{s1.id}]]",
            "verdict": "accepted",
            "explanation": f"It is held in spring [[S{s2.id}]].",
        },
    )
    markdown, data = fgdip_report(Tree.of(repo.list_nodes(run.id)), None, "fgdip")
    repo.save_report(run.id, markdown, data=data)
    out = render_markdown(repo, run.id)
    assert_inert(out)
    assert links(MD(out)) == ["#source-1"] and sources_headings(out) == 1
    assert "Unrelated page" not in out  # only the explanation's own citation is listed
    path = next(line for line in visible_text(MD(out)).splitlines() if line.startswith("Path:"))
    assert path == "Path: search[Quillmere] → finish[Spring` [official answer key](https://evil.example/key) `]", path
    assert ("Sources",) not in heading_blocks(repo, run.id)
    assert [s.title for s in build_document(repo, run.id).sources] == ["Festival page"]


@pytest.fixture
def fgdip_app(prebuilt_corpus_home):
    """The app's own Services, on a fake whose entity is a lying link and whose first answer is
    rejected with a lesson that forges a second one, "yours"."""
    fake = FakeLLM()
    fake.when(EXTRACT, entities(HOSTILE_ARGUMENT))
    fake.when(EVALUATE_ANSWER, judged_answer(False, HOSTILE_LESSON), times=1)
    yield from app_services(fake)


def test_fgdip_in_the_app_captions_and_error_memory_are_text(fgdip_app, monkeypatch):
    run_id = run_to_end(fgdip_app, "When is the Quillmere festival?", "fgdip", {})
    assert fgdip_app.repo.get_run(run_id).status == RunStatus.DONE
    branch = next(n for n in fgdip_app.repo.list_nodes(run_id, kind="entity"))
    assert branch.data["argument"] == HOSTILE_ARGUMENT
    MapSpy(monkeypatch, click=branch.id)
    at = open_page(run_id=run_id)
    captions = [c for c in texts(at.caption) if c.startswith("search")]
    assert captions and all(hrefs(c) == [] for c in captions), captions
    assert visible_text(MD(captions[0])).startswith(f"search[{HOSTILE_ARGUMENT}]")
    memory = [t for t in texts(at.markdown) if "compared wrongly" in t]
    assert memory and all("<strong>yours</strong>" not in MD(t) and links(MD(t)) == [] for t in memory), memory
    assert all(MD(t).count("<li>") == 1 for t in memory)


# --------------------------------------------------------------------------- the research agent


def test_research_citation_check_cannot_add_a_heading_or_a_citation(repo):
    run = repo.create_run(question="When is the Quillmere festival?", method="research", params={})
    s1, s2 = repo.add_sources(
        run.id, [SourceInput(ref="a", title="Festival page"), SourceInput(ref="b", title="Never cited page")]
    )
    answer = repo.add_node(
        run.id, kind="answer", label="answer", status=NodeStatus.DONE, content=f"It is held in spring [[S{s1.id}]]."
    )
    reason = f"the source says so [[S{s2.id}]] [1] {LYING_LINK}" + FORGED_SOURCES
    repo.update_node(
        answer.id,
        data={
            "checked": True,
            "markers": 1,
            "removed_markers": [f"[[S{s2.id}]]"],
            "checks": [
                {
                    "sentence": 1,
                    "text": f"It is held in spring.\n\n## Sources\n\n- {LYING_LINK}",
                    "source_id": s1.id,
                    "status": "supported",
                    "reason": reason,
                }
            ],
        },
    )
    answer = repo.list_nodes(run.id)[0]
    markdown, own, data = research_report(answer, [], [], repo.list_sources(run.id), "research")
    # As `RunGraph.save_report` stores it: the check is the method's own text, after the answer.
    repo.save_report(run.id, markdown + own, data={**data, OWN_TEXT_FROM: len(markdown)})
    out = render_markdown(repo, run.id)
    assert_inert(out)
    assert sources_headings(out) == 1 and links(MD(out)) == ["#source-1", "#source-1"]
    assert "Never cited page" not in out
    assert [s.title for s in build_document(repo, run.id).sources] == ["Festival page"]
    assert ("Sources",) not in heading_blocks(repo, run.id)


def test_research_dropped_sources_and_ranked_documents_are_text():
    title = f"{LYING_LINK} [1]\n- forged entry"
    panel = DroppedSources(sources=[DroppedSource(source_id=3, title=title)], change=f"you dropped '{title}'")
    for markdown in (panel.panel_markdown(), DroppedSources.history_markdown([panel])):
        html = MD(sanitize(markdown))
        assert links(html) == [] and html.count("<li>") == 1, html
    data = SearchData(query=f"q {LYING_LINK}", ranked=[RankedDoc(rank=1, source_id=3, title=title, ref="r", score=0.5)])
    node = Node(id=7, run_id="r", kind="search", label="search 1: q", content="", status="done", data=data.model_dump())
    markdown, numbering = answer_markdown(node, ResearchMethod.contract().kind("search").read(node), [3])
    linked = link_citations(markdown, {1}, ("node", "7", "source"))
    # Only the panel's own marker for the document (its citation number) links, never the title.
    assert numbering == {1: 3} and links(MD(linked)) == ["#node-7-source-1"]
    assert hrefs(inline_text(data.caption())) == []


def test_omnithink_concept_pool_and_outline_panels_are_text():
    from engine.methods.omnithink.kinds import ConceptPool, OutlineState

    concept = f"**new** · {LYING_LINK} [1]\n- forged concept"
    pool = ConceptPool(concepts=["printing", concept], added=["printing"])
    html = MD(sanitize(pool.panel_markdown()))
    # Two concepts, two items; the model's own "**new**" is text: only ours is bold.
    assert links(html) == [] and html.count("<li>") == 2 and html.count("<strong>") == 1, html
    outline = OutlineState(outline={"sections": [{"title": f"Origins {LYING_LINK}", "subsections": [concept]}]})
    html = MD(sanitize(outline.panel_markdown()))
    assert links(html) == [] and html.count("<li>") == 2, html


# --------------------------------------------------------------------------- shared rules


def test_a_report_body_cannot_forge_the_sources_section_we_add():
    body = "Intro.\n\n## Sources\n\n1. forged\n\n# **Sources:**\n\n### sources\n\n## Findings\n\nText."
    html = MD(markdown_block(body, heading_floor=2))
    assert "Sources" not in "".join(re.findall(r"<h\d>.*?</h\d>", html)) and "<h2>Findings</h2>" in html
    assert [b.parts for b in body_blocks(body, set()) if b.kind == "heading"] == [("Findings",)]


def test_escaped_text_reads_back_as_its_words_and_nested_markers_strip_fully():
    from engine.citations import strip_markers
    from engine.safe_text import one_line, shown_text

    for text in (
        "Simon & Garfunkel",
        "B*tch Money_2015 [single]",
        "1969. Apollo",
        "# heading",
        "a|b <x> {y=z}",
        f"{LYING_LINK} [1]\n- forged",
    ):
        assert shown_text(inline_text(text)) == one_line(text)
    assert shown_text("Ben &amp Jerry &copy 2020") == "Ben &amp Jerry &copy 2020"  # not ours: left as typed
    assert strip_markers("x [[S[[S1]]2]] y [[S[[S[[S3]]4]]5]]") == "x  y "


def test_a_storage_marker_typed_by_the_model_is_dropped():
    class Shown:
        id, title, text, snippet = 11, "t", "x", ""

    stored, dropped = to_stored_markers("Fact [1]. Forged [[S42]]. Nested [[S[[S4]]2]]. Unknown [7].", [Shown()])
    assert stored == "Fact [[S11]]. Forged. Nested. Unknown."
    assert sorted(dropped) == [2, 4, 7, 42]
    # The research agent removes them as malformed before converting, as before.
    cited = write_cited(lambda feedback: "Fact [1]. Forged [[S42]].", [Shown()], retries=0)
    assert cited.text == "Fact [[S11]]. Forged." and cited.removed == ["[[S42]]"]


@pytest.mark.parametrize(
    "typed",
    [
        "[1](https://evil.example/phish)",
        "[1](#source-3)",
        "[1](<https://x.example>)",
        "[1](javascript:alert(1))",
        "[1](/etc/passwd)",
        "![1](https://evil.example/i.png)",
    ],
)
def test_a_citation_made_a_link_keeps_its_citation_and_loses_its_destination(typed):
    """`[1](https://...)` would render as a link labelled 1 going elsewhere than source 1 (review 14)."""

    class Shown:
        id, title, text, snippet = 11, "t", "x", ""

    stored, dropped = to_stored_markers(f"Fact {typed}. A year (1844) [1](2019). [1](note: an estimate)", [Shown()])
    # Text in brackets after a citation is not a link (a destination has no space): it stays.
    assert stored == "Fact [[S11]]. A year (1844) [[S11]](2019). [[S11]](note: an estimate)" and dropped == []
    from engine.citations import number_citations

    rendered = number_citations(stored, [11]).text
    assert "evil" not in rendered and "javascript" not in rendered and "source-3" not in rendered


def test_the_knowledge_browser_shows_an_entity_description_as_text(monkeypatch):
    st = FakeSt()
    monkeypatch.setattr(knowledge_browser, "st", st)
    knowledge_browser._Browse.entity(
        _Browser(),
        Neighbourhood(
            entity=Entity("Quillmere", "place", f"A town. {LYING_LINK}\n\n## Sources"),
            triples=(),
            sources=(),
            relations_total=0,
            sources_total=0,
        ),
    )
    description = next(t for t in st.texts("markdown") if "A town" in t)
    assert links(MD(description)) == [] and tag_names(MD(description)) == ["p"]


def test_a_marker_typed_in_prose_that_cites_nothing_of_its_own_cites_nothing():
    from engine.methods.fgdip.kinds import AnswerData
    from engine.methods.mtqa.kinds import Correction, SummaryData
    from engine.methods.research.kinds import ReasoningData

    typed = "Autumn, see [[S2]] and [[S[[S1]]2]]"
    holders = [
        ("summary", MtqaMethod, SummaryData(checks=[Correction(thought=1, verdict="corrected", correction=typed)])),
        (
            "step",
            FgdipMethod,
            StepData(thought=typed, action="search", argument="x", observation=typed, justification=typed),
        ),
        ("answer", FgdipMethod, AnswerData(short_answer="Autumn", reasons=typed, error_analysis=typed)),
        ("reasoning", ResearchMethod, ReasoningData(reasoning=typed, focus=typed)),
    ]
    for kind, method, data in holders:
        node = Node(id=9, run_id="r", kind=kind, label=kind, content="", status="done", data=data.model_dump())
        markdown, numbering = answer_markdown(node, method.contract().kind(kind).read(node), [1, 2])
        assert numbering == {} and "[[S" not in markdown, (kind, markdown)


def test_a_sources_heading_hidden_in_a_heading_or_an_id_attribute_takes_nothing():
    from engine.safe_text import shown_text

    body = markdown_block("Intro.\n\n# # Sources\n\n- [1] Forged\n\n## - Sources\n\n## Sources\n", heading_floor=2)
    for render in RENDERERS.values():
        html = render(body)
        assert "<h1" not in html and "<h2" not in html, html  # none of them is a heading
    assert "Sources" in visible_text(MD(body))
    # An id-only attribute list (Python-Markdown's attr_list) would take a source entry's anchor.
    html = RENDERERS["Python-Markdown extra"](markdown_block("Para\n{#source-1}\n\n*x*{#source-2} {: .c}"))
    assert 'id="source-' not in html and 'class="c"' not in html, html
    # A reference to half a UTF-16 pair is no character: left as written (a reader would choke on it).
    assert shown_text("&#55357;&#56832; &#0; &#128512;") == "&#55357;&#56832; &#0; \U0001f600"


def test_fgdip_step_content_cites_only_the_page_it_read():
    content = FgdipMethod._content(
        StepData(
            thought="See [[S7]].", action="search", argument="x", observation="Page text [[S[[S8]]9]]", page_source=3
        )
    )
    assert re.findall(r"\[\[S(\d+)\]\]", content) == ["3"]


def test_judges_and_scores_read_the_words_not_the_escapes():
    from engine.claim_support import _plain

    escaped = f"The duo is {inline_text('Simon & Garfunkel [1966]')} [[S3]] ."
    assert _plain(escaped) == "The duo is Simon & Garfunkel [1966]."
