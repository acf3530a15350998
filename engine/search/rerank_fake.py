"""The offline fake LLM's answers to the LLM reranker's prompt (`rerank.judge`, `rerankers.py`),
registered with `engine.llm.fake` when `rerankers.py` is imported, so `--llm fake` grades documents:
"yes" or "no" by how many of the query's words the document holds; with logprobs asked,
P(yes) = 0.05 + 0.9 × that share (and P(no) the rest), so documents get graded scores.
"""

from __future__ import annotations

import re

from engine.llm.fake import request_text, script_prompts
from engine.llm.protocol import ChatRequest
from engine.search.rerank import tokens

_QUERY = re.compile(r"^Query: (?:<<<)?(.*?)(?:>>>)?$", re.MULTILINE)
_DOCUMENT = re.compile(r"<<<DOCUMENT\n(.*)\nDOCUMENT>>>", re.DOTALL)


def yes_share(request: ChatRequest) -> float:
    text = request_text(request)
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


script_prompts({"rerank.judge": rerank_answer}, {"rerank.judge": rerank_logprobs})
