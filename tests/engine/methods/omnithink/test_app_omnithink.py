"""OmniThink in the app: its information tree in the map (coloured by depth), the conceptual pool
and the outline beside it (run-state panels), subtopic steering in the node panel, the article in
the Report page."""

from __future__ import annotations

from components import mindmap
from engine.safe_text import inline_text
from storage.models import CommandStatus, NodeStatus, RunStatus
from tests.pages.test_app_pages import joined, open_page, pick_node, services, wait_until_idle  # noqa: F401
from tests.support.fixtures_engine import run_to_end

TOPIC = "2022 AFL Grand Final"
SMALL = {"max_depth": 1, "subnodes": 2}


def test_explore_shows_the_pool_the_outline_and_subtopic_steering(services, monkeypatch):
    run_id = run_to_end(services, TOPIC, "omnithink", SMALL)
    assert services.repo.get_run(run_id).status == RunStatus.DONE
    pools = services.repo.list_run_states(run_id, "concept_pool")
    assert len(pools) > 1
    concepts = pools[-1].data["concepts"]
    leaf = next(n for n in services.repo.list_nodes(run_id) if n.depth == 1)
    pick_node(monkeypatch, leaf.id)

    at = open_page(run_id=run_id)
    markdown = joined(at.markdown)
    expanders = [e.label for e in at.expander]
    # The run-state panels the view declares, each with its model's caption and body.
    assert {"Conceptual pool", "Outline", "How it grew · Conceptual pool"} <= set(expanders)
    assert f"Step {pools[-1].data['step']} · {len(concepts)} concepts" in joined(at.caption)
    assert all(inline_text(concept) in markdown for concept in concepts)  # model text, shown as text
    assert f"- Step {pools[-1].data['step']}: +{len(pools[-1].data['added'])} new" in markdown
    outline = services.repo.latest_run_state(run_id, "outline").data["outline"]["sections"]
    assert all(inline_text(section["title"]) in markdown for section in outline)
    labels = {b.label for b in at.button}
    assert {"Expand", "Prune", "Add subtopic", "Rewrite outline", "Rewrite article"} <= labels
    assert "Go deeper" not in labels
    # Two run commands share the label "Rewrite article": one button.
    assert [b.label for b in at.button].count("Rewrite article") == 1
    # Expand's count left empty takes the run's own: the empty box says so.
    expand = at.number_input(key=f"steer-{run_id}-{leaf.id}-expand.n")
    assert expand.value is None and expand.proto.placeholder == "the run's subnodes"
    key = f"steer-{run_id}-{leaf.id}-add_subtopic"
    assert (at.text_input(key=f"{key}.subtopic").label, at.text_input(key=f"{key}.keywords").label) == (
        "Subtopic",
        "Keywords",
    )

    at.text_input(key=f"{key}.subtopic").input("Attendance records")
    at.text_input(key=f"{key}.keywords").input("attendance, crowd figures")
    at.button(key=key).click().run()
    wait_until_idle(services, run_id)
    added = [n for n in services.repo.children(leaf.id) if n.label == "Attendance records"]
    assert added and added[0].status == NodeStatus.DONE and added[0].data["user"] is True
    command = services.repo.list_commands(run_id)[-1]
    assert command.status == CommandStatus.DONE
    assert command.payload["keywords"] == ["attendance", "crowd figures"]


def test_information_tree_is_coloured_by_depth_and_the_article_is_the_report(services):
    run_id = run_to_end(services, TOPIC, "omnithink", SMALL)
    snap = services.repo.snapshot(run_id)
    contract = services.method("omnithink").contract()
    data = mindmap.build_map(snap.nodes, snap.edges, contract=contract)
    assert data.mode == mindmap.HIERARCHICAL
    palette = contract.node_kinds["subtopic"].depth_palette
    colours = {n["level"]: n["color"]["background"] for n in data.nodes}
    assert colours[0] == palette[0] and colours[1] == palette[1]

    at = open_page("pages/report.py", run_id=run_id)
    article = services.repo.latest_report(run_id, "final").markdown
    first_heading = next(line for line in article.splitlines() if line.startswith("## "))
    assert first_heading[3:].strip() in joined(at.markdown)
    assert "## Sources" in joined(at.markdown)


def test_a_changed_tree_offers_to_regenerate_the_article(services, monkeypatch):
    run_id = run_to_end(services, TOPIC, "omnithink", SMALL)
    leaf = next(n for n in services.repo.list_nodes(run_id) if n.depth == 1)
    pick_node(monkeypatch, leaf.id)
    at = open_page(run_id=run_id)
    assert "changed since the article" not in joined(at.info)

    services.runner.steer(run_id, "prune", {"node_id": leaf.id})
    wait_until_idle(services, run_id)
    articles = len([r for r in services.repo.list_reports(run_id) if r.kind == "final"])
    at = open_page(run_id=run_id)
    assert "changed since the article" in joined(at.info)
    # Above the Node and "Pool & outline" tabs, not inside one: seen whichever tab is open.
    assert [t.label for t in at.tabs] == ["Node", "Pool & outline"]
    assert all("changed since the article" not in joined(tab.info) for tab in at.tabs)
    # The notice's button is the only one: the run commands below do not offer it again.
    assert [b.label for b in at.button].count("Rewrite article") == 1
    at.button(key=f"notice-{run_id}-regenerate_article").click().run()
    wait_until_idle(services, run_id)
    assert len([r for r in services.repo.list_reports(run_id) if r.kind == "final"]) == articles + 1
    at = open_page(run_id=run_id)
    assert "changed since the article" not in joined(at.info)
