"""A question the sources at hand do not cover, on a model that answers only from sources (the
built-in one): the node says so instead of asking the model, the report says what was searched and
what to do, and the run is `done` with that caveat (issue 43). A hit that shares the question's
words but not its meaning is left out by the semantic floor (engine/search/relevance.py)."""

from __future__ import annotations

from engine.methods.base import Coverage
from engine.report import render_markdown
from engine.search.protocol import Hit
from engine.search.relevance import SEMANTIC_FLOOR, relevant_hits, semantic_scores
from storage.models import Node, NodeStatus, RunStatus
from tests.engine.methods.deot.deot_scripts import PLANNER, SUMMARY, plan, task

UNCOVERED = "Which quantum error correction codes suit superconducting qubit arrays?"
ONE_NODE = {
    "max_layers": 1,
    "max_nodes": 1,
    "event_extractor": False,
    "history_analyzer": False,
    "direct_reasoning": False,
}


def _hit(title: str, text: str) -> Hit:
    return Hit(title=title, ref=f"t/{title}#0", snippet=text[:80], text=text, kind="corpus")


def _run_on_the_built_in_model(services, fake_llm, question: str, params: dict, method: str = "deot") -> str:
    """A run stored as the built-in model's (what decides `sources_only`), its calls answered by the
    scripted fake: the policy is the run's, the answers stay deterministic."""
    services.runner.llm_for = lambda run: fake_llm
    run = services.runner.create_run(
        question=question,
        method=method,
        params=params,
        llm_info={"kind": "local", "model": "built-in", "description": "built-in"},
        search_mode="local",
    )
    services.runner.start(run.id)
    final = services.runner.wait(run.id, timeout=60)
    assert final.status not in (RunStatus.RUNNING, RunStatus.QUEUED)
    return run.id


def test_a_deot_node_the_sources_do_not_cover_says_so_and_the_run_is_done(services, fake_llm):
    fake_llm.when(
        PLANNER, plan(task("task1", "info_search", "quantum error correction codes for superconducting qubits"))
    )
    run_id = _run_on_the_built_in_model(services, fake_llm, UNCOVERED, ONE_NODE)
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.DONE, run.error
    assert "do not cover this question" in run.warning
    root = services.repo.list_nodes(run_id, kind="question")[0]
    assert root.status == NodeStatus.DONE and root.data["not_covered"]
    assert "do not cover this" in root.content and "connect a model" in root.content
    assert root.data["uncovered_queries"] == ["quantum error correction codes for superconducting qubits"]
    assert fake_llm.calls_for(SUMMARY) == []  # the model was not asked to answer from nothing
    report = services.repo.latest_report(run_id).markdown
    assert report.startswith("## The sources at hand do not cover this question")
    assert "- quantum error correction codes for superconducting qubits" in report
    # Our text, shown with its heading and list (a report body is the model's, shown as prose).
    exported = render_markdown(services.repo, run_id)
    assert "\n## The sources at hand do not cover this question" in exported and "&#35;" not in exported
    assert "\n- quantum error correction codes for superconducting qubits" in exported
    assert "The nearest passages found, left out as unrelated" in report
    assert "[[S" not in report and services.repo.list_sources(run_id) == []


def test_an_answer_is_read_as_not_covered_whatever_else_its_data_holds():
    # `assess` reads every method's answers alike: another kind's fields, or a DEoT question's
    # checkpoint spoiled by a kill, must not hide (or fail) the one field it needs.
    spoiled = {"not_covered": True, "solving": "spoiled", "plan": 3, "summary": {"key_findings": []}}
    assert Coverage.of(Node(run_id=1, kind="question", label="q", data=spoiled)).not_covered
    assert not Coverage.of(Node(run_id=1, kind="answer", label="a", data={"confidence": "high"})).not_covered
    assert not Coverage.of(Node(run_id=1, kind="answer", label="a", data=None)).not_covered
    for unreadable in ({"not_covered": None}, {"not_covered": "covered"}, {"pruned_with": "x", "not_covered": True}):
        read = Coverage.of(Node(run_id=1, kind="answer", label="a", data=unreadable))
        assert read.not_covered is (unreadable.get("not_covered") is True)  # a field unread is its default


def test_rag_on_the_built_in_model_says_the_sources_do_not_cover_it(services, fake_llm):
    run_id = _run_on_the_built_in_model(services, fake_llm, UNCOVERED, {}, method="rag")
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.DONE and "do not cover this question" in run.warning
    answer = services.repo.list_nodes(run_id, kind="answer")[0]
    assert answer.data["not_covered"] and "do not cover this" in answer.content
    assert fake_llm.calls == []  # no answer asked of the model
    report = services.repo.latest_report(run_id).markdown
    assert "do not cover this" in report and "cites nothing" not in report


def test_a_connected_model_still_answers_uncited_from_its_own_knowledge(services, fake_llm):
    # The same question on a model that is not the built-in one: its own answer, marked uncited.
    from tests.support.fixtures_engine import run_to_end

    fake_llm.when(
        PLANNER, plan(task("task1", "info_search", "quantum error correction codes for superconducting qubits"))
    )
    run_id = run_to_end(services, UNCOVERED, "deot", ONE_NODE)
    root = services.repo.list_nodes(run_id, kind="question")[0]
    assert not root.data.get("not_covered") and fake_llm.calls_for(SUMMARY)
    assert "This answer is the model's own and cites nothing" in root.content


def test_a_hit_that_shares_the_words_but_not_the_meaning_is_left_out(embedding_model_dir):
    from engine.search.builtin_embedder import builtin_embedder

    embedder = builtin_embedder(embedding_model_dir.parent)
    question = "What causes the seasons on Earth?"
    avatar = _hit(
        "Avatar: The Last Airbender (season 2)",
        "The second season of Avatar: The Last Airbender, an American animated television series, "
        "aired on Nickelodeon; Earth is the book's title, as Aang seeks an earthbending teacher.",
    )
    tilt = _hit(
        "Season",
        "A season is a division of the year marked by changes in weather. On Earth, seasons are "
        "the result of the Earth's axial tilt relative to its orbital plane around the Sun.",
    )
    words_only = relevant_hits(question, [avatar, tilt])
    assert avatar in words_only.kept  # the word floor alone keeps it: "season", "earth"
    scores = semantic_scores(question, [avatar, tilt], embedder)
    assert scores[0] < SEMANTIC_FLOOR <= scores[1], scores
    judged = relevant_hits(question, [avatar, tilt], embedder=embedder)
    assert judged.kept == [tilt]
    assert judged.dropped_summary()[0]["title"] == avatar.title and "similarity" in judged.dropped_summary()[0]


def test_without_an_embedder_or_with_a_failing_one_the_word_floor_decides():
    from engine.search.embeddings import EmbeddingError

    class Failing:
        description = "failing"

        def embed(self, texts):
            raise EmbeddingError("the embeddings endpoint is down")

    hits = [_hit("Season", "On Earth, seasons are the result of the axial tilt.")]
    question = "What causes the seasons on Earth?"
    assert relevant_hits(question, hits, embedder=Failing()).kept == hits
    assert semantic_scores(question, hits, None) is None


def test_the_research_agent_on_the_built_in_model_says_the_sources_do_not_cover_it(services, fake_llm):
    from tests.engine.methods.research.research_scripts import AGENT, ANSWER, turn

    fake_llm.when(AGENT, turn(False))  # one search, then the answer
    run_id = _run_on_the_built_in_model(services, fake_llm, UNCOVERED, {}, method="research")
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.DONE, run.error
    assert "do not cover this question" in run.warning
    answer = services.repo.list_nodes(run_id, kind="answer")[0]
    assert answer.data["not_covered"] and "do not cover this" in answer.content
    assert fake_llm.calls_for(ANSWER) == []  # the model was not asked to answer from nothing
    report = services.repo.latest_report(run_id).markdown
    assert "do not cover this" in report and "cites nothing" not in report


def test_a_deot_question_the_sources_do_not_cover_is_not_expanded(services, fake_llm):
    # Room for a tree, but nothing under a question the sources do not cover: its sub-questions would
    # drift off it ("What is Rust about?" found the Tin Woodman on the built-in model).
    fake_llm.when(
        PLANNER, plan(task("task1", "info_search", "quantum error correction codes for superconducting qubits"))
    )
    run_id = _run_on_the_built_in_model(services, fake_llm, UNCOVERED, {**ONE_NODE, "max_layers": 3, "max_nodes": 5})
    assert services.repo.get_run(run_id).status == RunStatus.DONE
    [root] = services.repo.list_nodes(run_id, kind="question")
    assert root.data["expansion"]["decision"] == "STOP"
    assert "do not cover" in root.data["expansion"]["reasoning"]


def test_omnithink_on_the_built_in_model_neither_expands_nor_writes_from_nothing(services, fake_llm):
    from tests.engine.methods.omnithink.omnithink_scripts import ALL_PROMPTS

    run_id = _run_on_the_built_in_model(services, fake_llm, UNCOVERED, {}, method="omnithink")
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.DONE, run.error
    assert "do not cover this question" in run.warning
    [topic] = services.repo.list_nodes(run_id)  # not expanded: its subtopics would drift off it
    assert topic.data["not_covered"] and "do not cover this" in topic.content
    assert fake_llm.calls_for(ALL_PROMPTS) == []  # no reflection, outline or section from nothing
    report = services.repo.latest_report(run_id).markdown
    assert report.startswith("## The sources at hand do not cover this question")
    assert f"- {UNCOVERED}" in report  # what was searched


def test_mtqa_on_the_built_in_model_thinks_nothing_from_nothing(services, fake_llm):
    run_id = _run_on_the_built_in_model(services, fake_llm, UNCOVERED, {"rows": 2, "columns": 2}, method="mtqa")
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.DONE, run.error
    assert "do not cover this question" in run.warning
    nodes = services.repo.list_nodes(run_id)
    [knowledge] = [n for n in nodes if n.kind == "knowledge"]
    assert knowledge.data["not_covered"] and knowledge.data["documents"] == []
    thoughts = [n for n in nodes if n.kind in ("cell", "summary")]
    assert len(thoughts) == 6 and all(n.status == NodeStatus.DONE and n.data["not_covered"] for n in thoughts)
    assert fake_llm.calls == []  # no keyword, thought or summary asked of the model
    report = services.repo.latest_report(run_id).markdown
    assert report.startswith("## The sources at hand do not cover this question") and "[[S" not in report


def test_fgdip_on_the_built_in_model_does_not_give_an_unsourced_answer(services, fake_llm):
    from tests.engine.methods.fgdip.fgdip_scripts import EXTRACT, GENERATE, WRITE_ANSWER, entities, numbered_steps

    fake_llm.when(EXTRACT, entities("superconducting qubit arrays"))
    fake_llm.when(GENERATE, numbered_steps(answer="surface codes"))
    run_id = _run_on_the_built_in_model(services, fake_llm, UNCOVERED, {"max_nodes": 6}, method="fgdip")
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.DONE, run.error
    assert "do not cover this question" in run.warning
    [answer] = services.repo.list_nodes(run_id, kind="answer")
    assert answer.data["not_covered"] and answer.data["short_answer"] == ""
    assert answer.label == "★ not covered by the sources" and "do not cover this" in answer.content
    assert fake_llm.calls_for(WRITE_ANSWER) == []  # no explanation written from nothing
    report = services.repo.latest_report(run_id)
    assert report.markdown.startswith("## The sources at hand do not cover this question")
    assert "surface codes" not in report.markdown and "- superconducting qubit arrays" in report.markdown
    assert report.data["short_answer"] == ""
