"""What a run will cost before it starts: each method's formula (`Method.estimate(params)`) counts
the LLM calls its loop makes within the bounds its parameters set (nodes, layers, sections...) and
multiplies them by per-call token averages. The result is a `CostEstimate`: an expected number of
calls and tokens, a low/high range of calls and one line saying how it was counted.

Token averages are constants kept next to each method's formula, with where they came from. Turning
tokens into money (a model's price) and multiplying for a benchmark is `engine/evaluate/estimate.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.llm.structured import DEFAULT_MAX_REASKS

# Tokens per word of English prose (OpenAI's rule of thumb: a token is about 3/4 of a word), for
# outputs whose length a parameter sets in words.
TOKENS_PER_WORD = 4 / 3


# Prose whose length only a cap bounds (an answer's or a report's max tokens): the share of the cap
# a model is assumed to write. An assumption, not a measurement (no capable endpoint here).
CAP_FILL = 0.6


def capped_tokens(cap: int) -> int:
    return round(CAP_FILL * cap)


def words_to_tokens(words: int) -> int:
    return round(words * TOKENS_PER_WORD)


@dataclass(frozen=True)
class CallGroup:
    """One kind of call in an estimate: how many, and the tokens of each."""

    step: str  # what the calls do, in a reader's words ("plan each question")
    calls: float  # expected number (a fraction when a rate is assumed)
    prompt_tokens: int  # per call
    completion_tokens: int  # per call


@dataclass(frozen=True)
class CostEstimate:
    """Expected LLM calls and tokens of one run, with the range of calls the parameters allow."""

    calls: int
    low: int
    high: int
    prompt_tokens: int
    completion_tokens: int
    how: str  # one line: what was counted
    groups: tuple[CallGroup, ...] = field(default=())

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def times(self, n: int) -> CostEstimate:
        """The estimate for `n` runs like this one (a benchmark's items)."""
        return CostEstimate(
            self.calls * n,
            self.low * n,
            self.high * n,
            self.prompt_tokens * n,
            self.completion_tokens * n,
            self.how,
            tuple(CallGroup(g.step, g.calls * n, g.prompt_tokens, g.completion_tokens) for g in self.groups),
        )


def single_call(step: str, *, prompt: int, completion: int, structured: bool, how: str) -> CostEstimate:
    """A run of one call (the baselines). A structured answer may be re-asked with the validation
    error up to `DEFAULT_MAX_REASKS` times: the high end."""
    high = 1 + (DEFAULT_MAX_REASKS if structured else 0)
    return Tally().add(step, 1, prompt=prompt, completion=completion).estimate(low=1, high=high, how=how)


class Tally:
    """Collects a formula's call groups, then sums them into a `CostEstimate`."""

    def __init__(self) -> None:
        self._groups: list[CallGroup] = []

    def add(self, step: str, calls: float, *, prompt: int, completion: int) -> Tally:
        if calls > 0:
            self._groups.append(CallGroup(step, calls, prompt, completion))
        return self

    @property
    def calls(self) -> float:
        return sum(g.calls for g in self._groups)

    def estimate(self, *, low: float, high: float, how: str) -> CostEstimate:
        calls = round(self.calls)
        return CostEstimate(
            calls=calls,
            low=min(round(low), calls),
            high=max(round(high), calls),
            prompt_tokens=round(sum(g.calls * g.prompt_tokens for g in self._groups)),
            completion_tokens=round(sum(g.calls * g.completion_tokens for g in self._groups)),
            how=how,
            groups=tuple(self._groups),
        )
