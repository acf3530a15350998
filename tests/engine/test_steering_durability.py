"""A steering command survives what can cut its work short (the third audit of steering): a stop,
an interrupt or an endpoint failure during the growth it asked for. It is applied exactly once, and
the report it asked to be rewritten is rewritten when the run next completes; until then a reader
is told the report is from before the change."""

from __future__ import annotations

import itertools

import pytest

from engine.config import load_settings
from engine.llm.fake import default_answer
from engine.llm.protocol import LLMConnectionError
from engine.methods.mtqa import knowledge
from engine.methods.mtqa.method import MtqaMethod
from engine.report import render_markdown
from engine.runner import RunnerError
from engine.services import build_services
from storage.models import CommandStatus, NodeStatus, RunStatus
from tests.engine.methods.fgdip.fgdip_scripts import EXTRACT, GENERATE, answers_by_branch, entities, numbered_steps
from tests.engine.methods.fgdip.fgdip_scripts import QUESTION as FGDIP_QUESTION
from tests.engine.methods.mtqa.mtqa_knowledge import KnowledgeInjector
from tests.engine.methods.mtqa.mtqa_scripts import SUMMARY, THOUGHT
from tests.engine.methods.research.research_scripts import QUESTION, SUMMARIES, nodes_of
from tests.support.fixtures_engine import command_of, run_to_end, steer_and_wait
from tests.support.grid_method import GridMethod


@pytest.fixture
def knowledge_bases(monkeypatch) -> KnowledgeInjector:
    injector = KnowledgeInjector()
    monkeypatch.setattr(knowledge, "open_knowledge_base", injector)
    return injector


def numbered_summaries(fake) -> None:
    counter = itertools.count(1)
    fake.when(
        prompt=SUMMARY,
        respond=lambda r: {
            "checks": [],
            "paragraphs": [f"Summary number {(n := next(counter))} [1]."],
            "short_answer": f"ANSWER-{n}",
        },
    )


def once(holder: dict, action):
    """A fake reply that, when armed, first does `action` (the user's Stop, a worker shutting down)."""

    def respond(request):
        if holder.pop("arm", False):
            action(holder["run_id"])
        return default_answer(request)

    return respond


def test_a_rerun_column_stopped_half_way_gets_its_report_rewritten_on_resume(services, fake_llm, knowledge_bases):
    numbered_summaries(fake_llm)
    holder: dict = {}
    fake_llm.when(prompt=THOUGHT, respond=once(holder, services.runner.stop))
    run_id = run_to_end(services, QUESTION, "mtqa", {"rows": 2, "columns": 2})
    old = services.repo.latest_report(run_id)
    assert old.data["short_answer"] == "ANSWER-2"
    first = next(n for n in services.repo.list_nodes(run_id, kind="summary") if n.data["column"] == 0)

    holder.update(run_id=run_id, arm=True)
    services.runner.steer(run_id, "rerun_column", {"node_id": first.id, "alpha": 1.0})
    assert services.runner.wait(run_id, timeout=30).status == RunStatus.STOPPED
    # Stopped before any new summary: the old report stays, and says it is from before the change.
    assert services.repo.latest_report(run_id).id == old.id
    assert "written before your last change to the run" in render_markdown(services.repo, run_id)

    services.runner.resume(run_id)
    assert services.runner.wait(run_id, timeout=30).status == RunStatus.DONE
    report = services.repo.latest_report(run_id)
    assert report.data["short_answer"] == "ANSWER-4" and "Summary number 4" in report.markdown
    assert "before your last change" not in render_markdown(services.repo, run_id)


def test_an_added_column_interrupted_half_way_gets_its_report_rewritten(services, fake_llm, knowledge_bases):
    numbered_summaries(fake_llm)
    holder: dict = {}
    fake_llm.when(prompt=THOUGHT, respond=once(holder, lambda _run: services.runner.interrupt_all("shutting down")))
    run_id = run_to_end(services, QUESTION, "mtqa", {"rows": 2, "columns": 2})
    holder.update(run_id=run_id, arm=True)
    services.runner.steer(run_id, "add_column", {})
    assert services.runner.wait(run_id, timeout=30).status == RunStatus.INTERRUPTED
    services.runner.resume(run_id)
    assert services.runner.wait(run_id, timeout=30).status == RunStatus.DONE
    report = services.repo.latest_report(run_id)
    assert (report.data["column"], report.data["short_answer"]) == (3, "ANSWER-3")


def test_a_command_whose_growth_is_stopped_is_not_applied_again_on_resume(
    services, fake_llm, knowledge_bases, monkeypatch
):
    """It arrives while the run writes its report (applied by `Method.steer`), and the user presses
    Stop while the column it added thinks: on resume it must not add a second column."""
    holder: dict = {"queue": True}
    write_report = MtqaMethod.write_report

    def writing(self, ctx):
        write_report(self, ctx)
        if holder.pop("queue", False):
            holder["command"] = services.runner.steer(ctx.run_id, "add_column", {})
            holder["arm"] = True

    monkeypatch.setattr(MtqaMethod, "write_report", writing)
    fake_llm.when(prompt=THOUGHT, respond=once(holder, services.runner.stop))

    run = services.runner.create_run(
        question=QUESTION, method="mtqa", params={"rows": 1, "columns": 2}, llm_info=services.llm_info("fake")
    )
    holder["run_id"] = run.id
    services.runner.start(run.id)
    assert services.runner.wait(run.id, timeout=30).status == RunStatus.STOPPED
    assert command_of(services, run.id, holder["command"].id).status == CommandStatus.DONE  # applied, recorded
    services.runner.resume(run.id)
    assert services.runner.wait(run.id, timeout=30).status == RunStatus.DONE
    assert {n.data["column"] for n in services.repo.list_nodes(run.id, kind="summary")} == {0, 1, 2}


def test_a_research_query_cut_off_by_a_failed_endpoint_gets_its_report_rewritten(services, fake_llm):
    run_id = run_to_end(services, QUESTION, "research", {"max_searches": 0})
    old = services.repo.latest_report(run_id)
    fake_llm.when(SUMMARIES, LLMConnectionError("the endpoint went away"), times=1)
    services.runner.steer(run_id, "add_query", {"query": "First for Women magazine history"})
    assert services.runner.wait(run_id, timeout=30).status == RunStatus.FAILED
    services.runner.resume(run_id)
    assert services.runner.wait(run_id, timeout=30).status == RunStatus.DONE
    live = next(a for a in nodes_of(services, run_id, "answer") if a.status == NodeStatus.DONE)
    assert live.id != old.data["answer_node"]
    assert services.repo.latest_report(run_id).data["answer_node"] == live.id


def test_an_edited_error_memory_is_counted_in_the_report(services, fake_llm):
    fake_llm.when(EXTRACT, entities("Arthur's Magazine", "First for Women"))
    fake_llm.when(GENERATE, numbered_steps(answer=answers_by_branch))
    run_id = run_to_end(services, FGDIP_QUESTION, "fgdip", {})
    assert "its error memory holds no lesson" in services.repo.latest_report(run_id).markdown
    steer_and_wait(services, run_id, "edit_error_memory", {"analysis": "Compare founding years."})
    assert "its error memory holds 1 lesson of yours" in services.repo.latest_report(run_id).markdown


def stopped_at(services, fake_llm, prompt, question: str, method: str, params: dict):
    """A run the person stopped while the model answered `prompt` the first time."""
    holder: dict = {"arm": True}
    fake_llm.when(prompt, once(holder, services.runner.stop))
    run = services.runner.create_run(
        question=question, method=method, params=params, llm_info=services.llm_info("fake")
    )
    holder["run_id"] = run.id
    services.runner.start(run.id)
    stopped = services.runner.wait(run.id, timeout=30)
    assert stopped.status == RunStatus.STOPPED
    # `wait` returns when the run ended; its thread then looks at the queue once more (and reopens
    # the run for a command found there). Ended too, so a test's next command is not taken by it.
    execution = services.runner._executions.get(run.id)
    if execution is not None:
        execution.thread.join(timeout=30)
    return stopped


def fgdip_stopped_at_its_first_step(services, fake_llm):
    """An FGDIP run the person stopped while its first step was judged (no answer yet)."""
    from tests.engine.methods.fgdip.fgdip_scripts import EVALUATE_STEP

    fake_llm.when(EXTRACT, entities("Arthur's Magazine", "First for Women"))
    fake_llm.when(GENERATE, numbered_steps(answer=answers_by_branch))
    return stopped_at(services, fake_llm, EVALUATE_STEP, FGDIP_QUESTION, "fgdip", {})


def test_a_refused_command_leaves_a_stopped_run_stopped_and_an_applied_one_continues_it(services, fake_llm):
    run = stopped = fgdip_stopped_at_its_first_step(services, fake_llm)
    assert stopped.status == RunStatus.STOPPED and stopped.stop_reason == "stopped by the user"

    # Accepted when queued, refused when applied (the entity is a branch already): nothing runs.
    refused = services.runner.steer(run.id, "add_entity", {"entity": "arthur's magazine"})
    after = services.runner.wait(run.id, timeout=30)
    assert "already a branch" in command_of(services, run.id, refused.id).error
    assert (after.status, after.stop_reason, after.llm_calls) == (
        RunStatus.STOPPED,
        "stopped by the user",
        stopped.llm_calls,
    )
    # A command that applies continues the run the person steered.
    applied = services.runner.steer(run.id, "add_entity", {"entity": "Women's magazines"})
    assert services.runner.wait(run.id, timeout=30).status == RunStatus.DONE
    assert command_of(services, run.id, applied.id).status == CommandStatus.DONE


def test_a_command_queued_just_before_stop_says_so_and_can_be_sent_again(services, fake_llm):
    from tests.engine.methods.fgdip.fgdip_scripts import EVALUATE_STEP

    fake_llm.when(EXTRACT, entities("Arthur's Magazine", "First for Women"))
    fake_llm.when(GENERATE, numbered_steps())
    holder: dict = {"arm": True}

    def judge(request):
        if holder.pop("arm", False):  # the person adds an entity, then presses Stop
            holder["command"] = services.runner.steer(holder["run_id"], "add_entity", {"entity": "Bauer Media"})
            services.runner.stop(holder["run_id"])
        return default_answer(request)

    fake_llm.when(EVALUATE_STEP, judge)
    run = services.runner.create_run(
        question=FGDIP_QUESTION, method="fgdip", params={}, llm_info=services.llm_info("fake")
    )
    holder["run_id"] = run.id
    services.runner.start(run.id)
    assert services.runner.wait(run.id, timeout=30).status == RunStatus.STOPPED
    stranded = command_of(services, run.id, holder["command"].id)
    assert stranded.status == CommandStatus.FAILED and "stopped before it could apply this" in stranded.error

    again = services.runner.steer(run.id, "add_entity", {"entity": "Bauer Media"})  # not "already on its way"
    assert services.runner.wait(run.id, timeout=30).status == RunStatus.DONE
    assert command_of(services, run.id, again.id).status == CommandStatus.DONE
    assert sum(n.kind == "entity" and "Bauer Media" in n.label for n in services.repo.list_nodes(run.id)) == 1


def test_resume_does_not_expand_a_node_you_marked_impossible(services, fake_llm):
    """Its expansion had failed (an unreadable generator); the resume retries the others only."""
    fake_llm.when(EXTRACT, entities("Arthur's Magazine", "First for Women"))
    fake_llm.when(GENERATE, {"wrong": "shape"}, times=6)  # neither entity can be expanded
    run_id = run_to_end(services, FGDIP_QUESTION, "fgdip", {})
    assert services.repo.get_run(run_id).status == RunStatus.FAILED
    arthur = next(n for n in services.repo.list_nodes(run_id, kind="entity") if n.data["entity"] == "Arthur's Magazine")
    assert arthur.data["generate_error"]
    command = services.runner.steer(run_id, "mark_impossible", {"node_id": arthur.id})
    services.runner.wait(run_id, timeout=30)
    assert command_of(services, run_id, command.id).status == CommandStatus.DONE

    fake_llm.when(GENERATE, numbered_steps())  # a model that answers now
    services.runner.resume(run_id)
    services.runner.wait(run_id, timeout=30)
    assert services.repo.get_node(arthur.id).data["verdict"] == "impossible"
    assert not [n for n in services.repo.list_nodes(run_id) if n.parent_id == arthur.id and n.kind == "step"]


# ---------------------------------------------------------------------- Regenerate report is not Resume


def stopped_deot(services, fake_llm):
    """A small DEoT run the person stopped after its first summary (no report yet)."""
    from tests.engine.methods.deot.deot_scripts import QUESTION as DEOT_QUESTION
    from tests.engine.methods.deot.deot_scripts import SMALL, SUMMARY

    return stopped_at(services, fake_llm, SUMMARY, DEOT_QUESTION, "deot", SMALL)


def test_regenerate_report_on_a_stopped_run_rewrites_it_from_the_graph_and_keeps_it_stopped(services, fake_llm):
    from tests.engine.methods.deot.deot_scripts import FINAL_REPORT

    run = stopped = stopped_deot(services, fake_llm)
    assert services.repo.latest_report(run.id) is None
    nodes = len(services.repo.list_nodes(run.id))

    sent = services.runner.steer(run.id, "regenerate_report")
    after = services.runner.wait(run.id, timeout=30)
    command = command_of(services, run.id, sent.id)
    assert command.status == CommandStatus.DONE, command.error
    # The report of what the run holds, written by the model and marked partial; nothing grew.
    assert len(fake_llm.calls_for(FINAL_REPORT)) == 1
    assert (after.status, after.stop_reason) == (RunStatus.STOPPED, "stopped by the user")
    assert after.llm_calls == stopped.llm_calls + 1 and len(services.repo.list_nodes(run.id)) == nodes
    assert services.repo.latest_report(run.id).data["partial"] == "stopped by the user"
    assert "Partial report" in render_markdown(services.repo, run.id)


def test_regenerate_report_on_a_stopped_run_without_an_answer_says_to_resume(services, fake_llm):
    run = stopped = fgdip_stopped_at_its_first_step(services, fake_llm)
    sent = services.runner.steer(run.id, "regenerate_report")
    after = services.runner.wait(run.id, timeout=30)
    command = command_of(services, run.id, sent.id)
    assert command.status == CommandStatus.FAILED and "press Resume" in command.error
    assert (after.status, after.llm_calls) == (RunStatus.STOPPED, stopped.llm_calls)
    assert services.repo.latest_report(run.id) is None


def test_rewrite_report_finishes_a_run_that_failed_only_for_its_report(services, fake_llm):
    model = {"writes": False}
    fake_llm.when(
        prompt="deot.final_report",
        respond=lambda r: "The program ended for its cost [1]." if model["writes"] else "Field required.",
    )
    run_id = run_to_end(services, "Why did the Apollo program end?", "deot", {"max_nodes": 2, "max_layers": 2})
    failed = services.repo.get_run(run_id)
    assert failed.status == RunStatus.FAILED and "could not write the report" in failed.error
    model["writes"] = True
    sent = services.runner.steer(run_id, "regenerate_report")
    after = services.runner.wait(run_id, timeout=30)
    # What its error said to press: the run is finished, with a whole report.
    assert command_of(services, run_id, sent.id).status == CommandStatus.DONE
    assert after.status == RunStatus.DONE, after.error
    assert "partial" not in services.repo.latest_report(run_id).data


def test_a_rewrite_on_a_stopped_run_leaves_its_report_current(services, fake_llm):
    # The rewrite is recorded after the report it wrote: that must not make the report outdated
    # (research's Drop source reads [n] from it, and refuses an outdated one).
    run_id = run_to_end(services, QUESTION, "research", {"max_searches": 0})
    services.repo.set_status(run_id, RunStatus.STOPPED, stop_reason="stopped by the user")
    sent = services.runner.steer(run_id, "regenerate_report")
    assert services.runner.wait(run_id, timeout=30).status == RunStatus.STOPPED
    assert command_of(services, run_id, sent.id).status == CommandStatus.DONE
    drop = services.runner.steer(run_id, "drop_source", {"number": 1})
    services.runner.wait(run_id, timeout=30)
    assert command_of(services, run_id, drop.id).status == CommandStatus.DONE, command_of(
        services, run_id, drop.id
    ).error


def test_a_command_or_a_stop_sent_while_a_held_report_is_written_is_not_stranded(services, fake_llm):
    from tests.engine.methods.deot.deot_scripts import FINAL_REPORT

    stopped = stopped_deot(services, fake_llm)
    root = next(n for n in services.repo.list_nodes(stopped.id) if n.parent_id is None)
    sent: dict = {}

    def report_while_the_person_acts(request):
        if "ask" not in sent:  # the page shows the run busy: Stop, then a follow-up question
            services.runner.stop(stopped.id)
            sent["ask"] = services.runner.steer(
                stopped.id, "ask", {"node_id": root.id, "question": "What did it cost?"}
            )
        return default_answer(request)

    fake_llm.when(FINAL_REPORT, report_while_the_person_acts)
    services.runner.steer(stopped.id, "regenerate_report")
    services.runner.wait(stopped.id, timeout=30)
    final = services.runner.wait(stopped.id, timeout=30)
    # The question was applied and grown (not left queued), and the Stop meant for the rewrite did
    # not cut it short.
    assert command_of(services, stopped.id, sent["ask"].id).status == CommandStatus.DONE
    assert final.status == RunStatus.DONE, (final.status, final.stop_reason)
    asked = [n for n in services.repo.list_nodes(stopped.id) if n.label == "What did it cost?"]
    assert asked and asked[0].status == NodeStatus.DONE
    assert not [c for c in services.repo.list_commands(stopped.id) if c.status == CommandStatus.QUEUED]


def stopped_omnithink(services, fake_llm):
    """A small OmniThink run the person stopped at its first reflection (no article yet)."""
    from tests.engine.methods.omnithink.omnithink_scripts import REFLECT

    return stopped_at(
        services, fake_llm, REFLECT, "The history of the printing press", "omnithink", {"max_depth": 2, "subnodes": 2}
    )


def test_rewrite_article_on_a_stopped_omnithink_run_keeps_it_stopped(services, fake_llm):
    run = stopped_omnithink(services, fake_llm)
    nodes = len(services.repo.list_nodes(run.id))
    sent = services.runner.steer(run.id, "regenerate_article")
    after = services.runner.wait(run.id, timeout=60)
    assert command_of(services, run.id, sent.id).status == CommandStatus.DONE
    assert after.status == RunStatus.STOPPED and len(services.repo.list_nodes(run.id)) == nodes
    assert services.repo.latest_report(run.id).data["partial"] == "stopped by the user"


# ---------------------------------------------------------------------- a spent budget


def test_a_budget_stop_at_a_large_call_counts_as_short_until_the_budget_is_raised(services, fake_llm):
    from engine.llm.accounting import budget_short
    from tests.engine.methods.deot.deot_scripts import QUESTION as DEOT_QUESTION
    from tests.engine.methods.deot.deot_scripts import SMALL

    full = run_to_end(services, DEOT_QUESTION, "deot", SMALL)
    sizes = [(c.prompt_tokens, c.completion_tokens) for c in services.repo.list_llm_calls(full)]
    before_last = sum(p + c for p, c in sizes[:-1])
    average = before_last // (len(sizes) - 1)
    assert sizes[-1][0] > average  # the report's prompt: larger than the run's average call
    # Enough for one more average call, not for the report: the stop's own words say how much it needs.
    budget = before_last + (average + sizes[-1][0]) // 2 + 1
    run_id = run_to_end(services, DEOT_QUESTION + " (budget)", "deot", SMALL, max_tokens=budget)
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.STOPPED and "budget" in run.stop_reason
    short = budget_short(run)
    assert short is not None and short.dimension == "tokens"
    assert budget_short(run, max_tokens=10 * budget) is None
    root = next(n for n in services.repo.list_nodes(run_id) if n.parent_id is None)
    with pytest.raises(ValueError, match="resume it with a larger budget first"):
        services.runner.steer(run_id, "ask", {"node_id": root.id, "question": "What did it cost?"})


def test_a_finished_run_near_its_budget_is_steered_once_its_budget_is_raised(services, fake_llm):
    from engine.llm.accounting import budget_short
    from tests.engine.methods.deot.deot_scripts import QUESTION as DEOT_QUESTION
    from tests.engine.methods.deot.deot_scripts import SMALL

    run_id = run_to_end(services, DEOT_QUESTION, "deot", SMALL)
    done = services.repo.get_run(run_id)
    services.runner.raise_budget(run_id, max_tokens=done.prompt_tokens + done.completion_tokens + 10)
    assert budget_short(services.repo.get_run(run_id)) is not None
    root = next(n for n in services.repo.list_nodes(run_id) if n.parent_id is None)
    with pytest.raises(ValueError, match="raise its budget first"):
        services.runner.steer(run_id, "ask", {"node_id": root.id, "question": "What did it cost?"})
    with pytest.raises(ValueError, match="raise its budget first"):  # the model writes DEoT's report
        services.runner.steer(run_id, "regenerate_report")
    # A resume of a finished run is refused before it changes anything.
    with pytest.raises(RunnerError, match="already done"):
        services.runner.resume(run_id, max_tokens=10**7)
    assert services.repo.get_run(run_id).max_tokens == done.prompt_tokens + done.completion_tokens + 10
    services.runner.raise_budget(run_id, max_tokens=10**7)
    command = steer_and_wait(services, run_id, "ask", {"node_id": root.id, "question": "What did it cost?"})
    assert command.status == CommandStatus.DONE, command.error


# ---------------------------------------------------------------------- reopened runs (review 13b)


def steer_and_wait_held(services, run_id: str, kind: str, payload: dict | None = None):
    """Steer a stopped run and wait for the command; the run stays stopped (a rewrite)."""
    sent = services.runner.steer(run_id, kind, payload or {})
    assert services.runner.wait(run_id, timeout=60).status == RunStatus.STOPPED
    assert command_of(services, run_id, sent.id).status == CommandStatus.DONE


def test_a_stop_pressed_before_rewrite_report_on_a_run_failed_for_its_report_does_not_cut_it(services, fake_llm):
    holder = {"stop": True, "writes": False}

    def report(request):
        if holder.pop("stop", False):
            services.runner.stop(holder["run_id"])  # pressed while the report was being written
        return "The program ended for its cost [1]." if holder["writes"] else "Field required."

    fake_llm.when(prompt="deot.final_report", respond=report)
    run = services.runner.create_run(
        question="Why did the Apollo program end?",
        method="deot",
        params={"max_nodes": 2, "max_layers": 2},
        llm_info=services.llm_info("fake"),
    )
    holder["run_id"] = run.id
    services.runner.start(run.id)
    assert services.runner.wait(run.id, timeout=30).status == RunStatus.FAILED
    holder["writes"] = True
    sent = services.runner.steer(run.id, "regenerate_report")
    after = services.runner.wait(run.id, timeout=30)
    assert command_of(services, run.id, sent.id).status == CommandStatus.DONE
    assert after.status == RunStatus.DONE, (after.status, after.stop_reason)
    assert [c.status for c in services.repo.list_commands(run.id) if c.kind == "stop"] == [CommandStatus.FAILED]


def test_a_run_that_fails_setting_up_fails_its_commands_and_is_not_reopened_again(services, fake_llm):
    run_id = run_to_end(services, QUESTION, "research", {"max_searches": 0})
    runner = services.runner
    executions = []
    real_execute = runner._execute

    def counted(*args, **kwargs):
        executions.append(args[0])
        return real_execute(*args, **kwargs)

    def broken_searcher(run):
        raise OSError("the corpus index cannot be opened")

    runner._execute, real_searcher, runner.searcher_for = counted, runner.searcher_for, broken_searcher
    services.repo.set_status(run_id, RunStatus.STOPPED, stop_reason="stopped by the user")
    sent = runner.steer(run_id, "regenerate_report")
    failed = runner.wait(run_id, timeout=30)
    runner.searcher_for = real_searcher
    assert failed.status == RunStatus.FAILED and "corpus index" in failed.error
    command = command_of(services, run_id, sent.id)
    assert command.status == CommandStatus.FAILED and "send it again" in command.error
    assert len(executions) == 1


def test_a_stop_pressed_after_a_question_holds_whatever_comes_after_it(services, fake_llm):
    from engine.runner import HeldRun

    stopped = stopped_deot(services, fake_llm)
    root = next(n for n in services.repo.list_nodes(stopped.id) if n.parent_id is None)
    # As a worker finds them (queue mode): Ask, then Stop, then Rewrite report.
    ask = services.repo.enqueue_command(stopped.id, "ask", {"node_id": root.id, "question": "What did it cost?"})
    stop = services.repo.enqueue_command(stopped.id, "stop")
    services.repo.enqueue_command(stopped.id, "regenerate_report", {})
    services.runner.start(stopped.id, reopen=True, steered_from=HeldRun.of(stopped))
    final = services.runner.wait(stopped.id, timeout=30)
    assert command_of(services, stopped.id, ask.id).status == CommandStatus.DONE
    assert command_of(services, stopped.id, stop.id).status == CommandStatus.DONE  # it stopped the run
    assert (final.status, final.stop_reason) == (RunStatus.STOPPED, "stopped by the user")


def test_rewrite_article_taken_with_a_new_subtopic_is_written_after_it(services, fake_llm):
    from engine.graph import RunGraph
    from engine.methods.omnithink.method import OmniThinkMethod
    from engine.runner import HeldRun

    run = stopped_omnithink(services, fake_llm)
    steer_and_wait_held(services, run.id, "regenerate_article")  # an article of the tree as it stood
    stopped = services.repo.get_run(run.id)
    root = next(n for n in services.repo.list_nodes(run.id) if n.parent_id is None)
    services.repo.enqueue_command(run.id, "add_subtopic", {"node_id": root.id, "subtopic": "Movable type in Korea"})
    article = services.repo.enqueue_command(run.id, "regenerate_article", {})
    services.runner.start(run.id, reopen=True, steered_from=HeldRun.of(stopped))
    final = services.runner.wait(run.id, timeout=60)
    assert final.status == RunStatus.DONE and command_of(services, run.id, article.id).status == CommandStatus.DONE
    assert services.repo.latest_report(run.id).created_at >= command_of(services, run.id, article.id).done_at
    assert OmniThinkMethod().notices(RunGraph(services.repo, run.id, OmniThinkMethod.contract())) == []


# ---------------------------------------------------------------------- stops that come too late (review 13c)


def test_a_stop_that_came_after_the_last_step_does_not_stop_the_next_command(services, fake_llm):
    from tests.engine.methods.deot.deot_scripts import FINAL_REPORT, SMALL
    from tests.engine.methods.deot.deot_scripts import QUESTION as DEOT_QUESTION

    holder: dict = {"arm": True}
    fake_llm.when(FINAL_REPORT, once(holder, services.runner.stop))  # pressed during the last call
    run = services.runner.create_run(
        question=DEOT_QUESTION, method="deot", params=SMALL, llm_info=services.llm_info("fake")
    )
    holder["run_id"] = run.id
    services.runner.start(run.id)
    done = services.runner.wait(run.id, timeout=30)
    assert done.status == RunStatus.DONE  # no step was left to read it: superseded, not kept for later
    assert [c.status for c in services.repo.list_commands(run.id) if c.kind == "stop"] == [CommandStatus.FAILED]
    root = next(n for n in services.repo.list_nodes(run.id) if n.parent_id is None)
    command = steer_and_wait(services, run.id, "ask", {"node_id": root.id, "question": "What did it cost?"})
    assert command.status == CommandStatus.DONE, command.error


def test_a_stop_on_a_run_waiting_for_a_worker_drops_what_waited_with_it(services, fake_llm):
    stopped = stopped_deot(services, fake_llm)
    root = next(n for n in services.repo.list_nodes(stopped.id) if n.parent_id is None)
    # Queue mode as the app sees it: the Ask waits for a worker, then the person presses Stop.
    ask = services.repo.enqueue_command(stopped.id, "ask", {"node_id": root.id, "question": "What did it cost?"})
    services.repo.mark_queued(stopped.id)
    services.runner.stop(stopped.id)
    run = services.repo.get_run(stopped.id)
    assert (run.status, run.stop_reason) == (RunStatus.STOPPED, "stopped by the user")
    assert command_of(services, stopped.id, ask.id).status == CommandStatus.FAILED  # says to send it again
    assert [c.status for c in services.repo.list_commands(stopped.id) if c.kind == "stop"][-1] == CommandStatus.DONE
    # Sent again, it is applied and grown: no Stop is left over to cut it short.
    command = steer_and_wait(services, stopped.id, "ask", {"node_id": root.id, "question": "What did it cost?"})
    assert command.status == CommandStatus.DONE, command.error


def test_resume_of_a_run_another_process_executes_changes_nothing(services, fake_llm):
    import os
    import socket

    stopped = stopped_deot(services, fake_llm)
    elsewhere = f"{socket.gethostname()}:{os.getpid()}:another-runner"  # alive, and not this runner
    services.repo.set_status(stopped.id, RunStatus.RUNNING)
    services.repo.claim_run(stopped.id, elsewhere)
    services.repo.enqueue_command(stopped.id, "stop")  # the other process's Stop, not read yet
    with pytest.raises(RunnerError, match="in another process"):
        services.runner.resume(stopped.id, max_tokens=10**7)
    run = services.repo.get_run(stopped.id)
    assert run.max_tokens is None and run.owner == elsewhere
    assert [c.status for c in services.repo.list_commands(stopped.id) if c.kind == "stop"][-1] == CommandStatus.QUEUED


@pytest.fixture
def grid_services(prebuilt_corpus_home, fake_llm, monkeypatch):
    """Services serving the test-only grid method, whose Refine only writes the cell's data."""
    monkeypatch.setenv("THOUGHTMAP_METHODS", "tests.support.grid_method:GridMethod")
    built = build_services(load_settings())
    built.use_llm("fake", fake_llm)
    yield built
    built.close()


def test_a_command_says_it_was_applied_only_once_its_change_is_stored(grid_services):
    services = grid_services
    run_id = run_to_end(services, "Why did the Bronze Age collapse?", GridMethod.name, {"rows": 2, "columns": 2})
    cell = services.repo.list_nodes(run_id, kind="cell")[0]
    # The run's writes are gathered and held: only a flush stores them before the run ends.
    services.runner.write_delay_s = 600.0
    seen: dict[int, dict] = {}
    complete = services.repo.complete_command

    def completing(command_id: int, **kwargs) -> None:
        seen[command_id] = dict(services.repo.get_node(cell.id).data or {})
        complete(command_id, **kwargs)

    services.repo.complete_command = completing
    command = steer_and_wait(services, run_id, "refine", {"node_id": cell.id, "note": "Weigh the climate record"})
    assert command.status == CommandStatus.DONE
    assert seen[command.id]["refinements"] == ["Weigh the climate record"]
