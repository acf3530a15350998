"""Hop-following retrieval: the title linker, and the hop order over a small real corpus index."""

from __future__ import annotations

import pytest

from engine.search.exclusion import ExcludingSearcher, SearchExclusions
from engine.search.hops import HopSearcher, LinkerCache, TitleLinker
from engine.search.local import LocalCorpusSearcher
from engine.search.protocol import Searcher
from storage.corpus_store import CorpusStore

QUESTION = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"

# A two-hop question: the film is named, the actress only on the film's page. Her page shares no
# word with the question, so BM25 cannot find her; the distractors share several.
DOCUMENTS = [
    (
        "Kiss and Tell (1945 film)",
        [
            "Kiss and Tell is a 1945 American comedy film starring Shirley Temple as Corliss Archer.",
            "The film Kiss and Tell was based on a play; Kiss and Tell opened on Broadway in 1943.",
        ],
    ),
    (
        "Shirley Temple",
        [
            "Shirley Temple Black was an American actress and diplomat who served as "
            "United States Ambassador to Ghana and to Czechoslovakia."
        ],
    ),
    (
        "Meet Corliss Archer",
        ["Meet Corliss Archer is a radio sitcom; the woman who portrayed Corliss Archer on radio was Janet Waldo."],
    ),
    ("Women in government", ["A government position held by a woman: women held few such positions before the war."]),
    ("Film censorship", ["Government film boards held that a film could not show a kiss for long."]),
    ("Archery", ["An archer in the film held the position of royal archer to the government."]),
    ("Position paper", ["A position paper held by the government sets out its position."]),
    ("Tell (archaeology)", ["A tell is a mound; the woman who found this tell held a government post."]),
]


def add(store: CorpusStore, title: str, chunks: list[str], collection: str = "wiki") -> None:
    store.add_document(collection, title, title, None, chunks, f"hash of {title}")


@pytest.fixture
def store(tmp_path):
    s = CorpusStore(tmp_path / "corpus.sqlite3")
    for title, chunks in DOCUMENTS:
        add(s, title, chunks)
    yield s
    s.close()


@pytest.fixture
def bm25(store) -> LocalCorpusSearcher:
    return LocalCorpusSearcher(store)


def titles(hits) -> list[str]:
    return [hit.title for hit in hits]


# -- the linker ---------------------------------------------------------------------------------


def linker(*titles: str) -> TitleLinker:
    return TitleLinker([("wiki", title) for title in titles])


def test_linker_finds_titles_in_order_of_first_mention_on_word_boundaries():
    found = linker("Shirley Temple", "Temple", "Ghana", "United States", "Kiss and Tell (1945 film)")
    text = (
        "Kiss and Tell starred Shirley Temple, later envoy of the United States to Ghana; "
        "Shirley Temple again. Templeton and Ghanaian are other words."
    )
    # The longest title wins at a position ("Shirley Temple", not "Temple"); each title once.
    assert found.links(text) == ["Kiss and Tell (1945 film)", "Shirley Temple", "United States", "Ghana"]
    assert found.links("A Templeton of Ghanaian descent.") == []


def test_linker_ignores_case_and_accents_but_a_cased_text_must_capitalise_a_name():
    found = linker("Björk", "Blue Lagoon")
    assert found.links("BJORK sang at the Blue lagoon.") == ["Björk", "Blue Lagoon"]
    # Lower case in a text that has capitals is no name; an all lower-case question is matched anyway.
    assert found.links("Bjork was the first to swim in the blue lagoon.") == ["Björk"]
    assert found.links("who was the first to swim in the blue lagoon") == ["Blue Lagoon"]


def test_linker_skips_short_numeric_and_function_word_titles():
    found = linker("Run", "AA", "1995", "It", "Who Are You", "2001 (film)", "Ghana")
    assert found.links("In 1995 it was AA who ran the Run in Ghana. Who Are You? It. 2001.") == ["Ghana"]


def test_a_qualifier_is_dropped_only_for_an_unambiguous_several_word_name():
    found = linker(
        "Mercury (planet)",
        "Mercury (element)",
        "Heart (1987 film)",
        "Kiss and Tell (1945 film)",
        "Paris",
        "Paris (mythology)",
    )
    text = "Mercury, Heart, Kiss and Tell, Paris."
    # "Mercury" names two documents, "Heart" is one common word, "Paris" is a title itself.
    assert found.links(text) == ["Kiss and Tell (1945 film)", "Paris"]


def test_a_texts_links_are_remembered_and_handed_out_as_a_new_list_each_time(monkeypatch):
    import engine.search.hops as hops

    found = linker("Shirley Temple", "Ghana")
    text = "Shirley Temple was envoy to Ghana."
    first = found.links(text)
    first.append("changed by the caller")
    assert found.links(text) == ["Shirley Temple", "Ghana"]  # remembered, and not the caller's list
    scans: list[str] = []
    scan = found._scan
    monkeypatch.setattr(found, "_scan", lambda t: scans.append(t) or scan(t))
    assert found.links(text) == ["Shirley Temple", "Ghana"] and scans == []
    # Full: everything is forgotten at once, and each text is read again.
    monkeypatch.setattr(hops, "LINKS_REMEMBERED", 2)
    for other in ("Ghana.", "Shirley Temple.", "Ghana and Shirley Temple."):
        found.links(other)
    assert found.links(text) == ["Shirley Temple", "Ghana"]
    assert scans == ["Ghana.", "Shirley Temple.", "Ghana and Shirley Temple.", text]


# -- the hop order ------------------------------------------------------------------------------


def test_a_bridge_document_word_match_cannot_find_is_found_by_following_the_hop(bm25):
    plain = titles(bm25.search(QUESTION, 50))
    assert "Shirley Temple" not in plain  # BM25 alone never reaches the answer's document

    hops = titles(HopSearcher(bm25).search(QUESTION, 3))
    assert hops[:3] == [plain[0], "Kiss and Tell (1945 film)", "Shirley Temple"]


def test_hits_are_one_per_document_with_its_best_chunk_and_scores_in_order(bm25):
    plain = bm25.search("Kiss and Tell film", 50)
    assert titles(plain).count("Kiss and Tell (1945 film)") == 2  # both chunks match

    hits = HopSearcher(bm25).search("Kiss and Tell film", 10)
    assert len(titles(hits)) == len(set(titles(hits)))
    film = [hit for hit in hits if hit.title == "Kiss and Tell (1945 film)"]
    assert [hit.ref for hit in film] == [next(h.ref for h in plain if h.title == "Kiss and Tell (1945 film)")]
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == len(scores)


def test_a_page_reached_only_by_its_title_is_given_as_its_first_chunk(store, bm25):
    add(store, "Appendix Bravo", ["Its first chunk says nothing asked.", "A second chunk."])
    add(store, "Index of pages", ["The list names Appendix Bravo and nothing else."])
    assert "Appendix Bravo" not in titles(bm25.search("index of pages", 50))
    hits = HopSearcher(bm25).search("index of pages", 5)
    page = next(hit for hit in hits if hit.title == "Appendix Bravo")
    assert page.text == "Its first chunk says nothing asked."
    assert page.ref.endswith("#0")


def test_the_top_documents_links_move_up_only_when_bm25_found_them_too(store, bm25):
    add(
        store,
        "Saffron harvest",
        ["The saffron harvest in Kozani is picked by hand; see Crocus sativus and Kozani Museum."],
    )
    add(store, "Crocus sativus", ["Crocus sativus is a flower. Saffron comes from it."])
    add(store, "Kozani Museum", ["A museum in a Greek town."])
    for n in range(12):
        add(store, f"Saffron dish {n}", [f"A saffron recipe with rice number {n}, saffron and more saffron harvest."])
    question = "how is saffron picked by hand"
    plain = titles(bm25.search(question, 50))
    assert plain[0] == "Saffron harvest" and plain.index("Crocus sativus") > 3
    assert "Kozani Museum" not in plain

    hops = titles(HopSearcher(bm25).search(question, 10))
    assert hops[:3] == [plain[0], plain[1], "Crocus sativus"]
    assert "Kozani Museum" not in hops  # linked, but not a candidate: a single-hop question keeps BM25's list


def test_the_order_is_deterministic(store, bm25):
    first = HopSearcher(bm25).search(QUESTION, 8)
    again = HopSearcher(LocalCorpusSearcher(store)).search(QUESTION, 8)
    assert [(h.title, h.ref, h.score) for h in first] == [(h.title, h.ref, h.score) for h in again]
    assert HopSearcher(bm25).search(QUESTION, 8) == first


def test_a_document_added_later_is_linked_after_the_store_changes(store, bm25):
    cache = LinkerCache()
    searcher = HopSearcher(bm25, linkers=cache)
    before = cache.linker(store)
    assert cache.linker(store) is before  # built once per generation
    question = "Where was the Lindqvist Observatory built?"
    assert "Lindqvist Observatory" not in titles(searcher.search(question, 5))

    add(store, "Lindqvist Observatory", ["An observatory on a hill near Uppsala."])
    assert cache.linker(store) is not before
    assert titles(searcher.search(question, 5))[0] == "Lindqvist Observatory"


def test_an_excluded_page_is_neither_returned_nor_followed(bm25):
    excluded = ExcludingSearcher(bm25, SearchExclusions(titles=["Kiss and Tell (1945 film)"]))
    hits = titles(HopSearcher(excluded).search(QUESTION, 10))
    assert "Kiss and Tell (1945 film)" not in hits
    assert "Shirley Temple" not in hits  # reachable only through the excluded page


def test_it_is_a_searcher_that_says_it_follows_hops(bm25):
    searcher = HopSearcher(bm25)
    assert isinstance(searcher, Searcher)
    assert searcher.description == bm25.description + " + hops"
    assert searcher.titled("shirley temple").title == "Shirley Temple"
    assert searcher.store is bm25.store
    assert searcher.search(QUESTION, 0) == [] and searcher.search("", 5) == []
