"""FGDIP's structured outputs: the extracted entities, a generated node (thought and action), the
Step Evaluator's verdict, a written answer and the Answer Evaluator's verdict. Every model's text
comes from a model and is untrusted: it is stored and shown, never executed."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, create_model

from engine.llm.schema_tools import capped
from engine.reader_text import ReadableText

Verdict = Literal["sure", "maybe", "impossible"]
Action = Literal["search", "lookup", "finish"]


def entities_model(most: int) -> type[BaseModel]:
    """Appendix E.1: the specific, unique entities of the question (at most `most`)."""
    return create_model(
        "KeyEntities",
        entities=(
            capped(str, most),
            Field(
                min_length=1,
                max_length=most,
                description="Each a specific, uniquely identifiable name from the question (a person, place, work, "
                "event, organisation), most useful first; no generic categories.",
            ),
        ),
    )


class GeneratedStep(BaseModel):
    """One node of the search tree: a thought and the action it leads to."""

    thought: str = Field(description="Your reasoning: what is known so far and what to do next.")
    action: Action = Field(
        description="search: look an entity or phrase up; lookup: find a keyword in the last "
        "page retrieved; finish: give the answer."
    )
    argument: str = Field(
        min_length=1,
        max_length=300,
        description="The search query, the keyword to look up, or the answer (a few words).",
    )


class FinishStep(GeneratedStep):
    """The last layer the limits allow: the node must answer."""

    action: Literal["finish"] = Field(description="finish: give the answer.")


class StepJudgement(BaseModel):
    """Appendix E.2: judgement first, then the verdict on the whole trajectory."""

    judgement: str = Field(
        description="Your analysis of whether continuing this trajectory can reach the right "
        "answer (not whether the next step answers at once)."
    )
    verdict: Verdict = Field(description="sure, maybe or impossible.")


class WrittenAnswer(BaseModel):
    short_answer: str = Field(
        min_length=1,
        max_length=200,
        description="The answer alone, as short as possible: a name, a number, a date or a short phrase.",
    )
    explanation: ReadableText = Field(
        description="Two to four sentences showing how the sources support the answer, citing them as [n]."
    )


class WrittenYesNoAnswer(WrittenAnswer):
    short_answer: Literal["yes", "no"] = Field(description="yes or no.")


class AnswerJudgement(BaseModel):
    """Appendix E.3 with section 3.3.2's reasons: does it solve the question, is it on topic."""

    thought: str = Field(description="What kind of answer the question asks for and whether this one is it.")
    solves: bool = Field(description="true if the answer actually answers the question (not 'unknown' or a hedge).")
    on_topic: bool = Field(
        description="true if the answer is the kind of thing asked for (a person when a "
        "person is asked, not their team)."
    )
    error_analysis: str = Field(
        default="",
        description="When the answer is wrong or off topic: what went wrong on "
        "this path and what to do differently. Empty when it is right.",
    )
