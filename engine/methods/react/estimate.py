"""ReAct's cost formula: one call per step, counted along the path a run is expected to take.

Expected path (an assumption: no capable endpoint was measured here; ReAct's HotpotQA trajectories
are mostly 3-5 steps): a search for each of the question's two subjects, then the answer at the third
step, and its write-up. The scripted fake (`--llm fake`) takes exactly this path. The high end: every step the limit
allows, each re-asked once.
"""

from __future__ import annotations

from engine.methods.estimate import CostEstimate, Tally
from engine.methods.react.params import ReactParams

EXPECTED_SEARCHES = 2
# Prompt tokens: the instructions and question, plus each earlier step's thought and action and its
# observation (top_k passages of at most observation_chars, characters / 4).
BASE_TOKENS, STEP_TOKENS, COMPLETION = 330, 60, 90


def estimate(params: ReactParams) -> CostEstimate:
    searches = min(EXPECTED_SEARCHES, params.max_steps - 1)
    observation = params.top_k * (min(params.observation_chars, 600) // 4 + 10)
    tally = Tally()
    for step in range(searches + 1):  # the steps before the answer see the ones before them
        what = "think and choose the next search" if step < searches else "think and give the answer"
        tally.add(what, 1, prompt=BASE_TOKENS + step * (STEP_TOKENS + observation), completion=COMPLETION)
    tally.add(
        "write up the answer with citations", 1, prompt=BASE_TOKENS + searches * observation, completion=2 * COMPLETION
    )
    high = 2 * (params.max_steps + 1)
    how = (
        f"{searches} searches, then the answer: {searches + 1} steps of one call each and the write-up; "
        f"up to {params.max_steps} steps"
    )
    return tally.estimate(low=3, high=high, how=how)
