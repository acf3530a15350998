"""The offline fake LLM's answers to the research agent's prompts (`--llm fake`, tests), registered
with `engine.llm.fake` when `prompts.py` is imported, so the fake runs the whole method:

- `research.agent`: one more search after the question's (its subject and "causes and effects"),
  or the point you asked it to dig into; then it answers. The path the cost estimate expects.
- `research.answer`: a long-form answer of cited sentences from the listed documents, the best one
  of each document first, in two paragraphs.
Summaries use the fake's generic cited paragraph (`engine/llm/fake.py`).
"""

from __future__ import annotations

import json
import re

from engine.llm.fake import (
    PromptWriter,
    Sentence,
    cite,
    rank_sentences,
    read_prompt,
    request_text,
    script_prompts,
)
from engine.llm.fake_words import subject
from engine.llm.protocol import ChatRequest

ANSWER_SOURCES = 4  # the documents the fake's answer cites (each one claim-support call)
_SEARCHES = re.compile(r"Searches run so far \((\d+)\)")
_LEFT = re.compile(r"You may run (\d+) more searches")
_FOCUS = re.compile(r"dig into this point: <<<(.*?)>>>")


def agent_answer(request: ChatRequest) -> str:
    text = request_text(request)
    question = read_prompt(request.messages).question
    topic = subject(question) or "the question"
    focus = _FOCUS.search(text)
    searches = _SEARCHES.search(text)
    left = _LEFT.search(text)
    done = int(searches.group(1)) if searches else 0
    if focus:
        query = " ".join(focus.group(1).split())
        return json.dumps(
            {
                "reasoning": f"You asked for more on {query}; a search for it comes next.",
                "need_more_search": True,
                "next_query": query,
            }
        )
    if done < 2 and (left is None or int(left.group(1)) > 0):
        query = f"{topic} causes and effects"
        return json.dumps(
            {
                "reasoning": f"The first search gives an overview of {topic}; the causes and "
                "effects need more evidence.",
                "need_more_search": True,
                "next_query": query,
            }
        )
    return json.dumps(
        {
            "reasoning": "The findings cover the question's main dimensions; time to answer.",
            "need_more_search": False,
            "next_query": "",
        }
    )


def answer_text(request: ChatRequest) -> str:
    view = read_prompt(request.messages)
    ranked = rank_sentences(view)
    if not ranked:
        return PromptWriter(view).paragraph()
    best_per_source: dict[int, Sentence] = {}
    for sentence in ranked:
        best_per_source.setdefault(sentence.source, sentence)
    picked = list(best_per_source.values())[:ANSWER_SOURCES]
    picked += [s for s in ranked if s not in picked][: max(0, 2 * ANSWER_SOURCES - len(picked))]
    topic = subject(view.question) or "the question"
    cited = [cite(s) for s in picked]
    middle = (len(cited) + 1) // 2
    return "\n\n".join(
        part
        for part in (
            f"This answer brings together what the searches found about {topic}. " + " ".join(cited[:middle]),
            " ".join(cited[middle:]),
        )
        if part.strip()
    )


script_prompts({"research.agent": agent_answer, "research.answer": answer_text})
