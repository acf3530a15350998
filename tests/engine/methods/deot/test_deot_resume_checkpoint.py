"""DEoT checkpoints: a question node interrupted mid-solve (its run failed on an unreachable endpoint,
was stopped, or its process was killed) is solved again on resume from what it stored: the plan
is not asked for again, finished tasks are not run again, and every later prompt numbers the
node's sources exactly as before. A checkpoint that is incomplete, from another plan or query, or
of another shape is not trusted: that work is done again. A retried failed node starts over."""

from __future__ import annotations

import re
import time

import pytest

from engine.llm.fake import request_text
from engine.llm.protocol import ChatRequest, LLMConnectionError
from engine.methods.deot.checkpoint import SOLVING, VERSION
from storage.models import CommandStatus, NodeStatus, RunStatus
from tests.engine.methods.deot.deot_scripts import (
    ATTEMPTS_TO_FAIL,
    DIRECT_REASONING,
    INFO_SEARCH,
    INVALID,
    PLAN_VALIDATOR,
    PLANNER,
    PROMPTER_ANY,
    SUMMARY,
    about,
    plan,
    prompts_with,
    root_of,
    task,
)
from tests.support.fixtures_engine import run_to_end, steer_and_wait

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
ARTHUR = "Arthur's Magazine founding"
FIRST = "First for Women magazine founding"
COMPARE = "Compare when the magazines were founded"
ONLY_THE_ROOT = {"max_nodes": 1}
# Two searches that run concurrently (so their sources are numbered in whichever order they come)
# and an analysis built on the first one's result.
PLAN = plan(
    task("task1", "info_search", ARTHUR),
    task("task2", "info_search", FIRST),
    task("task3", "direct_reasoning", COMPARE, ["task1"]),
)
APPROVE = {"verdict": "approve", "completeness_issues": [], "redundancy_issues": [], "feedback": ""}

_LISTED = re.compile(r"^\[(\d+)\] (.+)$", re.MULTILINE)
_CLAIM = re.compile(r"^(.+) is source \[(\d+)\]\.$", re.MULTILINE)


def cite_every_source(request: ChatRequest) -> str:
    """A tool answer with one line per source the prompt lists, naming it and citing its number."""
    listed = _LISTED.findall(request_text(request))
    return "\n".join(f"{title} is source [{number}]." for number, title in listed) or "Nothing to cite."


def claims_match_listing(prompt: str) -> int:
    """Every "<title> is source [n]." line of the prompt's task results cites the source listed as
    [n] in that same prompt; the number of such lines."""
    listed = dict(_LISTED.findall(prompt))
    claims = _CLAIM.findall(prompt)
    for title, number in claims:
        assert listed.get(number) == title, f"[{number}] is {listed.get(number)!r} here, but was {title!r}"
    return len(claims)


@pytest.fixture
def scripted(fake_llm):
    """The fake LLM; each test adds its own rules first (the first matching rule answers), then
    calls `script_the_rest`."""
    return fake_llm


def script_the_rest(fake) -> None:
    fake.when(PLANNER, PLAN)
    fake.when(PLAN_VALIDATOR, APPROVE)
    fake.when(INFO_SEARCH, cite_every_source)
    fake.when(DIRECT_REASONING, cite_every_source)


def resume(services, run_id: str) -> None:
    services.runner.resume(run_id)
    run = services.runner.wait(run_id, timeout=60)
    assert run.status == RunStatus.DONE, (run.status, run.error)


def calls(fake) -> dict[str, int]:
    return {
        name: len(prompts_with(fake, marker))
        for name, marker in (
            ("prompter", PROMPTER_ANY),
            ("planner", PLANNER),
            ("plan review", PLAN_VALIDATOR),
            ("search", INFO_SEARCH),
            ("analysis", DIRECT_REASONING),
            ("summary", SUMMARY),
        )
    }


def test_interrupted_node_keeps_its_plan_finished_tasks_and_numbering(services, scripted):
    scripted.when(DIRECT_REASONING, LLMConnectionError("the endpoint went away"), times=1)
    script_the_rest(scripted)
    run_id = run_to_end(services, QUESTION, "deot", ONLY_THE_ROOT)
    assert services.repo.get_run(run_id).status == RunStatus.FAILED
    root = root_of(services, run_id)
    assert root.status == NodeStatus.PENDING
    stored = {t["id"]: t for t in root.data["tasks"]}
    assert sorted(stored) == ["task1", "task2"]  # the two searches finished before the analysis failed

    resume(services, run_id)

    # One prompter, planner and plan review call and one search each, in all; only the analysis
    # that failed was asked again.
    assert calls(scripted) == {"prompter": 1, "planner": 1, "plan review": 1, "search": 2, "analysis": 2, "summary": 1}
    root = root_of(services, run_id)
    assert root.status == NodeStatus.DONE and root.data[SOLVING] is None
    tasks = {t["id"]: t for t in root.data["tasks"]}
    assert [t["id"] for t in root.data["tasks"]] == ["task1", "task2", "task3"]
    assert all(t["status"] == "success" for t in tasks.values())
    assert tasks["task1"] == stored["task1"] and tasks["task2"] == stored["task2"]  # reused as they were
    # The analysis was asked exactly what it was asked before: same results, same source numbers.
    first_try, resumed = prompts_with(scripted, DIRECT_REASONING)
    assert resumed == first_try
    # The summary cites each finding with the number its source has in the summary's own list.
    summary_prompt = prompts_with(scripted, SUMMARY)[0]
    assert claims_match_listing(summary_prompt) >= 2
    assert claims_match_listing(resumed) >= 1
    linked = {s.id for s in services.repo.sources_for_node(root.id)}
    assert all(set(s) <= linked for s in (t["source_ids"] for t in tasks.values()))


def test_a_task_still_running_when_the_run_fails_is_kept(services, scripted):
    # The second search fails the run at once, while the first one is still being answered.
    scripted.when(about(INFO_SEARCH, FIRST), LLMConnectionError("the endpoint went away"), times=1)
    scripted.when(about(INFO_SEARCH, ARTHUR), lambda request: (time.sleep(0.5), cite_every_source(request))[1])
    script_the_rest(scripted)
    run_id = run_to_end(services, QUESTION, "deot", ONLY_THE_ROOT)
    assert services.repo.get_run(run_id).status == RunStatus.FAILED
    assert [t["id"] for t in root_of(services, run_id).data["tasks"]] == ["task1"]

    resume(services, run_id)

    searched = [query_of_prompt(p) for p in prompts_with(scripted, INFO_SEARCH)]
    assert sorted(searched) == sorted([ARTHUR, FIRST, FIRST])
    assert root_of(services, run_id).status == NodeStatus.DONE


def query_of_prompt(prompt: str) -> str:
    return re.search(r"^Question: (.*)$", prompt, re.MULTILINE).group(1)


REVISION = "A previous plan was rejected"
REVISE = {
    "verdict": "revise",
    "completeness_issues": ["the founding dates are not compared"],
    "redundancy_issues": [],
    "feedback": "compare the dates",
}


def test_planning_interrupted_before_the_review_keeps_the_drafted_plan(services, scripted):
    scripted.when(PLAN_VALIDATOR, LLMConnectionError("the endpoint went away"), times=1)
    script_the_rest(scripted)
    run_id = run_to_end(services, QUESTION, "deot", ONLY_THE_ROOT)
    assert services.repo.get_run(run_id).status == RunStatus.FAILED

    resume(services, run_id)

    # The drafted plan was reviewed again (that call never answered), not drafted again.
    counted = calls(scripted)
    assert (counted["planner"], counted["plan review"]) == (1, 2)
    root = root_of(services, run_id)
    assert root.status == NodeStatus.DONE and root.data["plan_accepted"] is True
    assert [a["verdict"] for a in root.data["plan_attempts"]] == ["approve"]


def test_planning_interrupted_during_a_revision_keeps_the_rejected_attempt(services, scripted):
    scripted.when(PLAN_VALIDATOR, REVISE, times=1)
    scripted.when(REVISION, LLMConnectionError("the endpoint went away"), times=1)
    script_the_rest(scripted)
    run_id = run_to_end(services, QUESTION, "deot", ONLY_THE_ROOT)
    assert services.repo.get_run(run_id).status == RunStatus.FAILED

    resume(services, run_id)

    # One first draft and one review of it in all; the revision (which never answered) was asked
    # again with the same feedback.
    first_drafts = [p for p in prompts_with(scripted, PLANNER) if REVISION not in p]
    revisions = [p for p in prompts_with(scripted, PLANNER) if REVISION in p]
    assert len(first_drafts) == 1 and len(revisions) == 2 and revisions[0] == revisions[1]
    assert "compare the dates" in revisions[1]
    assert calls(scripted)["plan review"] == 2  # the first draft's, then the revision's
    root = root_of(services, run_id)
    assert [a["verdict"] for a in root.data["plan_attempts"]] == ["revise", "approve"]


def _drop_checkpoint(data):
    data.pop(SOLVING)


def _other_version(data):
    data[SOLVING]["version"] = VERSION + 1


def _plan_edited(data):
    data["plan"][0]["input"] += " (edited)"


def _plan_and_attempts_spoiled(data):
    _plan_edited(data)
    data["plan_attempts"][0].pop("tasks")


def _other_query(data):
    data["query_optimization"]["optimized_query"] = "When did Arthur's Magazine start?"


def _task1_of_another_plan(data):
    next(t for t in data["tasks"] if t["id"] == "task1")["input"] = "another search"


def _task2_cut_short(data):
    next(t for t in data["tasks"] if t["id"] == "task2").pop("output")


def _unknown_source(data):
    data[SOLVING]["source_ids"].append(10**9)


def _checkpoint_not_a_record(data):
    data[SOLVING] = "spoiled"


def _version_as_text(data):
    data[SOLVING]["version"] = str(VERSION)  # not coerced: another shape is another version


def _plan_not_a_list(data):
    data["plan"] = "spoiled"


def _numbering_not_a_list(data):
    data[SOLVING]["source_ids"] = "spoiled"


def _nothing(data):
    pass


# What is done again on resume (the summary failed, so every task had finished), counted over the
# whole run: each case spoils one part of the checkpoint.
FALLBACKS = [
    (_nothing, {"prompter": 1, "planner": 1, "search": 2, "analysis": 1}),
    (_drop_checkpoint, {"prompter": 2, "planner": 2, "search": 4, "analysis": 2}),
    (_other_version, {"prompter": 2, "planner": 2, "search": 4, "analysis": 2}),
    # A field of the wrong shape (a kill mid-write, a hand edit) reads as absent: never an error.
    (_checkpoint_not_a_record, {"prompter": 2, "planner": 2, "search": 4, "analysis": 2}),
    (_version_as_text, {"prompter": 2, "planner": 2, "search": 4, "analysis": 2}),
    (_plan_not_a_list, {"prompter": 1, "planner": 1, "search": 4, "analysis": 2}),
    (_numbering_not_a_list, {"prompter": 1, "planner": 1, "search": 4, "analysis": 2}),
    # The plan no longer matches what the tasks ran for: it is taken again from the approved
    # attempt (no planner call), and the tasks are run again.
    (_plan_edited, {"prompter": 1, "planner": 1, "search": 4, "analysis": 2}),
    (_plan_and_attempts_spoiled, {"prompter": 1, "planner": 2, "search": 4, "analysis": 2}),
    (_other_query, {"prompter": 1, "planner": 2, "search": 4, "analysis": 2}),
    # task3 was built on task1's result, so it is redone with it; task2 is kept.
    (_task1_of_another_plan, {"prompter": 1, "planner": 1, "search": 3, "analysis": 2}),
    (_task2_cut_short, {"prompter": 1, "planner": 1, "search": 3, "analysis": 1}),
    # Without the numbering the outputs were written with, no output can be shown again.
    (_unknown_source, {"prompter": 1, "planner": 1, "search": 4, "analysis": 2}),
]


@pytest.mark.parametrize("spoil, expected", FALLBACKS, ids=[f.__name__.strip("_") for f, _ in FALLBACKS])
def test_only_a_whole_matching_checkpoint_is_reused(services, scripted, spoil, expected):
    scripted.when(SUMMARY, LLMConnectionError("the endpoint went away"), times=1)
    script_the_rest(scripted)
    run_id = run_to_end(services, QUESTION, "deot", ONLY_THE_ROOT)
    assert services.repo.get_run(run_id).status == RunStatus.FAILED
    root = root_of(services, run_id)
    assert [t["id"] for t in root.data["tasks"]] == ["task1", "task2", "task3"]
    data = dict(root.data)
    spoil(data)
    services.repo.update_node(root.id, data=data)

    resume(services, run_id)

    counted = calls(scripted)
    assert {k: counted[k] for k in expected} == expected
    root = root_of(services, run_id)
    assert root.status == NodeStatus.DONE and root.content
    assert [t["status"] for t in root.data["tasks"]] == ["success"] * 3
    assert claims_match_listing(prompts_with(scripted, SUMMARY)[-1]) >= 2


def test_a_retried_failed_node_starts_over(services, scripted):
    scripted.when(SUMMARY, INVALID, times=ATTEMPTS_TO_FAIL)
    script_the_rest(scripted)
    run_id = run_to_end(services, QUESTION, "deot", ONLY_THE_ROOT)
    root = root_of(services, run_id)
    assert root.status == NodeStatus.FAILED and root.data["plan"] and root.data[SOLVING] is None
    before = calls(scripted)

    command = steer_and_wait(services, run_id, "retry", {"node_id": root.id})

    assert command.status == CommandStatus.DONE, command.error
    assert root_of(services, run_id).status == NodeStatus.DONE
    after = calls(scripted)
    assert {k: after[k] - before[k] for k in ("prompter", "planner", "plan review", "search", "analysis")} == {
        "prompter": 1,
        "planner": 1,
        "plan review": 1,
        "search": 2,
        "analysis": 1,
    }
