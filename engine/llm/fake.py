"""`FakeLLM`: the scripted, offline, deterministic LLM shipped with the package.

Used by tests (script exact answers with `when`) and by `thoughtmap ... --llm fake` (no rule
matches, so every answer comes from `default_answer`). Default answers are a pure function of the
request, so the same request gives the same answer in every process:

- structured requests get a schema-valid instance (see `engine.llm.schema_fill`) whose strings are
  derived from the prompt;
- prose is extracted from the sources listed in the prompt, with `[n]` citation markers.

Prompt conventions the fake understands (methods should write prompts this way):

- a source block is a line ``[n] Title`` followed by its text lines, ending at a blank line (or at
  the next ``[m] ...`` line);
- the question is the rest of a line starting with ``Question:`` (or the lines after it, up to a
  blank line, when that rest is empty); without one, the last user message minus source blocks.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from engine.llm.fake_words import aspect, follow_up, listed_options, section_title, subject
from engine.llm.protocol import ChatRequest, ChatResponse, Message, ResponseFormat, TokenLogprob, Usage
from engine.llm.schema_fill import StringSlot, fill_schema
from engine.llm.structured import FORMAT_OPENING, REASK_OPENING, TOO_LONG_OPENING, extract_json

FAKE_MODEL = "fake"
FAKE_DESCRIPTION = "scripted fake LLM (offline, deterministic)"


@dataclass(frozen=True)
class FakeReply:
    """A scripted answer with the log probabilities of its first token's alternatives (`top`:
    token -> probability), served when a request asks for logprobs (`ChatRequest.top_logprobs`)."""

    text: str
    top: tuple[tuple[str, float], ...] = ()
    cut_off: bool = False  # served as stopped by the output-token limit (finish_reason "length")


Responder = str | dict[str, Any] | BaseModel | FakeReply | BaseException | Callable[[ChatRequest], Any]


# ====================================================================== scripted fake


Names = str | Collection[str]  # prompt names: exact ("deot.controller") or "prefix.*"


@dataclass(frozen=True)
class PromptMatch:
    """Which requests a rule is for (or which calls to list): by prompt name, by text, or both.

    `names` are prompt names (`ChatRequest.prompt`): exact, or ending in ".*" for every name
    under a prefix ("deot.*"); a request matches when its name matches any of them (no names: any
    request). `pattern` is a substring or compiled regex searched in the text of all messages (None:
    any text). Both must match. Build one with `named(...)`; `where(pattern)` narrows it to a text.
    """

    names: tuple[str, ...] = ()
    pattern: str | re.Pattern[str] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.names, str):
            object.__setattr__(self, "names", (self.names,))
        for name in self.names:
            if not isinstance(name, str) or not name or name == ".*":
                raise ValueError(f"a prompt name must be a non-empty string, not {name!r}")

    def matches_name(self, name: str) -> bool:
        if not self.names:
            return True
        return any(name.startswith(spec[:-1]) if spec.endswith(".*") else name == spec for spec in self.names)

    def search(self, text: str) -> bool:
        """Whether the text pattern is in `text` (True without a pattern)."""
        if self.pattern is None:
            return True
        if isinstance(self.pattern, re.Pattern):
            return self.pattern.search(text) is not None
        return self.pattern in text

    def matches(self, request: ChatRequest, text: str | None = None) -> bool:
        """`text`, when given, is `request_text(request)` (saves recomputing it per rule)."""
        if not self.matches_name(request.prompt):
            return False
        return self.pattern is None or self.search(request_text(request) if text is None else text)

    def where(self, pattern: str | re.Pattern[str]) -> PromptMatch:
        """The same prompt names, for requests whose text also contains `pattern`."""
        return PromptMatch(self.names, pattern)


def named(*names: str, pattern: str | re.Pattern[str] | None = None) -> PromptMatch:
    """A `PromptMatch` for the requests rendered from these prompts (exact names or "prefix.*")."""
    if not names:
        raise ValueError("give at least one prompt name")
    return PromptMatch(tuple(names), pattern)


def _as_match(pattern: str | re.Pattern[str] | PromptMatch | None, prompt: Names | PromptMatch | None) -> PromptMatch:
    if isinstance(prompt, PromptMatch):
        if pattern is not None:
            raise ValueError("give either a PromptMatch or a pattern with prompt names, not both")
        return prompt
    names: tuple[str, ...] = ()
    if prompt is not None:
        names = (prompt,) if isinstance(prompt, str) else tuple(prompt)
        if not names:
            raise ValueError("prompt names were given but the collection is empty")
    if isinstance(pattern, PromptMatch):
        if names:
            raise ValueError("give the prompt names either in the PromptMatch or as prompt=, not both")
        return pattern
    if pattern is not None and not isinstance(pattern, (str, re.Pattern)):
        raise TypeError(f"a rule pattern is a str, a compiled regex or a PromptMatch, not {type(pattern).__name__}")
    return PromptMatch(names, pattern)


@dataclass
class _Rule:
    match: PromptMatch
    respond: Responder
    times: int | None
    used: int = 0

    def matches(self, request: ChatRequest, text: str) -> bool:
        if self.times is not None and self.used >= self.times:
            return False
        return self.match.matches(request, text)


_UNSET: Any = object()


class FakeLLM:
    """An `LLM` that answers from scripted rules, else deterministically from the prompt.

    `when(pattern, respond, *, prompt=None, times=None)` adds a rule. It selects requests by
    `pattern` (a substring or compiled regex matched against the text of all messages), by
    `prompt` (the name of the prompt they were rendered from, `ChatRequest.prompt`: an exact name,
    "prefix.*", or a collection of these), or both (both must match); `pattern` may also be a
    `PromptMatch` (see `named`). Prefer prompt names: they do not change when a prompt is reworded.
    `respond` is a str, a dict or pydantic model (sent as JSON), an exception instance (raised), or
    a callable `(ChatRequest) -> str | dict | model`. Rules are tried in the order added; a rule
    with `times` is used at most that many times. A rule also answers the re-asks of a structured
    answer (same prompt name, `ChatRequest.attempt` > 1).
    Thread-safe; `calls` lists the requests received, `calls_for(name)` those of one prompt.
    """

    def __init__(self, *, latency_s: float = 0.0, model: str = FAKE_MODEL) -> None:
        self._latency_s = latency_s
        self._model = model
        self._lock = threading.Lock()
        self._rules: list[_Rule] = []
        self._calls: list[ChatRequest] = []

    @property
    def description(self) -> str:
        return FAKE_DESCRIPTION

    def model_for(self, purpose: str) -> str:
        return self._model

    def when(
        self,
        pattern: str | re.Pattern[str] | PromptMatch | None = None,
        respond: Responder = _UNSET,
        *,
        prompt: Names | PromptMatch | None = None,
        times: int | None = None,
    ) -> FakeLLM:
        if respond is _UNSET:
            raise TypeError("when() needs what to respond (respond=...)")
        if times is not None and times < 1:
            raise ValueError("times must be at least 1 (or None for unlimited)")
        match = _as_match(pattern, prompt)
        if not match.names and match.pattern is None:
            raise ValueError("a rule needs a pattern, a prompt name, or both")
        with self._lock:
            self._rules.append(_Rule(match, respond, times))
        return self

    def calls_for(self, prompt: Names | PromptMatch, first_try_only: bool = False) -> list[ChatRequest]:
        """The requests rendered from `prompt` (a name, "prefix.*", a collection of these, or a
        `PromptMatch`), in arrival order; with `first_try_only`, without the structured re-asks."""
        match = _as_match(None, prompt)
        return [r for r in self.calls if match.matches(r) and (not first_try_only or r.attempt == 1)]

    @property
    def calls(self) -> list[ChatRequest]:
        with self._lock:
            return list(self._calls)

    @property
    def call_count(self) -> int:
        with self._lock:
            return len(self._calls)

    def chat(self, request: ChatRequest) -> ChatResponse:
        started = time.monotonic()
        if self._latency_s > 0:
            time.sleep(self._latency_s)
        text_of_request = request_text(request)
        with self._lock:
            self._calls.append(request)
            rule = next((r for r in self._rules if r.matches(request, text_of_request)), None)
            if rule is not None:
                rule.used += 1
        # Rendering runs outside the lock: a scripted callable may be slow or call back into us.
        reply = _render(rule.respond, request) if rule is not None else default_answer(request)
        text = reply.text if isinstance(reply, FakeReply) else reply
        prompt_chars = sum(len(m.content) for m in request.messages)
        return ChatResponse(
            text=text,
            model=self._model,
            usage=Usage(
                prompt_tokens=max(1, prompt_chars // 4),
                completion_tokens=max(1, len(text) // 4),
            ),
            latency_s=time.monotonic() - started,
            attempts=1,
            response_format=request.response_format,
            logprobs=fake_logprobs(request, reply) if request.top_logprobs > 0 else None,
            cut_off=isinstance(reply, FakeReply) and reply.cut_off,
        )


def fake_logprobs(request: ChatRequest, reply: str | FakeReply) -> tuple[TokenLogprob, ...]:
    """The first token's log probability and alternatives: a scripted `FakeReply`'s, else the
    prompt's own offline ones (`LOGPROB_DEFAULTS`), else the answer's first word, certain."""
    if isinstance(reply, FakeReply) and reply.top:
        top = reply.top
    else:
        text = reply.text if isinstance(reply, FakeReply) else reply
        own = _scripted(LOGPROB_DEFAULTS, request.prompt)
        top = own(request) if own is not None else (((text.split() or [""])[0], 1.0),)
    alternatives = tuple((token, math.log(p) if p > 0 else -100.0) for token, p in top[: request.top_logprobs])
    first = alternatives[0] if alternatives else ("", 0.0)
    return (TokenLogprob(first[0], first[1], alternatives),)


def request_text(request: ChatRequest) -> str:
    """The text rules are matched against: all messages, one per line."""
    return "\n".join(m.content for m in request.messages)


# ====================================================================== a prompt owner's own answers

# A method or layer whose path needs more than schema-valid text (FGDIP's actions, the research
# agent's searches, the knowledge layer's extraction...) scripts its prompts' offline answers next to
# them, in its own `fake.py`, and registers them here when its prompts module is imported: before it
# can send one. The fake itself names no method.
Answer = Callable[[ChatRequest], str]
TopTokens = Callable[[ChatRequest], tuple[tuple[str, float], ...]]
PROMPT_DEFAULTS: dict[str, Answer] = {}  # a prompt name, or "prefix.*" for every prompt of a prefix
LOGPROB_DEFAULTS: dict[str, TopTokens] = {}


def script_prompts(answers: dict[str, Answer], logprobs: dict[str, TopTokens] | None = None) -> None:
    """Register prompts' own offline answers (and first-token probabilities) by prompt name."""
    PROMPT_DEFAULTS.update(answers)
    LOGPROB_DEFAULTS.update(logprobs or {})


_Scripted = TypeVar("_Scripted")


def _scripted(table: dict[str, _Scripted], prompt: str) -> _Scripted | None:
    return table.get(prompt) or table.get(prompt.partition(".")[0] + ".*")


def _render(respond: Responder, request: ChatRequest) -> str | FakeReply:
    if isinstance(respond, BaseException):
        raise respond
    if callable(respond) and not isinstance(respond, (BaseModel, type)):
        respond = respond(request)
        if isinstance(respond, BaseException):
            raise respond
    if isinstance(respond, FakeReply):
        return respond
    if isinstance(respond, BaseModel):
        return respond.model_dump_json()
    if isinstance(respond, (dict, list)):
        return json.dumps(respond, ensure_ascii=False)
    if isinstance(respond, str):
        return respond
    raise TypeError(f"a FakeLLM rule produced {type(respond).__name__}; expected str, dict or model")


# ====================================================================== default answers


def default_answer(request: ChatRequest) -> str:
    """The deterministic answer to a request no rule matched: its prompt's own, else generic."""
    own = _scripted(PROMPT_DEFAULTS, request.prompt)
    if own is not None:
        return own(request)
    return answer_from(request, read_prompt(request.messages))


def answer_from(request: ChatRequest, view: PromptView) -> str:
    """A schema-valid instance (or a cited paragraph) written from what `view` reads of the prompt."""
    schema = request.json_schema if request.response_format is not ResponseFormat.TEXT else None
    # Prompted mode carries the schema only in the prompt; a real model would still answer JSON.
    schema = schema or view.schema_in_prompt
    writer = PromptWriter(view)
    if schema is not None:
        return json.dumps(fill_schema(schema, writer), ensure_ascii=False)
    if request.response_format in (ResponseFormat.JSON_SCHEMA, ResponseFormat.JSON_OBJECT):
        return json.dumps({"answer": writer.paragraph()}, ensure_ascii=False)  # JSON mode, no schema
    return writer.paragraph()


@dataclass(frozen=True)
class Source:
    number: int
    title: str
    text: str


@dataclass(frozen=True)
class PromptView:
    """What the fake reads out of a prompt."""

    question: str
    sources: tuple[Source, ...]
    terms: tuple[str, ...]  # key terms of the question, in order, original spelling
    schema_in_prompt: dict[str, Any] | None
    text: str = ""  # the whole prompt, so a follow-up it already holds is not written again


SOURCE_HEAD = re.compile(r"^\s*\[(\d+)\]\s+(\S.*?)\s*$")
_QUESTION_HEAD = re.compile(r"^\s*Question\s*:\s*(.*?)\s*$", re.IGNORECASE)
_SCHEMA_MARK = re.compile(r"JSON schema:\s*", re.IGNORECASE)
# Messages added by engine.llm.structured (format instruction, re-ask) are not the question.
_INSTRUCTION = re.compile(r"^\s*(" + "|".join(map(re.escape, (FORMAT_OPENING, REASK_OPENING, TOO_LONG_OPENING))) + ")")
_WORD = re.compile(r"[^\W_][\w'-]*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")

_STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing done down during each few for from
    further had has have having he her here hers him his how however i if in into is it its itself
    just like make many may me might more most much must my no nor not now of off on once only or
    other our ours out over own please same she should so some such than that the their theirs
    them then there these they this those through to too under until up us very via was we were
    what when where which while who whom whose why will with would you your yours explain describe
    tell give list question answer using use used based within without versus vs etc does did
    """.split()
)


def read_prompt(messages: Sequence[Message]) -> PromptView:
    prompt_messages = [m for m in messages if m.role in ("system", "user")]
    sources = _sources(prompt_messages)
    question = _question(prompt_messages)
    return PromptView(
        question=question,
        sources=sources,
        terms=key_terms(question),
        schema_in_prompt=_schema_in_prompt(prompt_messages),
        text="\n".join(m.content for m in prompt_messages),
    )


def _sources(messages: Iterable[Message]) -> tuple[Source, ...]:
    """Source blocks of all messages; the first block with a given number wins."""
    found: dict[int, Source] = {}
    for message in messages:
        for source in _source_blocks(message.content):
            found.setdefault(source.number, source)
    return tuple(found[n] for n in sorted(found))


def _source_blocks(text: str) -> Iterable[Source]:
    head: re.Match[str] | None = None
    body: list[str] = []
    for line in text.splitlines():
        next_head = SOURCE_HEAD.match(line)
        if next_head or not line.strip():
            if head is not None:
                yield Source(int(head.group(1)), head.group(2), " ".join(body))
            head, body = next_head, []
        elif head is not None:
            body.append(line.strip())
    if head is not None:
        yield Source(int(head.group(1)), head.group(2), " ".join(body))


def _question(messages: Sequence[Message]) -> str:
    question = ""
    for message in messages:
        lines = message.content.splitlines()
        for i, line in enumerate(lines):
            head = _QUESTION_HEAD.match(line)
            if not head:
                continue
            if head.group(1):
                question = head.group(1)
            else:
                following = []
                for later in lines[i + 1 :]:
                    if not later.strip():
                        break
                    following.append(later.strip())
                question = " ".join(following) or question
    if question:
        return question
    for message in reversed(messages):
        if message.role == "user" and not _INSTRUCTION.match(message.content):
            text = _without_source_blocks(message.content)
            if text:
                return text
    return " ".join(_without_source_blocks(m.content) for m in messages).strip()


def _without_source_blocks(text: str) -> str:
    kept: list[str] = []
    in_block = False
    for line in text.splitlines():
        if SOURCE_HEAD.match(line):
            in_block = True
        elif not line.strip():
            in_block = False
        elif not in_block:
            kept.append(line.strip())
    return " ".join(kept).strip()


def _schema_in_prompt(messages: Iterable[Message]) -> dict[str, Any] | None:
    for message in reversed(list(messages)):
        mark = _SCHEMA_MARK.search(message.content)
        if not mark:
            continue
        try:
            value = extract_json(message.content[mark.end() :])
        except ValueError:
            continue
        if isinstance(value, dict) and ({"type", "properties", "$defs", "anyOf"} & value.keys()):
            return value
    return None


def key_terms(text: str, limit: int = 6) -> tuple[str, ...]:
    """Content words of `text` in order of appearance, without duplicates or stopwords."""
    terms: list[str] = []
    seen: set[str] = set()
    for word in _WORD.findall(text):
        word = word.strip("'-")
        stem = _stem(word)
        if len(word) < 3 or word.lower() in _STOPWORDS or stem in seen:
            continue
        seen.add(stem)
        terms.append(word)
        if len(terms) == limit:
            break
    return tuple(terms)


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    """A crude stemmer, enough to match 'cities' with 'city' and 'causes' with 'cause'. Remembered:
    ranking a prompt's sentences stems every word of its sources."""
    word = word.lower().removesuffix("'s")
    for suffix, replacement in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", "e"), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + replacement
    return word


# ---------------------------------------------------------------------- writing text


@dataclass(frozen=True)
class Sentence:
    text: str
    source: int  # the source's [n]
    score: int
    order: int  # position in the prompt, for stable tie-breaks


_PROSE_WORDS = (
    "answer", "summar", "content", "text", "analysis", "conclusion", "finding", "report",
    "section", "explanation", "rationale", "reasoning", "justification", "overview", "synthesis",
    "paragraph", "body", "draft", "critique", "evidence", "note", "description", "detail",
    "insight", "response",
)  # fmt: skip
_QUESTION_WORDS = ("query", "queries", "question", "followup", "search", "input")
_TITLE_WORDS = frozenset({"title", "name", "label", "heading", "topic", "headline"})
_TERM_WORDS = frozenset({"keyword", "keywords", "term", "terms", "tag", "tags", "entity", "concept"})


def _field_kind(field: str) -> str:
    """prose, question, title, term, url, id or phrase, from the field's name."""
    tokens = [t.lower() for t in re.findall(r"[A-Z]?[a-z]+|[0-9]+", field)]
    # Substrings for the long words, so compounds like "subquestions" or "followup" match.
    joined = "".join(tokens)
    if joined == "shortanswer":
        return "short"
    if "answer" in joined:
        return "prose"
    if any(word in joined for word in _QUESTION_WORDS):
        return "question"
    if any(word in joined for word in _PROSE_WORDS):
        return "prose"
    last = tokens[-1] if tokens else ""
    if any(token in _TITLE_WORDS for token in tokens):
        return "title"
    if any(token in _TERM_WORDS for token in tokens):
        return "term"
    if last in ("url", "uri", "link", "href"):
        return "url"
    if last == "id":
        return "id"
    return "phrase"


class PromptWriter:
    """Writes strings for schema fields (and plain answers) from what a prompt contains."""

    def __init__(self, view: PromptView) -> None:
        self._view = view
        self._ranked = rank_sentences(view)

    def __call__(self, slot: StringSlot) -> str:
        kind = _field_kind(slot.field)
        index = slot.index or 0
        if kind == "prose":
            if slot.index is None:
                return self.paragraph(max_length=slot.max_length)
            return self._point(index, slot.max_length)
        if kind == "question":
            return self.question(index)
        if kind == "short":
            return self.short_answer()
        topic = self._topic()
        if kind == "title":  # a list's items are its parts; one title is the subject's
            return (
                section_title(topic, index) if slot.index is not None else (topic[:1].upper() + topic[1:] or "Overview")
            )
        if kind == "term":
            terms = self._view.terms or ("topic",)
            term = terms[index % len(terms)]
            return term if index < len(terms) else f"{term} {index // len(terms) + 1}"
        if kind == "url":
            return f"https://example.org/{_slug(topic) or 'source'}"
        if kind == "id":
            return f"{_slug(topic) or 'item'}-{index + 1}"
        # A value the field's description lists ("Economic, Social, Political…"), else an aspect
        # of the subject ("Eiffel Tower: origins and history").
        options = listed_options(slot.description)
        return options[index % len(options)] if options else aspect(topic, index, self._view.text)

    def paragraph(self, max_length: int | None = None) -> str:
        """1-3 cited sentences from the sources, or a short answer naming the key terms."""
        if not self._ranked:
            return self._sourceless_answer()
        picked = [s for s in self._ranked if s.score > 0][:3] or self._ranked[:1]
        parts: list[str] = []
        for sentence in picked:
            cited = cite(sentence)
            candidate = " ".join([*parts, cited])
            if max_length is not None and len(candidate) > max_length:
                if not parts:
                    parts.append(cite(sentence, max_length))
                break
            parts.append(cited)
        return " ".join(parts)

    def short_answer(self) -> str:
        """A short answer (EM/F1 style): the title of the source the best sentence came from, else
        the question's first key terms."""
        best = next((s for s in self._ranked if s.score > 0), None)
        titles = {source.number: source.title for source in self._view.sources}
        if best is not None and titles.get(best.source):
            return titles[best.source]
        return self._topic() or "unknown"

    def question(self, index: int) -> str:
        """A follow-up about the subject, none its question or a sibling's has (`follow_up`)."""
        return follow_up(self._topic(), index, self._view.question)

    def _point(self, index: int, max_length: int | None) -> str:
        if self._ranked:
            sentence = self._ranked[index % len(self._ranked)]
            text = cite(sentence, max_length)
            rounds = index // len(self._ranked)
            return text if rounds == 0 else f"{text} (point {index + 1})"
        return f"{aspect(self._topic(), index)}: worth checking against the sources."

    def _topic(self) -> str:
        """What the question is about, in a few words (`fake_words.subject`)."""
        return subject(self._view.question)

    def _sourceless_answer(self) -> str:
        topic = self._topic()
        if not topic:
            return "No question or sources were given, so there is nothing to answer yet."
        return (
            f"The sources at hand do not cover {topic}, so this offline answer can only say what to "
            "look into: its origins and history, the people involved and its impact."
        )


def rank_sentences(view: PromptView) -> list[Sentence]:
    question_stems = {_stem(w) for w in _WORD.findall(view.question)} - {_stem(w) for w in _STOPWORDS}
    sentences: list[Sentence] = []
    for source in view.sources:
        for text in _SENTENCE_END.split(source.text):
            text = text.strip()
            if len(text) < 3:
                continue
            stems = {_stem(w) for w in _WORD.findall(text)}
            score = len(stems & question_stems)
            sentences.append(Sentence(text, source.number, score, len(sentences)))
    sentences.sort(key=lambda s: (-s.score, s.order))
    return sentences


def cite(sentence: Sentence, max_length: int | None = None) -> str:
    """'text [n].' -- the marker goes before the closing punctuation."""
    text = sentence.text.rstrip()
    end = text[-1] if text[-1] in ".!?" else "."
    body = text[:-1].rstrip() if text[-1] in ".!?" else text
    marker = f" [{sentence.source}]{end}"
    if max_length is not None and len(body) + len(marker) > max_length:
        room = max(0, max_length - len(marker))
        body = body[:room].rstrip()
        if not body:
            return marker.strip()[:max_length]
    return body + marker


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:48] or hashlib.sha256(text.encode()).hexdigest()[:8]
