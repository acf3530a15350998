"""The offline fake LLM's answers to MTQA's prompts (`--llm fake`, tests), registered with
`engine.llm.fake` when `prompts.py` is imported: the generic answer, written from a reading of the
prompt that suits MTQA's knowledge units.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from engine.llm.fake import (
    SOURCE_HEAD,
    PromptView,
    answer_from,
    rank_sentences,
    read_prompt,
    request_text,
    script_prompts,
)
from engine.llm.protocol import ChatRequest, Message

_MTQA_TRIPLE = re.compile(
    r"^\((?P<subject>.+?)\) -\[(?P<relation>.+?)\]-> \((?P<object>.+?)\)(?::\s*(?P<description>.*))?$"
)
_MTQA_ROW = re.compile(r"You are thought (\d+) of \d+")


def mtqa_messages(request: ChatRequest) -> Sequence[Message]:
    """A knowledge unit's triple lines are left out when the unit has source text (they restate
    it); a unit of triples only (the no-source-text ablation) reads as prose: each triple's
    description, else 'subject relation object.'"""

    def prose(line: str) -> str:
        triple = _MTQA_TRIPLE.match(line.strip())
        assert triple is not None, "prose() is only given triple lines"
        described = (triple.group("description") or "").strip()
        return described or f"{triple.group('subject')} {triple.group('relation')} {triple.group('object')}."

    def rewrite(text: str) -> str:
        out: list[str] = []
        block: list[str] = []

        def flush() -> None:
            has_text = any(not _MTQA_TRIPLE.match(line.strip()) for line in block[1:])
            out.extend(line for line in block[:1])
            out.extend(
                line if not _MTQA_TRIPLE.match(line.strip()) else prose(line)
                for line in block[1:]
                if not (has_text and _MTQA_TRIPLE.match(line.strip()))
            )
            block.clear()

        for line in text.splitlines():
            if SOURCE_HEAD.match(line) or not line.strip():
                flush()
                (block if line.strip() else out).append(line)
            elif block:
                block.append(line)
            else:
                out.append(line)
        flush()
        return "\n".join(out)

    return [Message(m.role, rewrite(m.content)) for m in request.messages]


def mtqa_view(request: ChatRequest, view: PromptView) -> PromptView:
    """Thought n of a column leaves out the n−1 knowledge units its best sentences would come from,
    so the thoughts of a column differ (their citations keep the prompt's numbers)."""
    if request.prompt != "mtqa.thought" or len(view.sources) < 2:
        return view
    row = _MTQA_ROW.search(request_text(request))
    skip = min(int(row.group(1)) - 1, len(view.sources) - 1) if row else 0
    best_first = list(dict.fromkeys(s.source for s in rank_sentences(view)))
    left_out = set(best_first[:skip])
    return PromptView(
        view.question,
        tuple(s for s in view.sources if s.number not in left_out),
        view.terms,
        view.schema_in_prompt,
        view.text,
    )


def mtqa_answer(request: ChatRequest) -> str:
    return answer_from(request, mtqa_view(request, read_prompt(mtqa_messages(request))))


script_prompts({"mtqa.*": mtqa_answer})
