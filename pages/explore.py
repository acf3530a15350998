"""Explore: ask a question, pick and tune a method, watch the tree grow, steer it."""

import json
import time

import streamlit as st
from streamlit.errors import StreamlitPageNotFoundError

from components import identity, mindmap
from components.app_state import (
    active_llm,
    get_services,
    preferences,
    run_llm_info,
    running_on_notice,
    start_local_model,
)
from components.cost_estimate import cost_estimate
from components.knowledge_graph_tab import has_knowledge_tab, knowledge_graph_tab
from components.live_run import last_reads, run_reads
from components.node_panel import node_panel
from components.params_form import params_form, readable_problems
from components.routing import through_the_app
from components.run_state_panels import has_side_tab, notice_list, notices, side_panels
from components.run_view import NOW_LINE_STYLE, controls, controls_row, progress, question_line
from components.safe_markdown import render_document
from components.step_log import lifecycle_events, node_badges, run_commands, run_events, step_log, stop_asked
from engine.access import LimitReached
from engine.contract import ANSWER_NODE, NODE_TAB
from engine.methods.params import ParamError, build_params, profile_defaults, profile_for_llm
from engine.methods.registry import UnknownMethod
from engine.node_numbers import node_numbers
from engine.questions import MAX_QUESTION_CHARS, QuestionError, check_length, clean_question
from engine.reader_text import as_sentence
from engine.reads import RunNotFound, RunStatus

through_the_app()  # first: a deep link opened first after a start still runs through app.py

REFRESH_SECONDS = 1.0
NEW_RESEARCH = "new-research"  # the form's expander: folded once a run is started from it
MAP_HEIGHT = 650  # px: the map's frame, toolbar included
PANEL_HEIGHT = MAP_HEIGHT - 80  # px: the node panel beside it, under the Node selectbox
TABS_HEIGHT = 50  # px: the Node / run tabs' headers above the panels, when the method has a side tab
NOTICE_HEIGHT = 150  # px: a method notice above the tabs, with its button (about three lines of text)
MIN_PANEL_HEIGHT = 250  # px: a panel never shrinks below this, however many notices
GRAPH_TAB_TEXT = 215  # px: the knowledge graph tab's lines around its drawing
START_DEBOUNCE_S = 10.0  # the same request started again within this is the same run
# Our own constant style (no run text in it): Streamlit's 6rem top margin, smaller while a run is open.
COMPACT_TOP = '<style>[data-testid="stMainBlockContainer"] { padding-top: 2.5rem; }</style>'

services = get_services()
current = st.query_params.get("run") or st.session_state.get("run_id")
if current:
    # A run open: the map is what the page is for. The title shares a row with the folded form, what
    # new research runs on is said in the form, and the page's top margin is smaller: the map starts
    # near the top, whole on a 900 px screen (it started 480 px down, half of it below the fold).
    st.html(COMPACT_TOP + NOW_LINE_STYLE)
    title_slot, research_slot = st.columns([1, 3], vertical_alignment="center")
    title_slot.title("Explore")
else:
    st.title("Explore")
    running_on_notice(services)
    research_slot = st.container()
if "flash" in st.session_state:
    st.toast(st.session_state.pop("flash"))
if current:
    # The open run, for the Report page too (a reload or a shared URL sets only the query).
    st.session_state["run_id"] = current

if st.session_state.pop("fold-new-research", False):
    # A run was just started from it: folded, so the new run's map is where the eye is, not below
    # the form and its parameters. (Set before the expander exists: Streamlit refuses it after.)
    st.session_state[NEW_RESEARCH] = False
with research_slot, st.expander("New research", expanded=current is None, key=NEW_RESEARCH, on_change="rerun"):
    if current:
        running_on_notice(services, compact=True)
    # No help tooltip: its button would share the "Question" label with the box.
    question = st.text_area(
        "Question",
        key="question",
        placeholder=f"An open-ended or multi-hop question (up to {MAX_QUESTION_CHARS:,} "
        "characters; documents go in the corpus, in Settings)",
    )
    # Said at the box as soon as the text is in (Streamlit sends it on leaving the box or Ctrl+Enter),
    # not first at Start. No max_chars on the widget: Streamlit drops a longer paste whole, silently.
    try:
        check_length(question.strip())
        too_long = False
    except QuestionError as exc:
        st.error(as_sentence(str(exc)))
        too_long = True
    # In the order the process serves them: the built-in ones as registered, then the plugins.
    methods = services.methods
    method = st.selectbox("Method", list(methods), format_func=lambda n: methods[n].title, key="method")
    st.caption(methods[method].summary)
    params_type = methods[method].Params
    kind = active_llm(services)
    profile = profile_for_llm(kind)
    with st.expander("Parameters" + (" (quick profile)" if profile == "quick" and params_type.quick_profile else "")):
        if profile == "quick" and params_type.quick_profile:
            st.caption(
                "Quick profile for the small built-in model, so a run finishes in minutes: "
                + ", ".join(
                    f"{k.replace('_', ' ')} { ({True: 'on', False: 'off'}.get(v, v) if isinstance(v, bool) else v) }"
                    for k, v in params_type.quick_profile.items()
                )
                + ". Raise any of them; the paper's values apply with a stronger model."
            )
        # Separate widget keys per profile: switching the LLM must show that profile's defaults.
        raw = params_form(
            params_type,
            key=f"params-{method}" + ("" if profile == "paper" else f"-{profile}"),
            defaults=profile_defaults(params_type, profile),
        )
    cost_estimate(methods[method], raw, model=run_llm_info(services, kind)["model"], prices=services.prices)
    if st.button("Start", type="primary", key="start"):
        if not question.strip():
            st.error("The question is empty: type the question you want researched.")
        else:
            try:
                question = clean_question(question)
                params = build_params(params_type, raw, method=method)
            except QuestionError as exc:
                if not too_long:  # said at the box already
                    st.error(as_sentence(str(exc)))
            except ParamError as exc:
                # In the form's words ("Max nodes is 500; allowed: 1 to 200."), else the CLI's.
                st.error(
                    "Could not start: "
                    + (readable_problems(params_type.model_fields, exc.errors) or as_sentence(str(exc)))
                )
            else:
                # Start is idempotent: a second click on the same request (a double click, or a
                # click while the page reruns) opens the run the first one started.
                request = json.dumps([question, method, params.model_dump(mode="json")], sort_keys=True)
                started = st.session_state.get("started")
                if started and started[0] == request and time.monotonic() - started[2] < START_DEBOUNCE_S:
                    run_id = started[1]
                else:
                    if kind == "local" and not start_local_model(services):
                        st.stop()
                    person = identity.viewer(services)
                    try:  # the person's own limits (multi-user mode): active runs, spending
                        max_cost = services.access.budget_for_new_run(person, None)
                    except LimitReached as exc:
                        st.error(f"Not started: {as_sentence(str(exc))}", icon=":material/block:")
                        st.stop()
                    run = services.runner.create_run(
                        question=question,
                        method=method,
                        params=params,
                        llm_info=run_llm_info(services, kind),
                        search_mode=preferences(services).search,
                        max_cost=max_cost,
                        user_id=person.user_id,
                    )
                    try:  # counted again with it stored: two starts at once cannot both pass
                        services.access.admit_new_runs(person.user_id, [run.id])
                    except LimitReached as exc:
                        st.error(f"Not started: {as_sentence(str(exc))}", icon=":material/block:")
                        st.stop()
                    services.runner.start(run.id)
                    run_id = run.id
                    st.session_state["started"] = (request, run_id, time.monotonic())
                st.session_state["run_id"] = run_id
                st.session_state["fold-new-research"] = True
                st.query_params["run"] = run_id
                st.rerun()

if current:
    opened = identity.open_run(services, current)  # someone else's, unshared: said, and nothing shown
    identity.whose(services, opened)
    active = opened.status in RunStatus.ACTIVE
    report_open, watched = f"report-open-{current}", f"watched-{current}"
    if active:
        st.session_state[watched] = True
    elif (
        st.session_state.pop(watched, False)
        and opened.status == RunStatus.DONE
        and st.session_state.get(report_open) is False
    ):
        # Watched to its end, with its report folded while the run worked (a report written
        # before the end): it opens now. One already open stays as the reader left it (steering).
        st.session_state[report_open] = True
        st.toast("The run is done: its report is open below the step log.")

    try:
        contract = services.method(opened.method).contract()
    except UnknownMethod:  # a run of a plugin this process does not load: shown plainly, not steered
        contract = None

    @st.fragment(run_every=REFRESH_SECONDS if active else None)
    def live_view(run_id: str, was_active: bool) -> None:
        # One SELECT of the run's version per refresh; the graph is read again only when it changed.
        try:
            reads = run_reads(services, run_id)
        except RunNotFound:
            st.error("This run was deleted.")
            return
        run, nodes = reads.run, reads.nodes
        if was_active and run.status not in RunStatus.ACTIVE:
            st.rerun(scope="app")  # the run ended: stop polling, show the report
        # The question beside the run's buttons, in one row, so the map starts higher. The buttons' slot
        # keeps its width when it has none: the question wraps the same while the run works or not.
        with st.container(horizontal=True, vertical_alignment="center", gap="medium"):
            question_slot, buttons = st.container(), controls_row(run)
        with question_slot:
            question_line(run)
        events, numbers = run_events(services, reads), reads.memo("numbers", lambda: node_numbers(nodes))
        commands = run_commands(services, reads)
        stopping = run.status in RunStatus.ACTIVE and stop_asked(commands)
        progress(
            run,
            nodes,
            lifecycle=lifecycle_events(services, reads),
            events=events,
            numbers=numbers,
            steerable=contract is not None and contract.steers_nodes and identity.may_change(services, run),
            stopping=stopping,
        )
        controls(services, run, row=buttons, stopping=stopping)
        selected_key, side_key, picked_key = f"selected-{run_id}", f"side-{run_id}", f"picked-{run_id}"
        generation_key, map_key = f"pick-generation-{run_id}", f"map-{run_id}"

        def select(node_id: int) -> None:
            """The page, not the Node list, selects a node. The list is drawn anew (a key of a new
            generation): a live refresh the browser sent before it showed this selection carries the
            old list's value, which would put the old node back."""
            if st.session_state.get(selected_key) != node_id:
                st.session_state[selected_key] = node_id
                st.session_state[generation_key] = st.session_state.get(generation_key, 0) + 1

        ids = [n.id for n in nodes]
        # The run's own state (FGDIP's error memory, OmniThink's outline...) and commands beside the
        # map, in a tab next to the selected node's: watched as the map grows, not below the step log.
        side_tab = contract is not None and has_side_tab(contract) and bool(ids)
        # MTQA's knowledge graph drawn in a third tab, around the selected node's units.
        graph_tab = contract.view.knowledge_tab.title if side_tab and has_knowledge_tab(contract) else None
        # A click or a search match on the map, read before the map is built: the render that tells
        # the frame its choice arrived then selects that node (one built before carried the old one).
        chosen = mindmap.map_choice(map_key)
        if chosen in ids:  # (a choice sent for another run's map is not a node of this one)
            select(chosen)
            st.session_state[picked_key] = True
            if side_tab and st.session_state.get(side_key) != graph_tab:
                # A node picked on the map is shown, whichever tab was open; the graph tab, open, follows it.
                st.session_state[side_key] = NODE_TAB
        if ids and st.session_state.get(selected_key) not in ids:
            select(ids[0])  # the root, selected on the map from the first draw
        if run.status == RunStatus.DONE and not st.session_state.get(picked_key):
            # A finished run whose report names the node it answers from (FGDIP's accepted answer, the
            # research agent's answer) shows that node until the reader picks another: where the
            # search ended up, with its explanation and sources, not the question they typed.
            report = reads.memo("report", lambda: services.reads.latest_report(run_id))
            answer = ((report.data or {}) if report is not None else {}).get(ANSWER_NODE)
            if answer in ids:
                select(answer)
        # The knowledge graph tab, open, takes 2/5 of the width: a graph needs room, a matrix less.
        wide_panel = graph_tab is not None and st.session_state.get(side_key) == graph_tab
        map_col, panel_col = st.columns([3, 2] if wide_panel else [7, 3], gap="small")
        with map_col:
            selected = st.session_state.get(selected_key)
            # Each node's queued or applying command, else its current step, under its label.
            # While the run works and the reader has not picked a node, the map keeps the node it
            # works on in view: a tree wider than the screen grows past its right edge otherwise.
            follow = (
                mindmap.working_node(nodes)
                if run.status in RunStatus.ACTIVE and not st.session_state.get(picked_key)
                else None
            )
            # A node the reader's steering made comes into view, even where they moved the map.
            reveal = reads.memo("steered", lambda: mindmap.steered_node(nodes, commands))
            data = reads.memo(
                ("map", selected, follow),
                lambda: mindmap.build_map(
                    nodes,
                    reads.snapshot.edges,
                    selected,
                    contract=contract,
                    follow=follow,
                    reveal=reveal,
                    badges=node_badges(nodes, events, commands, contract=contract),
                ),
            )
            mindmap.mind_map(data, key=map_key, height=MAP_HEIGHT)
        with panel_col:
            if not ids:
                st.caption("The first node appears in a moment.")
                return
            # What the method says the reader should know now (OmniThink: the article is older than
            # the tree), above the tabs: seen whichever is open.
            offered = notices(services, run, contract, reads) if side_tab else set()
            # The tabs give the notices' height back, so the column still ends with the map.
            shorter = NOTICE_HEIGHT * len(notice_list(services, run, contract, reads)) if side_tab else 0
            # Stateful tabs (a key, a rerun on switching): they keep the reader's tab through the
            # refreshes, and a click on the map can bring the node's tab back. Fixed labels: the key's
            # identity includes them.
            node_tab, run_tab, *more_tabs = (
                st.tabs(
                    [NODE_TAB, contract.view.side_tab, *([graph_tab] if graph_tab else [])],
                    key=side_key,
                    on_change="rerun",
                )
                if side_tab
                else (st.container(), None)
            )
            with node_tab:
                labels = {n.id: f"#{numbers[n.id]} {mindmap.short_label(n.label, 60)}" for n in nodes}
                generation = st.session_state.get(generation_key, 0)
                pick_key = f"pick-{run_id}-{generation}"
                st.session_state[pick_key] = st.session_state[selected_key]

                def picked_in_list(drawn: int) -> None:
                    if drawn == st.session_state.get(generation_key, 0):  # not a list a selection by the page replaced
                        st.session_state.update({selected_key: st.session_state[pick_key], picked_key: True})

                st.selectbox(
                    "Node", ids, format_func=labels.get, key=pick_key, on_change=picked_in_list, args=(generation,)
                )
                node = next(n for n in nodes if n.id == st.session_state[selected_key])
                # Beside the map at the map's height, scrolling on its own: a long node text never
                # pushes the node's commands or the map off the screen. Keyed by the node: another
                # node is a new element, shown from its top, not at the last node's scroll position.
                with st.container(
                    height=max(PANEL_HEIGHT - (TABS_HEIGHT if side_tab else 0) - shorter, MIN_PANEL_HEIGHT),
                    border=False,
                    key=f"panel-of-{node.id}",
                ):
                    node_panel(services, run, node, contract, reads, commands=commands, events=events, numbers=numbers)
            if run_tab is not None:
                with (
                    run_tab,
                    st.container(height=max(MAP_HEIGHT - TABS_HEIGHT - shorter, MIN_PANEL_HEIGHT), border=False),
                ):
                    side_panels(services, run, contract, reads, commands, offered=offered)
            if more_tabs and more_tabs[0].open:  # (drawn only when open: a hidden frame cannot place it)
                tall = max(MAP_HEIGHT - TABS_HEIGHT - shorter, MIN_PANEL_HEIGHT)
                with more_tabs[0], st.container(height=tall, border=False):
                    knowledge_graph_tab(services, run, contract, nodes, node, reads, height=tall - GRAPH_TAB_TEXT)
        step_log(events, numbers, key=f"log-{run_id}", selected=st.session_state.get(selected_key))
        if contract is not None and not side_tab:
            side_panels(services, run, contract, reads, commands)  # a method's notices, when it has no tab

    live_view(current, active)

    report = services.reads.latest_report(current)
    if report is not None:
        # Open or closed as first shown for this run: steering reopens a finished run, and a report
        # folding away then shortened the page under the reader, whose view dropped to its bottom.
        with st.expander("Report", expanded=st.session_state.setdefault(report_open, not active)):
            # The nodes the live view has just read (the report's header counts them): not read again.
            read = last_reads(current)
            render_document(st, services.reads.markdown(current, nodes=read.nodes if read else None))
            try:
                st.page_link(
                    "pages/report.py",
                    label="Open in the Report page",
                    icon=":material/description:",
                    query_params={"run": current},
                )
            except StreamlitPageNotFoundError:  # the page runs on its own (tests), without navigation
                st.caption("Downloads are on the Report page.")
