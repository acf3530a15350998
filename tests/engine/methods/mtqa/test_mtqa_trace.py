"""MTQA traces on the scripted fake LLM and an in-test knowledge base (tests/engine/methods/mtqa/mtqa_knowledge.py,
injected at the method's one injection point): the matrix's shape, the exact LLM calls per prompt
(m·n thoughts + n summaries) and retrievals (n + 1), the paragraphs α lets through, the degenerate
settings, concurrency of α = 0 thoughts, the four ablations, the short answer and its citations."""

from __future__ import annotations

import re
import threading

import pytest

from engine.citations import cited_source_ids
from engine.evaluate.reader import read_answer
from engine.evaluate.run_report import JudgeInputError, load_judged_run
from engine.llm.fake import request_text
from engine.methods.mtqa import knowledge
from engine.methods.mtqa.method import MtqaMethod
from engine.methods.mtqa.weights import passed_count
from engine.report import render_markdown
from storage.models import NodeStatus, RunStatus
from tests.engine.methods.mtqa.mtqa_knowledge import KnowledgeInjector
from tests.engine.methods.mtqa.mtqa_scripts import (
    MERGE,
    SHORT_ANSWER,
    SUMMARY,
    SUMMARY_TEXT,
    THOUGHT,
    Overlap,
    cell_of,
    labelled_thoughts,
    paragraph,
    summaries,
)
from tests.support.fixtures_engine import run_to_end

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
STRATEGY_TAKEN = "A strategy already taken in this column"
UNITS_END = re.compile(
    r"\n\n(?:Summary of the previous column|A strategy already taken|You are thought|Thoughts of column)"
)
TRIPLE_LINE = re.compile(r"^\(.+?\) -\[.+?\]-> \(.+?\)", re.M)


@pytest.fixture
def knowledge_bases(monkeypatch) -> KnowledgeInjector:
    injector = KnowledgeInjector()
    monkeypatch.setattr(knowledge, "open_knowledge_base", injector)
    return injector


def mtqa_run(services, params=None, **kwargs) -> str:
    run_id = run_to_end(services, QUESTION, "mtqa", params or {}, **kwargs)
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.DONE, (run.status, run.error)
    return run_id


def cells(services, run_id):
    return {(n.data["row"], n.data["column"]): n for n in services.repo.list_nodes(run_id) if n.kind == "cell"}


def summaries_of(services, run_id):
    return {n.data["column"]: n for n in services.repo.list_nodes(run_id) if n.kind == "summary"}


def prompt_of(fake, row, column):
    """The thought request of cell (row, column), 0-based."""
    return next(r for r in fake.calls_for(THOUGHT) if cell_of(r) == (row + 1, column + 1))


# --------------------------------------------------------------------------- shape and counts


def test_the_default_matrix_is_3_by_4_with_m_n_plus_n_calls_and_n_plus_1_retrievals(
    services, fake_llm, knowledge_bases
):
    run_id = mtqa_run(services)
    grid = cells(services, run_id)
    assert sorted(grid) == [(r, c) for r in range(3) for c in range(4)]
    assert sorted(summaries_of(services, run_id)) == [0, 1, 2, 3]
    assert all(n.status == NodeStatus.DONE for n in services.repo.list_nodes(run_id))

    assert len(fake_llm.calls_for(THOUGHT)) == 3 * 4
    assert len(fake_llm.calls_for(SUMMARY)) == 4
    assert fake_llm.call_count == 3 * 4 + 4  # the in-test knowledge base asks no model
    assert services.repo.get_run(run_id).llm_calls == 16

    (base,) = knowledge_bases.opened
    assert len(base.keyword_calls) == 1  # the question's keywords, once
    assert len(base.retrievals) == 4 + 1  # KU_1, then KU' after each column
    assert base.retrievals[0]["question"] == QUESTION
    assert all(r["question"].startswith(QUESTION + "\n\n") for r in base.retrievals[1:])  # question + thoughts
    assert all((r["top_k"], r["hops"], r["max_units"]) == (8, 2, 10) for r in base.retrievals)
    assert len(base.added) == 1 and base.added[0]  # the question's documents, added once


def test_the_grid_places_knowledge_thoughts_and_summaries_in_their_own_rows(services, knowledge_bases):
    run_id = mtqa_run(services, {"rows": 2, "columns": 3})
    position = MtqaMethod.contract().view.position
    places = {n.id: position(n) for n in services.repo.list_nodes(run_id)}
    nodes = {n.id: n for n in services.repo.list_nodes(run_id)}
    assert {places[i] for i, n in nodes.items() if n.kind == "cell"} == {(r, c) for r in (1, 2) for c in range(3)}
    assert {places[i] for i, n in nodes.items() if n.kind == "summary"} == {(3, c) for c in range(3)}
    assert [places[i] for i, n in nodes.items() if n.kind == "knowledge"] == [(0, 0)]
    assert [places[i] for i, n in nodes.items() if n.parent_id is None] == [None]
    edges = services.repo.list_edges(run_id)
    kinds = {e.kind for e in edges}
    assert {"child", "communication", "column", "summarised"} <= kinds
    # A column link joins each summary to the next column; communication joins vertical neighbours.
    link_ends = {(nodes[e.src].kind, nodes[e.dst].kind) for e in edges if e.kind == "column"}
    assert link_ends <= {("summary", "cell"), ("summary", "summary")}
    for edge in (e for e in edges if e.kind == "communication"):
        above, below = nodes[edge.src].data, nodes[edge.dst].data
        assert (below["row"], below["column"]) == (above["row"] + 1, above["column"])


# --------------------------------------------------------------------------- α and paragraphs


def test_alpha_decides_exactly_which_paragraphs_pass_between_cells(services, fake_llm, knowledge_bases):
    labelled_thoughts(fake_llm, paragraphs=5)
    run_id = mtqa_run(services)
    grid = cells(services, run_id)
    expected_alpha = [[None] * 4, [0.1, 0.2, 0.3, 0.3], [0.2, 0.3, 0.4, 0.4]]
    for (row, column), cell in grid.items():
        alpha = expected_alpha[row][column]
        assert cell.data.get("alpha") == alpha
        prompt = request_text(prompt_of(fake_llm, row, column))
        if row == 0:
            assert cell.data["passed_count"] == 0 and STRATEGY_TAKEN not in prompt
            continue
        count = passed_count(alpha, 5)  # 0.1, 0.2 → 1 of 5; 0.3, 0.4 → 2 of 5 (rounded up)
        assert count == {0.1: 1, 0.2: 1, 0.3: 2, 0.4: 2}[alpha]
        assert cell.data["passed_count"] == count
        passed = [paragraph(row, column + 1, step).replace(" [1]", "") for step in range(6 - count, 6)]
        assert cell.data["passed"] == passed
        for step in range(1, 6):
            text = paragraph(row, column + 1, step).replace(" [1]", "")
            assert (text in prompt) == (step >= 6 - count), (row, column, step)


def test_a_column_builds_on_the_previous_summary(services, fake_llm, knowledge_bases):
    summaries(fake_llm)
    mtqa_run(services, {"rows": 2, "columns": 2})
    first = request_text(prompt_of(fake_llm, 0, 0))
    second = request_text(prompt_of(fake_llm, 0, 1))
    assert "Summary of the previous column" not in first
    assert "Summary of the previous column" in second and "came before First for Women" in second


# --------------------------------------------------------------------------- degenerate settings


def test_one_row_is_a_chain_of_thought_corrected_by_retrieval(services, fake_llm, knowledge_bases):
    run_id = mtqa_run(services, {"rows": 1, "columns": 3})
    assert sorted(cells(services, run_id)) == [(0, 0), (0, 1), (0, 2)]
    assert len(fake_llm.calls_for(THOUGHT)) == 3 and len(fake_llm.calls_for(SUMMARY)) == 3
    assert not services.repo.list_edges(run_id, kind="communication")
    assert len(knowledge_bases.opened[0].retrievals) == 4


def test_one_column_is_its_thoughts_then_one_corrected_summary(services, fake_llm, knowledge_bases):
    run_id = mtqa_run(services, {"rows": 3, "columns": 1})
    grid = cells(services, run_id)
    assert sorted(grid) == [(0, 0), (1, 0), (2, 0)]
    assert [grid[(r, 0)].data.get("alpha") for r in range(3)] == [None, 0.1, 0.2]  # A's only column
    assert len(fake_llm.calls_for(THOUGHT)) == 3 and len(fake_llm.calls_for(SUMMARY)) == 1
    assert len(knowledge_bases.opened[0].retrievals) == 2


def test_alpha_zero_is_tree_like_and_its_thoughts_run_concurrently(services, fake_llm, knowledge_bases):
    # All three thoughts of a column must be inside the model at once to pass this barrier: run one
    # after another, the first would wait alone and the barrier would break.
    barrier = threading.Barrier(3, timeout=20)
    labelled_thoughts(fake_llm, paragraphs=3, before=lambda request: barrier.wait())
    run_id = mtqa_run(services, {"rows": 3, "columns": 2, "weight_preset": "constant", "constant": 0.0})
    grid = cells(services, run_id)
    assert all(n.status == NodeStatus.DONE for n in grid.values())
    assert all(n.data["passed_count"] == 0 for n in grid.values())
    assert not services.repo.list_edges(run_id, kind="communication")
    assert not any(STRATEGY_TAKEN in request_text(r) for r in fake_llm.calls_for(THOUGHT))


def test_a_column_splits_into_chains_where_alpha_is_zero(services, fake_llm, knowledge_bases):
    # A = [[0.0], [0.5]]: thought 2 does not wait for thought 1, thought 3 waits for thought 2.
    barrier = threading.Barrier(2, timeout=20)

    def first_two_together(request):
        if cell_of(request)[0] in (1, 2):
            barrier.wait()

    labelled_thoughts(fake_llm, paragraphs=4, before=first_two_together)
    run_id = mtqa_run(services, {"rows": 3, "columns": 1, "weight_preset": "custom", "custom_matrix": "[[0.0], [0.5]]"})
    grid = cells(services, run_id)
    assert [grid[(r, 0)].data["passed_count"] for r in range(3)] == [0, 0, 2]
    assert grid[(2, 0)].data["passed"][0].startswith("Strategy r2c1 step 3")
    order = [cell_of(r)[0] for r in fake_llm.calls_for(THOUGHT)]
    assert order.index(3) > order.index(2)


def test_thoughts_with_alpha_wait_for_the_one_above(services, fake_llm, knowledge_bases):
    overlap = Overlap()

    def one_at_a_time(request):
        overlap.enter()
        threading.Event().wait(0.05)  # long enough for a concurrent thought to overlap
        overlap.leave()

    labelled_thoughts(fake_llm, paragraphs=2, before=one_at_a_time)
    mtqa_run(services, {"rows": 3, "columns": 1})
    assert overlap.most == 1


# --------------------------------------------------------------------------- ablations


def _thought_and_summary_prompts(fake):
    return [request_text(r) for r in fake.calls_for([THOUGHT, SUMMARY, MERGE])]


def test_the_default_prompts_hold_triples_and_source_text(services, fake_llm, knowledge_bases):
    mtqa_run(services, {"rows": 2, "columns": 2})
    prompts = _thought_and_summary_prompts(fake_llm)
    assert all(TRIPLE_LINE.search(p) for p in prompts)
    assert all("Bauer Media Group" in p for p in prompts)  # First for Women's document text
    assert all(r["with_triples"] and r["with_text"] for r in knowledge_bases.opened[0].retrievals)


def test_no_triples_removes_the_triples_only(services, fake_llm, knowledge_bases):
    mtqa_run(services, {"rows": 2, "columns": 2, "no_triples": True})
    prompts = _thought_and_summary_prompts(fake_llm)
    assert not any(TRIPLE_LINE.search(p) for p in prompts)
    assert all("Bauer Media Group" in p for p in prompts)
    assert all(not r["with_triples"] and r["with_text"] for r in knowledge_bases.opened[0].retrievals)


def test_no_source_text_removes_the_source_text_only(services, fake_llm, knowledge_bases):
    mtqa_run(services, {"rows": 2, "columns": 2, "no_source_text": True})
    prompts = _thought_and_summary_prompts(fake_llm)
    assert all(TRIPLE_LINE.search(p) for p in prompts)
    for prompt in prompts:
        units = UNITS_END.split(prompt.split("Knowledge units:\n\n", 1)[1], 1)[0]
        for block in units.split("\n\n"):
            head, *lines = block.splitlines()
            assert re.match(r"\[\d+\] ", head) and lines and all(TRIPLE_LINE.match(line) for line in lines), block
    assert all(r["with_triples"] and not r["with_text"] for r in knowledge_bases.opened[0].retrievals)


def test_no_communication_sets_every_alpha_to_zero(services, fake_llm, knowledge_bases):
    labelled_thoughts(fake_llm, paragraphs=3)
    run_id = mtqa_run(services, {"rows": 3, "columns": 2, "no_communication": True})
    grid = cells(services, run_id)
    assert {n.data.get("alpha") for (r, _), n in grid.items() if r > 0} == {0.0}
    assert all(n.data["passed_count"] == 0 for n in grid.values())
    assert not any(STRATEGY_TAKEN in request_text(r) for r in fake_llm.calls_for(THOUGHT))
    assert len(fake_llm.calls_for(SUMMARY)) == 2  # corrections stay


def test_no_correction_merges_without_retrieval_or_checks(services, fake_llm, knowledge_bases):
    summaries(fake_llm)
    run_id = mtqa_run(services, {"rows": 2, "columns": 3, "no_correction": True})
    assert not fake_llm.calls_for(SUMMARY) and len(fake_llm.calls_for(MERGE)) == 3
    assert not any("Knowledge units" in request_text(r) for r in fake_llm.calls_for(MERGE))
    for summary in summaries_of(services, run_id).values():
        assert summary.data["checks"] == [] and summary.data["corrected"] is False
    # Later columns still retrieve with the question and the previous column's thoughts; the last
    # summary needs no retrieval.
    assert len(knowledge_bases.opened[0].retrievals) == 1 + 2
    assert len(fake_llm.calls_for(THOUGHT)) == 6


# --------------------------------------------------------------------------- the answer


def test_the_report_has_the_short_answer_and_citations_that_resolve(services, fake_llm, knowledge_bases):
    summaries(fake_llm)
    run_id = mtqa_run(services, {"rows": 2, "columns": 2})
    report = services.repo.latest_report(run_id)
    assert report.data["short_answer"] == SHORT_ANSWER  # its citation marker removed
    assert report.markdown.startswith(f"**Answer:** {SHORT_ANSWER}")
    last = summaries_of(services, run_id)[1]
    assert report.data["summary_node"] == last.id
    assert last.data["checks"][0]["verdict"] == "corrected"

    run_sources = {s.id for s in services.repo.list_sources(run_id)}
    cited = cited_source_ids(report.markdown)
    assert cited and set(cited) <= run_sources
    # The summary's [1] is the first unit of its own knowledge units KU'.
    assert cited[0] == last.data["units"][0]["source_id"]
    body, _, listing = render_markdown(services.repo, run_id).partition("\n## Sources\n")
    numbers = {int(n) for n in re.findall(r"\[(\d+)\]", body)}
    assert numbers and all(re.search(rf"^\[{n}\] ", listing, re.M) for n in numbers)
    # The evaluation harness takes the method's short answer at its word.
    answer = read_answer(None, question=QUESTION, report_markdown=report.markdown, report_data=report.data)
    assert (answer.answer, answer.source) == (SHORT_ANSWER, "method")


def test_a_summary_the_model_cannot_structure_is_written_as_plain_text(services, fake_llm, knowledge_bases):
    # A small model that copies the schema's words into the short answer, every time it is asked.
    fake_llm.when(
        prompt=SUMMARY,
        respond={
            "paragraphs": ["Arthur's Magazine came first [1]."],
            "short_answer": "The answer in as few words as possible: a name, number, date, or yes/no; no explanation.",
        },
    )
    # Its text starts with a line copied from the instructions, which is dropped.
    fake_llm.when(
        prompt=SUMMARY_TEXT,
        respond="Write the refined answer in a few paragraphs, citing units as [n].\n"
        "Arthur's Magazine (1844) came before First for Women [1].\n\n"
        "So the magazine started first is Arthur's.\n**Answer:** Arthur's Magazine",
    )
    run_id = mtqa_run(services, {"rows": 1, "columns": 1})
    assert services.repo.get_run(run_id).status == RunStatus.DONE
    (summary,) = summaries_of(services, run_id).values()
    assert summary.data["fallback"].startswith("written as plain text: the structured answer failed")
    assert summary.data["short_answer"] == "Arthur's Magazine"
    assert summary.data["paragraphs"][1] == "So the magazine started first is Arthur's."
    assert "refined answer" not in summary.content
    assert cited_source_ids(summary.content) and len(fake_llm.calls_for(SUMMARY_TEXT)) == 1
    assert services.repo.latest_report(run_id).markdown.startswith("**Answer:** Arthur's Magazine")


def test_a_plain_text_summary_of_only_its_answer_line_is_that_answer(services, fake_llm, knowledge_bases):
    fake_llm.when(prompt=SUMMARY, respond={"paragraphs": []})
    fake_llm.when(prompt=SUMMARY_TEXT, respond="Answer: Arthur's Magazine")
    run_id = mtqa_run(services, {"rows": 1, "columns": 1})
    (summary,) = summaries_of(services, run_id).values()
    assert summary.data["paragraphs"] == ["Arthur's Magazine"] and summary.data["short_answer"] == "Arthur's Magazine"


def test_a_plain_text_summary_that_repeats_the_instructions_still_fails(services, fake_llm, knowledge_bases):
    fake_llm.when(prompt=SUMMARY, respond={"paragraphs": []})
    fake_llm.when(
        prompt=SUMMARY_TEXT,
        respond="Check each thought against the knowledge units, keep what is right, "
        "correct what they contradict.\nAnswer: the fewest words that answer the question",
    )
    run_id = run_to_end(services, QUESTION, "mtqa", {"rows": 1, "columns": 1})
    assert services.repo.get_run(run_id).status == RunStatus.FAILED
    (summary,) = summaries_of(services, run_id).values()
    assert summary.status == NodeStatus.FAILED
    assert summary.error.endswith("asked again for plain text, it was empty or only repeated the instructions")


def test_the_offline_fake_writes_a_readable_cited_answer(services, knowledge_bases):
    run_id = mtqa_run(services, {"rows": 2, "columns": 2})
    report = services.repo.latest_report(run_id)
    short = report.data["short_answer"]
    assert short and len(short) <= 80 and "[" not in short
    assert cited_source_ids(report.markdown)
    assert "-[" not in report.markdown  # units' triples are not copied as prose
    thoughts = cells(services, run_id)
    assert thoughts[(0, 0)].content != thoughts[(1, 0)].content  # the thoughts of a column differ


def test_the_collection_scope_reads_the_collections_graph_without_adding_documents(services, fake_llm, monkeypatch):
    hits = services.searcher("local").search(QUESTION, k=20)  # the "collection", built before the run
    injector = KnowledgeInjector(documents=hits)
    monkeypatch.setattr(knowledge, "open_knowledge_base", injector)
    run_id = mtqa_run(services, {"rows": 1, "columns": 2, "scope": "collection", "collection": "hotpotqa"})
    assert injector.requests == [
        {"scope": "collection", "collection": "hotpotqa", "chunk_tokens": 1200, "node": "knowledge"}
    ]
    (base,) = injector.opened
    assert base.added == [] and len(base.retrievals) == 3
    events = services.repo.list_events(run_id)
    assert not any(e.kind == "search" for e in events)  # no per-question document search
    assert cited_source_ids(services.repo.latest_report(run_id).markdown)


# --------------------------------------------------------------------------- resume


def test_a_failed_run_resumes_without_thinking_finished_nodes_again(services, fake_llm, knowledge_bases):
    from engine.llm.protocol import LLMConnectionError

    fake_llm.when(prompt=SUMMARY, respond=LLMConnectionError("the endpoint went away"), times=1)
    run_id = run_to_end(services, QUESTION, "mtqa", {"rows": 2, "columns": 2})
    assert services.repo.get_run(run_id).status == RunStatus.FAILED
    done = {n.id: n for n in services.repo.list_nodes(run_id) if n.status == NodeStatus.DONE}
    assert {n.kind for n in done.values()} >= {"knowledge", "cell"}
    calls = fake_llm.call_count

    services.runner.resume(run_id)
    run = services.runner.wait(run_id, timeout=60)
    assert run.status == RunStatus.DONE, run.error
    for node_id, before in done.items():
        after = services.repo.get_node(node_id)
        assert (after.status, after.content, after.finished_at) == (before.status, before.content, before.finished_at)
    # Only the failed summary and the second column were asked: 1 + 2 thoughts + 1 summary.
    assert fake_llm.call_count - calls == 1 + 2 + 1
    assert len(knowledge_bases.opened) == 2  # reopened by the resumed process, its documents added again
    assert len(knowledge_bases.opened[1].keyword_calls) == 0  # the stored keywords are reused


def test_a_failed_search_fails_the_knowledge_node_and_resume_searches_again(services, fake_llm, knowledge_bases):
    from tests.support.search_outage import SearchOutage

    outage = SearchOutage(services)
    run_id = run_to_end(services, QUESTION, "mtqa", {"rows": 2, "columns": 2})
    run = services.repo.get_run(run_id)
    # Not a "done" run that reasoned over no knowledge: failed, saying why.
    assert run.status == RunStatus.FAILED, run.status
    [knowledge] = services.repo.list_nodes(run_id, kind="knowledge")
    assert knowledge.status == NodeStatus.FAILED
    assert "search for the question's documents failed: the corpus index is unreachable" in knowledge.error
    assert not services.repo.list_nodes(run_id, kind="cell", status=NodeStatus.DONE)  # nothing reasoned

    outage.on = False
    services.runner.resume(run_id)
    run = services.runner.wait(run_id, timeout=60)
    assert run.status == RunStatus.DONE, run.error
    assert services.repo.list_sources(run_id)


def test_extraction_failing_on_every_chunk_fails_the_knowledge_node(services, fake_llm):
    # The real knowledge layer, with an extractor whose replies can never be read.
    fake_llm.when(prompt="knowledge.extract", respond="I cannot help with that.")
    run_id = run_to_end(services, QUESTION, "mtqa", {"rows": 2, "columns": 2, "documents": 2})
    assert services.repo.get_run(run_id).status == RunStatus.FAILED
    [knowledge] = services.repo.list_nodes(run_id, kind="knowledge")
    assert knowledge.status == NodeStatus.FAILED and "extraction failed on all 2 chunks" in knowledge.error


def test_a_run_stopped_by_its_budget_reports_the_last_summary_as_partial_and_resume_replaces_it(
    services, fake_llm, knowledge_bases
):
    full = mtqa_run(services, {"rows": 2, "columns": 2})
    calls = services.repo.list_llm_calls(full)
    first_summary = next(i for i, c in enumerate(calls) if c.purpose == "summary")
    # Spent exactly by column 1's summary: column 2's first thought finds the budget used up.
    budget = sum(c.prompt_tokens + c.completion_tokens for c in calls[: first_summary + 1])

    run_id = run_to_end(services, QUESTION + " (budget)", "mtqa", {"rows": 2, "columns": 2}, max_tokens=budget)
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.STOPPED and "budget" in run.stop_reason
    report = services.repo.latest_report(run_id)
    assert report is not None and report.data["partial"] == run.stop_reason and report.data["column"] == 1
    rendered = render_markdown(services.repo, run_id)
    assert "Partial report: the run stopped before its end" in rendered
    assert "summary of column 1 of 2" in rendered and cited_source_ids(report.markdown)
    with pytest.raises(JudgeInputError, match="its report is partial"):  # judged only once finished
        load_judged_run(services.repo, run_id)

    services.runner.resume(run_id, max_tokens=10 * budget)
    run = services.runner.wait(run_id, timeout=60)
    assert run.status == RunStatus.DONE, (run.status, run.error)
    final = services.repo.latest_report(run_id)
    assert "partial" not in final.data and final.data["column"] == 2
    assert "Partial report" not in render_markdown(services.repo, run_id)


def test_a_run_whose_question_found_no_document_says_its_answer_cites_nothing(services, fake_llm):
    """No document passes the relevance floor: the matrix still answers (the model's own knowledge),
    and the report says so instead of reading as grounded as any other (review 14)."""
    run_id = run_to_end(services, "Qwxzv plorbit snarfle grundy?", "mtqa", {"rows": 1, "columns": 1})
    report = services.repo.latest_report(run_id, "final").markdown
    assert "This answer is the model's own and cites nothing" in report
    assert "No relevant source was found" in report


def test_a_run_whose_documents_gave_no_knowledge_unit_says_its_answer_cites_nothing(services, fake_llm):
    from engine.knowledge.prompts import EXTRACT

    fake_llm.when(prompt=EXTRACT.name, respond={"entities": [], "relations": []})
    run_id = run_to_end(services, QUESTION, "mtqa", {"rows": 1, "columns": 1})
    report = services.repo.latest_report(run_id, "final").markdown
    assert re.search(
        r"No knowledge unit was found for this question \(\d+ document\(s\), 0 entities and 0 "
        r"relations extracted from them\)\. This answer is the model's own and cites nothing\.",
        report,
    )


def test_a_grounded_run_has_no_ungrounded_note(services, fake_llm):
    run_id = run_to_end(services, QUESTION, "mtqa", {"rows": 1, "columns": 1})
    assert "cites nothing" not in services.repo.latest_report(run_id, "final").markdown
