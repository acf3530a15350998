"""OmniThink's structured outputs: the expansion decision, the reflection, the outline."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, create_model

from engine.llm.schema_tools import at_most, capped


class Subtopic(BaseModel):
    category: str = Field(description="A broad category of the subject worth exploring next.")
    keywords: list[str] = Field(min_length=1, max_length=4, description="Search-engine queries for this category.")


class ExpansionDecision(BaseModel):
    # What every `expansion_model` has (its fields' limits depend on k): the type the method reads.
    expand: bool
    subtopics: list[Subtopic]


def expansion_model(k: int, keywords: int) -> type[ExpansionDecision]:
    """Appendix J's decision: expand this leaf or not, and with which subtopics (at most k)."""
    sub = create_model(
        "Subtopic",
        __base__=Subtopic,
        keywords=(
            capped(str, keywords),
            Field(min_length=1, max_length=keywords, description="Search-engine queries for this category."),
        ),
    )
    return create_model(
        "Expansion",
        __base__=ExpansionDecision,
        expand=(bool, Field(description="true if this node needs further expansion, false if it is complete enough.")),
        subtopics=(
            capped(sub, k),
            Field(
                max_length=k,
                description=f"At most {k} new categories, none repeating earlier ones; empty when expand is false.",
            ),
        ),
    )


class Reflection(BaseModel):
    """Reflection: core insights distilled from new information, and whether it is enough."""

    insights: Annotated[list[str], at_most(8)] = Field(
        min_length=1, max_length=8, description="Each a distinct core insight, one sentence."
    )
    sufficient: bool = Field(
        default=False, description="true when the information gathered is sufficient to write a thorough article."
    )


class OutlineSection(BaseModel):
    title: str = Field(description="Section title (not the topic itself).")
    subsections: Annotated[list[str], at_most(5)] = Field(
        default=[], max_length=5, description="Subsection titles, if any."
    )


def outline_model(max_sections: int) -> type[BaseModel]:
    return create_model(
        "Outline",
        sections=(
            capped(OutlineSection, max_sections),
            Field(min_length=2, max_length=max_sections, description="The article's top-level sections, in order."),
        ),
    )
