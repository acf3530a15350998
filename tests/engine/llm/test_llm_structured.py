"""ask_structured end to end: the real adapter and openai client against the fake server."""

from __future__ import annotations

import json
import random

import pytest
from pydantic import BaseModel, Field

from engine.config import LLMSettings
from engine.llm.compact_schema import MIN_STRING_CHARS, compact_schema
from engine.llm.fake import FakeLLM, FakeReply
from engine.llm.fake_server import FakeOpenAIServer
from engine.llm.limits import ConcurrencyLimiter
from engine.llm.openai_compat import OpenAICompatibleLLM
from engine.llm.protocol import Message, ResponseFormat, StructuredOutputError
from engine.llm.structured import TOO_LONG_FEEDBACK, ask_structured, schema_for

SOURCES_PROMPT = """Sources:
[1] Bee communication
Honey bees communicate the location of flowers with the waggle dance. The angle of the dance
encodes the direction relative to the sun.

[2] Pollination
Bees pollinate many crops. Flowers attract bees with scent and colour.

Question: How do bees communicate where flowers are?"""


class Finding(BaseModel):
    answer: str
    follow_up_questions: list[str] = Field(min_length=2, max_length=4)
    confidence: float = Field(ge=0, le=1)


def make_llm(server: FakeOpenAIServer, **overrides) -> OpenAICompatibleLLM:
    settings = LLMSettings(base_url=server.base_url, api_key="k", timeout_s=2, max_retries=1,
                           **overrides)  # fmt: skip
    return OpenAICompatibleLLM(settings, ConcurrencyLimiter(2), sleep=lambda _: None,
                               rng=random.Random(0))  # fmt: skip


def test_structured_answer_from_the_fake_server():
    with FakeOpenAIServer() as server:
        responses = []
        finding = ask_structured(
            make_llm(server), [Message("user", SOURCES_PROMPT)], Finding,
            on_response=responses.append,
        )  # fmt: skip

    assert "waggle dance [1]" in finding.answer
    assert len(set(finding.follow_up_questions)) == 3
    assert responses[0].response_format is ResponseFormat.JSON_SCHEMA
    assert server.requests[0]["response_format"]["json_schema"]["name"] == "Finding"


def test_malformed_json_is_re_asked_with_the_error():
    with FakeOpenAIServer() as server:
        server.enqueue(content="not json {")
        finding = ask_structured(make_llm(server), [Message("user", SOURCES_PROMPT)], Finding)

        assert server.count_chat_requests() == 2
        second = server.requests[1]["messages"]
    assert finding.answer
    assert second[-2] == {"role": "assistant", "content": "not json {"}
    assert "That answer was not valid: no JSON object found" in second[-1]["content"]


def test_schema_invalid_answer_re_asks_then_succeeds():
    with FakeOpenAIServer() as server:
        server.enqueue(content='{"answer": "x", "follow_up_questions": [], "confidence": 3}')
        ask_structured(make_llm(server), [Message("user", SOURCES_PROMPT)], Finding)
        error_message = server.requests[1]["messages"][-1]["content"]
    assert "follow_up_questions" in error_message and "confidence" in error_message


def test_schema_invalid_every_time_raises_after_max_reasks():
    responder = FakeLLM().when("", {"wrong": 1})
    with FakeOpenAIServer(responder) as server:
        with pytest.raises(StructuredOutputError) as caught:
            llm = make_llm(server)
            ask_structured(llm, [Message("user", "Question: x")], Finding, max_reasks=2)
        assert server.count_chat_requests() == 3
    assert caught.value.attempts == 3 and caught.value.last_output == '{"wrong": 1}'


def test_an_answer_cut_off_by_the_length_limit_is_asked_again_shorter():
    """finish_reason "length": the model is told its answer was too long, without its cut text (a small
    model shown it writes it as long again), once however many times it is cut; cut twice, it is
    asked for the compact form (engine/llm/compact_schema.py) in the schema and in the prompt."""
    cut = '{"answer": "The waggle dance, described at great length, and then more and more'
    responder = FakeLLM().when("", FakeReply(cut, cut_off=True), times=2)
    with FakeOpenAIServer(responder) as server:
        responses = []
        finding = ask_structured(
            make_llm(server), [Message("user", SOURCES_PROMPT)], Finding, on_response=responses.append, max_tokens=50
        )
        bodies = server.requests
    assert [r.cut_off for r in responses] == [True, True, False] and finding.confidence is not None
    first, second, third = (b["messages"] for b in bodies)
    assert second[:-1] == first and second[-1] == {"role": "user", "content": TOO_LONG_FEEDBACK}
    # The third is the second with the compact schema in place of the full one, nothing else.
    assert third[0] == second[0] and third[2:] == second[2:]
    full, compact = (b["response_format"]["json_schema"]["schema"] for b in (bodies[1], bodies[2]))
    assert compact == compact_schema(full, 50) and compact != full
    assert compact["properties"]["answer"]["maxLength"] == MIN_STRING_CHARS
    assert '"maxLength":40' in third[1]["content"] and '"maxLength"' not in second[1]["content"]
    assert all(cut not in str(b["messages"]) for b in bodies)


class SmallSummary(BaseModel):
    """DEoT's node summary in miniature: required text, a required list, an optional list."""

    findings: str
    evidence: list[str] = Field(min_length=1, max_length=6)
    analysis: str
    conflicts: list[str] = Field(default=[], max_length=4)
    conclusion: str


def grammar_like(request) -> FakeReply:
    """A server that samples under the schema's grammar (as llama.cpp does): with no length limit in
    the schema the model runs on until the cap cuts it; with one, each string stops at its limit."""
    schema = request.json_schema or {}
    limit = schema.get("properties", {}).get("conclusion", {}).get("maxLength")
    if limit is None:
        return FakeReply('{"findings": "' + "long findings " * 40, cut_off=True)
    words = "Axial tilt of 23.4 degrees " * 20
    text = lambda n: words[:n].strip()  # noqa: E731
    items = schema["properties"]["evidence"]["maxItems"]
    return FakeReply(
        json.dumps(
            {
                "findings": text(limit),
                "evidence": [text(limit)] * items,
                "analysis": text(limit),
                "conclusion": text(limit),
            }
        )
    )


def test_a_structured_answer_cut_off_twice_is_answered_in_the_compact_form():
    # The first run's failure on a busy machine: the summary was cut before its conclusion three
    # times and the node failed. Now the third attempt asks for the compact form, and it fits.
    with FakeOpenAIServer(FakeLLM().when("", grammar_like)) as server:
        responses = []
        summary = ask_structured(
            make_llm(server),
            [Message("user", SOURCES_PROMPT)],
            SmallSummary,
            on_response=responses.append,
            max_tokens=300,
        )
        schemas = [b["response_format"]["json_schema"]["schema"] for b in server.requests]
    assert [r.cut_off for r in responses] == [True, True, False]
    assert summary.conclusion.startswith("Axial tilt") and len(summary.evidence) == 2
    assert "conflicts" in schemas[0]["properties"] and "conflicts" not in schemas[2]["properties"]
    assert schemas[2]["properties"]["evidence"]["maxItems"] == 2


def test_one_cut_off_with_one_attempt_left_goes_to_the_compact_form_at_once():
    with FakeOpenAIServer(FakeLLM().when("", grammar_like)) as server:
        summary = ask_structured(
            make_llm(server), [Message("user", "Question: x")], SmallSummary, max_reasks=1, max_tokens=300
        )
        assert server.count_chat_requests() == 2
    assert summary.conclusion


def test_the_compact_form_narrows_every_field_and_still_validates_as_the_full_type():
    full = schema_for(SmallSummary)
    compact = compact_schema(full, 300)
    props = compact["properties"]
    assert set(props) == {"findings", "evidence", "analysis", "conclusion"}  # the optional list is left out
    assert props["evidence"]["maxItems"] == 2 and props["evidence"]["minItems"] == 1
    # 300 tokens of about 2 characters of text each, shared among 3 strings and 2 list items.
    assert props["findings"]["maxLength"] == props["evidence"]["items"]["maxLength"] == 120
    assert full == schema_for(SmallSummary)  # the original is untouched
    answer = {"findings": "f" * 120, "evidence": ["e" * 120] * 2, "analysis": "a", "conclusion": "c"}
    assert SmallSummary.model_validate(answer).conflicts == []
    # Limits a field already has are kept when they are tighter, and a minimum is never undercut.
    assert compact_schema(
        {
            "type": "object",
            "properties": {"s": {"type": "string", "maxLength": 10}, "t": {"type": "string", "minLength": 900}},
            "required": ["s", "t"],
        },
        100,
    )["properties"] == {
        "s": {"type": "string", "maxLength": 10},
        "t": {"type": "string", "minLength": 900, "maxLength": 900},
    }
    # A string whose form is fixed (an enum) gets no length limit; no cap means a fixed budget.
    literal = compact_schema(
        {"type": "object", "properties": {"v": {"type": "string", "enum": ["A", "B"]}}, "required": ["v"]}, None
    )
    assert literal["properties"]["v"] == {"type": "string", "enum": ["A", "B"]}


def test_a_cut_off_answer_that_never_fits_names_the_limit_in_the_error():
    responder = FakeLLM().when("", FakeReply('{"answer": "x", "follow_up_questions": ["a", "b"', cut_off=True))
    with FakeOpenAIServer(responder) as server:
        with pytest.raises(StructuredOutputError, match="cut off by the length limit"):
            ask_structured(make_llm(server), [Message("user", "Question: x")], Finding, max_reasks=1)


def test_a_cut_off_answer_that_is_still_complete_is_used():
    whole = '{"answer": "x", "follow_up_questions": ["a", "b"], "confidence": 0.5}'
    with FakeOpenAIServer(FakeLLM().when("", FakeReply(whole, cut_off=True))) as server:
        finding = ask_structured(make_llm(server), [Message("user", "Question: x")], Finding)
        assert server.count_chat_requests() == 1
    assert finding.confidence == 0.5


def test_structured_output_through_a_llama_cpp_like_server():
    with FakeOpenAIServer(reject_json_schema=True) as server:
        llm = make_llm(server)
        first = ask_structured(llm, [Message("user", SOURCES_PROMPT)], Finding)
        second = ask_structured(llm, [Message("user", SOURCES_PROMPT)], Finding)
        kinds = [body["response_format"]["type"] for body in server.requests]

    assert first == second
    assert kinds == ["json_schema", "json_object", "json_object"]


def test_prompted_mode_works_from_the_schema_in_the_prompt():
    with FakeOpenAIServer() as server:
        finding = ask_structured(
            make_llm(server, structured_mode="prompted"), [Message("user", SOURCES_PROMPT)], Finding
        )
        assert "response_format" not in server.requests[0]
    assert "[1]" in finding.answer


def test_ask_structured_with_the_fake_directly():
    fake = FakeLLM()
    finding = ask_structured(fake, [Message("user", SOURCES_PROMPT)], Finding)
    assert fake.call_count == 1 and "[1]" in finding.answer


def test_the_schema_shown_to_models_leaves_out_class_docstrings_but_keeps_field_descriptions():
    """A 0.5B model copied "The executor's structured summary (appendix C, figure 22)." into its answer."""
    from engine.llm.structured import schema_for
    from engine.methods.deot.schemas import NodeSummary, breadth_model

    schema = schema_for(NodeSummary)
    assert "description" not in schema and "appendix" not in str(schema)
    assert "citing sources as [n]" in schema["properties"]["key_findings"]["description"]
    assert "appendix" not in str(schema_for(breadth_model(3)))


class Summary(BaseModel):
    paragraphs: list[str]
    short_answer: str = Field(description="The answer in as few words as possible: a name, number or date.")


SUMMARY_SYSTEM = (
    "Write the refined answer in paragraphs; then the short answer: the fewest words that answer "
    "the question (a name, number, date, yes or no)."
)


def test_an_answer_that_copies_the_instructions_is_re_asked():
    """A 0.5B model answered MTQA's summary with the prompt's own words as its short answer. That is
    not an answer: it is re-asked, saying why, and quoting the user's data stays allowed."""
    with FakeOpenAIServer() as server:
        server.enqueue(
            content='{"paragraphs": ["Arthur\'s Magazine came first [1]."], "short_answer": '
            '"The fewest words that answer the question (a name, number, date, yes or no)."}'
        )
        server.enqueue(
            content='{"paragraphs": ["How do bees communicate where flowers are? With the waggle '
            'dance [1]."], "short_answer": "The waggle dance"}'
        )
        summary = ask_structured(
            make_llm(server), [Message("system", SUMMARY_SYSTEM), Message("user", SOURCES_PROMPT)], Summary
        )
        reask = server.requests[1]["messages"][-1]["content"]
    assert summary.short_answer == "The waggle dance"  # the user's question quoted in a paragraph is fine
    assert "short_answer repeats the instructions instead of answering them" in reask


def test_a_field_description_copied_every_time_fails_as_a_structured_output_error():
    with FakeOpenAIServer() as server:
        for _ in range(3):
            server.enqueue(content='{"paragraphs": ["x"], "short_answer": "The answer in as few words as possible"}')
        with pytest.raises(StructuredOutputError, match="repeats the instructions"):
            ask_structured(make_llm(server), [Message("user", SOURCES_PROMPT)], Summary)


BLENDED_COPY = "The fewest words that answer the question (a name, number, date, or yes/no); no explanation."


def test_a_blend_of_the_prompt_and_the_schema_counts_as_a_copy_of_the_instructions():
    """3 of 18 MTQA runs on HotpotQA answered BLENDED_COPY with the built-in model: the summary
    prompt's words with the schema description's, in neither word for word."""
    from engine.llm.structured import format_instruction, repeats_instructions
    from engine.methods.mtqa.prompts import SUMMARY
    from engine.methods.mtqa.schemas import ColumnSummary

    instructions = SUMMARY.system + "\n" + format_instruction(ColumnSummary)
    assert BLENDED_COPY.casefold().rstrip(".") not in instructions.casefold()
    assert repeats_instructions(BLENDED_COPY, instructions)
    assert repeats_instructions(
        "The answer in as few words as possible: a name, number, date, yes or no.", instructions
    )


def test_answers_that_share_a_few_words_with_the_instructions_are_not_copies():
    from engine.llm.structured import format_instruction, repeats_instructions
    from engine.methods.mtqa.prompts import SUMMARY
    from engine.methods.mtqa.schemas import ColumnSummary

    instructions = SUMMARY.system + "\n" + format_instruction(ColumnSummary)
    for answer in (
        "Arthur's Magazine",
        "yes",
        "The answer is the Waggle Dance Society of Bavaria",
        "The knowledge units say the magazine was started in 1844, so it is older [1].",
        "Thought 2 claimed 1852, which unit [3] contradicts: the answer is 1844.",
        "a name, number, date, yes or no question about the Eiffel Tower's height in 1889",
    ):
        assert not repeats_instructions(answer, instructions), answer


def test_the_blended_copy_is_re_asked_and_a_real_answer_taken():
    from engine.methods.mtqa.prompts import SUMMARY
    from engine.methods.mtqa.schemas import ColumnSummary

    with FakeOpenAIServer() as server:
        server.enqueue(
            content='{"checks": [], "paragraphs": ["Arthur\'s Magazine came first [1]."], '
            f'"short_answer": "{BLENDED_COPY}"}}'
        )
        server.enqueue(
            content='{"checks": [], "paragraphs": ["Arthur\'s Magazine came first [1]."], '
            '"short_answer": "Arthur\'s Magazine"}'
        )
        summary = ask_structured(
            make_llm(server), [Message("system", SUMMARY.system), Message("user", SOURCES_PROMPT)], ColumnSummary
        )
        reask = server.requests[1]["messages"][-1]["content"]
    assert summary.short_answer == "Arthur's Magazine"
    assert "short_answer repeats the instructions instead of answering them" in reask


def _instructions(prompt, schema, **values) -> str:
    from engine.llm.structured import format_instruction

    filled = {name: "X" for name in prompt.placeholders()} | values
    return prompt.render(**filled)[0].content + "\n" + format_instruction(schema)


@pytest.mark.parametrize(
    "where, reason",
    [
        (
            "deot controller",
            "Early layers should usually go breadth; the topic has several distinct aspects still unexplored.",
        ),
        ("fgdip step", "The path is plausible but uncertain: continuing along it will lead to the correct answer."),
        ("claim support", "Yes, the source supports what the sentence claims."),
    ],
)
def test_a_reason_that_applies_a_rule_in_the_rules_own_words_is_not_a_copy(where, reason):
    """The blend rule holds for answer fields only: judges and controllers rightly justify a decision
    in the prompt's words (review 14c found these three refused and re-asked)."""
    from engine.claim_support import _batch_model
    from engine.evaluate.judge_prompts import CLAIM_SUPPORT
    from engine.llm.structured import copied_instructions
    from engine.methods.deot.prompts import CONTROLLER
    from engine.methods.deot.schemas import ControllerDecision
    from engine.methods.fgdip.prompts import EVALUATE_STEP
    from engine.methods.fgdip.schemas import StepJudgement

    prompt, schema, answer = {
        "deot controller": (CONTROLLER, ControllerDecision, {"reasoning": reason, "decision": "BREADTH"}),
        "fgdip step": (EVALUATE_STEP, StepJudgement, {"judgement": reason, "verdict": "maybe"}),
        "claim support": (
            CLAIM_SUPPORT,
            _batch_model((1,)),
            {"sentence_1": {"verdict": "supported", "reason": reason}},
        ),
    }[where]
    parsed = schema.model_validate(answer)
    assert copied_instructions(parsed, _instructions(prompt, schema)) is None
    # The same words as a short answer would be a copy of the instructions, not an answer.
    from engine.llm.structured import repeats_instructions

    assert repeats_instructions(reason, _instructions(prompt, schema))


class _Answer(BaseModel):
    answer: str
    confidence: str


class _Lenient(BaseModel):
    note: str = ""


def test_an_answer_holding_a_code_block_is_read_whole_not_cut_at_its_fences():
    """An answer about code holds a fenced block in a JSON string: its fences must not cut the JSON
    (read fenced pieces first, `[1, 2]` inside the block was taken for the answer and every try failed)."""
    from engine.llm.structured import parse_output

    text = '{"answer": "Like this:\\n```python\\nvalues = [1, 2]\\n```\\nsee [1].", "confidence": "high"}'
    assert parse_output(text, _Answer).answer == "Like this:\n```python\nvalues = [1, 2]\n```\nsee [1]."
    fenced = 'Sure:\n```json\n{"answer": "x", "confidence": "low"}\n```\nHope it helps {"a": 1}.'
    assert parse_output(fenced, _Answer).confidence == "low"


def test_a_part_of_an_answer_that_does_not_validate_is_no_answer_of_its_own():
    from pydantic import ValidationError

    from engine.llm.structured import parse_output

    with pytest.raises(ValidationError):  # not {"note": ...} nested in it, which would validate
        parse_output('{"note": 3, "detail": {"note": "taken from inside"}}', _Lenient)


class _AllDefaults(BaseModel):
    entities: list[dict] = []


def test_an_empty_object_in_the_prose_does_not_stand_for_an_answer_that_failed():
    from pydantic import ValidationError

    from engine.llm.structured import parse_output

    text = 'If nothing is named I return {} instead.\n\n```json\n{"entities": "Paris"}\n```'
    with pytest.raises(ValidationError):  # re-asked with the fenced answer's error, not taken as empty
        parse_output(text, _AllDefaults)
    with pytest.raises(ValueError):
        parse_output("[" * 3000, _AllDefaults)


def test_an_object_inside_an_answer_that_was_cut_off_is_no_answer():
    from engine.llm.structured import parse_output

    with pytest.raises(ValueError):  # re-asked (shorter, when the endpoint says it was cut off)
        parse_output('{"entities": [{"name": "Paris"}, {"name": "Sei', _AllDefaults)
    assert parse_output("```json\n{}\n```", _AllDefaults).entities == []  # an empty answer, whole


def test_cut_off_under_a_cap_lowered_for_a_slow_machine_goes_compact_at_once():
    """The built-in model on a busy machine writes under a lowered cap (`ChatResponse.output_cap`,
    engine/llm/decode_speed.py), where each attempt costs minutes: cut once, the next attempt is the
    compact form sized to the cap the call really ran under, not to what the step asked."""
    from engine.llm.protocol import ChatResponse

    class SlowMachine:
        description = "a slow built-in model"

        def __init__(self) -> None:
            self.requests = []

        def model_for(self, purpose: str) -> str:
            return "local"

        def chat(self, request):
            self.requests.append(request)
            if len(self.requests) == 1:
                return ChatResponse(
                    text='{"answer": "a long answer that goes on', model="local", cut_off=True, output_cap=60
                )
            return ChatResponse(
                text='{"answer": "short", "follow_up_questions": ["a?", "b?"], "confidence": 0.5}', model="local"
            )

    llm = SlowMachine()
    finding = ask_structured(llm, [Message("user", SOURCES_PROMPT)], Finding, max_tokens=1000)
    assert finding.answer == "short" and len(llm.requests) == 2
    full, compact = llm.requests[0].json_schema, llm.requests[1].json_schema
    assert compact == compact_schema(full, 60) != compact_schema(full, 1000)


def test_a_models_schema_is_made_once_and_each_caller_gets_its_own_copy(monkeypatch):
    """Pydantic makes a JSON schema anew on every call (a wave of structured calls waited on each
    other's): it is made once per model, and what a caller changes in its copy reaches no one else."""
    from engine.llm import structured

    class Verdict(BaseModel):
        supported: bool
        why: str = ""

    made = []
    real = Verdict.model_json_schema
    monkeypatch.setattr(Verdict, "model_json_schema", lambda: made.append(1) or real())
    first = schema_for(Verdict)
    first["properties"]["why"]["maxLength"] = 3
    assert schema_for(Verdict) == structured.schema_for(Verdict) != first
    assert "maxLength" not in schema_for(Verdict)["properties"]["why"] and len(made) == 1
