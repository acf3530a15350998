"""The Multivariate Information Extractor (section 3.1): the question's specific, unique entities,
each the start of one branch."""

from __future__ import annotations

from typing import Protocol, cast

from engine.llm.protocol import StructuredOutputError
from engine.methods.base import RunContext
from engine.methods.fgdip import prompts
from engine.methods.fgdip.explore import distinct
from engine.methods.fgdip.params import FgdipParams
from engine.methods.fgdip.schemas import entities_model
from storage.models import Node


class _KeyEntities(Protocol):
    entities: list[str]


def extract_entities(ctx: RunContext[FgdipParams], root: Node) -> tuple[list[str], str]:
    """(entities, error). When the model gives none usable, the question itself is the one entity
    searched, so the search still has a branch (the error says why)."""
    params = ctx.params
    try:
        # `entities_model` builds its model at run time (the limit is a parameter), with this field.
        found = cast(
            _KeyEntities,
            ctx.llm.ask(
                prompts.EXTRACT.render(question=ctx.question, most=params.max_entities),
                entities_model(params.max_entities),
                purpose="extract",
                node_id=root.id,
                max_tokens=200,
            ),
        )
        entities, error = distinct(found.entities, params.max_entities), ""
    except StructuredOutputError as exc:
        entities, error = [], f"the extractor's answer could not be read: {exc}"
    if not entities:
        return [ctx.question[:200]], error or "the extractor named no entity; the question is searched as it is"
    return entities, error
