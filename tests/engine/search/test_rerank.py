"""engine/search/rerank.py: BM25 over a handful of hits, the Reranker interface."""

from __future__ import annotations

import math
import random

import pytest

from engine.search.protocol import Hit
from engine.search.relevance import terms
from engine.search.rerank import BM25Reranker, Reranker, tokens


def hit(title: str, text: str = "", snippet: str = "", ref: str | None = None, score: float = 0.0) -> Hit:
    return Hit(title=title, ref=ref or f"doc/{title}", snippet=snippet, text=text, kind="corpus", score=score)


COOKING = hit("Cooking pasta", "Boil water, add salt, then add the pasta and stir.")
APOLLO = hit(
    "Apollo 11",
    "Apollo 11 was the first crewed Moon landing, in July 1969. The landing site "
    "was the Sea of Tranquility on the Moon.",
)
MOON = hit("The Moon", "The Moon is the Earth's only natural satellite.")
MARS = hit("Mars rover", "A rover explores the surface of Mars.")
HITS = [COOKING, APOLLO, MOON, MARS]


def refs(hits: list[Hit]) -> list[str]:
    return [h.ref for h in hits]


def test_is_a_reranker():
    reranker = BM25Reranker()
    assert isinstance(reranker, Reranker)
    assert all(part in reranker.description for part in ("BM25", "k1=1.5", "b=0.75"))


def test_ranks_by_bm25_then_keeps_the_rest_in_their_order():
    ranked = BM25Reranker().rerank("When was the Moon landing of 1969?", HITS, k=4)
    # APOLLO has "moon" twice, "landing" twice and "1969"; MOON only "moon"; the others nothing.
    assert refs(ranked) == refs([APOLLO, MOON, COOKING, MARS])
    assert ranked[0].score > ranked[1].score > 0
    assert ranked[2].score == ranked[3].score == 0.0
    # Only the score changes: the hits are otherwise the ones given.
    for before in HITS:
        after = next(h for h in ranked if h.ref == before.ref)
        assert (after.title, after.text, after.snippet, after.kind, after.url) == (
            before.title,
            before.text,
            before.snippet,
            before.kind,
            before.url,
        )


def test_top_k_only():
    ranked = BM25Reranker().rerank("Mars rover surface", HITS, k=1)
    assert refs(ranked) == [MARS.ref] and ranked[0].score > 0


def test_k_larger_than_the_hits_returns_them_all():
    ranked = BM25Reranker().rerank("pasta", HITS, k=50)
    assert refs(ranked) == refs([COOKING, APOLLO, MOON, MARS])
    assert ranked[0].score > 0 and all(h.score == 0.0 for h in ranked[1:])


def test_no_hits_or_no_room():
    assert BM25Reranker().rerank("moon", [], k=5) == []
    assert BM25Reranker().rerank("moon", HITS, k=0) == []


@pytest.mark.parametrize("query", ["", "   ", "what is the of and", "?!"])
def test_an_empty_query_keeps_the_given_order(query):
    given = [hit("b", "x", score=3.0), *HITS]
    ranked = BM25Reranker().rerank(query, given, k=3)
    assert refs(ranked) == refs(given[:3])
    assert all(h.score == 0.0 for h in ranked)  # no score from the searcher survives


def test_the_score_is_okapi_bm25_with_a_positive_idf():
    # Two hits, the query word in one of them: N=2, n=1, so idf = ln(1 + 1.5/1.5) = ln 2 (Okapi's
    # original log((N-n+0.5)/(n+0.5)) would be 0 here). Lengths 3 and 1, average 2.
    ranked = BM25Reranker().rerank("alpha", [hit("", "gamma"), hit("", "alpha alpha beta")], k=2)
    norm = 1.5 * (1 - 0.75 + 0.75 * 3 / 2)
    assert ranked[0].text == "alpha alpha beta"
    assert ranked[0].score == pytest.approx(math.log(2) * 2 * 2.5 / (2 + norm))
    assert ranked[1].score == 0.0


def test_a_word_in_every_hit_still_counts():
    ranked = BM25Reranker().rerank("moon", [hit("a", "moon"), hit("b", "moon moon")], k=2)
    assert all(h.score > 0 for h in ranked)
    assert refs(ranked) == ["doc/b", "doc/a"]  # more occurrences in a hit of the same length


def test_rare_words_weigh_more_than_common_ones():
    common = [hit(f"h{i}", "oil price") for i in range(3)]
    rare = hit("embargo", "oil embargo")
    ranked = BM25Reranker().rerank("oil embargo", [*common, rare], k=4)
    assert ranked[0].ref == rare.ref


def test_title_and_snippet_count():
    titled = hit("Volcano eruptions", "Lava and ash.")
    snippet_only = hit("Untitled", "", snippet="A volcano erupted last year.")
    nothing = hit("Gardening", "Roses and tulips.")
    ranked = BM25Reranker().rerank("volcano", [nothing, snippet_only, titled], k=3)
    assert [h.score > 0 for h in ranked] == [True, True, False]
    assert ranked[-1].ref == nothing.ref
    # The text wins over the snippet when there is one.
    both = hit("x", "nothing relevant here", snippet="volcano")
    assert BM25Reranker().rerank("volcano", [both], k=1)[0].score == 0.0


def test_ties_keep_the_given_order():
    twins = [hit("Moon facts", "moon", ref=f"doc/{i}") for i in range(4)]
    ranked = BM25Reranker().rerank("moon", twins, k=4)
    assert refs(ranked) == refs(twins)
    assert len({h.score for h in ranked}) == 1


def test_deterministic():
    rng = random.Random(7)
    words = "moon landing apollo rocket orbit crew lunar module saturn launch mars rover".split()
    hits = [hit(f"t{i}", " ".join(rng.choice(words) for _ in range(rng.randint(3, 30)))) for i in range(25)]
    query = "apollo lunar module landing crew"
    first = BM25Reranker().rerank(query, hits, k=10)
    assert all(BM25Reranker().rerank(query, hits, k=10) == first for _ in range(5))
    assert [h.score for h in first] == sorted((h.score for h in first), reverse=True)
    # The same hits in another order: the same scores per hit.
    shuffled = hits[:]
    rng.shuffle(shuffled)
    by_ref = {h.ref: h.score for h in BM25Reranker().rerank(query, shuffled, k=25)}
    assert all(by_ref[h.ref] == pytest.approx(h.score) for h in first)


def test_tokens_are_the_relevance_floor_words_with_repeats():
    text = "The embargoes of 1973: OPEC's embargo hit economies; the embargo ended in 1974."
    assert set(tokens(text)) == terms(text)
    assert tokens(text).count("embargo") == 3


def test_bad_parameters():
    with pytest.raises(ValueError):
        BM25Reranker(k1=-1)
    with pytest.raises(ValueError):
        BM25Reranker(b=1.5)
