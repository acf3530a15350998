"""The research agent in a real browser (issue 16): a run started on Explore as a person would, on a
Researchy question, with the fake LLM scripted by prompt name (tests/engine/methods/research/research_scripts.py) and served
over HTTP by `FakeOpenAIServer` in this process.

The script: the agent searches once more after the question's search, then answers; the claim
check finds the cited sentences about Malaysia not in their source. On the map (read through the frame's test hook):
the chain question → search → rerank → summary → reasoning → search → … → answer, left to right, the
searches in their declared fills (the question's, the agent's). The rerank step's panel lists every
document found with its score (the search's own, said so), kept or dropped and why; the summary
step's, its text with its citations (issue 43). The Report page shows the per-sentence citation check with
the verdicts, the rates and the sentences their source does not support.

Screenshots: test-artifacts/research-chain.png, research-rerank-step.png, research-summary-step.png,
research-citation-check.png."""

from __future__ import annotations

import pytest

from engine.llm.fake import FakeLLM
from engine.methods.research.kinds import NODE_KINDS
from engine.methods.research.method import ResearchMethod
from engine.node_numbers import node_numbers
from tests.e2e.conftest import (
    ARTIFACTS,
    MAP_IFRAME,
    choose_method,
    choose_node,
    map_frame,
    map_nodes,
    metric,
    node_panel_column,
    panel_node,
    poll,
    rgb,
    serving_fake_llm,
)
from tests.engine.methods.research.research_scripts import CLAIMS, verdicts

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
KINDS = {kind.name: kind for kind in NODE_KINDS}
FILLS = {v.value: rgb(v.colour) for v in KINDS["search"].variants}


def scripted_fake() -> FakeLLM:
    fake = FakeLLM()
    # The answer's sentences about Malaysia (from the bundled corpus) are judged not in their source.
    fake.when(CLAIMS, verdicts(lambda sentence: "not_supported" if "Malaysia" in sentence else "supported"))
    return fake


@pytest.fixture
def research_app(app_home, tmp_path, request):
    yield from serving_fake_llm(scripted_fake(), app_home, tmp_path, request)


def test_the_research_chain_and_the_citation_check(research_app, page, app_repo):
    page.set_viewport_size({"width": 1500, "height": 1100})
    page.set_default_navigation_timeout(120_000)  # a first page load on a busy two-core machine
    page.set_default_timeout(90_000)
    page.goto(research_app.url)
    page.get_by_label("Question").fill(QUESTION)
    choose_method(page, ResearchMethod.title)
    page.get_by_role("button", name="Start").click()
    poll(page, lambda: metric(page, "Status") == "done", timeout=240, what="the research run to finish")
    run_id = page.url.split("run=")[1].split("&")[0]
    nodes = sorted(app_repo.list_nodes(run_id), key=lambda n: n.id)
    assert [n.kind for n in nodes] == [
        "question",
        "search",
        "rerank",
        "summary",
        "reasoning",
        "search",
        "rerank",
        "summary",
        "reasoning",
        "answer",
    ]
    numbers = node_numbers(nodes)

    poll(page, lambda: len(map_nodes(page)) == len(nodes), what="every node on the map")
    page.wait_for_timeout(500)
    drawn = {n["id"]: n for n in map_nodes(page)}
    xs = [drawn[str(n.id)]["x"] for n in nodes]
    assert xs == sorted(xs) and len(set(round(x) for x in xs)) == len(nodes), xs  # a chain, left to right
    first, second = (n for n in nodes if n.kind == "search")
    assert rgb(drawn[str(first.id)]["fill"]) == FILLS["question"]
    assert rgb(drawn[str(second.id)]["fill"]) == FILLS["agent"]
    assert "search 1:" in drawn[str(first.id)]["label"] and "search 2:" in drawn[str(second.id)]["label"]
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator(MAP_IFRAME).scroll_into_view_if_needed()
    map_frame(page).get_by_role("button", name="Fit").click()
    poll(page, lambda: all(n["inView"] for n in map_nodes(page)), what="the whole chain in view")
    page.wait_for_timeout(500)
    page.locator(MAP_IFRAME).screenshot(path=str(ARTIFACTS / "research-chain.png"))

    # The first search's rerank step: every document found, in the reranked order, each with its score
    # (the search's own: the default reranker is none), the kept ones first, the dropped ones and why.
    rerank = next(n for n in nodes if n.kind == "rerank" and n.parent_id == first.id)
    summary = next(n for n in nodes if n.kind == "summary" and n.parent_id == rerank.id)
    assert rgb(drawn[str(rerank.id)]["fill"]) == rgb(KINDS["rerank"].colour)
    choose_node(page, numbers[rerank.id])
    poll(page, lambda: panel_node(page) == rerank.id, what="the node panel to show the rerank step")
    panel = node_panel_column(page)
    poll(page, lambda: "Dropped" in panel.inner_text(), what="the ranked documents in the panel")
    text = panel.inner_text()
    assert "The search's own score (no reranker ran)" in text, text
    hits = rerank.data["hits"]
    assert len(hits) == first.data["found"] and sum(h["kept"] for h in hits) == len(first.data["ranked"])
    for hit in (hits[0], next(h for h in hits if not h["kept"])):
        assert f"{hit['title']}" in text and f"score {hit['score']:.3f}" in text, hit
    assert f"· {next(h for h in hits if not h['kept'])['dropped']}" in text
    page.mouse.move(5, 5)
    panel.get_by_text("Dropped", exact=True).scroll_into_view_if_needed()  # the kept ones above, the dropped below
    page.wait_for_timeout(300)
    panel.screenshot(path=str(ARTIFACTS / "research-rerank-step.png"))

    # Its summary step: the summarizer's text, citations linked to the kept documents.
    choose_node(page, numbers[summary.id])
    poll(page, lambda: panel_node(page) == summary.id, what="the node panel to show the summary step")
    poll(page, lambda: "Cited sources" in panel.inner_text(), what="the summary's cited sources")
    assert f"summary of {summary.data['documents']} documents" in panel.inner_text()
    panel.screenshot(path=str(ARTIFACTS / "research-summary-step.png"))

    # The Report page: the answer, then its citation check sentence by sentence.
    page.goto(f"{research_app.url}/report?run={run_id}")
    heading = page.get_by_role("heading", name="Citation check")
    heading.wait_for(timeout=60_000)
    answer = nodes[-1]
    assert answer.data["not_supported"] >= 1 and answer.data["supported"] >= 1
    body = page.locator('[data-testid="stMainBlockContainer"]').inner_text()
    assert f"Support rate {answer.data['support_rate']:.0%}" in body, body
    assert "not in the source" in body and "supported" in body
    checks = [c for c in answer.data["checks"]]
    assert all(f"Sentence {c['sentence']} " in body for c in checks)
    heading.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    page.screenshot(path=str(ARTIFACTS / "research-citation-check.png"), full_page=True)
    assert page.dialogs == []
