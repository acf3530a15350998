"""Typed LLM outputs: pydantic models in, pydantic models out.

The schema is always put in the prompt as well as in `response_format`, so the same request works
whichever structured mode the backend ends up using (json_schema, json_object + schema, prompted).
Invalid answers are re-asked with the validation error, a bounded number of times, then raised as
`StructuredOutputError`, which methods turn into a failed node while the run goes on.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from engine.llm.compact_schema import compact_schema
from engine.llm.protocol import (
    LLM,
    ChatRequest,
    ChatResponse,
    Message,
    ResponseFormat,
    StructuredOutputError,
)
from engine.text import storable_json

T = TypeVar("T", bound=BaseModel)

DEFAULT_MAX_REASKS = 2
# How the messages ask_structured adds to a conversation begin (what the fake LLM must not read as the question).
FORMAT_OPENING = "Answer with exactly one JSON object"
REASK_OPENING = "That answer was not valid"
TOO_LONG_OPENING = "Your answer was too long"
TOO_LONG_FEEDBACK = (
    f"{TOO_LONG_OPENING}: the length limit cut it off before the JSON object was complete. "
    "Write it again much shorter (fewer list items, one short sentence each) and fill in every "
    "field. Reply with only the JSON object."
)
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


def schema_for(output_type: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema the model sees, a copy of the caller's own. Class docstrings are notes for
    developers (e.g. which paper figure a model follows): models, small ones especially, copy them
    into their answers, so they are left out. Field descriptions, which are written for the model, stay."""
    return copy.deepcopy(_schema(output_type))


@functools.lru_cache(maxsize=1024)
def _schema(output_type: type[BaseModel]) -> dict[str, Any]:
    # Made once per model: pydantic builds it anew on every call, the most of a structured call's
    # own CPU after the HTTP client's (a wave of calls made together waits on each other's).
    schema = output_type.model_json_schema()
    schema.pop("description", None)
    for definition in schema.get("$defs", {}).values():
        definition.pop("description", None)
    return schema


def format_instruction(output_type: type[BaseModel], schema: dict[str, Any] | None = None) -> str:
    """The instruction that closes a structured request: `schema` (by default `output_type`'s)."""
    schema_json = json.dumps(
        schema if schema is not None else schema_for(output_type), ensure_ascii=False, separators=(",", ":")
    )
    return (
        f"{FORMAT_OPENING} and nothing else (no prose, no code fence). "
        f"It must validate against this JSON schema:\n{schema_json}"
    )


def json_values(text: str) -> Iterator[tuple[Any, bool]]:
    """Each JSON object or array a model's answer may mean, most likely first: the whole answer when
    it is one (its strings may hold a code block of their own, whose fences must not cut it), then
    each code-fenced piece, then any value found in the text around it. With each: whether it is
    the whole of its candidate (not a piece of the text around it, or of a value cut off)."""
    stripped = text.strip()
    candidates = [stripped] if stripped[:1] in ("{", "[") else []
    candidates += [m.group(1) for m in _FENCE.finditer(text)]
    candidates.append(text)
    decoder = json.JSONDecoder()
    for candidate in candidates:
        candidate = candidate.strip()
        start = 0
        while (start := _first_opening(candidate, start)) >= 0:
            try:
                value, end = decoder.raw_decode(candidate, start)
            except (json.JSONDecodeError, RecursionError):  # "[" * 3000 nests past Python's stack
                start += 1
                continue
            # Escapes like "\\ud800" decode to unstorable text.
            yield storable_json(value), start == 0 and end == len(candidate)
            # Never a value nested in this one: a part of an answer that does not validate is no
            # answer of its own.
            start = end


def _first_opening(text: str, start: int) -> int:
    positions = [p for p in (text.find("{", start), text.find("[", start)) if p >= 0]
    return min(positions, default=-1)


def extract_json(text: str) -> Any:
    """Find the JSON value in a model's answer: tolerate code fences and text around it.

    Raises ValueError when no JSON object or array can be decoded.
    """
    for value, _whole in json_values(text):
        return value
    raise ValueError("no JSON object found in the answer")


def parse_output(text: str, output_type: type[T]) -> T:
    """The first JSON value of the answer (`json_values`' order) that validates as `output_type`;
    raises ValueError (no JSON answer) or the first value's pydantic.ValidationError."""
    first_error: ValidationError | None = None
    for value, whole in json_values(text):
        if isinstance(value, list) and len(output_type.model_fields) == 1:
            # Small models often answer with the bare list for a one-field wrapper model.
            (only_field,) = output_type.model_fields
            value = {only_field: value}
        try:
            parsed = output_type.model_validate(value)
        except ValidationError as exc:
            first_error = first_error or exc
            continue
        # A schema whose fields all have defaults takes any object: one that sets none of them
        # counts only as the whole answer, not as a `{}` in the prose around it or an object
        # inside an answer that was cut off.
        if whole or parsed.model_fields_set:
            return parsed
    if first_error is not None:
        raise first_error
    raise ValueError("no JSON object found in the answer")


# A string of at least this many words is a copy of the instructions when it is found in them word
# for word. In an answer field (ANSWER_FIELDS) it is also one when at least COPY_SHARE of its word
# 3-grams are: a 0.5B model answered "The fewest words that answer the question (a name, number, date,
# or yes/no); no explanation.", a blend of the prompt's words and the schema's description that is in
# neither word for word. Only there: a judge's or a controller's reason may rightly apply a rule in
# the rule's own words ("the source supports what the sentence claims").
COPY_MIN_WORDS = 5
COPY_SHARE = 0.8
ANSWER_FIELDS = frozenset({"short_answer", "argument"})
_WORD = re.compile(r"\w+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def _trigrams(words: Sequence[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + 3]) for i in range(len(words) - 2)}


@functools.lru_cache(maxsize=64)
def _instruction_words(instructions: str) -> tuple[str, set[tuple[str, ...]]]:
    """The instructions as one spaced word string and as their set of word 3-grams (asked once per
    string of every answer, so kept for the instructions of the last few calls)."""
    words = _words(instructions)
    return " " + " ".join(words) + " ", _trigrams(words)


def _strings(value: Any, path: str = "") -> list[tuple[str, str]]:
    """Every string in a parsed answer, with where it is (`field.0.name`)."""
    if isinstance(value, BaseModel):
        return [
            pair
            for name in type(value).model_fields
            for pair in _strings(getattr(value, name), f"{path}.{name}" if path else name)
        ]
    if isinstance(value, (list, tuple)):
        return [pair for i, item in enumerate(value) for pair in _strings(item, f"{path}.{i}")]
    if isinstance(value, dict):
        return [pair for key, item in value.items() for pair in _strings(item, f"{path}.{key}")]
    return [(path, value)] if isinstance(value, str) else []


class InstructionsCopied(ValueError):
    """An answer in the right form whose text repeats the instructions (`copied_instructions`)."""


def copied_instructions(answer: BaseModel, instructions: str) -> str | None:
    """Where `answer` copies the instructions instead of answering them (a small model given "then the
    short answer: the fewest words that answer the question" answered exactly that), or None. Only
    the system prompt and the schema count as instructions, never the user's data, which an answer
    may rightly quote."""
    return next(
        (
            where
            for where, text in _strings(answer)
            if repeats_instructions(text, instructions, blended=where.rsplit(".", 1)[-1] in ANSWER_FIELDS)
        ),
        None,
    )


def repeats_instructions(text: str, instructions: str, *, blended: bool = True) -> bool:
    """Whether `text` (of at least COPY_MIN_WORDS words) repeats `instructions`: word for word, or
    (with `blended`) with most of its word 3-grams (COPY_SHARE) taken from them."""
    words = _words(text)
    if len(words) < COPY_MIN_WORDS:
        return False
    spaced, trigrams = _instruction_words(instructions)
    if " " + " ".join(words) + " " in spaced:
        return True
    own = _trigrams(words)
    return blended and len(own & trigrams) >= COPY_SHARE * len(own)


def _short_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        parts = []
        for err in exc.errors()[:6]:
            where = ".".join(str(p) for p in err.get("loc", ())) or "(root)"
            parts.append(f"{where}: {err.get('msg')}")
        return "; ".join(parts)
    return str(exc)


def ask_structured(
    llm: LLM,
    messages: Sequence[Message],
    output_type: type[T],
    *,
    purpose: str = "default",
    max_reasks: int = DEFAULT_MAX_REASKS,
    max_tokens: int | None = None,
    temperature: float | None = None,
    on_response: Callable[[ChatResponse], None] | None = None,
    prompt: str | None = None,
) -> T:
    """Ask for an `output_type` instance; re-ask with the error up to `max_reasks` times.

    Every request carries the prompt's name (`prompt`, else the `.name` of `messages` when they
    were rendered from a `Prompt`) and its attempt number (1, then 2, 3... for the re-asks).
    `on_response` sees every raw response (for usage accounting), including the invalid ones.
    """
    prompt_name = prompt if prompt is not None else getattr(messages, "name", "")
    schema = schema_for(output_type)
    convo = list(messages)
    convo.append(Message("user", format_instruction(output_type, schema)))
    format_at = len(convo) - 1
    instructions = "\n".join(m.content for m in convo if m.role == "system") + "\n" + convo[-1].content
    last_text = ""
    last_error = ""
    last_cut_off = False
    last_copied = False
    cut_offs = 0
    compact = False
    attempts = max_reasks + 1
    for attempt in range(1, attempts + 1):
        request = ChatRequest(
            messages=tuple(convo),
            purpose=purpose,
            response_format=ResponseFormat.JSON_SCHEMA,
            json_schema=schema,
            schema_name=output_type.__name__,
            max_tokens=max_tokens,
            temperature=temperature,
            prompt=prompt_name,
            attempt=attempt,
        )
        response = llm.chat(request)
        if on_response is not None:
            on_response(response)
        last_text = response.text
        try:
            answer = parse_output(response.text, output_type)
            copied = copied_instructions(answer, instructions)
            if copied:
                raise InstructionsCopied(
                    f"{copied} repeats the instructions instead of answering them; write the content they ask for"
                )
            return answer
        except (ValueError, ValidationError) as exc:
            last_error = _short_error(exc)
            last_cut_off = response.cut_off
            last_copied = isinstance(exc, InstructionsCopied)
            if response.cut_off:
                # Cut by the output limit: shown its own unfinished answer, a small model writes it
                # again as long and is cut again (DEoT's node summary failed so three times running on
                # the built-in model). Asked for less instead, without the cut text in its context.
                last_error = f"cut off by the length limit before it was complete ({last_error})"
                if convo[-1].content != TOO_LONG_FEEDBACK:
                    convo.append(Message("user", TOO_LONG_FEEDBACK))
                cut_offs += 1
                if not compact and (cut_offs >= 2 or attempt + 1 == attempts or response.output_cap is not None):
                    # Cut twice (or once, with one attempt left, or once under a cap lowered for a
                    # slow machine, where every attempt costs minutes): the compact form, whose schema
                    # leaves out the optional fields and limits lists and text so the answer fits.
                    # Fitted to the cap the call really ran under (lower on a slow machine).
                    schema = compact_schema(schema, response.output_cap or max_tokens)
                    convo[format_at] = Message("user", format_instruction(output_type, schema))
                    compact = True
                continue
            convo.append(Message("assistant", response.text[:4000]))
            convo.append(
                Message(
                    "user",
                    f"{REASK_OPENING}: {last_error}. Reply again with only the corrected JSON object.",
                )
            )
    raise StructuredOutputError(
        f"the model's answer did not match {output_type.__name__} after {max_reasks + 1} "
        f"attempts{' (the last in its compact form)' if compact else ''} ({last_error})",
        last_output=last_text,
        attempts=max_reasks + 1,
        cut_off=last_cut_off,
        copied=last_copied,
    )
