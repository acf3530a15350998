"""The web app's pages under Streamlit's AppTest, offline on the scripted fake LLM.

Every test drives the real multipage app (`app.py` with `st.navigation`) and switches to the page
under test, so page links and `st.switch_page` resolve exactly as in `streamlit run`. Each test has
its own THOUGHTMAP_HOME (conftest) holding a copy of the prebuilt bundled corpus index; the
process-wide `get_services()` cache is cleared around every test so each one builds its own
`Services` there. Runs execute in the runner's background threads: tests wait for them through the
repository and then rerun the page. The mind map is a custom component that AppTest cannot render;
tests that need a node clicked patch `components.mindmap.map_choice` to return the node's id.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time

import pytest
from streamlit.testing.v1 import AppTest

from components import app_state, mindmap
from components.run_view import STEER_ON, STOPPING
from engine.llm.fake_server import FakeOpenAIServer
from engine.methods.registry import METHODS
from engine.preferences import (
    PRESETS,
    Preferences,
    load_preferences,
    preferences_path,
    save_preferences,
)
from engine.report import render_markdown
from storage.evaluation import EvaluationStore
from storage.models import CommandStatus, NodeStatus, RunStatus
from storage.repository import RunNotFound
from tests import REPO_ROOT
from tests.support.fixtures_engine import run_to_end
from tests.support.progress_line import progress_of

ROOT = REPO_ROOT
APP = ROOT / "app.py"
TIMEOUT = 30  # seconds per script run (generous: CI machines can be slow)

QUESTION = "What engineering legacy did the Apollo program leave?"
SMALL_DEOT = {"max_layers": 2, "max_nodes": 3, "optimize_query": False}


# ---------------------------------------------------------------------- fixtures and helpers


@pytest.fixture
def services(prebuilt_corpus_home):
    """The app's own Services (the cached `get_services()`), built in this test's home."""
    app_state.get_services.clear()
    built = app_state.get_services()
    assert built.settings.home == prebuilt_corpus_home
    yield built
    for run in built.repo.list_runs(limit=1000):
        built.runner.wait(run.id, timeout=20)
    built.close()
    app_state.get_services.clear()


def open_page(page: str | None = None, *, run_id: str | None = None) -> AppTest:
    """The app as a browser opens it: `app.py` (Explore is the default page), then `page`."""
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    if run_id is not None:
        at.query_params["run"] = run_id
    if page is not None:
        at.switch_page(page)
    at.run()
    assert_no_exception(at)
    return at


def assert_no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def texts(elements) -> list[str]:
    return [str(e.value) for e in elements]


def node_list(at: AppTest):
    """Explore's Node selectbox (its key changes with each choice made on the map)."""
    [found] = [box for box in at.selectbox if box.label == "Node"]
    return found


def in_order(block) -> list:
    """Every element of an AppTest block, depth first: in the order the page shows them."""
    found = []
    for child in getattr(block, "children", {}).values():
        found.extend(in_order(child) if getattr(child, "children", None) else [child])
    return found


def joined(elements) -> str:
    return "\n".join(texts(elements))


def shows_markdown(at: AppTest, text: str) -> bool:
    """Whether `text` was rendered as one Markdown element (Streamlit strips trailing spaces)."""
    return text.rstrip() in [t.rstrip() for t in texts(at.markdown)]


def follow_switch(at: AppTest, page: str) -> AppTest:
    """After the script called st.switch_page(page), stay there on the next run, as a browser
    does (AppTest would otherwise rerun the page last chosen with `AppTest.switch_page`)."""
    return at.switch_page(page)


def wait_until_idle(services, run_id: str, timeout: float = 30) -> object:
    """Poll the repository until the run is no longer queued/running/paused and its thread ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = services.repo.get_run(run_id)
        if run.status not in RunStatus.ACTIVE and not services.runner.is_active(run_id):
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} still {services.repo.get_run(run_id).status} after {timeout} s")


def finished_deot(services, question: str = QUESTION) -> str:
    run_id = run_to_end(services, question, "deot", SMALL_DEOT)
    assert services.repo.get_run(run_id).status == RunStatus.DONE
    return run_id


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def dead_owner() -> str:
    """An owner string naming a process of this host that has exited."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return f"{socket.gethostname()}:{proc.pid}:deadbeef"


def pick_node(monkeypatch, node_id: int) -> None:
    """Make the mind map report a click on `node_id` on every rerun (AppTest cannot render the
    component, which is not drawn)."""
    monkeypatch.setattr(mindmap, "mind_map", lambda data, *, key, **kwargs: None)
    monkeypatch.setattr(mindmap, "map_choice", lambda key: node_id)


# ---------------------------------------------------------------------- the app shell


def test_app_starts_on_explore_and_every_page_renders(services):
    at = open_page()
    assert texts(at.title) == ["Explore"]
    for page, title in (
        ("pages/sessions.py", "Sessions"),
        ("pages/report.py", "Report"),
        ("pages/settings.py", "Settings"),
        ("pages/explore.py", "Explore"),
    ):
        at.switch_page(page).run()
        assert_no_exception(at)
        assert texts(at.title) == [title]
    # With no runs yet, Sessions and Report say so instead of failing.
    at.switch_page("pages/sessions.py").run()
    assert "No runs match" in joined(at.info)
    at.switch_page("pages/report.py").run()
    assert "No runs yet" in joined(at.info)


# ---------------------------------------------------------------------- Explore


def test_with_a_run_open_explore_says_what_it_runs_on_in_one_line(services):
    run_id = run_to_end(services, "Who wrote the play Hamlet?", "direct")
    at = open_page(run_id=run_id)
    assert not any("Running offline on the scripted fake LLM" in t for t in texts(at.info))  # no four-line box
    line = next(t for t in texts(at.caption) if t.startswith("LLM: "))
    assert line.startswith(
        "LLM: the scripted fake LLM, offline: placeholder answers · search: local corpus"
    ) and line.endswith("for real answers, connect a model in Settings"), line


def test_explore_says_it_runs_on_the_fake_and_lists_every_method(services):
    at = open_page()
    assert any("Running offline on the scripted fake LLM" in t for t in texts(at.info))
    method = at.selectbox(key="method")
    # In the order the process serves them (the registry's), the first one chosen.
    assert method.options == [cls.title for cls in services.methods.values()]
    assert sorted(services.methods) == sorted(METHODS)
    assert method.value == next(iter(services.methods)) == "deot"


@pytest.mark.parametrize("name", sorted(METHODS))
def test_explore_params_form_follows_the_methods_params(services, name):
    at = open_page()
    at.selectbox(key="method").set_value(name).run()
    assert_no_exception(at)
    assert METHODS[name].summary in texts(at.caption)
    params = METHODS[name].Params
    for field_name, info in params.model_fields.items():
        widget = at.main.get_by_key(f"params-{name}.{field_name}")
        # The name as words, abbreviations in capitals ("llm_planner" -> "LLM planner").
        words = field_name.replace("_", " ").capitalize().split(" ")
        assert widget.label == " ".join({"Llm": "LLM", "llm": "LLM"}.get(w, w) for w in words)
        assert widget.value == info.default
        assert widget.help.startswith(info.description or "")
        low = next((m.ge for m in info.metadata if hasattr(m, "ge")), None)
        if low is not None:  # the allowed range is said, not enforced by the widget
            assert "Allowed: " in widget.help
    # Only this method's fields are on the form.
    for other in set(METHODS) - {name}:
        for field_name in METHODS[other].Params.model_fields:
            with pytest.raises(KeyError):
                at.main.get_by_key(f"params-{other}.{field_name}")


def test_explore_switching_method_changes_the_form(services):
    at = open_page()
    assert at.number_input(key="params-deot.max_nodes").value == 15
    other = next(n for n in sorted(METHODS) if n != "deot" and METHODS[n].Params.model_fields)
    at.selectbox(key="method").set_value(other).run()
    keys = {w.key for w in (*at.number_input, *at.checkbox, *at.selectbox, *at.text_input) if w.key}
    assert not any(k.startswith("params-deot.") for k in keys)
    assert {f"params-{other}.{f}" for f in METHODS[other].Params.model_fields} <= keys


def test_explore_empty_question_is_refused(services):
    at = open_page()
    at.text_area(key="question").input("   ")
    at.button(key="start").click().run()
    assert_no_exception(at)
    assert any("The question is empty" in t for t in texts(at.error))
    assert services.repo.list_runs() == []
    assert "run" not in at.query_params


def test_explore_bad_parameter_value_is_refused(services):
    at = open_page()
    at.text_area(key="question").input(QUESTION)
    for tool in ("news_search", "info_search", "event_extractor", "history_analyzer", "direct_reasoning"):
        at.checkbox(key=f"params-deot.{tool}").uncheck()
    at.button(key="start").click().run()
    assert_no_exception(at)
    # Said under the last tool's box as soon as it was unticked, and again by Start.
    (under,) = _said_under_field(at, "params-deot.direct_reasoning")
    (errors,) = [e for e in texts(at.error) if e.startswith("Could not start")]
    assert errors == f"Could not start: {under}", (errors, under)
    # In the form's words: no code names, no pydantic prefix; a sentence.
    assert errors.startswith("Could not start: Switch on at least one tool") and errors.endswith("."), errors
    assert "Value error" not in errors and "deot" not in errors
    assert "News search" in errors and "news_search" not in errors  # fields named as on the form
    assert services.repo.list_runs() == []


def test_explore_out_of_range_number_is_refused(services, monkeypatch):
    # The browser (and Streamlit's server) keep number inputs within their bounds, so a value past
    # a field's bound can only come from a form that lets it through: the Params model still
    # refuses it, with a message naming the field, and no run starts.
    import components.params_form as params_form_module

    real_form = params_form_module.params_form

    def too_many_nodes(params_type, *, key, defaults=None):
        return {**real_form(params_type, key=key, defaults=defaults), "max_nodes": 500}

    monkeypatch.setattr(params_form_module, "params_form", too_many_nodes)
    at = open_page()
    at.text_area(key="question").input(QUESTION)
    at.button(key="start").click().run()
    assert_no_exception(at)
    errors = joined(at.error)
    assert errors == "Could not start: Max nodes is 500; allowed: 1 to 200.", errors
    assert services.repo.list_runs() == []


def test_explore_start_runs_to_done_and_shows_progress_node_and_report(services):
    at = open_page()
    at.text_area(key="question").input(QUESTION)
    at.number_input(key="params-deot.max_nodes").set_value(3)
    at.number_input(key="params-deot.max_layers").set_value(2)
    at.checkbox(key="params-deot.optimize_query").uncheck()
    at.button(key="start").click().run()
    assert_no_exception(at)
    run_id = at.query_params.get("run")
    assert run_id, at.query_params
    assert at.session_state["run_id"] == run_id
    # The form folds once its run has started: the new run's map is where the eye is, not below it.
    assert at.session_state["new-research"] is False
    run = services.repo.get_run(run_id)
    assert (run.question, run.method, run.llm_info["kind"]) == (QUESTION, "deot", "fake")
    assert run.params["max_nodes"] == 3 and run.params["max_layers"] == 2

    assert wait_until_idle(services, run_id).status == RunStatus.DONE
    at.run()
    assert_no_exception(at)
    metrics = progress_of(at)
    assert metrics["Status"] == "done"
    nodes = services.repo.list_nodes(run_id)
    done = sum(n.status == NodeStatus.DONE for n in nodes)
    assert metrics["Nodes done"] == f"{done} / {len(nodes)}"
    assert {"active", "wall", "Cost"} <= set(metrics)  # active time apart from wall time
    assert int(metrics["Tokens"].replace(",", "")) > 0

    # The node panel shows the first node: its question and its answer under its own headings,
    # with citations linked to the node's cited sources.
    root = nodes[0]
    markdown = texts(at.markdown)
    assert f"#### {root.label}" in markdown
    answer = "\n".join(markdown)
    # Its source entries are named by the node's number on the map (#1), not its stored id.
    assert "##### Key findings" in answer and "(#node-1-source-1)" in answer
    assert "###### Node 1 source 1" in answer
    assert node_list(at).value == root.id

    # The report expander holds the rendered report (built safe by engine.report, shown as it is).
    assert "Report" in [e.label for e in at.expander]
    assert shows_markdown(at, render_markdown(services.repo, run_id))
    assert any("[1]" in t for t in markdown)


def _report_expander(at: AppTest):
    return next(e for e in at.expander if e.label == "Report")


def test_a_run_watched_to_its_end_opens_its_report(services):
    """A report written while the run still works is folded then; once the page sees the run end,
    the report opens (it used to stay folded at the bottom of the page)."""
    run_id = finished_deot(services)
    services.repo.set_status(run_id, RunStatus.RUNNING)
    at = open_page(run_id=run_id)
    assert not _report_expander(at).proto.expanded  # folded while the run works
    services.repo.set_status(run_id, RunStatus.DONE)
    at.run()
    assert_no_exception(at)
    assert _report_expander(at).proto.expanded
    assert "The run is done: its report is open below the step log." in [t.proto.body for t in at.toast]
    # Opened only once: the next rerun does not toast again, and a run opened done starts open.
    at.run()
    assert _report_expander(at).proto.expanded and not at.toast
    other = open_page(run_id=finished_deot(services, "Which rockets did the Apollo program fly?"))
    assert _report_expander(other).proto.expanded


def test_stop_pressed_says_the_run_is_stopping_and_takes_pause_and_stop_away(services):
    """Seen by a new user on the built-in model: after Stop the page still said what the run was
    doing, with Pause and Stop in place, for the 15 s its model call took to end. Now, until the run
    reads the Stop, the "Now:" line says it is stopping and the buttons that no longer apply are gone."""
    run_id = finished_deot(services)
    services.repo.set_status(run_id, RunStatus.RUNNING)  # no execution here: nothing reads the Stop
    at = open_page(run_id=run_id)
    assert {"Pause", "Stop"} <= {b.label for b in at.button}
    next(b for b in at.button if b.label == "Stop").click().run()
    assert_no_exception(at)
    at.run()  # the next refresh, which reads the command the press stored
    assert f"Now: {STOPPING}" in texts(at.caption)
    assert not [b for b in at.button if b.label in ("Pause", "Stop")]
    assert services.repo.get_run(run_id).status == RunStatus.RUNNING  # told, not stopped by the page


def test_a_finished_run_says_it_can_be_steered_on_and_an_unserved_methods_run_does_not(services):
    run_id = finished_deot(services)
    at = open_page(run_id=run_id)
    assert STEER_ON in texts(at.caption)
    assert not [b for b in at.button if b.label in ("Pause", "Stop", "Resume")]
    # A run of a method this process does not serve (a plugin not loaded) cannot be steered here.
    other = services.repo.create_run(question="Q?", method="plugin-gone", params={}, llm_info={"model": "m"})
    services.repo.add_node(other.id, kind="question", label="Q?")
    services.repo.set_status(other.id, RunStatus.DONE)
    at = open_page(run_id=other.id)
    assert_no_exception(at)
    assert STEER_ON not in texts(at.caption)


def test_explore_unknown_run_is_a_readable_error(services):
    at = open_page(run_id="nosuchrun")
    assert any("There is no run `nosuchrun`" in t for t in texts(at.error))


def test_a_hostile_run_address_is_shown_as_text_not_markdown(services):
    # A crafted link: ?run= carries an image (fetched from elsewhere on render) and a phishing link.
    hostile = "x ![](https://t.example/p.png) [Sign in](https://phish.example)"
    at = open_page(run_id=hostile)
    assert_no_exception(at)
    error = joined(at.error)
    assert error.startswith("There is no run `") and "[Sign in](https://phish.example)`" in error


# ---------------------------------------------------------------------- steering from the node panel


def _steer_target(services, run_id: str):
    """A done question node below the root (the panel shows the root unless one is clicked)."""
    questions = [n for n in services.repo.list_nodes(run_id, kind="question") if n.status == NodeStatus.DONE]
    assert len(questions) >= 2, [(n.id, n.status) for n in questions]
    return questions[-1]


def _open_on_node(services, monkeypatch, run_id: str, node_id: int) -> AppTest:
    pick_node(monkeypatch, node_id)
    at = open_page(run_id=run_id)
    assert node_list(at).value == node_id
    number = sorted(n.id for n in services.repo.list_nodes(run_id)).index(node_id) + 1
    assert f"**Node #{number}** · question · layer 1 · *done*" in texts(at.markdown)  # its number in the run
    return at


def _only_command(services, run_id: str, kind: str):
    commands = [c for c in services.repo.list_commands(run_id) if c.kind == kind]
    assert len(commands) == 1, commands
    return commands[0]


def _after_steering(services, at: AppTest, run_id: str, kind: str):
    assert_no_exception(at)
    assert not at.error, texts(at.error)
    assert wait_until_idle(services, run_id).status == RunStatus.DONE
    command = _only_command(services, run_id, kind)
    assert command.status == CommandStatus.DONE, (command.status, command.error)
    at.run()
    assert_no_exception(at)
    return command


def test_a_node_the_page_selects_draws_the_node_list_anew(services, monkeypatch):
    """A choice on the map gives the Node list a new key: a live refresh the browser sent before it
    showed the choice carries the old list's value, and a value for a list no longer drawn is
    dropped instead of putting the old node back (the map browser test met that race). A list the
    page did not change keeps its key, so the reader's own choices in it count."""
    run_id = finished_deot(services)
    target = _steer_target(services, run_id)
    at = open_page(run_id=run_id)
    opened = node_list(at)
    root = opened.value
    pick_node(monkeypatch, target.id)
    at.run()
    picked = node_list(at)
    assert picked.value == target.id and picked.key != opened.key
    monkeypatch.setattr(mindmap, "map_choice", lambda key: None)  # reported once
    at.run()
    assert node_list(at).key == picked.key
    node_list(at).set_value(root).run()
    assert_no_exception(at)
    assert node_list(at).value == root and node_list(at).key == picked.key


def test_a_choice_on_the_map_is_read_before_the_map_is_built_and_counted_once(services, monkeypatch):
    """The map frame's value (the node, a `seq` and its `chain`) is read before the map is built, so the render
    that tells the frame its choice arrived already selects that node (a render built before still
    carried the old one, and Streamlit repeats a render unchanged on a resize: the frame would
    have put the old node back). The same `seq` on later reruns is not a new choice."""
    run_id = finished_deot(services)
    target = _steer_target(services, run_id)
    drawn: list[tuple[str, mindmap.MapData]] = []
    monkeypatch.setattr(mindmap, "mind_map", lambda data, *, key, **kwargs: drawn.append((key, data)))
    at = open_page(run_id=run_id)
    root = node_list(at).value
    assert drawn[-1][1].selected == str(root) != str(target.id)
    at.session_state[f"map-{run_id}"] = {"node": str(target.id), "seq": "1700000000000:0.5"}
    at.run()
    assert_no_exception(at)
    assert drawn[-1][0] == f"map-{run_id}" and drawn[-1][1].selected == str(target.id)
    assert node_list(at).value == target.id
    node_list(at).set_value(root).run()
    assert node_list(at).value == root and drawn[-1][1].selected == str(root)
    # The frame's resend of that choice (a new seq, the same chain): not a new choice.
    at.session_state[f"map-{run_id}"] = {
        "node": str(target.id),
        "seq": "1700000000003:0.7",
        "chain": "1700000000000:0.5",
    }
    at.run()
    assert node_list(at).value == root
    at.session_state[f"map-{run_id}"] = {"node": "999999", "seq": "1700000000001:0.5"}  # not this run's node
    at.run()
    assert_no_exception(at)
    assert node_list(at).value == root


def test_node_click_then_go_deeper_adds_a_depth_child(services, monkeypatch):
    run_id = finished_deot(services)
    target = _steer_target(services, run_id)
    at = _open_on_node(services, monkeypatch, run_id, target.id)
    assert f"#### {target.label}" in texts(at.markdown)
    # The caption comes from the node kind's data model; the commands from its declarations.
    assert f"Engine: breadth engine · aspect: {target.data['aspect']}" in texts(at.caption)
    buttons = {b.key: b for b in at.button if (b.key or "").startswith(f"steer-{run_id}-{target.id}-")}
    assert [b.label for b in buttons.values()] == ["Go deeper", "Prune", "Expand", "Ask"]
    assert buttons[f"steer-{run_id}-{target.id}-deepen"].help == (
        "Ask the depth engine for one follow-up question under this node."
    )
    at.button(key=f"steer-{run_id}-{target.id}-deepen").click().run()
    command = _after_steering(services, at, run_id, "deepen")
    assert command.payload == {"node_id": target.id}
    children = services.repo.children(target.id)
    assert [c.data.get("engine") for c in children] == ["depth"]
    assert children[0].status == NodeStatus.DONE
    # The new node is listed in the panel's node picker.
    assert any(option.startswith(f"#{children[0].id} ") for option in node_list(at).options)


def test_node_click_then_prune_prunes_the_node(services, monkeypatch):
    run_id = finished_deot(services)
    target = _steer_target(services, run_id)
    reports = len(services.repo.list_reports(run_id))
    at = _open_on_node(services, monkeypatch, run_id, target.id)
    at.button(key=f"steer-{run_id}-{target.id}-prune").click().run()
    _after_steering(services, at, run_id, "prune")
    assert services.repo.get_node(target.id).status == NodeStatus.PRUNED
    assert len(services.repo.list_reports(run_id)) == reports + 1  # the report leaves it out
    assert any("Pruned: nothing grows under this node" in t for t in texts(at.caption))
    assert f"steer-{run_id}-{target.id}-prune" not in {b.key for b in at.button}
    # The progress line says why not every node is done.
    nodes = services.repo.list_nodes(run_id)
    pruned = sum(n.status == NodeStatus.PRUNED for n in nodes)
    assert progress_of(at)["ended"] == f"{pruned} pruned" and pruned >= 1
    # A pruned node offers Restore, which brings it back.
    at.button(key=f"steer-{run_id}-{target.id}-restore").click().run()
    assert_no_exception(at)
    assert not at.error, texts(at.error)
    assert wait_until_idle(services, run_id).status == RunStatus.DONE
    assert services.repo.get_node(target.id).status == NodeStatus.DONE


def test_node_click_then_ask_adds_the_users_question(services, monkeypatch):
    run_id = finished_deot(services)
    target = _steer_target(services, run_id)
    at = _open_on_node(services, monkeypatch, run_id, target.id)
    key = f"steer-{run_id}-{target.id}"
    at.button(key=f"{key}-ask").click().run()  # nothing typed yet
    assert "Could not ask: fill in Your follow-up first." in texts(at.error)
    assert services.repo.list_commands(run_id) == []

    follow_up = "Which Apollo technologies reached consumer products?"
    assert at.text_input(key=f"{key}-ask.question").label == "Your follow-up"
    at.text_input(key=f"{key}-ask.question").input(follow_up)
    at.button(key=f"{key}-ask").click().run()
    command = _after_steering(services, at, run_id, "ask")
    assert command.payload == {"node_id": target.id, "question": follow_up}
    children = services.repo.children(target.id)
    assert [(c.label, c.data.get("engine")) for c in children] == [(follow_up, "user")]
    assert children[0].status == NodeStatus.DONE


def test_node_click_then_expand_adds_n_aspects(services, monkeypatch):
    run_id = finished_deot(services)
    target = _steer_target(services, run_id)
    at = _open_on_node(services, monkeypatch, run_id, target.id)
    key = f"steer-{run_id}-{target.id}"
    assert at.number_input(key=f"{key}-expand.n").value == 2
    # Out of range: refused in the form's words, with what is allowed; nothing queued.
    at.number_input(key=f"{key}-expand.n").set_value(500)
    at.button(key=f"{key}-expand").click().run()
    assert "Could not expand: New branches is 500; allowed: 1 to 8." in texts(at.error)
    assert services.repo.list_commands(run_id) == []
    at.number_input(key=f"{key}-expand.n").set_value(1)
    at.button(key=f"{key}-expand").click().run()
    command = _after_steering(services, at, run_id, "expand")
    assert command.payload == {"node_id": target.id, "n": 1}
    children = services.repo.children(target.id)
    assert len(children) == 1
    assert children[0].data.get("engine") == "breadth"


# ---------------------------------------------------------------------- Sessions


def _session_titles(at: AppTest) -> list[str]:
    return [t[2:-2] for t in texts(at.markdown) if t.startswith("**") and t.endswith("**")]


def _interrupted_run(services, question: str, method: str = "rag", params: dict | None = None) -> str:
    """A run whose (dead) process had claimed it, found at start-up and marked interrupted."""
    run = services.runner.create_run(
        question=question, method=method, params=params, llm_info=services.llm_info("fake")
    )
    services.repo.claim_run(run.id, dead_owner())
    assert services.runner.recover_interrupted() == [run.id]
    assert services.repo.get_run(run.id).status == RunStatus.INTERRUPTED
    return run.id


def test_sessions_lists_and_filters_runs(services):
    deot = finished_deot(services)
    direct = run_to_end(services, "Who wrote the play Hamlet?", "direct")
    rag = _interrupted_run(services, "Which river flows through Paris?")
    at = open_page("pages/sessions.py")
    assert "3 runs" in texts(at.caption)
    assert sorted(_session_titles(at)) == sorted(
        [QUESTION, "Who wrote the play Hamlet?", "Which river flows through Paris?"]
    )
    assert any(f"`{direct}` · Direct answer · done" in t for t in texts(at.caption))

    at.text_input(key="sessions-text").input("hamlet").run()
    assert _session_titles(at) == ["Who wrote the play Hamlet?"]
    at.text_input(key="sessions-text").input("").run()

    at.selectbox(key="sessions-method").set_value("deot").run()
    assert _session_titles(at) == [QUESTION]
    assert {b.key for b in at.button} >= {f"open-{deot}"}
    at.selectbox(key="sessions-method").set_value("(any)").run()

    at.selectbox(key="sessions-status").set_value("interrupted").run()
    assert _session_titles(at) == ["Which river flows through Paris?"]
    assert f"resume-{rag}" in {b.key for b in at.button}  # only resumable runs offer Resume
    at.selectbox(key="sessions-status").set_value("done").run()
    assert sorted(_session_titles(at)) == sorted([QUESTION, "Who wrote the play Hamlet?"])
    assert not any(b.key.startswith("resume-") for b in at.button if b.key)

    at.selectbox(key="sessions-status").set_value("failed").run()
    assert_no_exception(at)
    assert "No runs match" in joined(at.info)


def test_sessions_pages_through_every_run_to_the_oldest(services):
    # Issue 43: with more than 200 stored, the oldest could not be reached and the count was wrong.
    for i in range(45):
        services.repo.create_run(question=f"Stored question number {i:02d}", method="direct", params={})
    at = open_page("pages/sessions.py")
    assert "45 runs" in texts(at.caption) and "Page 1 of 3" in texts(at.caption)
    assert len(_session_titles(at)) == 20 and "Stored question number 44" in _session_titles(at)
    at.button(key="sessions-older-top").click().run()
    assert "Page 2 of 3" in texts(at.caption)
    at.button(key="sessions-oldest-bottom").click().run()
    assert_no_exception(at)
    assert "Page 3 of 3" in texts(at.caption)
    assert sorted(_session_titles(at)) == [f"Stored question number {i:02d}" for i in range(5)]
    # A new search starts at its own first page.
    at.text_input(key="sessions-text").input("number 1").run()
    assert "10 runs" in texts(at.caption) and not any(c.startswith("Page ") for c in texts(at.caption))


def test_sessions_deletes_a_run_but_not_one_a_worker_executes(services):
    import os

    gone = run_to_end(services, "Who wrote the play Hamlet?", "direct")
    held = services.runner.create_run(
        question="Which river flows through Paris?", method="rag", llm_info=services.llm_info("fake")
    )
    services.repo.claim_run(held.id, f"{socket.gethostname()}:{os.getppid()}:worker")  # a live process
    at = open_page("pages/sessions.py")
    at.checkbox(key=f"confirm-{held.id}").check().run()
    at.button(key=f"delete-{held.id}").click().run()
    assert_no_exception(at)
    assert "Not deleted: the run is running (in another process): stop it before deleting it." in joined(at.error)
    assert services.repo.get_run(held.id).status == RunStatus.RUNNING

    at.checkbox(key=f"confirm-{gone}").check().run()
    at.button(key=f"delete-{gone}").click().run()
    assert_no_exception(at)
    with pytest.raises(RunNotFound):
        services.repo.get_run(gone)
    assert _session_titles(at) == ["Which river flows through Paris?"]


def test_sessions_open_switches_to_explore_with_the_run(services):
    run_id = finished_deot(services)
    at = open_page("pages/sessions.py")
    at.button(key=f"open-{run_id}").click().run()
    assert_no_exception(at)
    assert texts(at.title) == ["Explore"]
    assert at.query_params.get("run") == run_id
    assert at.session_state["run_id"] == run_id
    assert f"**Question:** {QUESTION}" in texts(at.markdown)
    assert progress_of(at)["Status"] == "done"
    follow_switch(at, "pages/explore.py").run()  # the browser stays on the run
    assert_no_exception(at)
    assert f"**Question:** {QUESTION}" in texts(at.markdown)


def test_sessions_rename(services):
    run_id = finished_deot(services)
    title = services.repo.get_run(run_id).title
    at = open_page("pages/sessions.py")
    at.text_input(key=f"title-{run_id}").input("   ")
    at.button(key=f"rename-{run_id}").click().run()
    assert_no_exception(at)
    assert any("the new name is empty" in t for t in texts(at.error))
    assert services.repo.get_run(run_id).title == title

    at.text_input(key=f"title-{run_id}").input("Apollo legacy study")
    at.button(key=f"rename-{run_id}").click().run()
    assert_no_exception(at)
    assert services.repo.get_run(run_id).title == "Apollo legacy study"
    assert _session_titles(at) == ["Apollo legacy study"]
    assert not at.error


def test_sessions_delete_needs_confirmation(services):
    keep = run_to_end(services, "Who wrote the play Hamlet?", "direct")
    gone = finished_deot(services)
    at = open_page("pages/sessions.py")
    assert at.button(key=f"delete-{gone}").disabled
    at.checkbox(key=f"confirm-{gone}").check().run()
    assert not at.button(key=f"delete-{gone}").disabled
    at.button(key=f"delete-{gone}").click().run()
    assert_no_exception(at)
    with pytest.raises(RunNotFound):
        services.repo.get_run(gone)
    assert services.repo.list_nodes(gone) == []
    assert [r.id for r in services.repo.list_runs()] == [keep]
    assert _session_titles(at) == ["Who wrote the play Hamlet?"]


def test_sessions_resume_continues_an_interrupted_run(services):
    run_id = _interrupted_run(services, QUESTION, method="deot", params=SMALL_DEOT)
    at = open_page("pages/sessions.py")
    assert f"`{run_id}` · DEoT · interrupted" in joined(at.caption)
    at.button(key=f"resume-{run_id}").click().run()
    assert_no_exception(at)
    assert texts(at.title) == ["Explore"]
    assert at.query_params.get("run") == run_id
    assert wait_until_idle(services, run_id, timeout=60).status == RunStatus.DONE
    follow_switch(at, "pages/explore.py").run()
    assert_no_exception(at)
    assert progress_of(at)["Status"] == "done"
    assert services.repo.latest_report(run_id) is not None


# ---------------------------------------------------------------------- Report


def test_report_page_renders_downloads_and_regenerates(services):
    other = run_to_end(services, "Who wrote the play Hamlet?", "direct")
    run_id = finished_deot(services)
    at = open_page("pages/report.py", run_id=run_id)
    assert at.selectbox(key="report-run").value == run_id
    report = render_markdown(services.repo, run_id)
    assert shows_markdown(at, report)
    assert "[1]" in report and "## Sources" in report
    assert [d.label for d in at.get("download_button")] == [
        "Download Markdown",
        "Download JSON",
        "Download PDF",
        "Download DOCX",
    ]
    assert any(e.label.startswith("All sources gathered by this run (") for e in at.expander)

    before = len(services.repo.list_reports(run_id))
    at.button(key="regenerate").click().run()
    assert_no_exception(at)
    assert not at.error, texts(at.error)
    assert wait_until_idle(services, run_id).status == RunStatus.DONE
    assert len(services.repo.list_reports(run_id)) == before + 1
    assert _only_command(services, run_id, "regenerate_report").status == CommandStatus.DONE

    # Picking another run shows that run's report.
    at.selectbox(key="report-run").set_value(other).run()
    assert_no_exception(at)
    assert shows_markdown(at, render_markdown(services.repo, other))
    assert at.session_state["run_id"] == other


def test_report_page_checks_every_cited_sentence_against_its_source(services):
    run_id = run_to_end(services, "Who wrote the play Hamlet?", "rag")
    at = open_page("pages/report.py", run_id=run_id)
    assert "Not checked yet." in joined(at.caption)
    at.button(key=f"check-citations-{run_id}").click().run()
    assert_no_exception(at)
    assert not at.error, texts(at.error)
    labels = {m.label: m.value for m in at.metric}
    assert {"Support rate", "Unsupported citations", "Citations", "Judge calls"} <= labels.keys()
    stored = EvaluationStore(services.db).list_judgments(run_id=run_id, protocol="claim_support")
    assert len(stored) == 1 and labels["Citations"] == str(stored[0].verdict["markers"]) != "0"
    table = at.dataframe[0].value
    assert list(table.columns) == ["Sentence", "Source", "Verdict", "Why"] and len(table) >= 1
    assert set(table["Source"]) <= {f"[{n}]" for n in range(1, 20)}
    # Reopened later: the stored check is shown without asking the judge again.
    again = open_page("pages/report.py", run_id=run_id)
    assert {m.label for m in again.metric} >= {"Support rate"}
    assert len(EvaluationStore(services.db).list_judgments(run_id=run_id)) == 1
    assert not again.warning
    # The report written again since: the check says it was of the earlier version, and keeps that
    # version's numbers.
    services.repo.save_report(run_id, "A rewritten report with no citation.")
    stale = open_page("pages/report.py", run_id=run_id)
    assert "This check was of an earlier version of the report" in joined(stale.warning)
    assert list(stale.dataframe[0].value["Source"]) == list(table["Source"])
    assert stored[0].verdict["report_id"] is not None  # the version judged, kept with the verdict


def test_report_page_refuses_a_second_regenerate_while_one_is_on_its_way(services):
    run_id = run_to_end(services, "Who wrote the play Hamlet?", "direct")
    wait_until_idle(services, run_id)
    services.runner._executions[run_id].thread.join(10)  # no longer reading its queue
    services.repo.enqueue_command(run_id, "regenerate_report", {})  # the first click's, still queued
    at = open_page("pages/report.py", run_id=run_id)
    at.button(key="regenerate").click().run()
    assert_no_exception(at)
    assert "Could not regenerate the report" in joined(at.error) and "already on its way" in joined(at.error)


# ---------------------------------------------------------------------- Settings


def test_settings_says_what_every_method_searches_with(services):
    at = open_page("pages/settings.py")
    captions = " ".join(c.value for c in at.caption)
    assert "retriever (THOUGHTMAP_RETRIEVER): hybrid" in captions
    assert "reranker (THOUGHTMAP_RERANKER" in captions and ": none: the first stage's order" in captions
    assert "embedding model: none" in captions  # the tests run without the built-in model


def test_settings_presets_fill_the_endpoint(services):
    at = open_page("pages/settings.py")
    for preset in ("Ollama (local)", "vLLM server", "OpenAI"):
        at.selectbox(key="settings-preset").set_value(preset).run()
        assert_no_exception(at)
        assert at.text_input(key="settings-base-url").value == PRESETS[preset]["base_url"]
        assert at.text_input(key="settings-model").value == PRESETS[preset]["model"]
        assert at.selectbox(key="settings-mode").value == PRESETS[preset]["structured_mode"]
    # Edits stick until another preset is picked.
    at.text_input(key="settings-model").input("my-model").run()
    assert at.text_input(key="settings-model").value == "my-model"


def test_settings_show_the_saved_endpoint_not_the_presets_defaults(services):
    # A saved, edited model must survive reopening the app: the preset's defaults fill the fields
    # only when the user picks a preset.
    saved = Preferences(
        preset="Ollama (local)", base_url="http://127.0.0.1:11434/v1", model="qwen2.5:7b", structured_mode="prompted"
    )
    save_preferences(services.settings, saved)
    at = open_page("pages/settings.py")
    assert at.selectbox(key="settings-preset").value == "Ollama (local)"
    assert at.text_input(key="settings-base-url").value == saved.base_url
    assert at.text_input(key="settings-model").value == "qwen2.5:7b"
    assert at.selectbox(key="settings-mode").value == "prompted"
    at.button(key="settings-save").click().run()
    assert_no_exception(at)
    reloaded = load_preferences(services.settings)
    assert reloaded.model_dump(exclude={"models"}) == saved.model_dump(exclude={"models"})
    assert not any(reloaded.models.values())  # the per-role fields were left empty
    # Leaving Settings and coming back shows the same values.
    at.switch_page("pages/sessions.py").run()
    at.switch_page("pages/settings.py").run()
    assert at.text_input(key="settings-model").value == "qwen2.5:7b"


def test_settings_save_writes_preferences_but_never_the_key(services):
    secret = "sk-test-NEVERSTORE-0123456789abcdef"
    home = services.settings.home
    at = open_page("pages/settings.py")
    at.selectbox(key="settings-preset").set_value("Ollama (local)").run()
    at.text_input(key="settings-model-judge").input("judge-model")
    at.radio(key="settings-search").set_value("none")
    at.text_input(key="settings-api-key").input(secret).run()
    assert_no_exception(at)
    captions = joined(at.caption)
    assert "API key: set (…cdef, from this session)" in captions
    assert secret not in captions and secret not in joined(at.markdown)

    at.button(key="settings-save").click().run()
    assert_no_exception(at)
    assert any("Saved" in t for t in texts(at.success))
    saved = json.loads(preferences_path(services.settings).read_text(encoding="utf-8"))
    assert saved["base_url"] == PRESETS["Ollama (local)"]["base_url"]
    assert saved["model"] == PRESETS["Ollama (local)"]["model"]
    assert saved["models"]["judge"] == "judge-model"
    assert saved["search"] == "none"

    # Visit the other pages with the key in the session, then look for it everywhere on disk.
    for page in ("pages/explore.py", "pages/sessions.py", "pages/settings.py"):
        at.switch_page(page).run()
        assert_no_exception(at)
    found = [p for p in home.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert found == []
    for run in services.repo.list_runs():
        assert secret not in json.dumps(run.llm_info)


def test_settings_test_connection(services):
    at = open_page("pages/settings.py")
    url = f"http://127.0.0.1:{closed_port()}/v1"
    at.text_input(key="settings-base-url").input(url)
    at.button(key="settings-test").click().run()
    assert_no_exception(at)
    assert any(f"cannot reach the LLM endpoint at {url}" in t for t in texts(at.error)), texts(at.error)
    assert not at.success

    with FakeOpenAIServer() as server:
        at.text_input(key="settings-base-url").input(server.base_url)
        at.button(key="settings-test").click().run()
        assert_no_exception(at)
        assert f"Connected to {server.base_url}." in texts(at.success)
        assert not at.error


def test_settings_corpus_shows_counts_and_ingests_an_upload(services):
    store = services.corpus().store
    documents = sum(store.collections().values())
    assert documents > 0
    at = open_page("pages/settings.py")
    assert f"{documents:,} documents in {store.count_chunks():,} passages" in texts(at.markdown)

    text = b"Zorblaxian glass is a fictional material first described in the Quillmere survey of 1903."
    at.file_uploader(key="settings-upload").upload("zorblax.txt", text, "text/plain").run()
    assert_no_exception(at)
    at.button(key="settings-ingest").click().run()
    assert_no_exception(at)
    assert at.success, texts(at.error)
    assert (services.uploads_dir / "zorblax.txt").read_bytes() == text
    # The count is the new one at once (no second run of the page).
    assert f"{documents + 1:,} documents in {store.count_chunks():,} passages" in texts(at.markdown)
    hits = services.corpus().search("Zorblaxian glass Quillmere", 3)
    assert hits and "Zorblaxian" in hits[0].snippet + hits[0].title + getattr(hits[0], "text", "")
    # Cited by its file name, not by the folder the server saved it in.
    assert hits[0].ref == "uploads/zorblax.txt#0" and hits[0].url is None


# ---------------------------------------------------------------------- errors are readable


def test_unreachable_endpoint_fails_the_run_with_a_readable_error(services, monkeypatch):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    # No retries, short timeout: the run fails at once instead of backing off.
    services.configure_openai(services.settings.llm.model_copy(update={"max_retries": 0, "timeout_s": 5}))
    save_preferences(
        services.settings, Preferences(llm="openai", preset="Custom endpoint", base_url=url, model="some-model")
    )
    at = open_page()
    assert any(url in t for t in texts(at.caption))  # the notice names the endpoint, not the fake
    assert not any("scripted fake LLM" in t for t in texts(at.info))
    at.text_area(key="question").input(QUESTION)
    at.number_input(key="params-deot.max_nodes").set_value(3)
    at.button(key="start").click().run()
    assert_no_exception(at)
    run_id = at.query_params.get("run")
    assert run_id
    run = wait_until_idle(services, run_id)
    assert run.status == RunStatus.FAILED
    assert run.llm_info["kind"] == "openai" and run.llm_info["base_url"] == url
    at.run()
    assert_no_exception(at)
    errors = joined(at.error)
    assert "The run failed:" in errors
    assert "Traceback" not in errors
    assert "127.0.0.1" in errors, errors
    assert ".." not in errors.replace("...", "") and errors.count("press Resume") == 1, errors
    assert progress_of(at)["Status"] == "failed"


def test_settings_show_a_learned_structured_mode_and_reset_it(services):
    from engine.llm.protocol import ResponseFormat

    services.structured_modes.remember(
        "http://127.0.0.1:8080/v1",
        "local",
        ResponseFormat.JSON_OBJECT,
        'response_format type must be one of "text" or "json_object"',
    )
    at = open_page("pages/settings.py")
    captions = " ".join(texts(at.caption))
    assert "local at http://127.0.0.1:8080/v1" in captions and "json_object" in captions
    at.button(key="settings-reset-modes").click().run()
    assert_no_exception(at)
    assert services.structured_modes.all() == []
    assert any("json_schema first" in s for s in texts(at.success))


def test_credentials_in_a_saved_endpoint_url_are_not_written_to_disk(services):
    from engine.preferences import preferences_path

    save_preferences(services.settings, Preferences(base_url="http://alice:hunter2@127.0.0.1:9/v1?api-key=k3y"))
    stored = preferences_path(services.settings).read_text(encoding="utf-8")
    assert "hunter2" not in stored and "k3y" not in stored and "alice" not in stored


# ---------------------------------------------------------------------- Explore issue 12: 3, 4, 5


def test_the_report_page_shows_the_run_open_in_explore_not_the_newest(services):
    opened = finished_deot(services)
    newer = run_to_end(services, "Who wrote the play Hamlet?", "direct")  # the newest run
    assert services.repo.list_runs()[0].id == newer
    at = open_page(run_id=opened)  # a reload or a shared link: only the query names the run
    at.query_params.clear()  # the sidebar's link to another page carries no query
    at.switch_page("pages/report.py").run()
    assert_no_exception(at)
    assert at.selectbox(key="report-run").value == opened
    # Picking another run in the Report page sticks, and it becomes the open run.
    at.selectbox(key="report-run").set_value(newer).run()
    assert at.selectbox(key="report-run").value == newer
    assert at.session_state["run_id"] == newer and at.query_params.get("run") == newer


def test_start_clicked_twice_creates_one_run(services):
    at = open_page()
    at.text_area(key="question").input(QUESTION)
    at.number_input(key="params-deot.max_nodes").set_value(2)
    at.button(key="start").click().run()
    first = at.query_params.get("run")
    at.button(key="start").click().run()  # the second click of a double click
    assert_no_exception(at)
    assert [r.id for r in services.repo.list_runs()] == [first]
    assert at.query_params.get("run") == first


def test_an_out_of_range_parameter_blocks_start_with_the_reason(services):
    at = open_page()
    at.text_area(key="question").input(QUESTION)
    at.number_input(key="params-deot.max_nodes").set_value(-5)
    at.button(key="start").click().run()
    assert_no_exception(at)
    # The field says it under itself, and Start names it (the Parameters may be folded).
    assert _said_under_field(at, "params-deot.max_nodes") == ["Max nodes is -5; allowed: 1 to 200."]
    assert texts(at.error) == [
        "Max nodes is -5; allowed: 1 to 200.",
        "Could not start: Max nodes is -5; allowed: 1 to 200.",
    ], texts(at.error)
    assert services.repo.list_runs() == []


def _said_under_field(at: AppTest, key: str) -> list[str]:
    """The errors drawn right under the widget keyed `key` (before the next widget)."""
    elements = in_order(at.main)
    start = next(i for i, e in enumerate(elements) if getattr(e, "key", None) == key)
    said = []
    for element in elements[start + 1 :]:
        if element.type == "error":
            said.append(str(element.value))
        elif element.type != "empty":
            break
    return said


def test_a_parameter_is_checked_under_its_field_as_soon_as_it_is_entered(services):
    """Issue 43: parameters were checked only at Start, with no field marked."""
    at = open_page()
    assert not at.error  # the defaults are valid: nothing said
    at.number_input(key="params-deot.max_nodes").set_value(-5).run()
    assert_no_exception(at)
    assert _said_under_field(at, "params-deot.max_nodes") == ["Max nodes is -5; allowed: 1 to 200."]
    assert _said_under_field(at, "params-deot.max_layers") == []
    # A check across fields (once each field is valid) is said under the last field it names, the
    # fields named as on the form.
    at.number_input(key="params-deot.max_nodes").set_value(5)
    for tool in ("news_search", "info_search", "event_extractor", "history_analyzer", "direct_reasoning"):
        at.checkbox(key=f"params-deot.{tool}").uncheck()
    at.run()
    assert _said_under_field(at, "params-deot.max_nodes") == []
    (said,) = _said_under_field(at, "params-deot.direct_reasoning")
    assert said.startswith("Switch on at least one tool") and "News search" in said, said
    # Fixed, the form says nothing any more.
    at.checkbox(key="params-deot.info_search").check()
    at.run()
    assert not at.error, texts(at.error)


def test_errors_by_field_puts_each_problem_under_the_field_it_is_about():
    from engine.methods.params import errors_by_field

    mtqa = METHODS["mtqa"].Params
    assert errors_by_field(mtqa, {}) == {}
    by_field = errors_by_field(mtqa, {"rows": 0, "scope": "collection", "collection": ""})
    assert [e["type"] for e in by_field["rows"]] == ["greater_than_equal"]
    assert set(by_field) == {"rows"}  # the check across fields runs once every field is valid
    by_field = errors_by_field(mtqa, {"scope": "collection", "collection": " "})
    assert set(by_field) == {"collection"}  # named last of "scope" and "collection"
    by_field = errors_by_field(mtqa, {"no_source_text": True, "no_triples": True})
    assert set(by_field) == {"no_triples"}


def test_the_report_page_says_when_the_run_it_is_asked_for_does_not_exist(services):
    shown = run_to_end(services, "Who wrote the play Hamlet?", "direct")
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.query_params["run"] = "deadbeef0000"  # a deleted run's link
    at.switch_page("pages/report.py").run()
    assert_no_exception(at)
    assert "There is no run `deadbeef0000` (deleted?). The newest run is shown instead" in joined(at.error)
    assert at.selectbox(key="report-run").value == shown


def test_the_report_page_opens_a_run_older_than_its_picker_lists(services, monkeypatch):
    old = run_to_end(services, "Who wrote the play Hamlet?", "direct")
    run_to_end(services, "Who built the Eiffel Tower?", "direct")
    newest = run_to_end(services, "Who painted the Mona Lisa?", "direct")
    real = services.repo.list_runs
    monkeypatch.setattr(services.repo, "list_runs", lambda *a, **k: [r for r in real(*a, **k) if r.id == newest])
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.query_params["run"] = old
    at.switch_page("pages/report.py").run()
    assert_no_exception(at)
    assert not at.error and at.selectbox(key="report-run").value == old
    assert [o.rsplit(" · ", 1)[1] for o in at.selectbox(key="report-run").options] == [newest, old]


def test_a_refused_run_level_command_is_said_where_it_was_given(services):
    """The research agent is steered as a whole: its node panel says so, and a refused "Drop a
    source" shows the reason beside the command, not only in the step log."""
    run_id = run_to_end(services, QUESTION, "research", {"max_searches": 0})
    at = open_page(run_id=run_id)
    assert_no_exception(at)
    assert (
        "This method is steered as a whole, not node by node: see its commands in the “Run” tab beside this one."
        in texts(at.caption)
    )
    key = f"run-cmd-{run_id}-drop_source"
    at.number_input(key=f"{key}.number").set_value(99)
    at.button(key=key).click().run()
    assert_no_exception(at)
    assert not at.error, texts(at.error)
    wait_until_idle(services, run_id)
    at.run()
    assert any("Drop a source refused: " in w and "99" in w for w in texts(at.warning)), texts(at.warning)


# ---------------------------------------------------------------------- a spent budget


def _budget_stopped_deot(services) -> str:
    full = finished_deot(services, "Which budget did the Apollo program have?")
    spent = services.repo.list_llm_calls(full)[:2]
    budget = sum(c.prompt_tokens + c.completion_tokens for c in spent)  # two calls' worth
    run_id = run_to_end(services, QUESTION, "deot", SMALL_DEOT, max_tokens=budget)
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.STOPPED and "budget" in run.stop_reason
    return run_id


def test_a_run_stopped_by_its_budget_is_resumed_with_a_raised_one_and_not_steered_before(services):
    run_id = _budget_stopped_deot(services)
    budget = services.repo.get_run(run_id).max_tokens
    # Steering would stop again at its first call: refused with what to do.
    root = next(n for n in services.repo.list_nodes(run_id) if n.parent_id is None)
    with pytest.raises(ValueError, match="budget is spent.*resume it with a larger budget"):
        services.runner.steer(run_id, "ask", {"node_id": root.id, "question": "What did it cost?"})
    # Sessions' Resume does not resume it as it is: Explore asks for a larger budget.
    at = open_page("pages/sessions.py")
    at.button(key=f"resume-{run_id}").click().run()
    assert_no_exception(at)
    assert services.repo.get_run(run_id).status == RunStatus.STOPPED
    at = open_page(run_id=run_id)
    warning = joined(at.warning)
    assert "raise the budget below and press Resume" in warning and "--max-tokens" not in warning
    raise_tokens = at.number_input(key=f"raise-tokens-{run_id}")
    assert raise_tokens.value == 2 * budget
    raise_tokens.set_value(100 * budget)
    at.button(key=f"resume-{run_id}").click().run()
    assert_no_exception(at)
    final = wait_until_idle(services, run_id, timeout=60)
    assert final.status == RunStatus.DONE, (final.status, final.stop_reason)
    assert final.max_tokens == 100 * budget


def test_a_finished_run_near_its_budget_offers_raise_budget(services):
    run_id = finished_deot(services)
    done = services.repo.get_run(run_id)
    services.runner.raise_budget(run_id, max_tokens=done.prompt_tokens + done.completion_tokens + 10)
    at = open_page(run_id=run_id)
    raise_tokens = at.number_input(key=f"raise-tokens-{run_id}")
    raise_tokens.set_value(10**7)
    at.button(key=f"raise-{run_id}").click().run()
    assert_no_exception(at)
    assert services.repo.get_run(run_id).max_tokens == 10**7
    assert services.repo.get_run(run_id).status == RunStatus.DONE  # raised, not resumed
    follow_switch(at, "pages/explore.py").run()
    assert_no_exception(at)
    assert f"raise-{run_id}" not in [b.key for b in at.button]  # the budget pays for a call again


def test_settings_make_show_once_and_revoke_an_api_token(services):
    from engine.service.tokens import check_token

    at = open_page("pages/settings.py")
    at.text_input(key="api-token-name").input("laptop agent")
    at.button(key="FormSubmitter:api-token-form-Create token").click().run()
    assert_no_exception(at)
    [shown] = [c.value for c in at.code]
    assert shown.startswith("tm_") and check_token(services.tokens, shown).name == "laptop agent"
    assert "shown only this once" in " ".join(texts(at.success))
    at.run()  # the next run of the page no longer shows it
    assert not at.code and "laptop agent" in " ".join(texts(at.markdown))
    [token] = services.tokens.list_tokens()
    at.button(key=f"api-token-revoke-{token.id}").click().run()
    assert_no_exception(at)
    assert check_token(services.tokens, shown) is None and "laptop agent" not in " ".join(texts(at.markdown))
