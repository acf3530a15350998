"""Compare: one question, several methods with the same budget, LLM and search; their maps and
reports side by side, and the judges' verdicts. The runs are the comparison: `?runs=a,b,c` reopens it."""

import streamlit as st

from components import identity
from components.app_state import (
    active_llm,
    get_services,
    preferences,
    run_llm_info,
    running_on_notice,
    start_local_model,
)
from components.compare_existing import pick_existing_runs
from components.compare_judge import judge_panel
from components.compare_view import compared_runs, compared_setups
from components.method_choice import choose_methods
from components.routing import through_the_app
from components.run_view import question_line
from engine.access import LimitReached
from engine.evaluate.compare import MAX_COMPARED, ComparisonError, parse_run_ids, setup_differences, start_comparison
from engine.methods.params import profile_for_llm
from engine.questions import MAX_QUESTION_CHARS

through_the_app()  # first: a deep link opened first after a start still runs through app.py

services = get_services()
st.title("Compare")
running_on_notice(services)
run_ids = parse_run_ids(st.query_params.get("runs"))

with st.expander("New comparison", expanded=not run_ids):
    question = st.text_area(
        "Question",
        key="compare-question",
        placeholder=f"One question for every method (up to {MAX_QUESTION_CHARS:,} characters)",
    )
    kind = active_llm(services)
    profile = profile_for_llm(kind)
    choice = choose_methods(
        services,
        key="compare",
        profile=profile,
        model=run_llm_info(services, kind)["model"],
        default=list(services.methods)[:2],
        max_selections=MAX_COMPARED,
        help_text=f"2 or {MAX_COMPARED} methods; each gets the same budget, LLM and search.",
    )
    st.caption("The budget is each run's: every method gets the same.")
    if st.button("Start comparison", type="primary", key="compare-start"):
        if kind == "local" and not start_local_model(services):
            st.stop()
        try:
            person = identity.viewer(services)
            run_ids = start_comparison(
                services,
                question=question,
                methods=choice.methods,
                values=choice.values,
                llm_kind=kind,
                llm_info=run_llm_info(services, kind),
                profile=profile,
                search_mode=preferences(services).search,
                max_cost=services.access.budget_for_new_run(person, choice.max_cost, runs=len(choice.methods)),
                max_tokens=choice.max_tokens,
                user_id=person.user_id,
            )
        except LimitReached as exc:
            st.error(f"Cannot start the comparison: {exc}. Nothing was started.")
        except ComparisonError as exc:
            st.error(f"Cannot start the comparison: {exc}. Nothing was started.")
        else:
            st.query_params["runs"] = ",".join(run_ids)
            st.rerun()

with st.expander("Compare runs you already have"):
    picked = pick_existing_runs(services)
    if picked:
        st.query_params["runs"] = ",".join(picked)
        st.rerun()

if not run_ids:
    st.info(
        "Type a question, choose two or three methods and press Start comparison; or put runs you already "
        "have side by side. A comparison's address (?runs=…) reopens it later."
    )
    st.stop()

for run_id in run_ids:  # someone else's unshared run in the address: said, and nothing of it shown
    identity.open_run(services, run_id)
question_line(services.reads.get_run(run_ids[0]))
differ = setup_differences(compared_setups(services, run_ids))
if differ:  # runs put side by side from storage, or an address typed by hand
    st.warning(
        "These runs differ in more than their method: " + ", ".join(differ) + ". What tells them apart "
        "is not the method alone.",
        icon=":material/warning:",
    )
compared_runs(services, run_ids)
if all(identity.may_change(services, services.reads.get_run(run_id)) for run_id in run_ids):
    judge_panel(services, run_ids)  # a verdict is stored with the runs: only their owner judges them
else:
    st.caption("Judges: only the owner of these runs can judge them (a verdict is stored with the runs).")
