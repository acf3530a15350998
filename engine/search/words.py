"""What a query term is, for the relevance floor (`relevance.py`) and the reranker's BM25
(`rerank.py`): the word pattern, the stopwords, a light stemmer. Its own module so that those two
share it without importing each other."""

from __future__ import annotations

import re
from functools import lru_cache

WORD = re.compile(r"[^\W_]+", re.UNICODE)
# Function words and question scaffolding: they say nothing about what a document is about.
STOPWORDS = frozenset(
    """
a about above after again against all also am an and any are as at be because been before being below between
both but by can could did do does doing down during each few for from further had has have having he her here
hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off
on once only or other our ours ourselves out over own same she should so some such than that the their theirs
them themselves then there these they this those through to too under until up very was we were what when where
which while who whom why will with would you your yours yourself yourselves
many much whose whether within without upon via per among across toward towards including include includes
explain describe discuss analyze analyse compare list give tell identify summarize evaluate assess
known called named según es el la los las de del y en un una que por con para
""".split()
)


@lru_cache(maxsize=65_536)  # a run reads the same words in hit after hit
def stem(word: str) -> str:
    """A light stemmer: enough to match 'embargoes' with 'embargo' and 'economies' with 'economy'."""
    for suffix, replacement in (("ies", "y"), ("es", ""), ("s", ""), ("ing", ""), ("ed", "")):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)] + replacement
    return word


def terms(text: str) -> set[str]:
    """The distinctive terms of a text: lower-cased, stemmed, without stopwords and 1-letter words."""
    words = {w.lower() for w in WORD.findall(text)}
    return {stem(w) for w in words if (len(w) > 1 or w.isdigit()) and w not in STOPWORDS}
