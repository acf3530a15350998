"""The knowledge layer's structured LLM outputs (MTQA Step 1's extraction, Step 2's keywords; the
fields are LightRAG's, which the paper builds on). Lists are capped, not refused, when a model
gives more than asked (`at_most`); everything in them is untrusted text, checked again when merged."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from engine.llm.schema_tools import at_most

MAX_ENTITIES = 40
MAX_RELATIONS = 40
MAX_RELATION_KEYWORDS = 6
MAX_QUESTION_KEYWORDS = 8


class ExtractedEntity(BaseModel):
    name: str = Field(description="The entity's name as written in the text, capitalised.")
    type: str = Field(default="", description="One of the entity types listed in the instructions.")
    description: str = Field(
        default="",
        description="What the text says about the entity: its attributes and activities, in one or two sentences.",
    )


class ExtractedRelation(BaseModel):
    source: str = Field(description="The name of one entity, exactly as in the entities list.")
    target: str = Field(description="The name of the other entity, exactly as in the entities list.")
    description: str = Field(default="", description="Why the two entities are related, according to the text.")
    keywords: Annotated[list[str], at_most(MAX_RELATION_KEYWORDS)] = Field(
        default_factory=list,
        description="One to three short, general words or phrases naming the kind of "
        "relation (themes or concepts, not details).",
    )


class Extraction(BaseModel):
    """The entities of one chunk and the relations between them."""

    entities: Annotated[list[ExtractedEntity], at_most(MAX_ENTITIES)] = Field(default_factory=list)
    relations: Annotated[list[ExtractedRelation], at_most(MAX_RELATIONS)] = Field(default_factory=list)


class QuestionKeywords(BaseModel):
    """Dual-level keywords of a question (the paper's Figure 7: low-level and high-level)."""

    detailed: Annotated[list[str], at_most(MAX_QUESTION_KEYWORDS)] = Field(
        default_factory=list,
        description="Specific keywords: names of people, places, works, organisations, "
        "dates and other concrete details the question mentions.",
    )
    general: Annotated[list[str], at_most(MAX_QUESTION_KEYWORDS)] = Field(
        default_factory=list,
        description="General keywords: the concepts, themes or kinds of relation the question is about.",
    )
