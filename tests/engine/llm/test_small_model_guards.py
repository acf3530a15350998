"""Guards for small local models (`engine.llm.small_models`): JSON cut off by the token limit is
closed where it stopped, and sentences a looping model repeated are removed."""

from __future__ import annotations

import json

from engine.llm.small_models import close_truncated_json, collapse_repeats, collapse_repeats_in_json

LOOP = "The creators of Wallace and Gromit are known for their work. This comedy is a series of shorts. "


def test_a_looping_answer_cut_by_the_token_limit_is_closed_and_its_repeats_removed():
    cut = json.dumps({"key_findings": "It is Creature Comforts [1]. " + LOOP * 4, "analysis": "x"})
    cut = cut[: cut.index(LOOP) + len(LOOP) * 3 + 20]  # stopped mid-sentence, inside the first string
    repaired = json.loads(collapse_repeats_in_json(cut))
    assert repaired["key_findings"].startswith("It is Creature Comforts [1]. " + LOOP.strip())
    assert repaired["key_findings"].count("This comedy is a series of shorts.") == 1


def test_cut_json_is_closed_only_when_that_gives_valid_json():
    assert close_truncated_json('{"a": "x", "b": ["one", "tw') == '{"a": "x", "b": ["one", "tw"]}'
    assert close_truncated_json('{"a": "x", "b": [') == '{"a": "x", "b": []}'
    assert close_truncated_json('{"a": "x", "b"') == '{"a": "x"}'
    assert close_truncated_json('{"a": "x",') == '{"a": "x"}'
    assert close_truncated_json('{"a": "say \\"hi') == '{"a": "say \\"hi"}'
    assert close_truncated_json('{"a": 1}') is None  # nothing was cut
    assert close_truncated_json("not json at all") is None


def test_text_answers_lose_only_repeated_long_sentences():
    assert collapse_repeats(LOOP * 3) == LOOP.strip()
    short = "Yes. No. Yes. No."
    assert collapse_repeats(short) == short  # short sentences may repeat on purpose
    assert collapse_repeats_in_json("plain text, not JSON") == "plain text, not JSON"
