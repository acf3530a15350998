"""Hop-following retrieval: put the documents a question leads to among its first hits.

A multi-hop question names one entity and asks about another that only the first one's page names
("the woman who portrayed Corliss Archer in *Kiss and Tell*" is Shirley Temple, named on the
film's page, not in the question). Word match finds the first document and rarely the second.
The bundled corpus is Wikipedia paragraphs named by their article's title, and a paragraph names
other articles by their titles, so the hop can be followed without any model: recognise the
corpus titles a text mentions (`TitleLinker`) and bring the linked documents up.

`follow_hops` orders a first-stage (BM25) candidate list, one hit per document:

1. BM25's first document (single-hop questions mostly have their answer there);
2. the documents the question names;
3. the documents those documents' pages name (the hop), in order of mention;
4. BM25's second document;
5. the documents BM25's first two documents name, when BM25 also retrieved them;
6. the rest of BM25's order.

Only pages the question names are followed outside BM25's candidates (step 3); the top
documents' links move up only when BM25 retrieved them too (step 5). So a single-hop question,
which names its answer's page or nothing, keeps BM25's order but for a few promoted candidates.
Chosen on half of the items of HotpotQA, 2WikiMultihopQA and NQ, checked on the other half
(`benchmarks/bench_hops.py`): all-gold@10 .78 -> .90 on HotpotQA and .40 -> .96 on 2Wiki, NQ
unchanged (.94). Without step 5 HotpotQA loses .01-.03; step 5 without its condition gains
HotpotQA about .01 and takes as much from NQ.

`HopSearcher` wraps the local corpus searcher with it.
"""

from __future__ import annotations

import html
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any, Protocol

from engine.search.local import corpus_hit
from engine.search.protocol import NAMED_BY_QUESTION, Candidates, Hit, Searcher, candidates_of, titled_page
from storage.corpus_store import STOPWORDS, CorpusStore

# The longest title, in words, the linker looks for: longer titles are rare and seldom quoted whole.
MAX_TITLE_WORDS = 10
# A title this short ("AA", "Run", "Joe") matches too much text to mean its document.
MIN_TITLE_CHARS = 4
# BM25 candidates the hops reorder: hops promote documents found this deep.
CANDIDATES = 50
# Documents a question names that are followed: a pasted page as a query names dozens.
MAX_NAMED = 6
# BM25's first documents whose links are promoted (when BM25 retrieved the linked document too).
RANKED_SEEDS = 2
# How much of a named page is read for its links: a Wikipedia lead names the entity's relations.
LINK_TEXT_CHARS = 5_000
# Texts whose links a linker remembers (chunks of at most a few kB each): forgotten all at once when full.
LINKS_REMEMBERED = 4_096

_TOKEN = re.compile(r"[^\W_]+|[^\w\s]", re.UNICODE)
_QUALIFIER = re.compile(r"\s*\([^()]*\)\s*$")
# Typographic variants written both ways in titles and texts.
_FOLD = str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"', "–": "-", "—": "-"})

Key = tuple[str, ...]


def cased_tokens(text: str) -> list[str]:
    """Words and punctuation marks, accents removed, case kept: "Björk's" is Bjork ' s."""
    if "&" in text:
        text = html.unescape(text)  # some titles keep "&amp;"
    text = text.translate(_FOLD)
    if not text.isascii():
        text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return _TOKEN.findall(text)


def title_key(title: str) -> Key:
    """What a title is compared by: its lower-cased `cased_tokens`."""
    return tuple(t.casefold() for t in cased_tokens(title))


def strip_qualifier(title: str) -> str:
    """The title without a trailing parenthesised qualifier: "Mercury (planet)" -> "Mercury"."""
    return _QUALIFIER.sub("", title).strip()


def linkable(key: Key) -> bool:
    """Whether a title's tokens can stand for its document in running text: not too short, not a
    number or year ("1995"), not only function words ("It", "Who Are You"), not too long."""
    words = [t for t in key if t[0].isalnum()]
    if not words or len(words) > MAX_TITLE_WORDS or len("".join(key)) < MIN_TITLE_CHARS:
        return False
    if all(w.isdigit() for w in words):
        return False
    return not all(w in STOPWORDS for w in words)


class TitleLinker:
    """Recognises the corpus titles a text mentions: whole tokens, case- and accent-insensitive,
    the longest title first, each title once, in order of first mention.

    In a text that has capitals, a title that starts with a capital is recognised only where the
    text writes it with one ("the first woman" does not name the album *The First*); an all
    lower-case text (a typed question) is matched regardless of case.

    A title is also recognised without its trailing qualifier ("Kiss and Tell" names "Kiss and
    Tell (1945 film)") when that short form has several words, no other title has it and no title
    is exactly it. Measured (`benchmarks/bench_hops.py`'s items): without short forms 2Wiki's
    all-gold@10 falls from .96 to .90; one-word ones ("Heart" for "Heart (1987 film)") link a
    common word wherever it is capitalised, and push down about as many gold documents as they
    bring up. An ambiguous short form names no single document.
    """

    def __init__(self, titles: Iterable[tuple[str, str]]) -> None:
        exact: dict[Key, str] = {}
        short: dict[Key, list[str]] = {}
        for _collection, title in titles:
            key = title_key(title)
            if linkable(key):
                exact.setdefault(key, title)
            bare = strip_qualifier(title)
            if bare != title.strip():
                bare_key = title_key(bare)
                if len([t for t in bare_key if t[0].isalnum()]) > 1 and linkable(bare_key):
                    names = short.setdefault(bare_key, [])
                    if title not in names:
                        names.append(title)
        self._titles: dict[Key, str] = dict(exact)
        for key, names in short.items():
            if key not in exact and len(names) == 1:
                self._titles[key] = names[0]
        self._capitalised = {key: title[:1].isupper() for key, title in self._titles.items()}
        # Every beginning of a title: a scan extends a match only while some title goes on with it.
        self._prefixes = {key[:n] for key in self._titles for n in range(1, len(key) + 1)}
        self._starts = {key[0] for key in self._titles}
        self._links: dict[str, tuple[str, ...]] = {}  # `links`, per text

    def __len__(self) -> int:
        return len(self._titles)

    def links(self, text: str) -> list[str]:
        """The titles `text` mentions, each once, in order of first mention.

        Remembered per text (the linker is rebuilt when the corpus changes, so it never goes stale):
        the same candidates come back search after search in a run, and each is read for links."""
        known = self._links.get(text)
        if known is None:
            if len(self._links) >= LINKS_REMEMBERED:
                self._links.clear()
            known = self._links[text] = tuple(self._scan(text))
        return list(known)

    def _scan(self, text: str) -> list[str]:
        original = cased_tokens(text)
        folded = [t.casefold() for t in original]
        cased = text.lower() != text
        found: dict[str, None] = {}
        i, end = 0, len(folded)
        while i < end:
            if folded[i] not in self._starts:
                i += 1
                continue
            matches: list[Key] = []  # the titles starting here, shortest first
            n = 1
            while i + n <= end and (key := tuple(folded[i : i + n])) in self._prefixes:
                if key in self._titles:
                    matches.append(key)
                n += 1
            capital = original[i][0].isupper()
            longest = next((m for m in reversed(matches) if capital or not (cased and self._capitalised[m])), None)
            if longest is None:
                i += 1
                continue
            found.setdefault(self._titles[longest], None)
            i += len(longest)
        return list(found)


class TitleSource(Protocol):
    """What a linker is built from: the corpus store (`CorpusStore`)."""

    generation: int

    def titles(self) -> list[tuple[str, str]]: ...


class LinkerCache:
    """One `TitleLinker` per corpus generation: built on first use (a scan of the titles and about
    0.2 s for the bundled corpus's 16k titles), rebuilt after the store changes. Share one cache
    between the searchers of one store. A change made by another process does not change this
    store's generation: its titles are linked once this process opens the store again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entry: tuple[TitleSource, int, TitleLinker] | None = None

    def linker(self, source: TitleSource) -> TitleLinker:
        with self._lock:
            entry = self._entry
            if entry is None or entry[0] is not source or entry[1] != source.generation:
                generation = source.generation  # read first: a write during the scan rebuilds next time
                entry = self._entry = (source, generation, TitleLinker(source.titles()))
            return entry[2]


def _same(title: str) -> str:
    return " ".join(title.casefold().split())


def follow_hops(
    query: str,
    candidates: Sequence[Hit],
    linker: TitleLinker,
    open_page: Callable[[str], Hit | None],
    k: int,
    as_hit: Callable[[Hit], Hit] = lambda page: page,
) -> list[Hit]:
    """The first `k` documents in hop order (see the module's docstring), one hit each: a
    candidate's best chunk, or a page opened by title (`open_page`: the page, whose text is read
    for links, or None for a page that cannot be had, which is then left out) as `as_hit` makes
    it a hit. Scores are reciprocal ranks (1, 1/2, ...): a BM25 score says nothing of a page
    opened by its title."""
    if k <= 0:
        return []
    best: dict[str, Hit] = {}
    for candidate in candidates:
        best.setdefault(_same(candidate.title), candidate)
    ranked = list(best.values())
    pages: dict[str, Hit | None] = {}

    def page(title: str) -> Hit | None:
        if _same(title) not in pages:
            pages[_same(title)] = open_page(title)
        return pages[_same(title)]

    named = [p for p in (page(title) for title in linker.links(query)[:MAX_NAMED]) if p is not None]

    # (title or hit, via): `via` says what named a document (`Hit.via`), so the relevance floor
    # can keep a bridge document that shares no word with the question.
    def hops() -> Iterator[tuple[str, str]]:
        for found in named:
            for title in linker.links(found.text[:LINK_TEXT_CHARS]):
                yield title, found.title

    def ranked_hops() -> Iterator[tuple[str, str]]:
        for seed in ranked[:RANKED_SEEDS]:
            for title in linker.links(seed.text):
                if _same(title) in best:
                    yield title, seed.title

    def order() -> Iterator[tuple[str | Hit, str]]:
        yield from ((hit, "") for hit in ranked[:1])
        yield from ((hit, NAMED_BY_QUESTION) for hit in named)
        yield from hops()
        yield from ((hit, "") for hit in ranked[1:2])
        yield from ranked_hops()
        yield from ((hit, "") for hit in ranked[2:])

    chosen: dict[str, Hit] = {}
    for item, via in order():
        title = item.title if isinstance(item, Hit) else item
        key = _same(title)
        if key in chosen:
            continue
        hit = best.get(key)
        if hit is None:
            opened = item if isinstance(item, Hit) else page(title)
            if opened is None:
                continue
            hit = as_hit(opened)
        if via and not hit.via:
            hit = replace(hit, via=via)
        chosen[key] = hit
        if len(chosen) == k:
            break
    return [replace(hit, score=1.0 / rank) for rank, hit in enumerate(chosen.values(), start=1)]


class HopSearcher:
    """A `Searcher` over the local corpus that follows hops (`follow_hops`) through its BM25
    candidates: one hit per document, best first.

    `searcher` is the local corpus searcher, or a searcher wrapping it that has its `store` (an
    `ExcludingSearcher`: then an excluded page is neither returned nor followed, since pages are
    opened through its `titled`). `linkers`: share one cache between searchers of the same store."""

    def __init__(self, searcher: Searcher, *, linkers: LinkerCache | None = None, pool: int = CANDIDATES) -> None:
        self.searcher = searcher
        self.linkers = linkers or LinkerCache()
        self.pool = pool  # the candidates the hops reorder

    @property
    def description(self) -> str:
        return f"{self.searcher.description} + hops"

    def titled(self, title: str) -> Hit | None:
        return titled_page(self.searcher, title)

    def search(self, query: str, k: int = 5) -> list[Hit]:
        found = self.candidates(query, k)
        return found.finish(found.hits)

    def candidates(self, query: str, k: int) -> Candidates:
        """The top `k` after the hops, with snippets to come (`Candidates`): made for the hits kept,
        not the 50 candidates, here or by a caller that keeps fewer still (the research agent's top N)."""
        if k <= 0:
            return Candidates([], list)
        found = candidates_of(self.searcher, query, max(self.pool, k))
        linker = self.linkers.linker(self.store)
        return Candidates(follow_hops(query, found.hits, linker, self.titled, k, self._first_chunk), found.finish)

    @property
    def store(self) -> CorpusStore:
        # `store` is the part of the seam HopSearcher needs beyond `Searcher` (see the class's docstring).
        store: CorpusStore = self.searcher.store  # type: ignore[attr-defined]
        return store

    def _first_chunk(self, page: Hit) -> Hit:
        """A page opened by its title, as a hit like the others: its first chunk, not the whole page."""
        chunks = self.store.titled(page.title)
        return corpus_hit(chunks[0]) if chunks else page

    def __getattr__(self, name: str) -> Any:
        # Anything else (the corpus store, ingest...) is the wrapped searcher's.
        if name == "searcher":
            raise AttributeError(name)
        return getattr(self.searcher, name)
