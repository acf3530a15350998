"""MTQA's structured outputs: a thought (its paragraphs) and a column summary (the strategies
checked against the knowledge units, the refined answer, the short answer)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from engine.llm.schema_tools import at_most
from engine.reader_text import ReadableText

MAX_PARAGRAPHS = 6


class Thought(BaseModel):
    """One thought node: a strategy, one step per paragraph (the paragraphs are what α passes on)."""

    paragraphs: Annotated[list[ReadableText], at_most(MAX_PARAGRAPHS)] = Field(
        min_length=1,
        max_length=MAX_PARAGRAPHS,
        description="Your line of reasoning as 2-5 paragraphs, one step each, citing knowledge units as [n].",
    )


class StrategyCheck(BaseModel):
    thought: int = Field(ge=1, description="The number of the thought checked (as listed).")
    verdict: Literal["consistent", "corrected", "unsupported"] = Field(
        description="consistent: agrees with the knowledge units; corrected: contradicted them and is fixed "
        "below; unsupported: the units neither confirm nor refute it."
    )
    correction: str = Field(default="", description="For a corrected thought: what was wrong and the right fact.")


class ColumnSummary(BaseModel):
    """A summary node with correction (Step 5)."""

    checks: Annotated[list[StrategyCheck], at_most(8)] = Field(
        default_factory=list, max_length=8, description="One check per thought of the column."
    )
    paragraphs: Annotated[list[ReadableText], at_most(MAX_PARAGRAPHS)] = Field(
        min_length=1,
        max_length=MAX_PARAGRAPHS,
        description="The refined answer: the correct strategies kept, errors corrected, citing units as [n].",
    )
    short_answer: str = Field(
        max_length=200,
        description=("The answer in as few words as possible: a name, number, date, or yes/no; no explanation."),
    )


class MergedColumn(BaseModel):
    """A summary node without correction (the -RAG ablation): the thoughts merged as they are."""

    paragraphs: Annotated[list[ReadableText], at_most(MAX_PARAGRAPHS)] = Field(
        min_length=1,
        max_length=MAX_PARAGRAPHS,
        description="The thoughts merged into one answer, keeping their citations [n].",
    )
    short_answer: str = Field(
        max_length=200,
        description=("The answer in as few words as possible: a name, number, date, or yes/no; no explanation."),
    )
