"""The hybrid first stage and the rerankers by name: fusion, the builtin reranker, the relevance
floor's hop provenance, and what `build_local_retrieval` returns for each setting."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from engine.config import RetrievalSettings
from engine.search.fusion import FusedReranker, FusedSearcher, fuse
from engine.search.hops import HopSearcher
from engine.search.local import LocalCorpusSearcher
from engine.search.protocol import NAMED_BY_QUESTION, SNIPPET_LATER, Hit
from engine.search.relevance import relevant_hits
from engine.search.retrieval import KeepOrder, build_local_retrieval, builtin_reranker
from engine.search.vectors import VectorIndex
from storage.corpus_store import CorpusStore

QUESTION = "Where was the place of burial of Charles Mathew's father?"

DOCUMENTS = [
    ("Charles Mathew", ["Charles Mathew was a British politician, son of George Mathew."]),
    ("George Mathew", ["George Mathew was buried at Westminster Abbey in London."]),
    ("Charles James Fox", ["Charles James Fox was a British Whig statesman and a place of note."]),
    ("Burial at sea", ["A burial at sea is the place of burial for many sailors."]),
    ("Father Brown", ["Father Brown is a fictional Roman Catholic priest; the place is Essex."]),
]


def hit(title: str, text: str = "", via: str = "") -> Hit:
    return Hit(title=title, ref=f"wiki/{title}#0", snippet=text, text=text, kind="corpus", via=via)


class HashedWords:
    """A deterministic embedder that is a real function of the text: hashed bags of words."""

    description = "hashed words"

    def embed(self, texts):
        out = []
        for text in texts:
            vector = np.zeros(64, dtype=np.float32)
            for word in text.lower().replace("'", " ").split():
                vector[int(hashlib.md5(word.strip(".,?").encode()).hexdigest(), 16) % 64] += 1.0
            out.append(vector.tolist())
        return out


@pytest.fixture
def corpus(tmp_path):
    store = CorpusStore(tmp_path / "corpus.sqlite3")
    for title, chunks in DOCUMENTS:
        store.add_document("wiki", title, title, None, chunks, f"hash of {title}")
    yield LocalCorpusSearcher(store)
    store.close()


def test_fusion_ranks_by_summed_reciprocal_rank():
    fused = fuse([["a", "b", "c"], ["c", "b", "d"]], key=lambda x: x)
    # b: 1/62 + 1/62; c: 1/63 + 1/61 (larger); a: 1/61 alone; d: 1/63 alone.
    assert [item for item, _ in fused] == ["c", "b", "a", "d"]
    assert fused[0][1] == pytest.approx(1 / 63 + 1 / 61)


def test_the_builtin_reranker_cannot_demote_what_both_orders_agree_on():
    hits = [hit("A", "alpha"), hit("B", "beta"), hit("C", "gamma")]

    class Reverse:
        description = "reverse"

        def rerank(self, query, given, k):
            return list(reversed(given))[:k]

    ranked = FusedReranker(Reverse()).rerank("q", hits, 3)
    # Reversed by the other: A and C tie (1/61 + 1/63) above B (2/62); the first stage's order
    # breaks the tie, so its first hit stays first.
    assert [h.title for h in ranked] == ["A", "C", "B"]
    assert {h.ref for h in ranked} == {h.ref for h in hits}

    class Agree:
        description = "agree"

        def rerank(self, query, given, k):
            return list(given)[:k]

    assert [h.title for h in FusedReranker(Agree()).rerank("q", hits, 2)] == ["A", "B"]


def test_the_builtin_reranker_without_an_embedder_keeps_the_order():
    hits = [hit("A"), hit("B"), hit("C")]
    reranker = builtin_reranker(None)
    assert isinstance(reranker, KeepOrder)
    assert [h.title for h in reranker.rerank("q", hits, 2)] == ["A", "B"]


def test_the_floor_keeps_a_bridge_page_named_by_a_kept_page_and_drops_a_hop_from_noise():
    hits = [
        hit("Charles Mathew", "Charles Mathew was a politician, son of George Mathew.", via=NAMED_BY_QUESTION),
        hit("George Mathew", "He was buried at Westminster Abbey.", via="Charles Mathew"),
        hit("Unrelated page", "Tennis results of 1990.", via=""),
        hit("Hop of noise", "Football scores.", via="Unrelated page"),
    ]
    result = relevant_hits(QUESTION, hits, floor=0.35)
    assert [h.title for h in result.kept] == ["Charles Mathew", "George Mathew"]
    assert [j.hit.title for j in result.dropped] == ["Unrelated page", "Hop of noise"]


def test_without_provenance_the_bridge_page_is_dropped():
    # The same bridge page without `via`: what the floor did before, and why provenance is needed.
    hits = [
        hit("Charles Mathew", "Charles Mathew was a politician, son of George Mathew."),
        hit("George Mathew", "He was buried at Westminster Abbey."),
    ]
    assert [h.title for h in relevant_hits(QUESTION, hits, floor=0.35).kept] == ["Charles Mathew"]


def test_hybrid_follows_the_hop_to_the_bridge_page_and_the_floor_keeps_it(corpus):
    searcher = build_local_retrieval(corpus, RetrievalSettings(retriever="hybrid"), None)
    hits = searcher.search(QUESTION, 5)
    # BM25's first, then the page the question names, then the page that one names (the hop).
    assert [h.title for h in hits][:3] == ["Burial at sea", "Charles Mathew", "George Mathew"]
    assert "dense retrieval unavailable" in searcher.description
    kept = relevant_hits(QUESTION, hits, floor=0.35).kept
    assert "George Mathew" in [h.title for h in kept]


def test_each_retriever_setting_builds_its_first_stage(corpus):
    embedder = HashedWords()
    index = VectorIndex(corpus.store, "hashed-words")
    index.update(lambda texts: embedder.embed(list(texts)))
    assert build_local_retrieval(corpus, RetrievalSettings(retriever="bm25"), embedder, vectors=index) is corpus
    dense = build_local_retrieval(corpus, RetrievalSettings(retriever="dense"), embedder, vectors=index)
    assert dense.description == "local corpus by hashed words"
    assert dense.search("Westminster Abbey buried", 1)[0].title == "George Mathew"
    hybrid = build_local_retrieval(corpus, RetrievalSettings(retriever="hybrid"), embedder, vectors=index)
    assert isinstance(hybrid, HopSearcher) and isinstance(hybrid.searcher, FusedSearcher)
    assert [h.title for h in hybrid.search(QUESTION, 5)][1:3] == ["Charles Mathew", "George Mathew"]
    # Without vectors, dense falls back to BM25 and says so.
    fallback = build_local_retrieval(corpus, RetrievalSettings(retriever="dense"), None)
    assert "dense retrieval unavailable" in fallback.description
    assert fallback.search("Westminster", 1)[0].title == "George Mathew"


class Eager:
    """A searcher as it is seen through `search` alone: every hit with its snippet made at once."""

    def __init__(self, inner):
        self.inner = inner
        self.store = inner.store

    @property
    def description(self):
        return self.inner.description

    def search(self, query, k=5):
        return self.inner.search(query, k)

    def titled(self, title):
        return self.inner.titled(title)


def test_the_hybrid_search_makes_snippets_for_the_hits_it_keeps_the_same_as_before(corpus):
    long_text = " ".join(
        ["Westminster Abbey holds the tombs of kings and statesmen."] * 3
        + ["George Mathew's grave lies in the abbey's north aisle, his son Charles wrote."] * 4
    )
    corpus.store.add_document("wiki", "Westminster burials", "Westminster burials", None, [long_text], "burials")
    embedder = HashedWords()
    index = VectorIndex(corpus.store, "hashed-words")
    index.update(lambda texts: embedder.embed(list(texts)))
    hybrid = build_local_retrieval(corpus, RetrievalSettings(retriever="hybrid"), embedder, vectors=index)
    dense = hybrid.searcher.searchers[1]
    eager = HopSearcher(FusedSearcher([Eager(corpus), Eager(dense)], store=corpus.store), linkers=hybrid.linkers)
    asked: list[int] = []
    deferred = 0
    made = corpus.store.snippets
    corpus.store.snippets = lambda query, ids: asked.extend(ids) or made(query, ids)
    for query in (QUESTION, "George Mathew grave north aisle", "Westminster Abbey kings", "nothing matches zzz"):
        for k in (1, 2, 5):
            asked.clear()
            hits = hybrid.search(query, k)
            assert hits == eager.search(query, k)
            assert all(h.snippet != SNIPPET_LATER for h in hits)
            assert len(asked) <= k  # not one per candidate (the hop searcher asks for 50)
            deferred += len(asked)
    assert deferred  # BM25's hits got their snippets afterwards
    grave = hybrid.search("George Mathew grave north aisle", 5)
    burials = next(h for h in grave if h.title == "Westminster burials")
    # FTS5's passage around the words, not the text's start.
    assert "grave" in burials.snippet and burials.snippet != long_text[:300]


def test_fusion_makes_hits_only_for_the_refs_it_keeps(corpus, monkeypatch):
    import engine.search.local as local

    embedder = HashedWords()
    index = VectorIndex(corpus.store, "hashed-words")
    index.update(lambda texts: embedder.embed(list(texts)))
    hybrid = build_local_retrieval(corpus, RetrievalSettings(retriever="hybrid"), embedder, vectors=index)
    fused = hybrid.searcher
    made: list[str] = []
    real = local.corpus_hit
    monkeypatch.setattr(local, "corpus_hit", lambda chunk, *a, **kw: made.append(chunk.title) or real(chunk, *a, **kw))
    # Both stages rank all five documents; the two kept are made, each once, by the stage that ranks it first.
    assert len(fused.searchers[0].ranking(QUESTION, 50).refs) + len(fused.searchers[1].ranking(QUESTION, 50).refs) > 5
    made.clear()
    found = fused.candidates(QUESTION, 2)
    assert sorted(made) == sorted(h.title for h in found.hits) and len(made) == 2
    expected = fuse([[h.ref for h in stage.search(QUESTION, 50)] for stage in fused.searchers], key=lambda ref: ref)
    assert [(h.ref, h.score) for h in found.hits] == expected[:2]
    assert found.hits[0].snippet == SNIPPET_LATER  # BM25 ranks it first: its snippet is made when kept
    assert all(h.snippet != SNIPPET_LATER for h in found.finish(found.hits))


def test_the_hops_hand_on_their_hits_with_snippets_to_come(corpus):
    """A caller that keeps a few of the hybrid search's hits (the research agent's top N of its K)
    asks for candidates: the same hits as `search`, in its order, whose snippets `finish` makes, for
    the hits given it only."""
    embedder = HashedWords()
    index = VectorIndex(corpus.store, "hashed-words")
    index.update(lambda texts: embedder.embed(list(texts)))
    hybrid = build_local_retrieval(corpus, RetrievalSettings(retriever="hybrid"), embedder, vectors=index)
    assert isinstance(hybrid, HopSearcher)
    searched = hybrid.search(QUESTION, 4)
    found = hybrid.candidates(QUESTION, 4)
    assert [h.ref for h in found.hits] == [h.ref for h in searched]
    later = [h for h in found.hits if h.snippet == SNIPPET_LATER]
    assert later, "BM25 ranks some of them first: their snippets are to come"
    assert found.finish(found.hits) == searched
    kept = found.finish([later[0]])
    assert kept == [next(h for h in searched if h.ref == later[0].ref)]
    assert hybrid.candidates(QUESTION, 0).hits == []
