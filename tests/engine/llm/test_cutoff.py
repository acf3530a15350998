"""Free text cut off by the output-token limit ends where the model last finished something
(`engine/llm/cutoff.py`), through the real `openai` client: the fake server answers
`finish_reason: "length"`, `RunLLM.text` ends the text at its last complete sentence and
`RunLLM.text_reply` says it was cut."""

from __future__ import annotations

import random

import pytest

from engine.config import LLMSettings
from engine.llm.cutoff import complete_sentences
from engine.llm.fake import FakeLLM, FakeReply
from engine.llm.fake_server import FakeOpenAIServer
from engine.llm.limits import ConcurrencyLimiter
from engine.llm.openai_compat import OpenAICompatibleLLM
from engine.llm.protocol import Message
from tests.engine.llm.test_prompt_names import run_llm


@pytest.mark.parametrize(
    "cut, kept",
    [
        # the unfinished sentence goes; the citation marker after the last stop stays
        (
            "## Causes\n\nPoverty has many causes [[S1]]. It is caused by several factors, including lack of ",
            "## Causes\n\nPoverty has many causes [[S1]].",
        ),
        ('Growth rose." [[S12]] And then', 'Growth rose." [[S12]]'),
        ("It fell by 3.5 percent. It is about 3.5 percent of GDP and", "It fell by 3.5 percent."),  # 3.5 is no stop
        # finished lines are kept; a heading, a bare list marker or a colon line left with nothing after goes
        (
            "1. First point\n2. Second point\n5. \n6. **Military Control**: Dictators kept control over the",
            "1. First point\n2. Second point",
        ),
        ("The text ends well.\n\n## References", "The text ends well."),
        ("Causes are many. They include:\n- poverty of", "Causes are many."),
        # nothing complete at all: what there is, marked as cut
        ("no stop at all here", "no stop at all here…"),
        (
            "### What leads to poverty?\n\nIt is caused by lack of",
            "### What leads to poverty?\n\nIt is caused by lack of…",
        ),
    ],
)
def test_a_cut_text_ends_at_its_last_complete_sentence_or_line(cut, kept):
    assert complete_sentences(cut) == kept


def test_run_llm_text_ends_a_cut_answer_and_leaves_a_whole_one_alone():
    responder = (
        FakeLLM()
        .when("cut", FakeReply("One finding [1]. Another finding that was", cut_off=True))
        .when("whole", FakeReply("One finding [1]. Another finding that was"))
    )
    with FakeOpenAIServer(responder) as server:
        llm = OpenAICompatibleLLM(
            LLMSettings(base_url=server.base_url, api_key="k", timeout_s=5, max_retries=1),
            ConcurrencyLimiter(1),
            sleep=lambda _: None,
            rng=random.Random(0),
        )
        run, usage = run_llm(llm)
        cut = run.text_reply([Message("user", "Question: cut")], max_tokens=20)
        whole = run.text_reply([Message("user", "Question: whole")], max_tokens=20)
        text = run.text([Message("user", "Question: cut")], max_tokens=20)
        assert server.requests[0]["max_tokens"] == 20
    assert (cut.text, cut.cut_off) == ("One finding [1].", True)
    assert (whole.text, whole.cut_off) == ("One finding [1]. Another finding that was", False)
    assert text == "One finding [1]."
    assert len(usage.calls) == 3  # every call is accounted, the cut ones too
