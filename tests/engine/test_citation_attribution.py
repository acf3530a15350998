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
