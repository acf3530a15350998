"""Deterministic reading of names and content words in text, with no model: the keywords of a
question when the model's answer is unusable, and the offline fake LLM's extraction
(`engine/knowledge/fake.py`)."""

from __future__ import annotations

import re

# Words that start a sentence or join a name without being one ("In Paris" is Paris; "Bank of
# England" keeps its "of").
_FUNCTION_WORDS = frozenset(
    """
    a an the and or but if in on at to of for from by with as is was are were be been it its he she
    they we you i his her their our your this that these those there here when where which who whom
    whose what why how after before during while since until also however although though because
    then than not no yes do does did has have had may might can could will would should shall must
    about above below between into onto over under upon within without across along among around
    both each either neither every all any some many most much few more less other such same one
    """.split()
)
_CONNECTORS = frozenset(
    {"of", "the", "for", "and", "de", "du", "des", "da", "von", "van", "der", "la", "le", "del", "y", "&"}
)
# A word; a hyphen joins letters ("Jean-Paul") but splits numbers ("1844-1846" is two years).
_TOKEN = re.compile(r"[^\W_][\w'’&]*(?:-(?=[^\W\d_])[\w'’&]+)*")
_YEAR = re.compile(r"^(1[0-9]{3}|20[0-9]{2})$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text.replace("\n", " ")) if s.strip()]


def _capitalised(token: str) -> bool:
    return token[:1].isupper()


def proper_names(text: str) -> list[str]:
    """Capitalised names in order of appearance, without repeats: runs of capitalised words (joined
    by "of", "the", "for"... between two of them), without a leading function word ("In Paris" gives
    "Paris"); four-digit years are names too (dates)."""
    names: list[str] = []
    for sentence in sentences(text):
        tokens = [t.strip("'’-") for t in _TOKEN.findall(sentence)]
        tokens = [t for t in tokens if t]
        run: list[str] = []

        def close(run: list[str] = run) -> None:  # this sentence's run
            while run and (run[-1].lower() in _CONNECTORS):
                run.pop()
            while run and run[0].lower() in _FUNCTION_WORDS:
                run.pop(0)
            if run:
                names.append(" ".join(run))
            run.clear()

        for index, token in enumerate(tokens):
            if _YEAR.match(token):
                close()
                names.append(token)
            elif _capitalised(token):
                run.append(token)
            elif run and token.lower() in _CONNECTORS and index + 1 < len(tokens) and _capitalised(tokens[index + 1]):
                run.append(token)
            else:
                close()
        close()
    seen: set[str] = set()
    unique = []
    for name in names:
        if name.lower() not in seen:
            seen.add(name.lower())
            unique.append(name)
    return unique


def content_words(text: str, *, skip: set[str] | frozenset[str] = frozenset(), limit: int | None = None) -> list[str]:
    """Lower-case words of three letters or more that are not function words (nor in `skip`), in
    order, without repeats."""
    out: list[str] = []
    for token in _TOKEN.findall(text):
        word = token.strip("'’-").lower()
        if len(word) < 3 or word in _FUNCTION_WORDS or word in skip or word in out or word.isdigit():
            continue
        out.append(word)
        if limit is not None and len(out) == limit:
            break
    return out


def is_year(name: str) -> bool:
    return bool(_YEAR.match(name))
