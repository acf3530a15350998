"""Zero-config, as a person on a fresh offline machine sees it: no key, no endpoint; the app says it
runs on the built-in model, starts it, and a DEoT run on it, with the default profile, on a machine
another process keeps busy, ends `done` and says truthfully what its sources do not cover. The real
0.5B model on this CPU, in Debian's Chromium. Screenshots go to test-artifacts/; the time to the
first answered node to test-artifacts/timings.jsonl. (The cited report on this model is the CLI's
test: tests/engine/llm/test_local_model_run.py.)"""

from __future__ import annotations

import time

import pytest

from engine.methods.deot.params import DeotParams
from storage.models import NodeStatus, RunStatus
from tests.e2e.conftest import StreamlitApp, metric, poll
from tests.engine.llm.test_local_model_server import local_settings  # noqa: F401  (fixture: skips without the runtime)
from tests.support.progress_wait import (
    BACKSTOP_S,
    STALL_S,
    cpu_burners,
    record_timing,
    run_progress,
    stop,
    wait_on_progress,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.local_model, pytest.mark.timeout(BACKSTOP_S)]

# Nothing in the bundled corpus (Wikipedia passages of HotpotQA, 2Wiki, NQ, FreshWiki) is about it:
# its top hits share a word or two, and the word and semantic floors leave them out.
UNCOVERED = "How does the Rust borrow checker prevent data races?"


@pytest.fixture
def local_app(app_home, tmp_path, local_settings):  # noqa: F811
    # THOUGHTMAP_LLM=auto and nothing else configured: what a fresh machine has.
    app = StreamlitApp(app_home, log_dir=tmp_path, env={"THOUGHTMAP_LLM": "auto"})
    try:
        app.start()
        yield app
    finally:
        app.stop()


def test_a_question_the_corpus_does_not_cover_on_a_busy_machine(local_app, page, shot, app_repo):
    """Issue 43: the default method and profile on the built-in model, both cores kept busy by
    another process, and a question the bundled corpus does not hold. The run ends `done` with an
    answer that says what the sources do not cover, instead of one the 0.5B model made up. Waited on
    while it advances (stored calls, nodes, events, the model's CPU), never against a clock."""
    page.goto(local_app.url)
    page.get_by_text("Running on the built-in local model").wait_for()
    page.get_by_label("Question").fill(UNCOVERED)
    shot(page, "1-question")
    burners = cpu_burners(2)  # another process keeps both cores busy from here to the end
    try:
        started = time.monotonic()
        page.get_by_role("button", name="Start").click()
        poll(page, lambda: "run=" in page.url, timeout=120, what="the run to open")
        run_id = page.url.split("run=")[1].split("&")[0]
        on_page = dict(sleep=lambda s: page.wait_for_timeout(s * 1000), stall_s=STALL_S)

        def first_answer():
            return any(n.status == NodeStatus.DONE for n in app_repo.list_nodes(run_id))

        wait_on_progress(
            first_answer, lambda: run_progress(app_repo, run_id), what="the first answered node", **on_page
        )
        first_answer_s = time.monotonic() - started
        shot(page, "2-first-answer")
        wait_on_progress(
            lambda: metric(page, "Status") not in ("queued", "running"),
            lambda: run_progress(app_repo, run_id),
            what="the run to end",
            **on_page,
        )
        total_s = time.monotonic() - started
    finally:
        stop(burners)
    record_timing("uncovered-question-loaded", first_answer_s=round(first_answer_s, 1), total_s=round(total_s, 1))

    run = app_repo.get_run(run_id)
    assert run.status == RunStatus.DONE, run.error
    assert run.llm_info["kind"] == "local" and run.method == "deot"
    assert run.params["max_nodes"] == DeotParams.quick_profile["max_nodes"]  # the default profile, untouched
    report = app_repo.latest_report(run_id).markdown
    # What the sources do not cover is said, by us: the whole report, or its section when some was.
    assert "The sources at hand do not cover this question" in report or "What the sources do not cover" in report
    uncovered = [n for n in app_repo.list_nodes(run_id) if n.data.get("not_covered")]
    assert uncovered and all("do not cover this" in n.content for n in uncovered)
    page.get_by_text("do not cover", exact=False).first.wait_for()  # shown to the reader
    shot(page, "3-done")
    assert page.dialogs == []
