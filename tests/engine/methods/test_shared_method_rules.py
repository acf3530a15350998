"""Small robustness rules shared by the methods: over-long list answers are cut (not re-asked),
sources' own reference markers never reach a prompt, the root cannot be pruned, an unusable draft
outline falls back to the tree."""

from __future__ import annotations

import pytest

from engine.citations import source_blocks
from engine.methods.deot.schemas import breadth_model
from engine.methods.omnithink.schemas import Reflection
from storage.models import RunStatus
from tests.support.fixtures_engine import run_to_end


class _Source:
    def __init__(self, id, title, text):
        self.id, self.title, self.text, self.snippet = id, title, text, ""


def test_list_answers_longer_than_allowed_are_cut_not_rejected():
    aspect = {"aspect": "a", "category": "c", "reasoning": "r", "query": "q?", "priority": "HIGH"}
    parsed = breadth_model(3).model_validate({"aspects": [dict(aspect, query=f"q{i}?") for i in range(5)]})
    assert [a.query for a in parsed.aspects] == ["q0?", "q1?", "q2?"]
    assert len(Reflection.model_validate({"insights": [f"i{i}" for i in range(12)]}).insights) == 8


def test_sources_own_reference_markers_are_not_shown_to_the_model():
    block = source_blocks(
        [_Source(7, "Apollo 11", "Landed in 1969.[12] Crew of three.[3, 4]\n[9] https://nasa.gov [citation needed]")]
    )
    assert block.startswith("[1] Apollo 11\n")
    body = block.split("\n", 1)[1]
    assert "[12]" not in body and "[3, 4]" not in body and "[9]" not in body and "citation needed" not in body
    assert "Landed in 1969." in body and "https://nasa.gov" in body
    # The same rule as a node's text: a span of years and an index are not markers, and neither a
    # marker's space nor our own storage marker reaches the prompt.
    block = source_blocks(
        [_Source(8, "Dams", "Built over [1990-2024]; x[3]y in code. It won [41]. Then [[S2]] ended.")]
    )
    assert block.split("\n", 1)[1] == "Built over [1990-2024]; x[3]y in code. It won. Then ended."
    # A marker an extractor glued to the next sentence is one too; a line's indentation stays.
    block = source_blocks([_Source(9, "Club", "Founded in 1892.[3]The club won [41] in May.\n    [2] indented")])
    assert block.split("\n", 1)[1] == "Founded in 1892. The club won in May.\n     indented"


def test_the_root_cannot_be_pruned(services):
    for method, params in (("deot", {"max_nodes": 2, "max_layers": 2}), ("omnithink", {"max_depth": 1, "subnodes": 1})):
        run_id = run_to_end(services, "How did the Apollo program shape computing?", method, params)
        root = next(n for n in services.repo.list_nodes(run_id) if n.parent_id is None)
        with pytest.raises(ValueError, match="does not apply to the question itself"):
            services.runner.steer(run_id, "prune", {"node_id": root.id})
        assert services.repo.get_node(root.id).status != "pruned"


def test_an_unusable_draft_outline_falls_back_to_the_tree(services, fake_llm):
    fake_llm.when(prompt="omnithink.draft_outline", respond={"not": "an outline"})
    run_id = run_to_end(services, "The history of the printing press", "omnithink", {"max_depth": 1, "subnodes": 2})
    assert services.repo.get_run(run_id).status == RunStatus.DONE
    outline = services.repo.latest_run_state(run_id, "outline").data
    first_level = [n.label for n in services.repo.list_nodes(run_id) if n.depth == 1]
    assert [s["title"] for s in outline["draft"]["sections"]] == first_level
    assert services.repo.latest_report(run_id, "final") is not None
