"""Progress and controls of a run: one line of progress (active time apart from wall time),
"Now:" with each running node's current step, and pause/resume/stop."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from components import identity
from components.node_text import show_error
from components.step_log import now_lines
from engine.access import LimitReached
from engine.llm.accounting import budget_short
from engine.narration import active_seconds, minutes
from engine.node_numbers import node_numbers
from engine.reader_text import run_failure
from engine.reads import DatabaseUnwritable, Node, NodeStatus, Run, RunEvent, RunStatus, utcnow
from engine.runner import RunnerError
from engine.safe_text import inline_text
from engine.services import Services

PROGRESS_KEY = "run-progress"
NOW_KEY = "run-now"  # the "Now:" line, or the finished run's "steer it on" line in its place
# Our own constant style (no run text in it): the "Now:" line stays one line, so what it says does not
# change its height, nor move the map below it. The page puts it in (`pages/explore.py`).
NOW_LINE_STYLE = (
    f"<style>.st-key-{NOW_KEY} p {{ white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }}</style>"
)
BETWEEN_STEPS = "choosing the next step"
PAUSED = "paused; press Resume to continue"
STOPPING = "stopping once the current step ends (a model call under way is finished first)"


# Enough to recognise a question at a glance; the whole question is one click away.
QUESTION_PREVIEW_CHARS = 300


def question_line(run: Run) -> None:
    """The run's question as text (never a heading: a long question would fill the page), cut to a
    preview when long, the whole of it in an expander."""
    question = run.question or run.title
    if run.title and run.title != question[: len(run.title)]:
        st.markdown(f"**{inline_text(run.title)}**")  # a name the user gave the run
    preview = question if len(question) <= QUESTION_PREVIEW_CHARS else question[:QUESTION_PREVIEW_CHARS].rstrip() + " …"
    st.markdown(f"**Question:** {inline_text(preview)}")
    if preview != question:
        with st.expander(f"The whole question ({len(question):,} characters)"):
            st.text(question)


def wall_seconds(run: Run) -> float | None:
    """From the start to the end (or to now while active), idle time included."""
    if run.started_at is None:
        return None
    end = run.finished_at if run.status not in RunStatus.ACTIVE and run.finished_at else utcnow()
    start = run.started_at
    if (start.tzinfo is None) != (end.tzinfo is None):  # SQLite hands back naive UTC
        end = end.replace(tzinfo=start.tzinfo)
    return max(0.0, (end - start).total_seconds())


STEER_ON = "Done. Pick a node on the map to steer the run on from it: it reopens for your command."


def progress_line(run: Run, nodes: Sequence[Node], lifecycle: Sequence[RunEvent]) -> str:
    """status · nodes done/total (pruned, failed) · active time (wall time) · tokens · cost · the run's
    model (when stored), as plain text."""
    done = sum(n.status == NodeStatus.DONE for n in nodes)
    wall = wall_seconds(run)
    # While the run executes, its open segment runs to now; otherwise to its last event.
    active = active_seconds(lifecycle, now=utcnow() if run.status == RunStatus.RUNNING else None)
    if wall is None:
        # No start stored: a queued run (or one stopped while queued: no event, no node begun) has
        # not started; any other, a run imported or written by an earlier release without its
        # times, has, and "not started" beside "done" would be false.
        begun = lifecycle or any(n.status != NodeStatus.PENDING for n in nodes)
        time_part = "not started" if run.status == RunStatus.QUEUED or not begun else "time not recorded"
    elif lifecycle:
        time_part = f"active {minutes(active)} (wall {minutes(wall)})"
    else:  # a run of an earlier release: no lifecycle events to tell active time by
        time_part = f"wall {minutes(wall)}"
    # Nodes that will never be done, said beside the count: "12 / 17 nodes done" alone reads as
    # unfinished work on a finished run whose other 5 were pruned.
    ended = [
        f"{count} {status}"
        for status in (NodeStatus.PRUNED, NodeStatus.FAILED)
        if (count := sum(n.status == status for n in nodes))
    ]
    nodes_part = f"{done} / {len(nodes)} nodes done" + (f" ({', '.join(ended)})" if ended else "")
    # The model the run ran on, last: with a run open the page says what new research would run on
    # only inside the folded form, and a run opened later may have run on another model.
    model = str((run.llm_info or {}).get("model") or "").strip()
    return " · ".join(
        [run.status, nodes_part, time_part, f"{run.prompt_tokens + run.completion_tokens:,} tokens", f"${run.cost:.4f}"]
        + ([model] if model else [])
    )


def progress(
    run: Run,
    nodes: list[Node],
    *,
    lifecycle: Sequence[RunEvent] = (),
    events: Sequence[RunEvent] = (),
    numbers: dict[int, int] | None = None,
    steerable: bool = False,
    stopping: bool = False,
) -> None:
    """One compact line (so the map starts above the fold), then "Now:" — each running node with
    its current step — and what the run's status asks of the reader. A finished run whose method
    takes commands on its nodes (`steerable`) says, where "Now:" was, that it can be steered on:
    the line keeps its place, so the map does not move when a steered run reopens and ends."""
    # One container for all of it: what shows inside changes ("Now:" comes and goes, a warning
    # appears), and Streamlit places what follows by position, so without it the map below would
    # be a new element at each change: its frame rebuilt, zoom and position lost.
    with st.container():
        with st.container(key=PROGRESS_KEY):
            st.markdown(inline_text(progress_line(run, nodes, lifecycle)))
        if run.status in RunStatus.ACTIVE:
            lines = now_lines(nodes, events, numbers if numbers is not None else node_numbers(nodes))
            if stopping:  # Stop pressed, not yet read by the run (`step_log.stop_asked`)
                lines = [STOPPING]
            elif run.status == RunStatus.PAUSED:
                lines = [PAUSED]
            elif not lines and run.status == RunStatus.RUNNING:
                lines = [BETWEEN_STEPS]
            if lines:
                # One line, cut with an ellipsis (`NOW_LINE_STYLE`; the step log below has it whole): the steps
                # of running nodes come and go, and a line that wrapped to two or three moved the map.
                with st.container(key=NOW_KEY):
                    st.caption(
                        "Now: " + " · ".join(inline_text(line) for line in lines[:4]) + (" …" if len(lines) > 4 else "")
                    )
        if run.status == RunStatus.STOPPED and run.stop_reason:
            short = budget_short(run)
            # The budget's own words, not the CLI's hint (--max-tokens): the fields below raise it here.
            reason = str(short) if short is not None else run.stop_reason
            then = "raise the budget below and press Resume" if short is not None else "press Resume"
            st.warning(f"Stopped: {inline_text(reason.rstrip('. '))}. Partial results are kept; {then} to continue.")
        if run.status == RunStatus.FAILED and run.error:
            show_error(run_failure(run.error))
        if run.status == RunStatus.DONE and steerable:
            with st.container(key=NOW_KEY):
                st.caption(STEER_ON)
        if run.status == RunStatus.DONE and run.warning:
            st.warning(f"Done, with a warning: {inline_text(run.warning.rstrip('. '))}.")
        if run.status == RunStatus.INTERRUPTED:
            why = inline_text(run.stop_reason.rstrip(". ")) if run.stop_reason else "its process ended"
            st.warning(f"This run was interrupted ({why}). Press Resume to continue from where it stopped.")


def raised_budget(run: Run) -> dict:
    """A run whose budget cannot pay for its next call would stop again at once: offer the budget
    to continue with (the short one doubled to start with, the other as it is), as `resume`'s or
    `raise_budget`'s arguments."""
    short = budget_short(run)
    if short is None:
        return {}
    cols = st.columns(2)
    raised: dict = {}
    if run.max_tokens is not None:
        used = run.prompt_tokens + run.completion_tokens
        raised["max_tokens"] = int(
            cols[0].number_input(
                "Max tokens to continue with",
                min_value=run.max_tokens + 1 if short.dimension == "tokens" else run.max_tokens,
                value=2 * run.max_tokens if short.dimension == "tokens" else run.max_tokens,
                step=1000,
                key=f"raise-tokens-{run.id}",
                help=f"{used:,} used so far; {inline_text(str(short))}",
            )
        )
    if run.max_cost is not None:
        raised["max_cost"] = float(
            cols[1].number_input(
                "Max cost ($) to continue with",
                min_value=run.max_cost * 1.01 if short.dimension == "cost" else run.max_cost,
                value=2 * run.max_cost if short.dimension == "cost" else run.max_cost,
                step=0.1,
                format="%.4f",
                key=f"raise-cost-{run.id}",
                help=f"${run.cost:.4f} spent so far",
            )
        )
    return raised


# The row of run buttons keeps its height when it has none: a finished run steered on reopens (Pause
# and Stop appear) and ends again, and a row that came and went moved the map under the reader's pointer.
CONTROLS_HEIGHT = 40  # px: one Streamlit button


CONTROLS_WIDTH = 280  # px: room for the widest pair ("Retry failed nodes", "Raise budget")


def controls_row(run: Run):
    """The row the run's buttons go in, of one size whether it has buttons or none, so it can sit
    beside the question: what is beside it does not move when a steered run reopens and ends."""
    return st.container(
        horizontal=True,
        height=CONTROLS_HEIGHT,
        width=CONTROLS_WIDTH,
        border=False,
        vertical_alignment="center",
        horizontal_alignment="right",
        key=f"controls-{run.id}",
    )


def controls(services: Services, run: Run, *, row=None, stopping: bool = False) -> None:
    """Pause, Stop, Resume, Raise budget: those that apply, in `row` (a `controls_row`, by default
    here); a warning and the budget's fields go where this is called. Once Stop is pressed
    (`stopping`), Pause and Stop are gone: the run has been told."""
    if not identity.may_change(services, run):
        return  # someone else's run (shared, or read as an admin): read, never steered
    runner = services.runner
    # Its execution here ended without recording its end (the database's disk full, or read-only):
    # until the stored status catches up (`interrupted`), it would say running for ever.
    died = runner.execution_died(run.id) if run.status in RunStatus.ACTIVE else None
    if died is not None:
        then = f"{died.fix[:1].upper()}{died.fix[1:]}, then press Resume" if died.fix else "Press Resume"
        st.error(f"The run stopped: {inline_text(died.what)}. {then} to continue it.", icon=":material/error:")
    retryable = runner.retryable(run)
    resumable = (run.status in RunStatus.RESUMABLE and run.status != RunStatus.QUEUED) or bool(died and died.resumable)
    raised = raised_budget(run) if resumable or run.status == RunStatus.DONE else {}
    pause = run.status == RunStatus.RUNNING and died is None and not stopping
    stop = run.status in RunStatus.ACTIVE and died is None and not stopping
    raise_budget, resume = run.status == RunStatus.DONE and bool(raised), resumable or retryable
    # The buttons that apply, side by side from the left: a lone Resume under a stopped run's warning
    # sat in the middle of the page, easy to miss; it is the primary action there.
    row = row if row is not None else controls_row(run)
    try:
        if pause and row.button("Pause", key=f"pause-{run.id}"):
            runner.pause(run.id)
            st.toast("Pausing at the next step")
        if raise_budget and row.button("Raise budget", key=f"raise-{run.id}"):
            # A finished run is steered on: its commands need the budget to grow what they add.
            runner.raise_budget(run.id, **raised)
            st.session_state["flash"] = "Budget raised: send your command again"
            st.rerun(scope="app")
        if resume and row.button(
            "Retry failed nodes" if retryable else "Resume", key=f"resume-{run.id}", type="primary"
        ):
            services.access.check_may_run(identity.viewer(services), run)  # the person's own limits
            runner.resume(run.id, **raised)
            st.session_state["flash"] = "Resuming"
            st.rerun(scope="app")  # the live view starts polling again
        if stop and row.button("Stop", key=f"stop-{run.id}"):
            runner.stop(run.id)
            st.toast("Stopping at the next step")
    except (RunnerError, LimitReached) as exc:
        st.error(str(exc))
    except DatabaseUnwritable as exc:  # pressed while the disk is still full, or the database read-only
        what = inline_text(str(exc))
        st.error(f"{what[:1].upper()}{what[1:]}; {exc.fix}, then try again.")
