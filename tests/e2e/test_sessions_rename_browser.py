"""Issue 43: a renamed session's card kept its old name while its menu ("More") was open. In
Chromium: rename a run from its card's menu; the card's title says the new name at once, the menu
still open. Screenshot: test-artifacts/test_a_renamed_card_shows_its_new_name_with_its_menu_open-renamed.png."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import poll

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def test_a_renamed_card_shows_its_new_name_with_its_menu_open(app_repo, streamlit_app, page, shot):
    run = app_repo.create_run(question="What did the river carry to the delta?", method="direct", params={})
    page.goto(f"{streamlit_app.url}/sessions")
    # The card's title: its one bold line (the page holds this one card).
    title = page.locator('[data-testid="stMain"] [data-testid="stMarkdownContainer"] strong').first
    poll(page, lambda: title.inner_text() == "What did the river carry to the delta?", what="the card")
    page.get_by_role("button", name="More").click()
    name = page.get_by_role("textbox", name="Name")
    # Named as a person names things: typed, then Enter (which used to change only the box: the
    # menu showed the new name over a card that kept the old one); then typed and clicked.
    for new_name, confirm in (("River delta study", "Enter"), ("Delta sediment, second look", "click")):
        name.fill(new_name)
        if confirm == "Enter":
            name.press("Enter")
        else:
            page.get_by_role("button", name="Rename", exact=True).click()
        poll(page, lambda: app_repo.get_run(run.id).title == new_name, what="the rename to be stored")
        # The menu is still open, and the card under it says the new name.
        assert name.is_visible()
        poll(page, lambda: title.inner_text() == new_name, timeout=30, what="the card's title to say the new name")
    shot(page, "renamed")
