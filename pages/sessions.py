"""Sessions: every stored run; search, filter, open, resume, rename, delete."""

from datetime import UTC, datetime, time

import streamlit as st

from components import identity
from components.app_state import get_services
from components.routing import through_the_app
from components.sharing import share_controls
from engine.access import LimitReached
from engine.llm.accounting import budget_short
from engine.reads import RunStatus
from engine.report import report_title
from engine.runner import RunnerError, describe_owner
from engine.safe_text import inline_text

through_the_app()  # first: a deep link opened first after a start still runs through app.py

STATUSES = ["queued", "running", "paused", "done", "failed", "stopped", "interrupted"]
PAGE_SIZE = 20  # run cards per page, newest first

services = get_services()
reads = services.reads
st.title("Sessions")
depth = services.queue_depth()
if depth is not None:  # distributed execution: runs execute on `thoughtmap worker` processes
    st.caption(f"Run queue: {depth.waiting} waiting for a worker · {depth.running} being executed by workers")

person = identity.viewer(services)
SHOWN = {
    "Mine and shared with me": {"visible_to": person.user_id},
    "Mine": {"owned_by": person.user_id},
    "Shared with me": {"visible_to": person.user_id, "not_owned_by": person.user_id},
    **({"Everyone's (admin)": {}} if person.is_admin else {}),
}
shown = st.radio("Show", list(SHOWN), horizontal=True, key="sessions-shown") if person.signed_in else None
cols = st.columns([3, 2, 2, 2])
text = cols[0].text_input("Search questions", key="sessions-text")
# The methods this process serves, in their order (built-in ones as registered, then plugins).
method = cols[1].selectbox(
    "Method",
    ["(any)", *services.methods],
    key="sessions-method",
    format_func=lambda n: n if n == "(any)" else services.methods[n].title,
)
status = cols[2].selectbox("Status", ["(any)", *STATUSES], key="sessions-status")
since = cols[3].date_input("Since", value=None, key="sessions-since")

filters = dict(
    text=text.strip() or None,
    method=None if method == "(any)" else method,
    status=None if status == "(any)" else status,
    since=datetime.combine(since, time.min, tzinfo=UTC) if since else None,
    **(SHOWN[shown] if shown is not None else {}),  # multi-user mode: whose runs
)
if "flash" in st.session_state:
    st.toast(st.session_state.pop("flash"))
# Every run is reachable a page at a time, counted and paged in the database: one page of cards
# renders in about a second, where 200 cards took 10-12 s and the 201st run could not be reached.
total = reads.count_runs(**filters)
if not total:
    st.info("No runs match. Start one on the Explore page.")
    st.stop()
pages = -(-total // PAGE_SIZE)
if st.session_state.get("sessions-filters") != filters:  # a new search starts at its newest runs
    st.session_state["sessions-filters"] = filters
    st.session_state["sessions-page"] = 1
st.session_state["sessions-page"] = min(max(int(st.session_state.get("sessions-page", 1)), 1), pages)


def go_to(page: int) -> None:
    st.session_state["sessions-page"] = page


def page_nav(where: str) -> None:
    """Newer / page number / Older / Oldest; `where` keeps the top and bottom rows' keys apart."""
    current = st.session_state["sessions-page"]
    nav = st.columns([1, 1, 2, 1, 1], vertical_alignment="center")
    nav[0].button("Newest", key=f"sessions-newest-{where}", disabled=current == 1, on_click=go_to, args=(1,))
    nav[1].button("Newer", key=f"sessions-newer-{where}", disabled=current == 1, on_click=go_to, args=(current - 1,))
    nav[2].caption(f"Page {current:,} of {pages:,}")
    nav[3].button(
        "Older", key=f"sessions-older-{where}", disabled=current == pages, on_click=go_to, args=(current + 1,)
    )
    nav[4].button("Oldest", key=f"sessions-oldest-{where}", disabled=current == pages, on_click=go_to, args=(pages,))


page_number = st.session_state["sessions-page"]
runs = reads.list_runs(**filters, limit=PAGE_SIZE, offset=(page_number - 1) * PAGE_SIZE)


def method_name(name: str) -> str:
    """The method as Explore names it, without its description ("FGDIP", "Deep research agent"); its
    id when this process does not serve it."""
    method = services.methods.get(name)
    return method.title.split(":")[0].split(" (")[0] if method is not None else name


st.caption(f"{total:,} run" + ("" if total == 1 else "s"))
if pages > 1:
    page_nav("top")
for run in runs:
    with st.container(border=True):
        top = st.columns([6, 1, 1, 1])
        top[0].markdown(f"**{inline_text(report_title(run.title or run.question))}**")  # one line, capped
        top[0].caption(
            f"`{run.id}` · {inline_text(method_name(run.method))} · {run.status} · {run.node_count} nodes · "
            f"{run.created_at:%Y-%m-%d %H:%M} · {run.prompt_tokens + run.completion_tokens:,} tokens"
            + (
                f" · on {inline_text(describe_owner(run.owner))}"
                if depth is not None and run.owner and run.status in (RunStatus.RUNNING, RunStatus.PAUSED)
                else ""
            )
            + (f" · ⚠ {inline_text(run.warning)}" if run.warning else "")
            + (
                f" · {inline_text(services.access.owner_name(run))}'s"
                if person.signed_in and run.user_id != person.user_id
                else ""
            )
        )
        if top[1].button("Open", key=f"open-{run.id}"):
            st.session_state["run_id"] = run.id
            st.query_params["run"] = run.id
            st.switch_page("pages/explore.py", query_params={"run": run.id})
        if not identity.may_change(services, run):
            continue  # someone else's: opened and read, never resumed, renamed or deleted here
        retryable = services.runner.retryable(run)
        if (run.status in (RunStatus.INTERRUPTED, RunStatus.STOPPED, RunStatus.FAILED) or retryable) and top[2].button(
            "Retry failed" if retryable else "Resume", key=f"resume-{run.id}"
        ):
            try:
                if budget_short(run) is not None:
                    # Resumed as it is, it would stop again at its first call: Explore asks for more.
                    st.session_state["flash"] = "Its budget is spent: raise it, then press Resume"
                else:
                    services.access.check_may_run(person, run)  # the person's own limits
                    services.runner.resume(run.id)
            except (RunnerError, LimitReached) as exc:
                st.error(str(exc))
            else:
                st.session_state["run_id"] = run.id
                st.switch_page("pages/explore.py", query_params={"run": run.id})
        with top[3].popover("More"):
            # A form, so Enter in the box renames as the button does: Enter used to change only the
            # box, which then showed the new name over a card that kept the old one.
            with st.form(f"rename-form-{run.id}", border=False, enter_to_submit=True):
                new_title = st.text_input("Name", value=run.title, key=f"title-{run.id}")
                renamed = st.form_submit_button("Rename", key=f"rename-{run.id}")
            if renamed:
                try:
                    services.rename_run(run.id, new_title)
                except ValueError as exc:
                    st.error(str(exc))
                else:
                    st.rerun()
            confirm = st.checkbox("Yes, delete this run and everything in it", key=f"confirm-{run.id}")
            if st.button("Delete", key=f"delete-{run.id}", disabled=not confirm, type="primary"):
                try:
                    services.runner.delete(run.id)
                except RunnerError as exc:
                    st.error(f"Not deleted: {exc}.")
                else:
                    if st.session_state.get("run_id") == run.id:
                        st.session_state.pop("run_id")
                    st.rerun()
            share_controls(services, run)
if pages > 1:
    page_nav("bottom")
