"""The offline fake LLM's answers to FGDIP's prompts (`--llm fake`, tests), registered with
`engine.llm.fake` when `prompts.py` is imported.

The schema filler cannot name a question's entities nor tell when a branch has found enough. These
answers make the fake walk the path FGDIP's cost estimate expects: the question's proper names as
entities, one more search (a different one per sibling), then finish; the evaluators' defaults (the
first verdict, "sure"; true for the answer checks) accept it.
"""

from __future__ import annotations

import json
import re

from engine.llm.fake import (
    PromptWriter,
    key_terms,
    read_prompt,
    request_text,
    script_prompts,
)
from engine.llm.protocol import ChatRequest

_PROPER_NAME = re.compile(r"[A-Z][\w'’-]*(?:\s+(?:(?:of|for|the|in|de)\s+)*[A-Z][\w'’-]*)*")
_OPENERS = frozenset(
    [
        "Which",
        "Who",
        "Whom",
        "Whose",
        "What",
        "When",
        "Where",
        "How",
        "Why",
        "Is",
        "Are",
        "Was",
        "Were",
        "Did",
        "Does",
        "Do",
        "Can",
        "Could",
        "Has",
        "Have",
        "In",
        "On",
        "The",
        "A",
        "An",
    ]
)
_FGDIP_STEPS = re.compile(r"This branch so far \((\d+) steps\)")
_FGDIP_REACHED = re.compile(r"Answer the path reached: <<<(.*?)>>>")


def proper_names(text: str) -> list[str]:
    """Capitalised names of a question, in order ("Arthur's Magazine", "First for Women")."""
    names: list[str] = []
    for match in _PROPER_NAME.finditer(text):
        words = match.group(0).split()
        while words and words[0] in _OPENERS:
            words = words[1:]
        name = " ".join(words)
        if name and name not in names:
            names.append(name)
    return names


def fgdip_answer(request: ChatRequest) -> str:
    view = read_prompt(request.messages)
    question = view.question
    names = proper_names(question) or list(key_terms(question)[:1]) or ["the question"]
    if request.prompt == "fgdip.extract":
        return json.dumps({"entities": names}, ensure_ascii=False)
    text = request_text(request)
    if request.prompt == "fgdip.write_answer":
        reached = _FGDIP_REACHED.search(text)
        answer = reached.group(1).strip() if reached and reached.group(1).strip() else names[0]
        if "yes/no question" in text:
            answer = "no" if answer.lower() == "no" else "yes"
        return json.dumps(
            {"short_answer": answer[:200], "explanation": PromptWriter(view).paragraph()}, ensure_ascii=False
        )
    steps = _FGDIP_STEPS.search(text)
    if "you must finish" in text or (steps is not None and int(steps.group(1)) >= 2):
        answer = "yes" if "yes/no question" in text else names[0]
        return json.dumps(
            {"thought": f"The observations point to {answer}.", "action": "finish", "argument": answer},
            ensure_ascii=False,
        )
    terms = key_terms(question) or (names[0],)
    siblings = text.count("\nAction: ")  # the nodes already generated at this layer
    query = f"{names[0]} {terms[siblings % len(terms)]}"
    return json.dumps(
        {"thought": f"I should search {query} next.", "action": "search", "argument": query}, ensure_ascii=False
    )


script_prompts({name: fgdip_answer for name in ("fgdip.extract", "fgdip.generate", "fgdip.write_answer")})
