"""The offline fake LLM's answers to the knowledge layer's prompts, registered with `engine.llm.fake`
when `prompts.py` is imported, so `--llm fake` builds a real graph offline. Deterministic, from the prompt alone:

- `knowledge.extract`: the entities are the capitalised names (and four-digit years) of the passage,
  plus its title when the title is a name; each is described by the first sentence that mentions it.
  Two names in one sentence are related (the title with every name of the sentence, and names next
  to each other), described by that sentence, with its first content words as keywords.
- `knowledge.keywords`: the question's names are its detailed keywords, its other content words the
  general ones.
"""

from __future__ import annotations

import json
import re

from engine.llm.fake import script_prompts
from engine.llm.protocol import ChatRequest
from engine.names import content_words, is_year, proper_names, sentences

MAX_ITEMS = 40
MAX_PAIRS_PER_SENTENCE = 6
DESCRIPTION_CHARS = 300

_PASSAGE = re.compile(r"<<<PASSAGE\n(.*)\nPASSAGE>>>", re.DOTALL)
_TITLE = re.compile(r"^Passage title: (.*)$", re.MULTILINE)
_QUESTION = re.compile(r"^\s*Question\s*:\s*(.*?)\s*$", re.MULTILINE | re.IGNORECASE)
_ORGANISATION_WORDS = frozenset(
    {
        "university",
        "company",
        "magazine",
        "records",
        "inc",
        "corporation",
        "party",
        "club",
        "band",
        "group",
        "school",
        "college",
        "council",
        "association",
        "media",
    }
)
_PLACE_WORDS = frozenset({"river", "city", "county", "mountain", "island", "lake", "state", "province", "valley"})


def _user_text(request: ChatRequest) -> str:
    return "\n".join(m.content for m in request.messages if m.role == "user")


def _entity_type(name: str) -> str:
    words = {w.lower() for w in name.split()}
    if is_year(name):
        return "date"
    if words & _ORGANISATION_WORDS:
        return "organisation"
    if words & _PLACE_WORDS:
        return "place"
    return "other"


def extraction_answer(request: ChatRequest) -> str:
    text = _user_text(request)
    passage = _PASSAGE.search(text)
    body = passage.group(1) if passage else text
    title_match = _TITLE.search(text)
    title = title_match.group(1).strip() if title_match else ""
    title_names = proper_names(title) if title else []
    subject = title_names[0] if title_names else ""
    entities: dict[str, dict[str, str]] = {}
    relations: dict[tuple[str, str], dict[str, str | list[str]]] = {}

    def add_entity(name: str, sentence: str) -> None:
        key = name.lower()
        if key not in entities and len(entities) < MAX_ITEMS:
            entities[key] = {"name": name, "type": _entity_type(name), "description": sentence[:DESCRIPTION_CHARS]}

    passage_sentences = sentences(body)
    if subject and passage_sentences:  # a passage's first sentence usually says what its subject is
        add_entity(subject, next((s for s in passage_sentences if subject.lower() in s.lower()), passage_sentences[0]))
    for sentence in passage_sentences:
        names = [n for n in proper_names(sentence)]
        for name in names:
            add_entity(name, sentence)
        skip = {w.lower() for n in names for w in n.split()} | {w.lower() for w in subject.split()}
        keywords = content_words(sentence, skip=skip, limit=3) or ["related"]
        pairs = [(subject, n) for n in names if subject and n.lower() != subject.lower()]
        pairs += list(zip(names, names[1:]))
        for source, target in pairs[:MAX_PAIRS_PER_SENTENCE]:
            pair = tuple(sorted((source.lower(), target.lower())))
            if (
                source.lower() in entities
                and target.lower() in entities
                and pair not in relations
                and len(relations) < MAX_ITEMS
            ):
                relations[pair] = {  # type: ignore[index]
                    "source": source,
                    "target": target,
                    "description": sentence[:DESCRIPTION_CHARS],
                    "keywords": keywords,
                }
    return json.dumps({"entities": list(entities.values()), "relations": list(relations.values())}, ensure_ascii=False)


def keywords_answer(request: ChatRequest) -> str:
    found = _QUESTION.findall(_user_text(request))
    question = found[-1] if found else _user_text(request)
    names = proper_names(question)
    name_words = {w.lower() for n in names for w in n.split()}
    general = content_words(question, skip=name_words, limit=6)
    return json.dumps({"detailed": names[:8] or general[:3], "general": general}, ensure_ascii=False)


# Prompt name -> the default answer (engine/llm/fake.py asks here before its generic answers).
script_prompts({"knowledge.extract": extraction_answer, "knowledge.keywords": keywords_answer})
