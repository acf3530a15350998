"""No new circle and no new arrow back up the layers (`tests/import_graph.py` reads the graph and
says the rules). The ones still there are listed below, each a step of issue 44 not taken yet: the
lists may only shrink, and a test fails when one of them is gone, so the list stays true."""

from __future__ import annotations

from tests.import_graph import back_arrows, circles, graph

KNOWN_CIRCLES: set[tuple[str, str]] = set()
KNOWN_BACK_ARROWS = {
    # Storage uses three leaf helpers of the engine (a URL's redaction, a value check, a title).
    ("storage.db", "engine.config_values"),
    ("storage.db", "engine.redact"),
    ("storage.repository", "engine.questions"),
}


def test_no_new_circle():
    found = set(circles(graph()))
    assert found <= KNOWN_CIRCLES, f"new import circles: {sorted(found - KNOWN_CIRCLES)}"
    assert found == KNOWN_CIRCLES, f"gone, take them off KNOWN_CIRCLES: {sorted(KNOWN_CIRCLES - found)}"


def test_no_new_back_arrow():
    found = set(back_arrows(graph()))
    assert found <= KNOWN_BACK_ARROWS, f"new arrows back up the layers: {sorted(found - KNOWN_BACK_ARROWS)}"
    assert found == KNOWN_BACK_ARROWS, f"gone, take them off KNOWN_BACK_ARROWS: {sorted(KNOWN_BACK_ARROWS - found)}"


def test_the_reader_sees_a_circle_and_a_back_arrow():
    # The reader itself: a made-up graph with one circle (a <-> b) and one arrow up (engine.llm -> methods).
    arrows = {"engine.llm.a": {"engine.llm.b", "engine.methods.x"}, "engine.llm.b": {"engine.llm.a"},
              "engine.methods.x": {"storage.models"}}
    assert circles(arrows) == [("engine.llm.a", "engine.llm.b")]
    assert back_arrows(arrows) == [("engine.llm.a", "engine.methods.x")]
