"""The Evaluate page and the Compare view in Chromium, offline on the fake LLM, at 1400×900: a small
benchmark (2 HotpotQA items × direct, rag) is started, watched to the end, its tables read, and an
item's run opened on Explore; then two methods compared side by side on one question, both maps
drawn, and the comparison reopened from its address. Screenshots: test-artifacts/evaluate-*.png,
compare-*.png."""

from __future__ import annotations

import pytest

from engine.config import load_settings
from engine.methods.registry import METHODS
from storage import open_database
from storage.evaluation import EvaluationStore, ItemStatus
from storage.models import RunStatus
from tests.e2e.conftest import ARTIFACTS, MAP_IFRAME, choose_option, map_nodes, poll, type_number

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

QUESTION = "Who designed the Eiffel Tower?"


@pytest.fixture
def eval_store(app_home):
    db = open_database(load_settings().database_url)
    try:
        yield EvaluationStore(db)
    finally:
        db.dispose()


def _methods_box(page):
    return page.locator("[data-testid='stMultiSelect']").filter(has_text="Methods")


def _pick_methods(page, methods: list[str], *, clear: bool = False) -> None:
    """Choose methods in the Methods multiselect as a person does: (empty it with Backspace), open it,
    click each option; checked by the tags it shows."""
    box = _methods_box(page)
    if clear:
        box.locator("input").click()
        for _ in range(4):
            box.locator("input").press("Backspace")
        page.keyboard.press("Escape")
        poll(
            page,
            lambda: not any(METHODS[m].title in box.inner_text() for m in METHODS),
            timeout=30,
            what="the methods to be cleared",
        )
    for method in methods:
        title = METHODS[method].title

        def chosen(title=title):
            if title in box.inner_text():
                return True
            box.locator("input").click(timeout=3_000)
            page.get_by_role("option", name=title, exact=True).click(timeout=3_000)
            return False

        poll(page, chosen, timeout=60, what=f"{title} to be chosen")
        page.keyboard.press("Escape")


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.wait_for_timeout(600)  # let the last rerun paint
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_evaluate_and_compare_in_the_browser(streamlit_app, page, app_repo, eval_store):
    page.set_viewport_size({"width": 1400, "height": 900})
    # In through the app's navigation, as a person starts (a deep link first: the test below).
    page.goto(streamlit_app.url)
    page.get_by_role("link", name="Evaluate").click()
    page.get_by_text("No benchmarks yet").wait_for()
    page.get_by_text("Protocol: FGDIP").wait_for()
    type_number(page, "Items", 2, leave="Tab")
    _pick_methods(page, ["direct", "rag"])
    _shot(page, "evaluate-form")
    page.get_by_role("button", name="Start benchmark").click()

    [bench] = poll(page, eval_store.list_benchmarks, timeout=60, what="the benchmark to be stored")
    assert (bench.methods, bench.limit) == (["direct", "rag"], 2)
    page.get_by_text("item runs finished").first.wait_for()
    poll(page, lambda: eval_store.get_benchmark(bench.id).status == "done", timeout=180, what="the benchmark to finish")
    poll(
        page,
        lambda: page.get_by_text("4 of 4 item runs finished · done").count() > 0,
        timeout=60,
        what="the page to show the finished benchmark",
    )
    page.get_by_role("heading", name="Results").wait_for()
    page.get_by_role("heading", name="Items").first.wait_for()  # a rerun may leave the last one a moment
    # Done, two methods: their paired differences under the results, as `bench --show --paired` gives them.
    page.get_by_text("Paired differences, item by item").wait_for()
    _shot(page, "evaluate-results")
    page.get_by_role("heading", name="Items").first.scroll_into_view_if_needed()
    _shot(page, "evaluate-items")

    # Open an item's run on Explore.
    rows = eval_store.list_items(bench.id)
    page.get_by_role("button", name="Open on Explore").click()
    poll(
        page,
        lambda: "run=" in page.url and "/explore" in page.url or "run=" in page.url,
        timeout=60,
        what="Explore to open the item's run",
    )
    run_id = page.url.split("run=")[1].split("&")[0]
    assert run_id in {r.run_id for r in rows}
    page.get_by_text(app_repo.get_run(run_id).question[:40]).first.wait_for()
    _shot(page, "evaluate-opened-run")

    # Compare: two methods side by side on one question.
    page.get_by_role("link", name="Compare").click()
    page.get_by_label("Question", exact=True).fill(QUESTION)
    page.get_by_label("Question", exact=True).press("Tab")
    # The first two methods are chosen by default; compare the two baselines instead.
    _pick_methods(page, ["direct", "rag"], clear=True)
    page.get_by_role("button", name="Start comparison").click()
    poll(page, lambda: "runs=" in page.url, timeout=60, what="the comparison's address")
    run_ids = page.url.split("runs=")[1].split("&")[0].replace("%2C", ",").split(",")
    assert [app_repo.get_run(r).method for r in run_ids] == ["direct", "rag"]
    poll(
        page,
        lambda: all(app_repo.get_run(r).status == RunStatus.DONE for r in run_ids),
        timeout=120,
        what="both runs to finish",
    )
    poll(page, lambda: page.locator(MAP_IFRAME).count() == 2, timeout=60, what="two maps side by side")

    def map_boxes():
        found = [page.locator(MAP_IFRAME).nth(i).bounding_box() for i in range(2)]
        return all(found) and found

    boxes = poll(page, map_boxes, what="both maps laid out")
    assert boxes[0]["x"] + boxes[0]["width"] <= boxes[1]["x"] + 1  # side by side
    assert page.get_by_text("LLM call").count() >= 2
    # Each narrow map shows every node whole, its label too (a fit by shapes alone cut the question).
    for nth, count in ((0, 2), (1, 3)):
        poll(
            page,
            lambda: (shown := map_nodes(page, nth)) and len(shown) == count and all(n["wholeInView"] for n in shown),
            what=f"map {nth + 1}'s nodes whole in view",
        )
    _shot(page, "compare-side-by-side")
    page.get_by_role("heading", name="Judges").scroll_into_view_if_needed()
    page.get_by_role("button", name="Judge", exact=True).click()
    poll(
        page,
        lambda: page.get_by_text("DEoT dual comparison · judge").count() > 0,
        timeout=60,
        what="the judge's verdict",
    )
    page.get_by_role("heading", name="Judges").scroll_into_view_if_needed()
    _shot(page, "compare-reports-and-judges")

    # Reopened from its address alone.
    address = page.url
    page.goto(streamlit_app.url)
    page.get_by_role("link", name="Compare").wait_for()
    page.goto(address)
    poll(page, lambda: page.locator(MAP_IFRAME).count() == 2, timeout=60, what="the reopened comparison")
    page.get_by_text("DEoT dual comparison · judge").wait_for()  # the stored verdict, shown again
    assert page.dialogs == []

    # Runs already stored, put side by side: the question, then its runs (the newest of each method).
    page.goto(streamlit_app.url)
    page.get_by_role("link", name="Compare").click()
    page.get_by_text("Compare runs you already have").click()
    choose_option(page, "Question with two runs or more", QUESTION)
    poll(
        page,
        lambda: all(
            r in page.locator("[data-testid='stMultiSelect']").filter(has_text="Runs").inner_text() for r in run_ids
        ),
        what="the question's runs preselected",
    )
    _shot(page, "compare-existing-runs")
    page.get_by_role("button", name="Compare these runs").click()
    poll(page, lambda: "runs=" in page.url, timeout=60, what="the comparison of stored runs")
    chosen = page.url.split("runs=")[1].split("&")[0].replace("%2C", ",").split(",")
    assert sorted(chosen) == sorted(run_ids)
    poll(page, lambda: page.locator(MAP_IFRAME).count() == 2, timeout=60, what="their maps side by side")
    page.get_by_text("DEoT dual comparison · judge").wait_for()  # their stored verdict too
    assert page.dialogs == []


def test_a_benchmark_its_budget_stopped_is_raised_and_resumed_in_the_browser(streamlit_app, page, eval_store):
    """A person gives a benchmark a token budget too small for it: it stops part-way
    and says so; the page shows what was spent and the budget, a raise below the spend is
    refused with the amount to beat, and a real raise lets Resume finish every item."""
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(streamlit_app.url)
    page.get_by_role("link", name="Evaluate").click()
    page.get_by_text("No benchmarks yet").wait_for()
    for label, value in (("Items", 2), ("Concurrency", 1), ("Max tokens", 300)):
        type_number(page, label, value, leave="Tab")
    _pick_methods(page, ["direct", "rag"])
    page.get_by_role("button", name="Start benchmark").click()

    [bench] = poll(page, eval_store.list_benchmarks, timeout=60, what="the benchmark to be stored")
    assert bench.max_tokens == 300
    poll(
        page,
        lambda: eval_store.get_benchmark(bench.id).status == "stopped",
        timeout=120,
        what="the budget to stop the benchmark",
    )
    left = sum(1 for r in eval_store.list_items(bench.id) if r.status not in ItemStatus.FINISHED)
    assert 0 < left < 4
    page.get_by_text(f"The token budget was reached with {left} runs left. Raise it below and press Resume").wait_for(
        timeout=60_000
    )
    page.get_by_text("Spent so far:").wait_for()
    budget = page.get_by_role("spinbutton", name="Token budget", exact=True)
    assert budget.input_value() == "300"
    _shot(page, "evaluate-budget-stopped")

    # A "raise" to no more than was spent would stop it again at once: refused, with the amount to beat.
    spent = page.get_by_text("Spent so far:").inner_text().split(":")[1].split("tokens")[0].strip().replace(",", "")
    assert int(spent) >= 300
    type_number(page, "Token budget", int(spent), leave="Tab")
    page.get_by_role("button", name="Resume").click()
    page.get_by_text("would stop it again at once; give more than").wait_for(timeout=30_000)
    assert (
        eval_store.get_benchmark(bench.id).max_tokens == 300 and eval_store.get_benchmark(bench.id).status == "stopped"
    )
    _shot(page, "evaluate-budget-refused")

    type_number(page, "Token budget", 100000, leave="Tab")
    page.get_by_role("button", name="Resume").click()
    poll(
        page,
        lambda: eval_store.get_benchmark(bench.id).status == "done",
        timeout=180,
        what="the resumed benchmark to finish",
    )
    assert eval_store.get_benchmark(bench.id).max_tokens == 100_000
    poll(
        page,
        lambda: page.get_by_text("4 of 4 item runs finished · done").count() > 0,
        timeout=60,
        what="the page to show the finished benchmark",
    )
    page.get_by_text("Paired differences, item by item").wait_for()
    _shot(page, "evaluate-budget-resumed")
    assert page.dialogs == []


def test_a_deep_link_opened_first_after_a_start_gets_the_whole_app(streamlit_app, page):
    """Streamlit kept its pages/-folder mode until app.py had run once: a bookmark opened first
    after a start ran its page alone (narrow, a sidebar of file names, app.py's set-up skipped), and
    so did every session after it. components/routing.py sends it through app.py."""
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{streamlit_app.url}/evaluate?benchmark=nope")
    page.get_by_role("heading", name="Evaluate").wait_for()
    nav = page.locator('[data-testid="stSidebarNav"]')
    poll(page, lambda: "Sessions" in nav.inner_text(), what="the app's own navigation")
    assert "app" not in nav.inner_text().split() and "evaluate" not in nav.inner_text().split()
    assert "benchmark=nope" in page.url  # the address, query included, is kept
    width = page.locator('[data-testid="stMainBlockContainer"]').bounding_box()["width"]
    assert width > 900, width  # app.py's wide layout
    other = page.context.new_page()  # and the next session too
    other.set_viewport_size({"width": 1400, "height": 900})
    other.goto(f"{streamlit_app.url}/settings")
    other.get_by_role("heading", name="Settings").first.wait_for()
    poll(
        other,
        lambda: "Sessions" in other.locator('[data-testid="stSidebarNav"]').inner_text(),
        what="the app's own navigation in a second session",
    )
    _shot(page, "deep-link-first")
