"""What the sources at hand cover, said in a report by us, not by the model.

When the model answers only from sources (`RunContext.sources_only`, the built-in model) a node
none of whose searches found a passage about its question is answered `relevance.not_covered`. The
report then says which questions the sources did not cover, and when none was covered, the report
is this text alone: what was searched, the nearest passages found and left out as unrelated, and
what to do. A small model handed only "not covered" answers still writes a report of its own
inventions; this text cannot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from engine.safe_text import inline_text
from engine.search.relevance import SEARCH_OFF

if TYPE_CHECKING:
    from engine.methods.base import P, RunContext

NEAREST_SHOWN = 5


def uncovered_report(question: str, where: str, searched: Sequence[str], nearest: Sequence[str]) -> str:
    """The whole report of a run whose sources covered none of its questions."""
    lines = ["## The sources at hand do not cover this question", ""]
    if where == "no search":
        lines += [SEARCH_OFF, ""]
    else:
        lines += [
            f"Nothing found in {inline_text(where)} is about “{inline_text(question)}”, and the built-in "
            "model answers only from sources, so this run does not guess an answer.",
            "",
        ]
    if searched:
        lines += ["What was searched:", "", *(f"- {inline_text(query)}" for query in dict.fromkeys(searched)), ""]
    if nearest:
        titles = list(dict.fromkeys(nearest))[:NEAREST_SHOWN]
        lines += [
            "The nearest passages found, left out as unrelated: "
            + "; ".join(inline_text(title) for title in titles)
            + ".",
            "",
        ]
    lines += [
        "To research it: turn on web search or upload documents on the Settings page, or connect a model "
        "there for knowledge beyond the sources, and run it again."
    ]
    return "\n".join(lines)


def save_uncovered_report(
    ctx: RunContext[P], searched: Sequence[str], nearest: Sequence[str], data: dict[str, Any]
) -> None:
    """Save `uncovered_report` as the run's report: our text (`own`), no model text, its `data`
    marked `not_covered`."""
    ctx.graph.save_report(
        "",
        own=uncovered_report(ctx.question, ctx.searcher.description, searched, nearest),
        data={**data, "not_covered": True},
    )


def uncovered_section(queries: Sequence[str]) -> str:
    """The report's section naming the questions the sources did not cover ("" when none)."""
    if not queries:
        return ""
    return (
        "\n\n## What the sources do not cover\n\n_Nothing found was about these questions; the built-in "
        "model answers only from sources, so they are left unanswered:_\n\n"
        + "\n".join(f"- {inline_text(query)}" for query in dict.fromkeys(queries))
        + "\n"
    )
