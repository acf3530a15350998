"""ReAct (engine/methods/react): one thought / action / observation chain, on the scripted fake and
the bundled corpus. The contract suite (`test_method_contract.py`) and the recorded fake tree
(`test_fake_trees.py`) cover it as every method; these are its own rules."""

from __future__ import annotations

import json
import re

from storage.models import NodeStatus, RunStatus
from tests.support.fixtures_engine import run_to_end

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"


def step(action: str, argument: str, thought: str = "Thinking.") -> str:
    return json.dumps({"thought": thought, "action": action, "argument": argument})


def text(request) -> str:
    return "\n".join(m.content for m in request.messages)


def chain(services, run_id):
    return [n for n in services.repo.list_nodes(run_id) if n.kind == "step"]


def test_the_default_path_searches_then_answers_with_citations_that_resolve(services):
    run_id = run_to_end(services, QUESTION, "react")
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.DONE
    steps = chain(services, run_id)
    assert [n.data["action"] for n in steps] == ["search", "search", "finish"]
    assert [n.label for n in steps] == [
        "Search: Arthur's Magazine",
        "Search: First for Women",
        "Finish: Arthur's Magazine",
    ]
    # A chain: each step is the child of the one before.
    assert [n.parent_id for n in steps[1:]] == [n.id for n in steps[:-1]]
    answer = next(n for n in services.repo.list_nodes(run_id) if n.kind == "answer")
    assert answer.parent_id == steps[-1].id and answer.data["short_answer"] == "Arthur's Magazine"
    report = services.repo.list_reports(run_id)[-1]
    assert report.data["short_answer"] == "Arthur's Magazine" and report.data["steps"] == 3
    run_sources = {s.id for s in services.repo.list_sources(run_id)}
    cited = {int(x) for x in re.findall(r"\[\[S(\d+)\]\]", report.markdown)}
    assert cited and cited <= run_sources
    assert "### How it was found" in report.markdown


def test_the_last_step_allowed_may_only_finish(services, fake_llm):
    fake_llm.when(
        prompt="react.step",
        respond=lambda r: step(
            *(
                ("finish", "Arthur's Magazine")
                if "must finish now" in text(r)
                else ("search", f"query {text(r).count('Action ')}")
            )
        ),
    )
    run_id = run_to_end(services, QUESTION, "react", {"max_steps": 3})
    steps = chain(services, run_id)
    assert len(steps) == 3 and steps[-1].data["forced"] and steps[-1].data["action"] == "finish"
    # The forced step was asked with a schema that allows only finish.
    last_request = fake_llm.calls_for("react.step")[-1]
    assert last_request.json_schema is None or "search" not in json.dumps(
        last_request.json_schema["properties"]["action"]
    )
    assert services.repo.get_run(run_id).status == RunStatus.DONE


def test_a_repeated_query_is_not_searched_again_and_the_model_is_told(services, fake_llm):
    answers = iter(
        [
            step("search", "Arthur's Magazine"),
            step("search", "arthur's   magazine"),
            step("finish", "Arthur's Magazine"),
        ]
    )
    fake_llm.when(prompt="react.step", respond=lambda r: next(answers))
    run_id = run_to_end(services, QUESTION, "react")
    steps = chain(services, run_id)
    assert steps[1].data["repeated"] and "found" not in steps[1].data  # nothing was searched
    assert all(link.node_id != steps[1].id for link in services.repo.node_source_links(run_id))
    told = text(fake_llm.calls_for("react.step")[2])
    assert "Observation 2: you searched this already" in told


def test_an_unusable_step_fails_the_run_truthfully_and_a_resume_goes_on(services, fake_llm):
    fake_llm.when(prompt="react.step", respond="not JSON at all", times=3)  # the ask and its re-asks
    run_id = run_to_end(services, QUESTION, "react")
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.FAILED and "nothing was answered" in run.error
    report = services.repo.list_reports(run_id)[-1]
    assert "No answer was produced" in report.markdown
    assert chain(services, run_id)[0].status == NodeStatus.FAILED

    services.runner.resume(run_id)
    final = services.runner.wait(run_id, timeout=60)
    assert final.status == RunStatus.DONE
    assert [n.status for n in chain(services, run_id)] == [NodeStatus.DONE] * 3


def test_on_the_built_in_model_a_question_the_sources_do_not_cover_is_said_so(services, fake_llm):
    """A run stored as the built-in model's (it answers only from sources): nothing any search found is
    about the question, so the answer says so without asking the model, and the report is ours."""
    fake_llm.when(
        prompt="react.step",
        respond=lambda r: step(*(("finish", "unknown") if "Action 1" in text(r) else ("search", "zzqx qqzv"))),
    )
    services.runner.llm_for = lambda run: fake_llm
    run = services.runner.create_run(
        question="What is the zzqx qqzv?",
        method="react",
        params={},
        llm_info={"kind": "local", "model": "built-in", "description": "built-in"},
        search_mode="local",
    )
    services.runner.start(run.id)
    final = services.runner.wait(run.id, timeout=60)
    assert final.status == RunStatus.DONE and "do not cover this question" in final.warning
    answer = next(n for n in services.repo.list_nodes(run.id) if n.kind == "answer")
    assert answer.data["not_covered"] and chain(services, run.id)[0].data["found"] == 0
    assert fake_llm.calls_for("react.answer") == []  # the model was not asked to write from nothing
    report = services.repo.list_reports(run.id)[-1]
    assert report.markdown.startswith("## The sources at hand do not cover this question")
    assert "- zzqx qqzv" in report.markdown and report.data["short_answer"] is None
