"""FGDIP's cost formula: the calls `method.py` makes, counted along the path the search is expected
to take within the bounds the parameters set.

Per run: one extraction (with the extractor on) and one Step Evaluator call per entity. Per
expansion: k generations and, with the step evaluator, k judgements. Per candidate answer: one
written explanation and, with the answer evaluator, one check.

Expected path (an assumption: no capable endpoint was measured here; the paper's cost table,
appendix D, reports about 123k tokens per HotpotQA question on GPT-3.5 with its own prompts): the
extractor names two entities; the first branch answers at its third step (the entity's search, one
more search or lookup, then finish), so two expansions; the first candidate is accepted. The
scripted fake (`--llm fake`) takes exactly this path. The high end: every node the limits allow is
generated and judged, and every backtrack follows a rejected answer.
"""

from __future__ import annotations

from engine.methods.estimate import CostEstimate, Tally
from engine.methods.fgdip.params import FgdipParams

EXPECTED_ENTITIES = 2
EXPECTED_EXPANSIONS = 2  # the entity, then one more step before the finishing layer

# Prompt tokens per call, measured on the scripted fake's default run over the bundled corpus
# (characters / 4, the contract question); a generation's prompt grows with the trajectory, the error
# memory and the siblings, so deeper searches and web pages cost more per call.
PROMPT_TOKENS = {"extract": 300, "generate": 690, "evaluate_step": 540, "write_answer": 890, "evaluate_answer": 700}
# Completion tokens: an assumption sized to each schema for a real model (a thought and an action, a
# judgement and a verdict...); the fake's terse fillers write 13-96.
COMPLETION_TOKENS = {"extract": 25, "generate": 90, "evaluate_step": 90, "write_answer": 130, "evaluate_answer": 120}


def estimate(params: FgdipParams) -> CostEstimate:
    k = params.siblings
    entities = min(EXPECTED_ENTITIES, params.max_entities) if params.extractor else 0
    expansions = min(EXPECTED_EXPANSIONS, params.max_depth - 1) + (0 if params.extractor else 1)
    generated = expansions * k
    judged = (entities + generated) * params.step_evaluator

    tally = Tally()
    tally.add(
        "pick out the key entities",
        int(params.extractor),
        prompt=PROMPT_TOKENS["extract"],
        completion=COMPLETION_TOKENS["extract"],
    )
    tally.add(
        "generate the next steps", generated, prompt=PROMPT_TOKENS["generate"], completion=COMPLETION_TOKENS["generate"]
    )
    tally.add(
        "judge each step", judged, prompt=PROMPT_TOKENS["evaluate_step"], completion=COMPLETION_TOKENS["evaluate_step"]
    )
    tally.add("write the answer", 1, prompt=PROMPT_TOKENS["write_answer"], completion=COMPLETION_TOKENS["write_answer"])
    tally.add(
        "check the answer",
        int(params.answer_evaluator),
        prompt=PROMPT_TOKENS["evaluate_answer"],
        completion=COMPLETION_TOKENS["evaluate_answer"],
    )

    # Low: one entity whose first expansion answers at once.
    low = int(params.extractor) + k * (1 + params.step_evaluator) + params.step_evaluator + 1
    # High: every node the limits allow generated and judged; an answer per backtrack, plus the last.
    nodes = params.max_nodes + params.siblings  # a forced expansion may pass max_nodes by one layer
    answers = params.max_backtracks + 1
    high = (
        int(params.extractor)
        + params.max_entities * params.step_evaluator
        + nodes * (1 + params.step_evaluator)
        + answers * (1 + params.answer_evaluator)
    )
    how = (
        f"{entities or 'no'} entity branches, {expansions} expansions of {k} nodes on the way to an accepted "
        f"answer; up to {params.max_nodes} nodes and {params.max_backtracks} backtracks"
    )
    return tally.estimate(low=low, high=high, how=how)
