"""The fake LLM's default answers for the research agent (`engine/methods/research`) and the LLM
reranker, so `--llm fake` runs the whole method offline and deterministically:

- `rerank.judge`: "yes" or "no" by how many of the query's words the document holds; with logprobs
  asked, P(yes) = 0.05 + 0.9 × that share (and P(no) the rest), so documents get graded scores.
- `research.agent`: one more search after the question's (its subject and "causes and effects"),
  or the point you asked it to dig into; then it answers. The path the cost estimate expects.
- `research.answer`: a long-form answer of cited sentences from the listed documents, the best one
  of each document first, in two paragraphs.
Summaries use the fake's generic cited paragraph (`engine/llm/fake.py`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from engine.llm.protocol import ChatRequest
from engine.search.rerank import tokens

ANSWER_SOURCES = 4  # the documents the fake's answer cites (each one claim-support call)
_QUERY = re.compile(r"^Query: (?:<<<)?(.*?)(?:>>>)?$", re.MULTILINE)
_DOCUMENT = re.compile(r"<<<DOCUMENT\n(.*)\nDOCUMENT>>>", re.DOTALL)
_SEARCHES = re.compile(r"Searches run so far \((\d+)\)")
_LEFT = re.compile(r"You may run (\d+) more searches")
_FOCUS = re.compile(r"dig into this point: <<<(.*?)>>>")


def _text(request: ChatRequest) -> str:
    return "\n".join(m.content for m in request.messages)


def yes_share(request: ChatRequest) -> float:
    text = _text(request)
    query = _QUERY.search(text)
    document = _DOCUMENT.search(text)
    wanted = set(tokens(query.group(1) if query else ""))
    if not wanted or document is None:
        return 0.05
    share = len(wanted & set(tokens(document.group(1)))) / len(wanted)
    return round(0.05 + 0.9 * share, 6)


def rerank_answer(request: ChatRequest) -> str:
    return "yes" if yes_share(request) >= 0.5 else "no"


def rerank_logprobs(request: ChatRequest) -> tuple[tuple[str, float], ...]:
    p = yes_share(request)
    pair = (("yes", p), ("no", round(1 - p, 6)))
    return pair if p >= 0.5 else pair[::-1]


def agent_answer(request: ChatRequest) -> str:
    from engine.llm.fake import read_prompt
    from engine.llm.fake_words import subject

    text = _text(request)
    question = read_prompt(request.messages).question
    topic = subject(question) or "the question"
    focus = _FOCUS.search(text)
    searches = _SEARCHES.search(text)
    left = _LEFT.search(text)
    done = int(searches.group(1)) if searches else 0
    if focus:
        query = " ".join(focus.group(1).split())
        return json.dumps({"reasoning": f"You asked for more on {query}; a search for it comes next.",
                           "need_more_search": True, "next_query": query})
    if done < 2 and (left is None or int(left.group(1)) > 0):
        query = f"{topic} causes and effects"
        return json.dumps({"reasoning": f"The first search gives an overview of {topic}; the causes and "
                           "effects need more evidence.", "need_more_search": True, "next_query": query})
    return json.dumps({"reasoning": "The findings cover the question's main dimensions; time to answer.",
                       "need_more_search": False, "next_query": ""})


def answer_text(request: ChatRequest) -> str:
    from engine.llm.fake import PromptWriter, _cite, _rank_sentences, mtqa_view, read_prompt
    from engine.llm.fake_words import subject

    view = read_prompt(request.messages)
    ranked = _rank_sentences(view)
    if not ranked:
        return PromptWriter(mtqa_view(request, view)).paragraph()
    best_per_source: dict[int, object] = {}
    for sentence in ranked:
        best_per_source.setdefault(sentence.source, sentence)
    picked = list(best_per_source.values())[:ANSWER_SOURCES]
    picked += [s for s in ranked if s not in picked][: max(0, 2 * ANSWER_SOURCES - len(picked))]
    topic = subject(view.question) or "the question"
    cited = [_cite(s) for s in picked]  # type: ignore[arg-type]
    middle = (len(cited) + 1) // 2
    return "\n\n".join(part for part in (
        f"This answer brings together what the searches found about {topic}. " + " ".join(cited[:middle]),
        " ".join(cited[middle:])) if part.strip())


DEFAULTS: dict[str, Callable[[ChatRequest], str]] = {
    "rerank.judge": rerank_answer,
    "research.agent": agent_answer,
    "research.answer": answer_text,
}
LOGPROB_DEFAULTS: dict[str, Callable[[ChatRequest], tuple[tuple[str, float], ...]]] = {
    "rerank.judge": rerank_logprobs,
}
