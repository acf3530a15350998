"""`--llm fake` grows the same trees as before: each built-in method's run, with its default
parameters, compared with the tree recorded in `tests/support/fake_trees/` (how it is written without
ids and clocks, and how to record it again: `tests/support/fake_trees.py`). A refactor that is meant to
change nothing a method grows must leave these files as they are."""

from __future__ import annotations

import difflib

import pytest

from tests.support.fake_trees import METHODS, RECORDED, dumps, grow


@pytest.mark.parametrize("method", METHODS)
def test_the_fake_llm_grows_the_recorded_tree(services, method):
    recorded = (RECORDED / f"{method}.json").read_text(encoding="utf-8")
    grown = dumps(grow(services, method))
    if grown != recorded:
        diff = "".join(
            list(
                difflib.unified_diff(
                    recorded.splitlines(True), grown.splitlines(True), f"recorded {method}", f"grown {method}"
                )
            )[:80]
        )
        pytest.fail(
            f"{method} grew a different tree on the fake LLM (record again only if that was meant: "
            f"python -m tests.support.fake_trees {method}):\n{diff}"
        )


def test_names_do_not_depend_on_row_ids(services):
    """Two runs of one question get different row ids and the same canonical tree."""
    first, second = grow(services, "mtqa"), grow(services, "mtqa")
    assert first == second
    assert first["nodes"] and all(node["name"].startswith("N") for node in first["nodes"])


def test_ids_in_text_and_data_become_names(services):
    tree = grow(services, "deot")
    text = dumps(tree)
    assert "[[S:" in text and "node?" not in text and "source?" not in text
    created = [name for node in tree["nodes"] for name in node["data"].get("expansion", {}).get("created", [])]
    assert created and all(isinstance(name, str) and name.startswith("N") for name in created)
