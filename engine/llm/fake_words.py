"""The words the scripted fake LLM writes where a real model would write its own: a question's
subject ("Eiffel Tower", "Apollo program"), follow-up questions, aspects and section titles about
it, all in natural templates, so an offline demo (`--llm fake`) reads as plausible instead of
broken. A pure function of the prompt, so the fake stays deterministic.

A follow-up the fake wrote is often the question of the next prompt: its subject is read back out of
the template ("What are the key facts about Eiffel Tower?" is about "Eiffel Tower"), where taking
its first words gave "key facts about key facts born"; each question's follow-ups come from
templates of its own, so no two questions of a tree get the same ones, and an aspect the prompt
already holds (the node's own, those already explored) is passed over.
"""

from __future__ import annotations

import functools
import hashlib
import re

from engine.names import content_words, is_year, proper_names

QUESTION_TEMPLATES = (
    "What are the key facts about {topic}?",
    "How did {topic} come about?",
    "Who were the main people behind {topic}?",
    "What evidence supports the main claims about {topic}?",
    "How has {topic} changed over time?",
    "What were the consequences of {topic}?",
    "What is still debated about {topic}?",
    "Which sources best explain {topic}?",
    "How is {topic} seen today?",
    "Which numbers best describe {topic}?",
    "What do critics say about {topic}?",
    "How does {topic} compare with similar cases?",
)
# What an aspect, a category or a section of a text about the subject is about.
ANGLES = (
    "origins and history",
    "the people involved",
    "how it works",
    "impact and legacy",
    "evidence and sources",
    "open questions",
    "numbers and scale",
    "public reception",
    "comparisons",
)

_TEMPLATE_PATTERNS = tuple(
    re.compile(
        "^" + re.escape(t).replace(re.escape("{topic}"), "(?P<topic>.+?)") + r"(?: \(angle \d+\))?\?*$", re.IGNORECASE
    )
    for t in QUESTION_TEMPLATES
)
# Verbs a question puts after its subject ("How do tides work?"): not part of the subject.
_VERBS = frozenset(
    """
    work works worked happen happens happened cause causes caused influence influenced influences affect
    affects affected build built design designed write wrote written make made begin began start started
    change changed lead led become became compare differ mean means leave left use used come came get got
    explain happen win won lose lost find found form formed develop developed create created take took
    """.split()
)
# Labels a prompt puts before its parts ("Subject: …"), capitalised but no name; any word written
# before a colon counts too.
_LABELS = frozenset({"Question", "Subject", "Topic", "Overall", "Task", "Query"})


@functools.lru_cache(maxsize=1024)
def subject(question: str) -> str:
    """What the question is about, in a few words: the subject of a question the fake wrote, else
    its first proper name (a one-word name with the noun after it: "the Apollo program"; with "the"
    when the question says it), else its first content words that are not verbs; "" for none.

    Remembered: an answer asks it once for each string it writes, about the same question, and its
    regular expressions over a long prompt made it most of the test endpoint's CPU (which a
    benchmark's run on 2 cores shares)."""
    text = " ".join(question.split())
    for pattern in _TEMPLATE_PATTERNS:
        match = pattern.match(text)
        if match:
            return subject(match.group("topic")) or match.group("topic")
    # Line by line: a name never runs on into the label of the next line ("… Final\nSection: …").
    names = [
        n
        for line in question.splitlines()
        for n in proper_names(line)
        if not is_year(n) and not _is_label(n.split()[0], text)
    ]
    if names:
        name = names[0]
        if " " not in name:
            after = re.search(rf"\b{re.escape(name)}\s+([a-z][a-z-]{{2,}})\b", text)
            if (
                after
                and after.group(1) not in _VERBS
                and content_words(after.group(1))
                and not after.group(1).endswith("ed")
            ):
                name = f"{name} {after.group(1)}"
        # "the Eiffel Tower" as the question says it: the templates read "about the Eiffel Tower".
        return f"the {name}" if re.search(rf"\bthe\s+{re.escape(name)}\b", text, re.IGNORECASE) else name
    words = [w for w in content_words(text) if w not in _VERBS]
    return " ".join(words[:2])


def _pick(candidates: list[str], index: int, already: str) -> tuple[str, int]:
    """The `index`-th of the candidates `already` (the prompt's text) does not hold, and how many
    times the list was gone round. In a first prompt (none held) from the first; further down the
    tree from a place the prompt decides, so two nodes' follow-ups differ (deterministically)."""
    held = already.lower()
    fresh = [c for c in candidates if c.lower() not in held] or candidates
    start = 0 if len(fresh) == len(candidates) else int(hashlib.sha256(already.encode()).hexdigest()[:8], 16)
    return fresh[(start + index) % len(fresh)], index // len(fresh)


def _is_label(word: str, text: str) -> bool:
    """A prompt's label ("Sources:", "Subject:"), capitalised but no name."""
    return word in _LABELS or re.search(rf"(?:^|\s){re.escape(word)}\s*:", text) is not None


# How many follow-ups one question is given templates of its own: a node's follow-ups differ from
# its siblings' (DEoT asks for up to 3 by default; a proposal repeating a question is dropped).
_PER_QUESTION = 3


def follow_up(topic: str, index: int, asked: str = "") -> str:
    """The `index`-th follow-up question about `topic` under the question `asked`: the first
    question's from the first template, one the fake wrote (template k) from template 3(k + 1), so
    no two questions of a tree get the same ones."""
    topic = topic or "the topic"
    own = next((k for k, pattern in enumerate(_TEMPLATE_PATTERNS) if pattern.match(" ".join(asked.split()))), -1)
    position = _PER_QUESTION * (own + 1) + index
    text = QUESTION_TEMPLATES[position % len(QUESTION_TEMPLATES)].format(topic=topic)
    rounds = position // len(QUESTION_TEMPLATES)
    return text if rounds == 0 else f"{text[:-1]} (angle {rounds + 1})?"


def aspect(topic: str, index: int, already: str = "") -> str:
    """An aspect of the subject the prompt's text does not hold: "The Eiffel Tower: origins and
    history"."""
    lead = f"{topic[:1].upper()}{topic[1:]}: " if topic else ""
    text, rounds = _pick([lead + (angle if topic else angle.capitalize()) for angle in ANGLES], index, already)
    return text if rounds == 0 else f"{text} (part {rounds + 1})"


def section_title(topic: str, index: int) -> str:
    """The title of the `index`-th part of a text about the subject, which names the subject (its
    evidence is found by its words): "The Eiffel Tower: how it works"."""
    return aspect(topic, index)


def listed_options(description: str) -> list[str]:
    """The examples a field's description lists as capitalised words ("Economic, Social,
    Political…"): the values a model would pick from."""
    match = re.search(r"\b([A-Z][a-z]+(?:, [A-Z][a-z]+){2,})", description)
    return match.group(1).split(", ") if match else []
