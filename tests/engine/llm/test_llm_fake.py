"""FakeLLM: scripting, deterministic default answers, the schema filler."""

from __future__ import annotations

import datetime as dt
import enum
import json
import os
import re
import subprocess
import sys
import threading
import uuid
from typing import Annotated, Literal

import pytest
from pydantic import AnyUrl, BaseModel, Field, ValidationError

from engine.llm.fake import FakeLLM, default_answer, key_terms, named, read_prompt
from engine.llm.protocol import LLM, ChatRequest, LLMServerError, Message, ResponseFormat
from engine.llm.schema_fill import fill_schema
from engine.llm.structured import ask_structured, format_instruction
from tests import REPO_ROOT

PROMPT = """You are a careful researcher.

Sources:
[1] Photosynthesis - Encyclopedia
Photosynthesis converts light energy into chemical energy in plants. Chlorophyll absorbs mostly
red and blue light. Oxygen is released as a by-product.

[2] History of botany
Jan Ingenhousz showed in 1779 that light is needed for plants to purify air.
The study of plants is called botany.

Question: How do plants use light energy in photosynthesis?"""


def request(content: str = PROMPT, **options) -> ChatRequest:
    return ChatRequest(messages=(Message("user", content),), **options)


def structured(model: type[BaseModel], content: str = PROMPT) -> ChatRequest:
    return request(
        content,
        response_format=ResponseFormat.JSON_SCHEMA,
        json_schema=model.model_json_schema(),
        schema_name=model.__name__,
    )


# ---------------------------------------------------------------------- models for the filler


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Claim(BaseModel):
    text: str
    source_ids: list[int] = Field(default_factory=list)
    verdict: Literal["supported", "refuted", "unclear"]


class Report(BaseModel):
    title: str = Field(min_length=5, max_length=40)
    summary: str = Field(max_length=120)
    claims: list[Claim] = Field(min_length=2, max_length=5)
    follow_up: list[str] = Field(max_length=2)
    confidence: float = Field(gt=0, lt=1)
    score: int = Field(ge=1, le=10)
    rank: Annotated[int, Field(gt=3)]
    step: int = Field(multiple_of=5, ge=7, le=30)
    note: str | None = None
    color: Color
    created: dt.date
    updated: dt.datetime
    link: AnyUrl
    run_id: uuid.UUID
    metadata: dict[str, int]
    pair: tuple[int, str]
    tags: set[str] = Field(min_length=2)
    choice: Claim | int
    flag: bool = False


class TreeNode(BaseModel):
    label: str
    children: list[TreeNode] = Field(default_factory=list)
    parent: TreeNode | None = None


class Subquestions(BaseModel):
    subquestions: list[str] = Field(min_length=3, max_length=6)


class Bounds(BaseModel):
    exactly_two: list[int] = Field(min_length=2, max_length=2)
    at_least_four: list[str] = Field(min_length=4, max_length=9)
    unbounded: list[str]
    short: str = Field(min_length=10, max_length=12)


# ---------------------------------------------------------------------- protocol and scripting


def test_fake_implements_the_protocol():
    fake = FakeLLM()
    assert isinstance(fake, LLM)
    assert fake.description == "scripted fake LLM (offline, deterministic)"
    assert fake.model_for("judge") == "fake"
    response = fake.chat(request("hello there"))
    assert response.model == "fake" and response.attempts == 1
    assert response.usage.prompt_tokens == max(1, len("hello there") // 4)
    assert response.usage.completion_tokens == max(1, len(response.text) // 4)


def test_rules_in_order_with_times_and_regex():
    fake = (
        FakeLLM()
        .when("weather", "sunny", times=2)
        .when(re.compile(r"weather|climate"), {"forecast": "rain"})
        .when("never", "unused")
    )
    answers = [fake.chat(request("the weather today")).text for _ in range(3)]
    assert answers == ["sunny", "sunny", '{"forecast": "rain"}']
    assert fake.chat(request("climate trends")).text == '{"forecast": "rain"}'
    assert fake.call_count == 4 and fake.calls[0].messages[0].content == "the weather today"


def test_rule_responders_models_callables_and_exceptions():
    claim = Claim(text="t", verdict="unclear")
    fake = (
        FakeLLM()
        .when("model", claim)
        .when("callable", lambda req: {"echo": req.messages[-1].content})
        .when("boom", LLMServerError("scripted failure"), times=1)
    )
    assert Claim.model_validate_json(fake.chat(request("model")).text) == claim
    assert json.loads(fake.chat(request("callable x")).text) == {"echo": "callable x"}
    with pytest.raises(LLMServerError, match="scripted failure"):
        fake.chat(request("boom"))
    assert fake.chat(request("boom")).text  # the rule is used up: default answer
    assert fake.call_count == 4


def test_rules_match_any_message():
    fake = FakeLLM().when("SYSTEM-MARK", "matched")
    chat = ChatRequest(messages=(Message("system", "SYSTEM-MARK"), Message("user", "hi")))
    assert fake.chat(chat).text == "matched"


def test_times_is_respected_under_concurrency():
    fake = FakeLLM().when("x", "scripted", times=5)
    answers: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(20):
            text = fake.chat(request("x")).text
            with lock:
                answers.append(text)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert fake.call_count == 160 and answers.count("scripted") == 5


def test_latency_is_simulated():
    assert FakeLLM(latency_s=0.05).chat(request("x")).latency_s >= 0.05


def test_invalid_times():
    with pytest.raises(ValueError):
        FakeLLM().when("x", "y", times=0)


def named_request(prompt: str, content: str = "hello", attempt: int = 1) -> ChatRequest:
    return ChatRequest(messages=(Message("user", content),), prompt=prompt, attempt=attempt)


def test_rules_by_prompt_name_pattern_or_both():
    fake = (
        FakeLLM()
        .when("urgent", "urgent review", prompt="deot.validate_plan")  # both must match
        .when(prompt="deot.validate_plan", respond="review")
        .when(prompt="omnithink.*", respond="omnithink prompt")  # a prefix
        .when(prompt=("deot.plan_tasks", "deot.revise_plan"), respond="plan")  # any of these
        .when("weather", "by text")  # text only, whatever the prompt
    )
    assert fake.chat(named_request("deot.validate_plan", "an urgent plan")).text == "urgent review"
    assert fake.chat(named_request("deot.validate_plan", "a plan")).text == "review"
    assert fake.chat(named_request("omnithink.expand")).text == "omnithink prompt"
    assert fake.chat(named_request("deot.revise_plan")).text == "plan"
    assert fake.chat(named_request("deot.plan_tasks")).text == "plan"
    assert fake.chat(named_request("deot.controller", "weather")).text == "by text"
    assert fake.chat(named_request("", "weather")).text == "by text"
    # Names are exact: neither a longer name nor a name without the prefix's dot matches.
    assert fake.chat(named_request("deot.validate_plan_v2")).text not in ("review", "urgent review")
    assert fake.chat(named_request("omnithinkx.expand")).text != "omnithink prompt"
    # A rule by name never answers a request without one, even if its text holds the name.
    assert fake.chat(named_request("", "deot.validate_plan")).text != "review"


def test_prompt_match_rules_and_narrowing():
    summary = named("deot.summarize_results")
    about_beta = summary.where(re.compile(r"^Question: Beta$", re.MULTILINE))
    fake = FakeLLM().when(about_beta, "beta summary").when(summary, "summary")
    assert fake.chat(named_request("deot.summarize_results", "Question: Beta")).text == "beta summary"
    assert fake.chat(named_request("deot.summarize_results", "Question: Alpha")).text == "summary"
    assert fake.chat(named_request("deot.controller", "Question: Beta")).text not in ("summary", "beta summary")
    assert about_beta.search("x\nQuestion: Beta\ny") is True
    assert about_beta.search("Question: Alpha") is False


def test_calls_for_selects_by_name_and_first_try():
    fake = FakeLLM()
    for prompt, attempt in (("deot.breadth", 1), ("deot.breadth", 2), ("deot.depth", 1), ("", 1)):
        fake.chat(named_request(prompt, attempt=attempt))
    breadth = fake.calls_for("deot.breadth")
    assert [(r.prompt, r.attempt) for r in breadth] == [("deot.breadth", 1), ("deot.breadth", 2)]
    assert [r.attempt for r in fake.calls_for("deot.breadth", first_try_only=True)] == [1]
    assert [r.prompt for r in fake.calls_for("deot.*")] == ["deot.breadth", "deot.breadth", "deot.depth"]
    assert [r.prompt for r in fake.calls_for(["deot.depth", "nope"])] == ["deot.depth"]
    assert len(fake.calls_for(named("deot.*", pattern="hello"), first_try_only=True)) == 2


def test_bad_rules_are_refused():
    with pytest.raises(ValueError):
        FakeLLM().when(respond="nothing selects this")
    with pytest.raises(TypeError):
        FakeLLM().when("x")  # no respond
    with pytest.raises(ValueError):
        FakeLLM().when(prompt="", respond="x")
    with pytest.raises(ValueError):
        FakeLLM().when(prompt=[], respond="x")
    with pytest.raises(ValueError):
        FakeLLM().when(named("a.b"), "x", prompt="c.d")
    with pytest.raises(TypeError):
        FakeLLM().when(42, "x")
    with pytest.raises(ValueError):
        named()


# ---------------------------------------------------------------------- determinism


def test_two_instances_give_identical_answers():
    for chat in (request(), structured(Report), structured(Subquestions), request("Why?")):
        assert FakeLLM().chat(chat).text == FakeLLM().chat(chat).text


def test_answers_are_identical_across_processes():
    script = (
        "import sys; from tests.engine.llm.test_llm_fake import structured, Report, request; "
        "from engine.llm.fake import FakeLLM; "
        "sys.stdout.write(FakeLLM().chat(structured(Report)).text + '\\n' + "
        "FakeLLM().chat(request()).text)"
    )
    root = REPO_ROOT
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }  # fmt: skip
    local = FakeLLM().chat(structured(Report)).text + "\n" + FakeLLM().chat(request()).text
    assert outputs == {local}


# ---------------------------------------------------------------------- default answers


def test_text_answer_is_extractive_with_citations():
    text = FakeLLM().chat(request()).text
    first = "Photosynthesis converts light energy into chemical energy in plants [1]."
    assert text.startswith(first)
    assert re.findall(r"\[(\d)\]", text)
    assert "lorem" not in text.lower()


def test_text_answer_without_sources_mentions_the_key_terms():
    text = FakeLLM().chat(request("Why do cats purr when they are content?")).text
    assert "cats" in text and "purr" in text and "[" not in text


def test_question_comes_from_the_question_line_or_the_last_user_message():
    assert read_prompt(request().messages).question == ("How do plants use light energy in photosynthesis?")
    chat = (
        Message("system", "Be brief."),
        Message("user", "[1] Some source\nText of it.\n\nWhat about volcanoes?"),
        Message("user", format_instruction(Subquestions)),
    )
    view = read_prompt(chat)
    assert view.question == "What about volcanoes?" and view.terms == ("volcanoes",)
    assert [s.number for s in view.sources] == [1] and view.sources[0].text == "Text of it."


def test_source_blocks_end_at_a_blank_line_or_the_next_block():
    view = read_prompt((Message("user", "[1] A\none\ntwo\n[2] B\nthree\n\nnot a source"),))
    found = [(s.number, s.title, s.text) for s in view.sources]
    assert found == [(1, "A", "one two"), (2, "B", "three")]


def test_key_terms():
    assert key_terms("What are the causes of the French Revolution and its causes?") == (
        "causes", "French", "Revolution",
    )  # fmt: skip
    assert key_terms("") == ()


def test_structured_prose_fields_cite_the_best_sources():
    report = Report.model_validate_json(FakeLLM().chat(structured(Report)).text)
    assert report.summary.endswith("[1].") and len(report.summary) <= 120
    texts = [claim.text for claim in report.claims]
    assert len(set(texts)) == len(texts) and all(re.search(r"\[\d\]\.$", t) for t in texts)
    assert "Photosynthesis converts light energy" in texts[0]


def test_question_fields_are_distinct_questions_on_the_key_terms():
    answer = Subquestions.model_validate_json(FakeLLM().chat(structured(Subquestions)).text)
    assert len(answer.subquestions) == 3 and len(set(answer.subquestions)) == 3
    assert all(q.endswith("?") and "plants" in q for q in answer.subquestions)


def test_prompted_requests_answer_json_from_the_schema_in_the_prompt():
    chat = (Message("user", PROMPT), Message("user", format_instruction(Subquestions)))
    text = FakeLLM().chat(ChatRequest(messages=chat)).text
    Subquestions.model_validate_json(text)


# ---------------------------------------------------------------------- schema filler


@pytest.mark.parametrize("model", [Claim, Report, TreeNode, Subquestions, Bounds])
def test_filled_instances_validate(model: type[BaseModel]):
    via_fake = FakeLLM().chat(structured(model)).text
    model.model_validate_json(via_fake)
    model.model_validate(fill_schema(model.model_json_schema()))  # with the plain writer
    ask_structured(FakeLLM(), [Message("user", PROMPT)], model)


def test_array_sizes_follow_the_bounds():
    bounds = Bounds.model_validate_json(FakeLLM().chat(structured(Bounds)).text)
    assert len(bounds.exactly_two) == 2
    assert len(bounds.at_least_four) == 4
    assert len(bounds.unbounded) == 1
    assert 10 <= len(bounds.short) <= 12


def test_numbers_respect_bounds():
    report = Report.model_validate_json(FakeLLM().chat(structured(Report)).text)
    assert 0 < report.confidence < 1 and 1 <= report.score <= 10
    assert report.rank > 3 and report.step % 5 == 0 and 7 <= report.step <= 30
    assert report.note is not None  # optional fields prefer the non-null branch
    assert report.metadata == {}


def test_filler_handles_raw_schema_keywords():
    schema = {
        "type": "object",
        "properties": {
            "kind": {"const": "fixed"},
            "either": {"oneOf": [{"type": "null"}, {"type": "integer", "exclusiveMinimum": 2}]},
            "multi": {"type": ["null", "number"], "maximum": -3},
            "merged": {
                "allOf": [{"type": "object", "properties": {"a": {"type": "boolean"}}, "required": ["a"]}]
            },  # fmt: skip
            "anything": {},
        },
        "required": ["kind", "either", "multi", "merged", "anything"],
    }
    value = fill_schema(schema)
    assert value["kind"] == "fixed" and value["either"] == 3 and value["multi"] == -3
    assert value["merged"] == {"a": True} and isinstance(value["anything"], str)


def test_recursive_models_terminate():
    node = TreeNode.model_validate_json(FakeLLM().chat(structured(TreeNode)).text)
    depth = 0
    while node.children:
        node, depth = node.children[0], depth + 1
    assert depth < 10


def test_default_answer_is_a_pure_function():
    chat = structured(Report)
    assert default_answer(chat) == default_answer(chat)
    with pytest.raises(ValidationError):
        Report.model_validate_json("{}")  # sanity: the model is strict enough to mean something


# ---------------------------------------------------------------------- demo wording (issue 43)


class Aspects(BaseModel):
    aspect: str = Field(description="Name of the impact aspect.")
    category: str = Field(description="Economic, Social, Political, Technical, Environmental, Historical...")


def test_a_follow_up_of_a_follow_up_reads_as_a_plausible_question():
    """The fake's follow-ups read "What are the key facts about key facts born?" one layer down: it
    took a question's first words for its subject, and the question was its own template."""
    parent = "What are the key facts about the Eiffel Tower?"
    prompt = (
        f"Overall research question: When was the Eiffel Tower built?\nQuestion: {parent}\nAlready explored: {parent}"
    )
    asked = Subquestions.model_validate_json(FakeLLM().chat(structured(Subquestions, prompt)).text).subquestions
    assert all("the Eiffel Tower" in q and q.endswith("?") for q in asked), asked
    assert parent not in asked and len(set(asked)) == len(asked)
    assert not any("key facts about key facts" in q or "Eiffel Tower built" in q for q in asked), asked
    # The same prompt, the same words: still deterministic.
    assert Subquestions.model_validate_json(FakeLLM().chat(structured(Subquestions, prompt)).text).subquestions == asked


def test_aspects_name_the_subject_or_pick_what_the_field_lists():
    prompt = "Question: How did the Apollo program influence the history of computing?"
    answer = Aspects.model_validate_json(FakeLLM().chat(structured(Aspects, prompt)).text)
    assert answer.aspect == "The Apollo program: origins and history"
    assert answer.category == "Economic"


@pytest.mark.parametrize(
    "question, topic",
    [
        ("When was the Eiffel Tower built and who designed it?", "the Eiffel Tower"),
        ("How did the Apollo program influence the history of computing?", "the Apollo program"),
        ("Who wrote the play Hamlet?", "Hamlet"),
        ("How do tides work?", "tides"),
        ("Which sources best explain the Eiffel Tower?", "the Eiffel Tower"),  # one of the fake's own
        ("Subject: When was the Eiffel Tower built?", "the Eiffel Tower"),  # a label is no name
        ("", ""),
    ],
)
def test_the_subject_of_a_question(question, topic):
    from engine.llm.fake_words import subject

    assert subject(question) == topic


def test_without_sources_the_answer_says_so_and_what_to_look_into():
    text = FakeLLM().chat(request("Question: When was the Eiffel Tower built?")).text
    assert text.startswith("The sources at hand do not cover the Eiffel Tower"), text
