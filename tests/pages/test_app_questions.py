"""Issue 10, finding 7 (the question) in the app: Explore's Start refuses a question that is too
long or holds NUL with a clear error, and creates no run."""

from __future__ import annotations

import pytest

from engine.questions import MAX_QUESTION_CHARS
from tests.pages.test_app_pages import assert_no_exception, joined, open_page, services  # noqa: F401  (fixture)


@pytest.mark.parametrize(
    "question, expected",
    [
        (
            "Why? " + "x" * MAX_QUESTION_CHARS,
            [f"the limit is {MAX_QUESTION_CHARS:,}", "documents belong in the corpus"],
        ),
        ("Why is the sky\x00 blue?", ["NUL character", "plain text"]),
    ],
)
def test_explore_start_refuses_the_question_with_a_clear_error(services, question, expected):
    at = open_page()
    at.text_area(key="question").input(question)
    at.button(key="start").click().run()
    assert_no_exception(at)
    errors = joined(at.error)
    for phrase in expected:
        assert phrase in errors
    # A sentence on the page (the CLI prints the same words after "error: ").
    assert errors.startswith("The question ") and errors.endswith("."), errors
    assert services.repo.list_runs() == []
    assert "run" not in at.query_params


def test_a_question_over_the_limit_is_refused_at_the_box_before_start(services):
    # Issue 43: the box took any length and only Start said it was too long.
    at = open_page()
    at.text_area(key="question").input("Why? " + "x" * MAX_QUESTION_CHARS).run()
    assert_no_exception(at)
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and f"the limit is {MAX_QUESTION_CHARS:,}" in errors[0], errors
    at.button(key="start").click().run()
    assert [e.value for e in at.error] == errors  # said once, not again by Start
    assert services.repo.list_runs() == []
    at.text_area(key="question").input("Why is the sky blue?").run()
    assert not at.error


def test_the_open_run_shows_its_question_as_text_not_a_heading(services):
    # A stored question with Markdown in it, as long as the limit allows (issue 12, finding 10).
    question = "# Heading?\n" + "word " * ((MAX_QUESTION_CHARS - 20) // 5)
    run = services.repo.create_run(question=question, method="rag", params={})
    at = open_page(run_id=run.id)
    assert not [h for h in at.subheader if "Heading" in h.value]
    assert not [h for h in at.header if "Heading" in h.value]
    shown = [m.value for m in at.markdown if m.value.startswith("**Question:**")]
    # `#` as an entity: shown as the character, never able to start a heading.
    assert len(shown) == 1 and "&#35; Heading? word" in shown[0] and shown[0].endswith(" …")
    assert len(shown[0]) < 400
    assert [t.value for t in at.text] == [question.strip()]  # the whole question, in its expander
