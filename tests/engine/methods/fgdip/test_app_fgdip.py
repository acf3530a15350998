"""FGDIP in the app, from its declarations alone (issue 15, without a browser): the search tree with
verdict colours and the backtrack drawn over it, the error memory beside the map, a node's thought,
action and observation with its commands, and a run-level command sent from the page."""

from __future__ import annotations

import pytest

from components import app_state, mindmap
from components.map_legend import legend_text
from engine.llm.fake import FakeLLM
from storage.models import CommandStatus, RunStatus
from tests.components.test_ui_contract import MapSpy
from tests.engine.methods.fgdip.fgdip_scripts import EVALUATE_ANSWER, QUESTION, judged_answer
from tests.pages.test_app_pages import assert_no_exception, joined, node_list, open_page, texts, wait_until_idle
from tests.support.fixtures_engine import run_to_end

LESSON = "LESSON-MAP: compare the founding years, not the titles."


def app_services(fake: FakeLLM):
    """The app's own Services (those its pages get) on `fake`, closed once their runs have ended."""
    app_state.get_services.clear()
    built = app_state.get_services()
    built.use_llm("fake", fake)
    yield built
    for run in built.repo.list_runs(limit=100):
        built.runner.wait(run.id, timeout=20)
    built.close()
    app_state.get_services.clear()


@pytest.fixture
def services(prebuilt_corpus_home):
    """The app's own Services, on a fake whose Answer Evaluator rejects the first answer."""
    fake = FakeLLM()
    fake.when(EVALUATE_ANSWER, judged_answer(False, LESSON), times=1)
    yield from app_services(fake)


@pytest.fixture
def fgdip_run(services) -> str:
    run_id = run_to_end(services, QUESTION, "fgdip", {})
    assert services.repo.get_run(run_id).status == RunStatus.DONE
    return run_id


def test_explore_draws_the_search_tree_and_lists_the_error_memory(services, fgdip_run, monkeypatch):
    step = next(n for n in services.repo.list_nodes(fgdip_run, kind="step") if n.data.get("explored_order"))
    spy = MapSpy(monkeypatch, click=step.id)
    at = open_page(run_id=fgdip_run)
    assert_no_exception(at)

    data = spy.last
    assert data.mode == mindmap.FIXED  # the search tree, a backtrack drawn over it
    assert any(e.get("tip") == "backtrack" and e["dashes"] for e in data.edges)
    legend = legend_text(data.legend)
    for words in ("Entity:", "Step:", "Answer:", "verdict sure", "verdict impossible", "backtrack:", "answer rejected"):
        assert words in legend, words
    # The error memory beside the map: the tab next to the node's, with the run's own commands.
    assert [t.label for t in at.tabs] == ["Node", "Error memory"]
    memory_tab = at.tabs[1]
    assert "Error memory" in [e.label for e in memory_tab.expander]
    assert LESSON in joined(memory_tab.markdown)
    assert {"Add entity", "Edit error memory"} <= {b.label for b in memory_tab.button}
    assert "Explore next" in {b.label for b in at.tabs[0].button}  # the node's commands stay on its tab
    # The chosen node: its caption, thought/action/observation and its commands.
    # (As Markdown that shows "search[...]": the caption is plain text, its brackets escaped.)
    assert any(c.startswith("search\\[") for c in texts(at.caption))
    assert "Observation" in joined(at.markdown)
    labels = {b.label for b in at.button}
    assert {"Explore next", "Mark impossible", "Add entity", "Edit error memory"} <= labels


def test_a_finished_run_opens_on_its_answer_until_the_reader_picks_a_node(services, fgdip_run, monkeypatch):
    answer = services.repo.latest_report(fgdip_run).data["answer_node"]
    assert services.repo.get_node(answer).data["verdict"] == "accepted"
    spy = MapSpy(monkeypatch)
    at = open_page(run_id=fgdip_run)
    assert node_list(at).value == answer  # not the question at the root
    assert spy.last.selected == str(answer)  # and the map centres it
    # Picked on the map: the reader's node stays through the next runs of the page.
    entity = services.repo.list_nodes(fgdip_run, kind="entity")[0]
    spy.click = entity.id
    at.run()
    spy.click = None
    at.run()
    assert node_list(at).value == entity.id


def test_an_empty_error_memory_says_so_beside_the_map(prebuilt_corpus_home, monkeypatch):
    services = app_services(FakeLLM())  # the first answer is accepted: no lesson is ever stored
    built = next(services)
    try:
        run_id = run_to_end(built, QUESTION, "fgdip", {})
        assert built.repo.list_run_states(run_id, "error_memory") == []
        MapSpy(monkeypatch)
        at = open_page(run_id=run_id)
        [memory] = [e for e in at.tabs[1].expander if e.label == "Error memory"]
        assert "No lessons yet" in joined(memory.caption), texts(memory.caption)
    finally:
        next(services, None)


def test_a_lesson_added_from_the_page_is_applied(services, fgdip_run, monkeypatch):
    MapSpy(monkeypatch)
    at = open_page(run_id=fgdip_run)
    key = f"run-cmd-{fgdip_run}-edit_error_memory"
    # A pasted text over the limit stays in the box (no widget limit drops it) and is refused with
    # its length; a new lesson without text is refused on the page. Neither is sent.
    at.text_input(key=f"{key}.analysis").input("x" * 1200)
    at.button(key=key).click().run()
    assert "Lesson is too long (1,200 characters); at most 1,000: shorten it." in joined(at.error)
    at.text_input(key=f"{key}.analysis").input("   ")
    at.button(key=key).click().run()
    assert "A new lesson (entry 0) needs its text: write it under Lesson." in joined(at.error)
    # A lesson the memory does not hold: said at once, and what was typed stays to be corrected.
    at.number_input(key=f"{key}.number").set_value(5)
    at.text_input(key=f"{key}.analysis").input("Check the year each magazine started.")
    at.button(key=key).click().run()
    assert "there is no lesson 5: the memory holds 1 (entries 1 to 1), and 0 adds one" in joined(at.error)
    assert at.text_input(key=f"{key}.analysis").value == "Check the year each magazine started."
    assert services.repo.list_commands(fgdip_run) == []
    at.run()  # a refresh (every second while a run is active) keeps the refusal under its form
    assert "there is no lesson 5" in joined(at.error)
    at.number_input(key=f"{key}.number").set_value(0)
    at.text_input(key=f"{key}.analysis").input("Check the year each magazine started.")
    at.button(key=key).click().run()
    assert_no_exception(at)
    assert not at.error, texts(at.error)  # sent: the earlier refusal is gone
    assert wait_until_idle(services, fgdip_run).status == RunStatus.DONE
    [command] = services.repo.list_commands(fgdip_run)
    assert (command.kind, command.status) == ("edit_error_memory", CommandStatus.DONE)
    analyses = [e["analysis"] for e in services.repo.latest_run_state(fgdip_run, "error_memory").data["entries"]]
    assert analyses == [LESSON, "Check the year each magazine started."]
    at = open_page(run_id=fgdip_run)  # the panel says whose lessons they are
    assert "2 lessons (1 from a rejected answer, 1 of yours), given to every new step" in joined(at.caption)


@pytest.fixture
def services_rejecting_all(prebuilt_corpus_home):
    fake = FakeLLM()
    fake.when(EVALUATE_ANSWER, judged_answer(False, LESSON))
    yield from app_services(fake)


def test_a_run_no_answer_passed_warns_without_offering_a_retry_that_cannot_work(services_rejecting_all):
    """Its warning is about the answer, not failed nodes: no "Retry failed nodes" button, whose
    resume would be refused, and no `thoughtmap resume` hint (review 14c)."""
    services = services_rejecting_all
    run_id = run_to_end(services, QUESTION, "fgdip", {"max_backtracks": 1})
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.DONE and "no candidate answer passed" in run.warning
    assert not services.runner.retryable(run)
    at = open_page(run_id=run_id)
    assert_no_exception(at)
    assert "Done, with a warning: no candidate answer passed the Answer Evaluator" in joined(at.warning)
    assert not [b for b in at.button if b.label in ("Retry failed nodes", "Retry failed")]
    sessions = open_page("pages/sessions.py")
    assert_no_exception(sessions)
    assert not [b for b in sessions.button if b.label == "Retry failed"]


def test_the_root_panel_shows_the_question_once_as_asked(services, monkeypatch):
    """The question node's panel: its heading is the question; the same text is not repeated under
    it, and its Markdown is not rendered there (as on the map and the question line)."""
    question = "Which magazine started first, **Arthur's Magazine** or First for Women?"
    run_id = run_to_end(services, question, "fgdip", {})
    root = next(n for n in services.repo.list_nodes(run_id) if n.parent_id is None)
    assert root.content == question
    MapSpy(monkeypatch, click=root.id)  # (a finished run opens on its answer)
    at = open_page(run_id=run_id)
    assert_no_exception(at)
    escaped = "Which magazine started first, \\*\\*Arthur's Magazine\\*\\* or First for Women?"
    shown = [m.value for m in at.markdown if m.value.endswith(escaped) or m.value == question]
    assert shown == [f"**Question:** {escaped}", f"#### {escaped}"], shown  # the question line and the panel
