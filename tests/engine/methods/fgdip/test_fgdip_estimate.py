"""FGDIP's cost formula follows its switches and limits, and stays within ±30 % of a run on the
offline fake (`--llm fake`) for each ablation too (tests/engine/methods/test_cost_estimate.py checks the default
and the quick profile of every method)."""

from __future__ import annotations

import pytest

from engine.methods.fgdip import FgdipMethod
from engine.methods.fgdip.params import FgdipParams
from storage.models import RunStatus
from tests.engine.methods.fgdip.fgdip_scripts import QUESTION
from tests.support.fixtures_engine import run_to_end


def test_each_switch_removes_its_calls_from_the_estimate():
    full = FgdipMethod.estimate(FgdipParams())
    steps = {g.step: g.calls for g in full.groups}
    assert FgdipMethod.estimate(FgdipParams(answer_evaluator=False)).calls == full.calls - 1
    assert FgdipMethod.estimate(FgdipParams(step_evaluator=False)).calls == full.calls - steps["judge each step"]
    no_extractor = {g.step: g.calls for g in FgdipMethod.estimate(FgdipParams(extractor=False)).groups}
    assert "pick out the key entities" not in no_extractor
    # The question is opened by the node generator instead: one more layer of k generations.
    assert no_extractor["generate the next steps"] == steps["generate the next steps"] + FgdipParams().siblings
    assert FgdipMethod.estimate(FgdipParams(siblings=5)).calls > full.calls
    assert FgdipMethod.estimate(FgdipParams(max_nodes=100)).high > full.high


@pytest.mark.parametrize(
    "switch",
    [{"extractor": False}, {"step_evaluator": False}, {"answer_evaluator": False}, {"yes_no": True}, {"siblings": 1}],
)
def test_the_estimate_holds_for_a_fake_run_with_each_switch(services, switch):
    run_id = run_to_end(services, QUESTION, "fgdip", switch)
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.DONE, (run.status, run.error)
    estimate = FgdipMethod.estimate(FgdipParams(**switch))
    assert abs(estimate.calls - run.llm_calls) <= 0.3 * run.llm_calls, (estimate.calls, run.llm_calls)
    assert estimate.low <= run.llm_calls <= estimate.high
