"""`attribute_uncited`: citations added for small models that write from their sources without
citing them, only where the sentence is clearly drawn from one source."""

from __future__ import annotations

from dataclasses import dataclass

from engine.citations import attribute_uncited, to_stored_markers
from engine.methods.deot.params import DeotParams
from engine.methods.omnithink.params import OmniThinkParams
from engine.methods.rag import RagParams


@dataclass
class Src:
    id: int
    title: str
    text: str
    snippet: str = ""


SOURCES = [
    Src(
        11,
        "Magic-City",
        "Magic-City was an amusement park near Pont de l'Alma, two blocks east of the Eiffel "
        "Tower, in Paris, France from 1900 to 1934.",
    ),
    Src(
        12,
        "Seine",
        "The Seine is a 777-kilometre-long river in northern France. It flows through Paris into "
        "the English Channel at Le Havre.",
    ),
]


def test_a_sentence_drawn_from_one_source_gets_its_number():
    text, added = attribute_uncited("The Seine is a long river in northern France that flows through Paris.", SOURCES)
    assert text == "The Seine is a long river in northern France that flows through Paris [2]." and added == 1


def test_a_line_naming_a_source_title_cites_it_and_cited_or_vague_sentences_are_left_alone():
    original = (
        "- Magic-City\n- The Seine reaches the English Channel at Le Havre [2]\n- It is great.\n"
        "- Rivers of Germany include the Rhine, the Elbe and the Danube."
    )
    text, added = attribute_uncited(original, SOURCES)
    assert text.splitlines() == [
        "- Magic-City [1]",
        "- The Seine reaches the English Channel at Le Havre [2]",
        "- It is great.",
        "- Rivers of Germany include the Rhine, the Elbe and the Danube.",
    ]
    assert added == 1


def test_added_citations_resolve_like_the_models_own():
    text, _ = attribute_uncited("Magic-City was an amusement park near the Eiffel Tower in Paris.", SOURCES)
    stored, dropped = to_stored_markers(text, SOURCES)
    assert stored == "Magic-City was an amusement park near the Eiffel Tower in Paris [[S11]]." and dropped == []


def test_nothing_to_attribute_without_sources():
    assert attribute_uncited("The Seine flows through Paris.", []) == ("The Seine flows through Paris.", 0)


def test_attribution_is_off_with_the_papers_values_and_on_in_the_quick_profile():
    for params in (RagParams, DeotParams, OmniThinkParams):
        assert params().attribute_citations is False
        assert params.quick_profile["attribute_citations"] is True


def test_headings_are_never_given_a_citation():
    text = "## The Seine river flows through Paris into the English Channel\n\n## Seine"
    assert attribute_uncited(text, SOURCES) == (text, 0)


def test_questions_are_never_given_a_citation():
    text = "Query: Which river flows through Paris in northern France?"
    assert attribute_uncited(text, SOURCES) == (text, 0)


POE = Src(
    13,
    "Arthur's Magazine",
    "Arthur's Magazine (1844-1846) was an American literary periodical published in Philadelphia. It "
    "featured work by Edgar A. Poe, J.H. Ingraham, Sarah Josepha Hale, Thomas G. Spear, and others. Its "
    "circulation was 3.5 thousand copies.",
)


def test_an_initials_or_a_titles_period_ends_no_sentence_so_no_citation_cuts_a_name():
    """Seen with the built-in model: "Edgar A [1]. Poe, ... Thomas G [1]. Spear" — the periods of the
    initials were taken for sentence ends, and each piece got a citation in the middle of a name."""
    text = "The magazine featured work by Edgar A. Poe, J.H. Ingraham and Thomas G. Spear. Dr. Hale wrote for it."
    attributed, added = attribute_uncited(text, [POE])
    assert attributed == (
        "The magazine featured work by Edgar A. Poe, J.H. Ingraham and Thomas G. Spear [1]. Dr. Hale wrote for it."
    )
    assert added == 1  # the last sentence names too few of the source's words to be drawn from it


def test_a_sentence_with_a_decimal_number_is_one_sentence_and_can_be_attributed():
    # Before, no unit could start before "3." of "3.5": the words ahead of it were never attributed.
    text, added = attribute_uncited(
        "Arthur's Magazine in Philadelphia had a circulation of 3.5 thousand copies.", [POE]
    )
    assert text == "Arthur's Magazine in Philadelphia had a circulation of 3.5 thousand copies [1]." and added == 1
