"""ReAct's structured output: one step, a thought and the action it leads to."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from engine.reader_text import ReadableText


class ReactStep(BaseModel):
    thought: str = Field(description="Your reasoning: what the observations so far show and what to do next.")
    action: Literal["search", "finish"] = Field(
        description="search: look something up (the argument is the query); finish: give the answer "
        "(the argument is the answer)."
    )
    argument: str = Field(min_length=1, max_length=300, description="The search query, or the short answer.")


class FinishStep(ReactStep):
    """The last step the limit allows: only finish."""

    action: Literal["finish"] = Field(description="finish: give the answer (the argument is the answer).")


class WrittenAnswer(BaseModel):
    short_answer: str = Field(min_length=1, max_length=200, description="The answer itself, in a few words.")
    explanation: ReadableText = Field(description="Two to four sentences citing the passages as [n].")
