"""The final report, written from the stored tree without the model: the short answer (kept in the
report's data as `short_answer` for EM/F1, `engine/evaluate/reader.py`), its cited explanation, the
path that found it and what the search went through."""

from __future__ import annotations

from typing import Any

from engine.contract import ANSWER_NODE
from engine.methods.fgdip.explore import Tree, final_answer
from engine.methods.fgdip.kinds import (
    QUESTION,
    SEARCH_KINDS,
    ErrorMemory,
    QuestionData,
    action_markdown,
    answer_of,
    explored_order,
    plural,
    step_of,
)
from engine.safe_text import inline_text
from storage.models import Node

# When the node generator's replies could not be read, the limits were not what ended the search.
GENERATOR_FAILED = (
    "_The search ended without reaching an answer: at {count} node{s} the model's next steps "
    "could not be read as steps (thought, action, argument), so the search could not go on "
    "there. Resume to try those nodes again, or use a more capable model._"
)
NO_ANSWER = (
    "_The search ended without reaching an answer (its limits were met first). Add an entity or "
    "explore a node (Explore next), or start a new run with a higher max_nodes, max_depth or "
    "max_backtracks._"
)


def _generate_error(node: Node) -> str:
    """Why the generator's reply for this node's children could not be read ("" for none)."""
    if node.kind == QUESTION:
        return QuestionData.model_validate(node.data).generate_error
    return step_of(node).generate_error if node.kind in SEARCH_KINDS else ""


def report(tree: Tree, memory: ErrorMemory | None, method: str) -> tuple[str, dict[str, Any]]:
    """(Markdown with run-wide citation markers, report data)."""
    answer, verified = final_answer(tree)
    searched = len(tree.search_nodes())
    data: dict[str, Any] = {
        "method": method,
        "nodes": searched,
        "backtracks": tree.backtracks(),
        "rejected_answers": sum(answer_of(a).verdict == "rejected" for a in tree.answers()),
    }
    if answer is None:
        unreadable = sum(1 for n in tree.nodes.values() if _generate_error(n))
        return (
            GENERATOR_FAILED.format(count=unreadable, s="" if unreadable == 1 else "s") if unreadable else NO_ANSWER
        ), {**data, "short_answer": "", "verified": False}
    info = answer_of(answer)
    short = info.short_answer
    parent = tree.nodes.get(answer.parent_id) if answer.parent_id is not None else None
    steps = (
        [action_markdown(step.action, step.argument) for step in map(step_of, tree.path(parent))]
        if parent is not None
        else []
    )
    # The short answer is the model's (a finish step's raw argument when it could not be written):
    # escaped, one line, so it cannot start a heading or list, nor make a link or a citation.
    parts = [f"**Answer: {inline_text(short)}**"]
    if info.explanation:
        parts.append(info.explanation)
    if not verified and info.verdict == "unjudged":
        parts.append(
            "_No candidate passed the Answer Evaluator, and its reply on this one could not be read: "
            "this answer is not verified._"
        )
    elif not verified:
        parts.append("_No candidate passed the Answer Evaluator; this is the last one it rejected._")
    elif info.verdict == "unchecked":
        parts.append("_This answer was not checked by the Answer Evaluator._")
    if steps:
        parts.append("Path: " + " → ".join(steps))
    # "Expanded" as the map numbers them (explored 1st, 2nd..., the question first): the steps
    # generated are more.
    expanded = sum(1 for n in tree.nodes.values() if explored_order(n) is not None)
    parts.append(
        f"_The search generated {plural(searched, 'step')} and expanded {plural(expanded, 'node')}, "
        f"the question first (the map numbers them in that order); it backtracked "
        f"{plural(data['backtracks'], 'time')}, and its error memory holds "
        f"{(memory or ErrorMemory()).lessons()}._"
    )
    # Verified only when the Answer Evaluator passed it (with the evaluator off, nothing checked it).
    return "\n\n".join(parts), {
        **data,
        "short_answer": short,
        "verified": verified and info.verdict == "accepted",
        ANSWER_NODE: answer.id,
    }
