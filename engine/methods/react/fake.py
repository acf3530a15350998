"""The offline fake LLM's answers to ReAct's prompt (`--llm fake`, tests), registered with
`engine.llm.fake` when `prompts.py` is imported. The schema filler would search the same words until
the step limit; these answers walk the path the cost estimate expects: a search for each of the
question's first two names (its proper names, else its key terms), then finish with the first
name (or "yes" to a yes/no question) as the answer; the write-up quotes the passages, cited.
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
from engine.names import proper_names

_ACTIONS = re.compile(r"^Action \d+: search ", re.MULTILINE)
_REACHED = re.compile(r"The trajectory's answer: <<<(.*?)>>>")


def step_answer(request: ChatRequest) -> str:
    text = request_text(request)
    view = read_prompt(request.messages)
    question = view.question
    names = proper_names(question) or list(key_terms(question)[:2]) or ["the question"]
    searched = len(_ACTIONS.findall(text))
    if searched < 2 and "you must finish now" not in text:
        query = names[searched] if searched < len(names) else f"{names[0]} {' '.join(key_terms(question)[:2])}"
        return json.dumps(
            {"thought": f"I need to know more about {query}.", "action": "search", "argument": query},
            ensure_ascii=False,
        )
    answer = "yes" if "answered yes or no" in text else names[0]
    return json.dumps(
        {"thought": f"The observations point to {answer}.", "action": "finish", "argument": answer[:300]},
        ensure_ascii=False,
    )


def written_answer(request: ChatRequest) -> str:
    reached = _REACHED.search(request_text(request))
    view = read_prompt(request.messages)
    return json.dumps(
        {
            "short_answer": (reached.group(1).strip() if reached else "") or "unknown",
            "explanation": PromptWriter(view).paragraph(600),
        },
        ensure_ascii=False,
    )


script_prompts({"react.step": step_answer, "react.answer": written_answer})
