"""OmniThink (engine/methods/omnithink) with the scripted fake LLM and the bundled corpus.

The information tree grows level by level up to max_depth, each expansion adds at most k
sub-nodes that retrieve their own information, and the leaves of one step expand concurrently;
the conceptual pool grows by merging without duplicates and keeps one version per step;
reflection can stop the growth early; the outline is drafted then polished with the pool; every
section is written from snippets of the (unpruned) tree and every citation resolves; the article
polish is guarded. Steering (expand, prune, add_subtopic, regenerate_outline, regenerate_article)
changes the stored graph and outputs on a finished run and on a running one; bad commands fail
and change nothing. Stopped runs resume without retrieving again; the CLI runs the method with the
fake, against an OpenAI-compatible server, and on a FreshWiki topic.
"""

from __future__ import annotations

import json
import os
import re
import threading

import pytest

from engine import cli
from engine.citations import cited_source_ids
from engine.llm.fake import FakeReply, request_text
from engine.llm.fake_server import FakeOpenAIServer
from engine.methods.base import UnsupportedCommand
from engine.methods.omnithink import OmniThinkMethod
from engine.methods.omnithink.kinds import ConceptPool
from engine.report import render_markdown
from engine.search.embeddings import Embedder
from storage.models import CommandStatus, NodeStatus, RunStatus
from tests import REPO_ROOT
from tests.engine.cli.test_cli import (
    BUNDLED_DATASETS,
    SOURCE_LINE,
    cli_run,
    run_id_of,
    split_report,
    stored_run,
)
from tests.engine.methods.deot.deot_scripts import ATTEMPTS_TO_FAIL, INVALID, Gate
from tests.engine.methods.omnithink.omnithink_scripts import (
    ARTICLE,
    DRAFT_OUTLINE,
    EXPAND,
    FLAT,
    OUTLINE,
    POLISH_ARTICLE,
    POLISH_OUTLINE,
    POOL,
    REFLECT,
    SMALL,
    TOPIC,
    WRITE_SECTION,
    ExpandScript,
    Reflections,
    article_in,
    by_label,
    children_of,
    count_searches,
    graph_state,
    listed_titles,
    live,
    node_of,
    outline,
    prompts_with,
    root_of,
    section_of,
    section_writer,
    source_ids,
    start_run,
    subtopic,
    tree,
    versions,
)
from tests.support.fixtures_embedder import RememberingWords
from tests.support.fixtures_engine import release_and_finish, run_to_end, steer_and_wait, steer_refused

FRESHWIKI = REPO_ROOT / "data" / "datasets" / "freshwiki" / "freshwiki_articles_100.jsonl"

MATCH, MEDIA, APOLLO = "Match summary", "Media coverage", "Apollo 7 spaceflight"
# The root's expansion in the steering tests: two subtopics, one of them off-topic so that its
# branch retrieves sources no other node has.
ROOT_CHILDREN = [
    subtopic(MATCH, "match summary Geelong Sydney"),
    subtopic(APOLLO, "Apollo 7 spaceflight", "Apollo program crew"),
]


def _finished(services, params: dict | None = None, question: str = TOPIC) -> str:
    run_id = run_to_end(services, question, "omnithink", SMALL if params is None else params)
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.DONE, (run.status, run.error)
    return run_id


def _norm(concept: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", concept.lower()))


def _article(services, run_id: str):
    return services.repo.latest_report(run_id, ARTICLE)


# ====================================================================== the information tree


@pytest.mark.parametrize("max_depth, subnodes", [(None, None), (1, 2), (3, 2)], ids=["defaults", "depth1", "depth3"])
def test_tree_grows_level_by_level_up_to_max_depth(services, fake_llm, max_depth, subnodes):
    script = ExpandScript()  # always expands with as many fresh subtopics as allowed
    fake_llm.when(EXPAND, script)
    params = {k: v for k, v in {"max_depth": max_depth, "subnodes": subnodes}.items() if v is not None}
    run_id = _finished(services, params)
    limit, k = max_depth or 2, subnodes or 3  # the paper's defaults: depth 2, k = 3

    nodes = tree(services, run_id)
    assert max(n.depth for n in nodes) == limit
    assert [sum(n.depth == d for n in nodes) for d in range(limit + 1)] == [k**d for d in range(limit + 1)]
    by_id = {n.id: n for n in nodes}
    for node in nodes:
        assert node.status == NodeStatus.DONE
        assert node.kind == ("topic" if node.parent_id is None else "subtopic")
        if node.parent_id is not None:
            assert node.depth == by_id[node.parent_id].depth + 1
    # Only nodes above the limit were considered for expansion.
    assert sorted(script.asked) == sorted(n.label for n in nodes if n.depth < limit)
    assert all("expansion" not in n.data for n in nodes if n.depth == limit)
    # One reflection per level: the pool's history has steps 0..limit, each from one level's nodes.
    pools = versions(services, run_id, POOL)
    assert [p.data["step"] for p in pools] == list(range(limit + 1))
    for pool in pools:
        assert sorted(pool.data["from_nodes"]) == sorted(n.id for n in nodes if n.depth == pool.data["step"])
        assert all(by_id[i].data["reflected_step"] == pool.data["step"] for i in pool.data["from_nodes"])
    assert len(versions(services, run_id, OUTLINE)) == 1 and len(versions(services, run_id, ARTICLE)) == 1


def test_an_expansion_adds_at_most_k_children(services, fake_llm):
    # The model proposes 4 subtopics (with 2 keywords each) where k=2 and one keyword are asked for.
    fake_llm.when(EXPAND, ExpandScript(fresh=4))
    run_id = _finished(services, {**SMALL, "keywords_per_subtopic": 1})
    nodes = tree(services, run_id)
    assert len(nodes) == 1 + 2 + 4
    assert all("up to 2 broad categories" in p for p in prompts_with(fake_llm, EXPAND))
    for node in nodes:
        kids = children_of(services, run_id, node)
        if node.depth < 2:
            assert len(kids) == 2
            assert node.data["expansion"]["created"] == [c.id for c in kids]
            assert len(node.data["expansion"]["subtopics"]) == 2
        else:
            assert kids == []
        if node.parent_id is not None:
            assert len(node.data["keywords"]) == 1
    # The first two proposals are kept, in order.
    assert [c.label for c in children_of(services, run_id, root_of(services, run_id))] == ["Aspect 1", "Aspect 2"]


def test_each_sub_node_retrieves_its_own_information(services, fake_llm):
    searcher = count_searches(services)
    fake_llm.when(EXPAND, ExpandScript())
    run_id = _finished(services)
    nodes = tree(services, run_id)
    expected_queries = [TOPIC]
    for node in nodes:
        sources = services.repo.sources_for_node(node.id)
        assert sources, f"node {node.label!r} has no sources"
        assert node.data["retrieved"] == len(sources) and node.data["search_errors"] == []
        for source in sources:  # the node's content lists what it retrieved, with its marker
            assert f"[[S{source.id}]]" in node.content and source.title in node.content
        assert set(cited_source_ids(node.content)) == {s.id for s in sources}
        if node.parent_id is not None:
            assert node.data["keywords"] and node.data["forced"] is False
            expected_queries += list(node.data["keywords"])  # the bare keywords, as the paper searches
    # Each node searched its own queries, each exactly once.
    assert sorted(searcher.queries) == sorted(expected_queries)
    # Sub-nodes of one parent found different information.
    root = root_of(services, run_id)
    first, second = children_of(services, run_id, root)
    assert source_ids(services, [first]) != source_ids(services, [second])


def test_leaves_of_one_step_expand_concurrently(services, fake_llm):
    # The three depth-1 leaves only get an answer once all three are being expanded at once.
    barrier = threading.Barrier(3)
    script = ExpandScript(
        {TOPIC: [subtopic(MATCH), subtopic(MEDIA), subtopic("Background")]},
        barrier=barrier,
        barrier_for=lambda label: label != TOPIC,
    )
    fake_llm.when(EXPAND, script)
    run_id = _finished(services, {"subnodes": 3, "max_depth": 2})
    assert script.met_at_barrier == [True, True, True]
    assert len(tree(services, run_id)) == 1 + 3 + 9


def test_a_rounds_queries_are_embedded_before_its_searches_a_batch_a_core(services, fake_llm, monkeypatch):
    """Each search embeds its query (the dense first stage, the relevance floor). The queries of a
    leaf's new sub-nodes are embedded first, together (a batch per core when each gets 4 or more), so
    every query is embedded once and the searches find their vectors made."""
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    embedder = RememberingWords()
    services.runner.services.provide(Embedder, embedder)
    fake_llm.when(EXPAND, ExpandScript())
    run_id = _finished(services, {"subnodes": 3, "max_depth": 2})
    nodes = tree(services, run_id)
    parents = {n.parent_id for n in nodes if n.depth > 0}
    assert len(parents) == 4  # the root, then its three sub-nodes
    for parent in parents:
        queries = {q for n in nodes if n.parent_id == parent for q in n.data["keywords"]}
        assert len(queries) == 6
        first = next(i for i, call in enumerate(embedder.calls) if queries & set(call))
        assert set(embedder.calls[first]) == queries  # 6 queries: one batch
    assert len(embedder.computed) == len(set(embedder.computed))  # nothing embedded twice


def test_a_leafs_sub_nodes_are_searched_while_the_layers_other_leaves_wait(services, fake_llm):
    """A leaf's new sub-nodes need nothing but its expansion: they are searched at once, while the
    layer's other leaves still wait for their answers. Here "Aspect 2" answers only once the queries
    of "Aspect 1"'s sub-nodes are embedded (the first thing their searches do): a round retrieved
    after the whole layer's expansions would wait on it."""
    first_leafs = {f"aspect 1.{i} {word}" for i in (1, 2, 3) for word in ("premiership", "season")}
    embedder = RememberingWords(wanted=first_leafs)
    services.runner.services.provide(Embedder, embedder)
    script = ExpandScript()

    def expand(request):
        if node_of(request) == "Aspect 2":
            assert embedder.ready.wait(timeout=120), "Aspect 1's sub-nodes were not searched while Aspect 2 waited"
        return script(request)

    fake_llm.when(EXPAND, expand)
    run_id = _finished(services, {"subnodes": 3, "max_depth": 2})
    nodes = tree(services, run_id)
    assert sum(n.depth == 2 for n in nodes) == 9
    assert all(n.status == NodeStatus.DONE for n in nodes)


def test_the_drafts_headings_are_embedded_while_the_model_polishes_the_outline(services, fake_llm):
    """The sections' evidence is ranked by each heading's similarity to the sources: the draft's
    headings are embedded while the model polishes the outline. The polish here answers only once
    they are embedded: asked one after the other, the run would wait on it."""
    draft = outline("History", ("Results", ["First half"]))
    embedder = RememberingWords(wanted={"History", "Results", "First half"})
    services.runner.services.provide(Embedder, embedder)
    fake_llm.when(DRAFT_OUTLINE, draft)

    def polish(request):
        assert embedder.ready.wait(timeout=120), "the draft's headings were not embedded while it was polished"
        return outline("History", ("Results", ["First half"]), "Aftermath")

    fake_llm.when(POLISH_OUTLINE, polish)
    run_id = _finished(services, FLAT)
    assert [s["title"] for s in _article(services, run_id).data["sections"]] == ["History", "Results", "Aftermath"]
    assert all(embedder.computed.count(h) == 1 for h in ("History", "Results", "First half", "Aftermath"))


# ====================================================================== the conceptual pool

STEP0 = [
    "Geelong won the 2022 AFL Grand Final by 81 points.",
    "The match was played at the Melbourne Cricket Ground.",
    "Isaac Smith won the Norm Smith Medal.",
]
STEP1 = [
    "geelong won the 2022 afl grand final by 81 points",  # near duplicate: case, punctuation
    "The match was played at the Melbourne Cricket Ground.",  # exact repeat
    "Attendance was 100,024 spectators.",
    "ATTENDANCE WAS 100,024 SPECTATORS!",
]  # repeats the new one of this very step
STEP2 = ["Isaac Smith won the Norm Smith Medal!", "Sydney Swans lost the final.", "  Sydney   Swans lost the final  "]


def test_pool_grows_by_merging_without_duplicates(services, fake_llm):
    fake_llm.when(EXPAND, ExpandScript())
    fake_llm.when(REFLECT, Reflections((STEP0, False), (STEP1, False), (STEP2, False)))
    run_id = _finished(services)
    pools = versions(services, run_id, POOL)
    assert [p.data["step"] for p in pools] == [0, 1, 2]
    v0, v1, v2 = (p.data for p in pools)

    assert v0["concepts"] == STEP0 and v0["added"] == STEP0 and v0["duplicates"] == []
    assert v1["added"] == ["Attendance was 100,024 spectators."]
    assert v1["duplicates"] == [STEP1[0], STEP1[1], STEP1[3]]
    assert v1["concepts"] == STEP0 + v1["added"]
    assert v2["added"] == ["Sydney Swans lost the final."]
    assert v2["duplicates"] == ["Isaac Smith won the Norm Smith Medal!", "Sydney Swans lost the final"]
    assert v2["concepts"] == v1["concepts"] + v2["added"]
    for pool in pools:
        concepts = pool.data["concepts"]
        assert len({_norm(c) for c in concepts}) == len(concepts), concepts
        assert pool.data["sufficient"] is False and pool.data["error"] == ""
        panel = ConceptPool.model_validate(pool.data).panel_markdown()
        assert all(c in panel for c in concepts)
    # Each step reflects against (and expands with) the pool of the previous step.
    reflect_prompts = prompts_with(fake_llm, REFLECT)
    assert len(reflect_prompts) == 3
    assert "Conceptual pool so far:\n(empty)" in reflect_prompts[0]
    for prompt, previous in zip(reflect_prompts[1:], (v0, v1)):
        assert "\n".join(f"- {c}" for c in previous["concepts"]) in prompt
    depth1 = {n.label for n in tree(services, run_id) if n.depth == 1}
    for prompt in prompts_with(fake_llm, EXPAND):
        if re.search(r"^Node: (.*)$", prompt, re.MULTILINE).group(1) in depth1:
            assert "- Attendance was 100,024 spectators." in prompt


# ====================================================================== early stopping


def test_sufficient_at_step_0_stops_before_any_expansion(services, fake_llm):
    fake_llm.when(REFLECT, Reflections((STEP0, True)))
    run_id = _finished(services, {})  # the paper's defaults
    nodes = tree(services, run_id)
    assert len(nodes) == 1 and nodes[0].status == NodeStatus.DONE
    assert prompts_with(fake_llm, EXPAND) == []
    assert [p.data["step"] for p in versions(services, run_id, POOL)] == [0]
    assert versions(services, run_id, POOL)[0].data["sufficient"] is True
    # The outline and the article are still written, from the root's information.
    assert len(versions(services, run_id, OUTLINE)) == 1
    article = _article(services, run_id)
    assert article.markdown.strip() and cited_source_ids(article.markdown)
    assert {i for s in article.data["sections"] for i in s["snippets"]} <= source_ids(services, nodes)


def test_sufficient_at_step_1_stops_before_the_second_level(services, fake_llm):
    script = ExpandScript()
    fake_llm.when(EXPAND, script)
    fake_llm.when(REFLECT, Reflections((STEP0, False), (STEP2, True)))
    run_id = _finished(services, {})
    nodes = tree(services, run_id)
    assert max(n.depth for n in nodes) == 1 and len(nodes) == 1 + 3
    assert script.asked == [TOPIC]
    assert [p.data["step"] for p in versions(services, run_id, POOL)] == [0, 1]
    assert _article(services, run_id) is not None


# ====================================================================== sections and citations


def test_every_section_is_written_from_snippets_of_the_tree(services, fake_llm):
    # This fixture's headings were written against BM25's sources; which sources a tree gets is
    # retrieval's business (tests/engine/search/test_hybrid_retrieval.py), the per-heading evidence is this test's.
    services.settings.retrieval.retriever = "bm25"
    services._searchers.clear()
    fake_llm.when(EXPAND, ExpandScript())
    fake_llm.when(POLISH_OUTLINE, outline("Background", (MATCH, ["First half", "Second half"]), MEDIA))
    fake_llm.when(WRITE_SECTION, section_writer())
    run_id = _finished(services, {**SMALL, "snippets_per_section": 2})
    tree_sources = {s.id: s for n in live(services, run_id) for s in services.repo.sources_for_node(n.id)}
    article = _article(services, run_id)
    sections = article.data["sections"]
    assert [s["title"] for s in sections] == ["Background", MATCH, MEDIA]

    prompts = {section_of(p).split(" (subsections:")[0]: p for p in prompts_with(fake_llm, WRITE_SECTION)}
    assert set(prompts) == {"Background", MATCH, MEDIA}
    assert section_of(prompts[MATCH]) == f"{MATCH} (subsections: First half; Second half)"
    for section in sections:
        snippets = section["snippets"]
        # Up to 2 for the title and 2 for each subsection title (the paper's per-heading evidence).
        headings = section["evidence"]["headings"]
        assert [h["heading"] for h in headings][0] == section["title"]
        assert 1 <= len(snippets) <= 2 * len(headings)
        assert all(len(h["sources"]) <= 2 for h in headings)
        assert snippets == list(dict.fromkeys(i for h in headings for i in h["sources"]))
        assert set(snippets) <= set(tree_sources)
        # The prompt shows exactly these snippets, in order, and the section cites only them.
        assert listed_titles(prompts[section["title"]]) == [tree_sources[i].title for i in snippets]
        assert set(cited_source_ids(section["markdown"])) <= set(snippets)
        assert section["markdown"].startswith(f"## {section['title']}")
        assert section["invalid_citations"] == []
    assert article.data["tree"] == [[n.id, n.status] for n in tree(services, run_id)]


def test_every_citation_resolves(services, fake_llm):
    fake_llm.when(EXPAND, ExpandScript())
    run_id = _finished(services)
    article = _article(services, run_id)
    run_sources = {s.id: s for s in services.repo.list_sources(run_id)}
    cited = cited_source_ids(article.markdown)
    assert cited and set(cited) <= set(run_sources)

    body, source_lines = split_report(render_markdown(services.repo, run_id))
    numbers = {int(n) for n in re.findall(r"\[(\d+)\]", body)}
    listed = {}
    for line in source_lines:
        match = SOURCE_LINE.match(line)
        assert match, f"not a source entry: {line!r}"
        listed[int(match.group(1))] = match
    assert numbers == set(listed) and sorted(listed) == list(range(1, len(cited) + 1))
    assert all(m.group(5).split("/", 1)[0] in BUNDLED_DATASETS for m in listed.values())


def test_a_citation_of_a_source_not_shown_is_dropped(services, fake_llm):
    fake_llm.when(WRITE_SECTION, section_writer(" A claim with a made-up source [99]."))
    run_id = _finished(services, FLAT)
    article = _article(services, run_id)
    for section in article.data["sections"]:
        assert section["invalid_citations"] == [99]
        assert "[99]" not in section["markdown"]
        assert section["markdown"].rstrip().endswith("A claim with a made-up source.")
        assert cited_source_ids(section["markdown"]) == section["snippets"]
    rendered = render_markdown(services.repo, run_id)
    body, source_lines = split_report(rendered)
    assert "[99]" not in body
    assert {int(n) for n in re.findall(r"\[(\d+)\]", body)} == set(range(1, len(source_lines) + 1))


# ====================================================================== the outline


def test_outline_is_drafted_then_polished_with_the_pool(services, fake_llm):
    fake_llm.when(REFLECT, Reflections((STEP0, False), (STEP1, False)))
    fake_llm.when(DRAFT_OUTLINE, outline("History", "Results"))
    fake_llm.when(POLISH_OUTLINE, outline("Background", (MATCH, ["First half"]), "Aftermath"))
    run_id = _finished(services, FLAT)
    concepts = versions(services, run_id, POOL)[-1].data["concepts"]
    [draft_prompt] = prompts_with(fake_llm, DRAFT_OUTLINE)
    [polish_prompt] = prompts_with(fake_llm, POLISH_OUTLINE)
    assert all(c not in draft_prompt for c in concepts)  # the draft comes from the topic alone
    assert "Draft outline:\n# History\n# Results" in polish_prompt
    assert "Conceptual pool:\n" + "\n".join(f"- {c}" for c in concepts) in polish_prompt
    assert "- Attendance was 100,024 spectators." in polish_prompt

    [stored] = versions(services, run_id, OUTLINE)
    assert stored.data["draft"] == outline("History", "Results")
    assert stored.data["outline"] == outline("Background", (MATCH, ["First half"]), "Aftermath")
    assert stored.data["note"] == ""
    assert OmniThinkMethod._outline_md(stored.data["outline"]) == f"# Background\n# {MATCH}\n## First half\n# Aftermath"
    assert [s["title"] for s in _article(services, run_id).data["sections"]] == ["Background", MATCH, "Aftermath"]


def test_an_invalid_polished_outline_falls_back_to_the_draft(services, fake_llm):
    fake_llm.when(DRAFT_OUTLINE, outline("History", "Results"))
    fake_llm.when(POLISH_OUTLINE, INVALID, times=ATTEMPTS_TO_FAIL)
    run_id = _finished(services, FLAT)
    [stored] = versions(services, run_id, OUTLINE)
    assert stored.data["outline"] == stored.data["draft"] == outline("History", "Results")
    assert "the draft is used" in stored.data["note"]
    assert [s["title"] for s in _article(services, run_id).data["sections"]] == ["History", "Results"]


# ====================================================================== the article polish


@pytest.mark.parametrize(
    "edit",
    [
        lambda article: "## Summary\n\nThe final was played.",  # loses content
        lambda article: re.sub(r"\[\d+\]", "", article),  # loses the citations
        lambda article: article.replace("## ", ""),  # loses the headings
    ],
    ids=["content", "citations", "headings"],
)
def test_a_polish_that_loses_content_keeps_the_draft(services, fake_llm, edit):
    fake_llm.when(WRITE_SECTION, section_writer())
    fake_llm.when(POLISH_ARTICLE, lambda request: edit(article_in(request)))
    run_id = _finished(services, FLAT)
    article = _article(services, run_id)
    assert article.markdown == article.data["draft"]
    assert article.data["polish"] == "the polished version lost content or citations; the draft is kept"


def test_a_polish_cut_off_by_the_length_limit_keeps_the_draft(services, fake_llm):
    fake_llm.when(WRITE_SECTION, section_writer())
    # The whole article came back but the limit stopped the editor: it may have lost its end.
    fake_llm.when(POLISH_ARTICLE, lambda request: FakeReply(article_in(request), cut_off=True))
    article = _article(services, _finished(services, FLAT))
    assert article.markdown == article.data["draft"]
    assert article.data["polish"] == "the polished version was cut off by the length limit; the draft is kept"


def test_a_section_cut_off_by_the_length_limit_ends_at_its_last_sentence(services, fake_llm):
    def cut_section(request):
        return FakeReply(section_writer()(request).rstrip() + " Moreover, the final was", cut_off=True)

    fake_llm.when(WRITE_SECTION, cut_section)
    article = _article(services, _finished(services, FLAT))
    for section in article.data["sections"]:
        assert "Moreover, the final was" not in section["markdown"]
        assert section["markdown"].rstrip().endswith((".", "]"))


@pytest.mark.parametrize("attribute", [True, False])
def test_a_section_that_forgets_to_cite_gets_the_citations_its_sentences_are_drawn_from(services, fake_llm, attribute):
    def uncited_writer(request):
        # Each source's own first sentence, copied without its [n]: what small models write.
        sources = request_text(request).split("Sources:\n\n", 1)[1]
        firsts = [
            block.split("\n", 1)[1].split(". ")[0].strip() + "."
            for block in re.split(r"\n(?=\[\d+\] )", sources)
            if block.startswith("[")
        ]
        return "## Section\n\n" + " ".join(firsts)

    fake_llm.when(WRITE_SECTION, uncited_writer)
    fake_llm.when(POLISH_ARTICLE, lambda request: article_in(request))
    article = _article(services, _finished(services, {**FLAT, "attribute_citations": attribute}))
    for section in article.data["sections"]:
        if attribute:
            assert section["attributed_citations"] >= 1
            assert set(cited_source_ids(section["markdown"])) <= set(section["snippets"])
            assert cited_source_ids(section["markdown"])
        else:
            assert section["attributed_citations"] == 0 and not cited_source_ids(section["markdown"])
        assert "[[S" not in section["markdown"].split("\n", 1)[0]  # never on the heading


def test_a_faithful_polish_is_used(services, fake_llm):
    fake_llm.when(WRITE_SECTION, section_writer())
    fake_llm.when(POLISH_ARTICLE, lambda request: article_in(request).replace("## ", "## Revised: "))
    run_id = _finished(services, FLAT)
    article = _article(services, run_id)
    draft = article.data["draft"]
    assert article.data["polish"] == "polished"
    assert article.markdown == draft.replace("## ", "## Revised: ")
    # The editor saw [n] numbers; they were turned back into the very same sources.
    [prompt] = prompts_with(fake_llm, POLISH_ARTICLE)
    assert "[[S" not in prompt and "[1]" in prompt
    assert cited_source_ids(article.markdown) == cited_source_ids(draft)
    assert len(cited_source_ids(draft)) >= 2


# ====================================================================== steering


def _gated_run(services, fake_llm, pattern, params: dict, then=None) -> tuple[str, Gate]:
    """Start a run that blocks at the first call matching `pattern`; return (run id, gate)."""
    gate = Gate(then)
    fake_llm.when(pattern, gate, times=1)
    run_id = start_run(services, TOPIC, params)
    gate.wait_reached()
    services.runner.store_gathered(run_id)  # the run as it stands at the held call
    return run_id, gate


def _reflect_about(label: str):
    """The reflection over the information of the node `label` (its step)."""
    return REFLECT.where(re.compile(r"^## " + re.escape(label) + "$", re.MULTILINE))


@pytest.fixture
def scripted(fake_llm):
    """The root expands into MATCH and APOLLO; every other expansion gets fresh subtopics.
    Reflections are the fake's default (never sufficient): a gate added later still catches them."""
    script = ExpandScript({TOPIC: ROOT_CHILDREN})
    fake_llm.when(EXPAND, script)
    fake_llm.script = script
    return fake_llm


def _check_expanded(services, run_id: str, leaf_id: int, pool_steps: list[int]) -> None:
    leaf = services.repo.get_node(leaf_id)
    new = children_of(services, run_id, leaf)
    assert len(new) == 2  # the model proposed 3, n=2 were asked for
    assert leaf.data["expansion"]["created"] == [c.id for c in new]
    for child in new:
        assert child.status == NodeStatus.DONE and child.depth == leaf.depth + 1 and child.data["forced"] is True
        assert services.repo.sources_for_node(child.id) and child.data["retrieved"] > 0
    pools = versions(services, run_id, POOL)
    assert [p.data["step"] for p in pools] == pool_steps
    assert pools[-1].data["from_nodes"] == [c.id for c in new]


def test_expand_finished_run(services, scripted):
    scripted.script.fresh = 3
    searcher = count_searches(services)
    run_id = _finished(services, FLAT)
    match = by_label(services, run_id, MATCH)
    assert "expansion" not in match.data  # at max_depth: never expanded by the run itself
    searches = len(searcher.queries)
    command = steer_and_wait(services, run_id, "expand", {"node_id": match.id, "n": 2})
    assert command.status == CommandStatus.DONE, command.error
    _check_expanded(services, run_id, match.id, [0, 1, 2])
    assert "up to 2 broad categories" in prompts_with(scripted, EXPAND)[-1]
    new = children_of(services, run_id, match)
    assert sorted(searcher.queries[searches:]) == sorted(kw for c in new for kw in c.data["keywords"])
    # Nothing else was touched; the grown tree stays below the new nodes (depth 2 > max_depth 1).
    assert len(tree(services, run_id)) == 5


def test_expand_running_run(services, scripted):
    scripted.script.fresh = 3
    run_id, gate = _gated_run(services, scripted, _reflect_about(MATCH), FLAT)
    match = by_label(services, run_id, MATCH)
    command = services.runner.steer(run_id, "expand", {"node_id": match.id, "n": 2})
    assert command.status == CommandStatus.QUEUED
    command = release_and_finish(services, run_id, gate, command.id)
    assert command.status == CommandStatus.DONE, command.error
    _check_expanded(services, run_id, match.id, [0, 1, 2])
    assert len(versions(services, run_id, ARTICLE)) == 1
    new_ids = {c.id for c in children_of(services, run_id, match)}
    assert new_ids <= {node_id for node_id, _ in _article(services, run_id).data["tree"]}


def _pruned_only_sources(services, run_id: str, branch: list) -> set[int]:
    others = [n for n in live(services, run_id) if n.id not in {b.id for b in branch}]
    return source_ids(services, branch) - source_ids(services, others)


def _article_sources(services, run_id: str) -> set[int]:
    return {i for s in _article(services, run_id).data["sections"] for i in s["snippets"]}


def _write_prompts_since(fake, start: int) -> list[str]:
    return prompts_with(fake, WRITE_SECTION)[start:]


def test_prune_finished_run(services, scripted):
    scripted.when(POLISH_OUTLINE, outline(MATCH, APOLLO))
    run_id = _finished(services)
    apollo = by_label(services, run_id, APOLLO)
    branch = [apollo, *children_of(services, run_id, apollo)]
    assert len(branch) == 3
    pruned_only = _pruned_only_sources(services, run_id, branch)
    assert pruned_only and pruned_only & _article_sources(services, run_id)  # the branch was used

    command = steer_and_wait(services, run_id, "prune", {"node_id": apollo.id})
    assert command.status == CommandStatus.DONE, command.error
    for node in branch:
        node = services.repo.get_node(node.id)
        assert node.status == NodeStatus.PRUNED and node.data["status_before_prune"] == NodeStatus.DONE
    assert all(n.status == NodeStatus.DONE for n in live(services, run_id)) and len(live(services, run_id)) == 4

    writes, outlines = len(prompts_with(scripted, WRITE_SECTION)), len(versions(services, run_id, OUTLINE))
    command = steer_and_wait(services, run_id, "regenerate_article")
    assert command.status == CommandStatus.DONE, command.error
    assert not pruned_only & _article_sources(services, run_id)
    assert _article_sources(services, run_id) <= source_ids(services, live(services, run_id))
    by_id = {s.id: s for s in services.repo.list_sources(run_id)}
    new_prompts = _write_prompts_since(scripted, writes)
    assert len(new_prompts) == 2
    for source_id in pruned_only:
        head = by_id[source_id].text.strip()[:80]
        assert all(head not in p for p in new_prompts), by_id[source_id].ref
    assert len(versions(services, run_id, OUTLINE)) == outlines

    # Restored: the branch is back as it was, and the rewritten article draws on it again.
    command = steer_and_wait(services, run_id, "restore", {"node_id": apollo.id})
    assert command.status == CommandStatus.DONE, command.error
    assert all(services.repo.get_node(n.id).status == NodeStatus.DONE for n in branch)
    assert steer_and_wait(services, run_id, "regenerate_article").status == CommandStatus.DONE
    assert pruned_only & _article_sources(services, run_id)


def test_prune_running_run_before_its_children_exist(services, scripted):
    scripted.when(POLISH_OUTLINE, outline(MATCH, APOLLO))
    run_id, gate = _gated_run(services, scripted, _reflect_about(MATCH), SMALL)
    apollo = by_label(services, run_id, APOLLO)
    command = services.runner.steer(run_id, "prune", {"node_id": apollo.id})
    command = release_and_finish(services, run_id, gate, command.id)
    assert command.status == CommandStatus.DONE, command.error
    apollo = services.repo.get_node(apollo.id)
    assert apollo.status == NodeStatus.PRUNED and "expansion" not in apollo.data
    assert children_of(services, run_id, apollo) == []
    assert APOLLO not in scripted.script.asked
    match = by_label(services, run_id, MATCH)
    kids = children_of(services, run_id, match)
    assert len(kids) == 2 and all(k.status == NodeStatus.DONE for k in kids)
    assert versions(services, run_id, POOL)[-1].data["from_nodes"] == [k.id for k in kids]
    assert not _pruned_only_sources(services, run_id, [apollo]) & _article_sources(services, run_id)
    assert _article_sources(services, run_id) <= source_ids(services, live(services, run_id))


def test_add_subtopic_finished_run(services, scripted):
    searcher = count_searches(services)
    run_id = _finished(services, FLAT)
    root = root_of(services, run_id)
    searches = len(searcher.queries)
    command = steer_and_wait(
        services,
        run_id,
        "add_subtopic",
        {"node_id": root.id, "subtopic": f"  {MEDIA} ", "keywords": ["television broadcast", "  ", "radio coverage"]},
    )
    assert command.status == CommandStatus.DONE, command.error
    added = by_label(services, run_id, MEDIA)
    assert added.parent_id == root.id and added.depth == 1 and added.kind == "subtopic"
    assert added.data["keywords"] == ["television broadcast", "radio coverage"] and added.data["user"] is True
    assert added.status == NodeStatus.DONE and services.repo.sources_for_node(added.id)
    assert searcher.queries[searches:] == ["television broadcast", "radio coverage"]
    pools = versions(services, run_id, POOL)
    assert [p.data["step"] for p in pools] == [0, 1, 2] and pools[-1].data["from_nodes"] == [added.id]


def test_add_subtopic_running_run(services, scripted):
    # Held while the article is polished: the command is applied after the run's own writing.
    run_id, gate = _gated_run(services, scripted, POLISH_ARTICLE, FLAT)
    match = by_label(services, run_id, MATCH)
    command = services.runner.steer(run_id, "add_subtopic", {"node_id": match.id, "subtopic": "Umpiring decisions"})
    command = release_and_finish(services, run_id, gate, command.id)
    assert command.status == CommandStatus.DONE, command.error
    added = by_label(services, run_id, "Umpiring decisions")
    assert added.parent_id == match.id and added.depth == 2
    assert added.data["keywords"] == ["Umpiring decisions"] and added.status == NodeStatus.DONE
    assert services.repo.sources_for_node(added.id)
    assert versions(services, run_id, POOL)[-1].data["from_nodes"] == [added.id]


def _no_research_since(fake, searcher, counts: tuple[int, int, int]) -> None:
    assert (len(searcher.queries), len(prompts_with(fake, REFLECT)), len(prompts_with(fake, EXPAND))) == counts


def _research_counts(fake, searcher) -> tuple[int, int, int]:
    return len(searcher.queries), len(prompts_with(fake, REFLECT)), len(prompts_with(fake, EXPAND))


def test_regenerate_outline_finished_run(services, scripted):
    scripted.when(POLISH_OUTLINE, outline("Background", MATCH), times=1)
    scripted.when(POLISH_OUTLINE, outline("Background", "Aftermath"))
    searcher = count_searches(services)
    run_id = _finished(services, FLAT)
    before, research = graph_state(services, run_id), _research_counts(scripted, searcher)
    pools = len(versions(services, run_id, POOL))
    command = steer_and_wait(services, run_id, "regenerate_outline")
    assert command.status == CommandStatus.DONE, command.error
    outlines, articles = versions(services, run_id, OUTLINE), versions(services, run_id, ARTICLE)
    assert len(outlines) == 2 and len(articles) == 2
    assert outlines[-1].data["outline"] == outline("Background", "Aftermath")
    assert [s["title"] for s in articles[-1].data["sections"]] == ["Background", "Aftermath"]
    assert [s["title"] for s in articles[0].data["sections"]] == ["Background", MATCH]
    assert graph_state(services, run_id) == before and len(versions(services, run_id, POOL)) == pools
    _no_research_since(scripted, searcher, research)


def test_regenerate_outline_running_run(services, scripted):
    run_id, gate = _gated_run(services, scripted, DRAFT_OUTLINE, FLAT)
    command = services.runner.steer(run_id, "regenerate_outline")
    command = release_and_finish(services, run_id, gate, command.id)
    assert command.status == CommandStatus.DONE, command.error
    assert len(versions(services, run_id, OUTLINE)) == 2 and len(versions(services, run_id, ARTICLE)) == 2
    assert len(prompts_with(scripted, DRAFT_OUTLINE)) == 2


@pytest.mark.parametrize("kind", ["regenerate_article", "regenerate_report"])
def test_regenerate_article_finished_run(services, scripted, kind):
    searcher = count_searches(services)
    run_id = _finished(services, FLAT)
    before, research = graph_state(services, run_id), _research_counts(scripted, searcher)
    writes = len(prompts_with(scripted, WRITE_SECTION))
    command = steer_and_wait(services, run_id, kind)
    assert command.status == CommandStatus.DONE, command.error
    articles = versions(services, run_id, ARTICLE)
    assert len(articles) == 2 and len(versions(services, run_id, OUTLINE)) == 1
    assert len(prompts_with(scripted, DRAFT_OUTLINE)) == 1  # the outline was not redone
    assert len(prompts_with(scripted, WRITE_SECTION)) == 2 * writes
    assert [s["title"] for s in articles[1].data["sections"]] == [s["title"] for s in articles[0].data["sections"]]
    assert graph_state(services, run_id) == before
    _no_research_since(scripted, searcher, research)


def test_regenerate_article_running_run(services, scripted):
    run_id, gate = _gated_run(services, scripted, POLISH_ARTICLE, FLAT)
    command = services.runner.steer(run_id, "regenerate_article")
    command = release_and_finish(services, run_id, gate, command.id)
    assert command.status == CommandStatus.DONE, command.error
    assert len(versions(services, run_id, ARTICLE)) == 2 and len(versions(services, run_id, OUTLINE)) == 1
    assert len(prompts_with(scripted, POLISH_ARTICLE)) == 2


# ---------------------------------------------------------------------- bad steering

STALLED, BROKEN = "Stalled leaf", "Broken leaf"

BAD = {
    "unknown-node": ("expand", lambda ids: {"node_id": 987654}, "no node with id 987654"),
    "no-node-id": ("prune", lambda ids: {}, "node_id: Field required"),
    "expand-pruned": ("expand", lambda ids: {"node_id": ids["pruned"]}, "pruned"),
    "add-under-pruned": ("add_subtopic", lambda ids: {"node_id": ids["pruned"], "subtopic": "More"}, "pruned"),
    "empty-subtopic": ("add_subtopic", lambda ids: {"node_id": ids["root"], "subtopic": "   "}, "subtopic is empty"),
    "expand-n-0": ("expand", lambda ids: {"node_id": ids["stalled"], "n": 0}, "greater than or equal to 1"),
    "expand-proposes-nothing": ("expand", lambda ids: {"node_id": ids["stalled"], "n": 2}, "proposed no new subtopic"),
    "expand-only-repeats": ("expand", lambda ids: {"node_id": ids["root"], "n": 2}, "proposed no new subtopic"),
    "expand-invalid-answers": ("expand", lambda ids: {"node_id": ids["broken"], "n": 2}, "no usable expansion"),
    "other-run": ("prune", lambda ids: {"node_id": ids["other_run"]}, "belongs to another run"),
}


@pytest.mark.parametrize("kind, payload, error", list(BAD.values()), ids=list(BAD))
def test_bad_steering_fails_and_changes_nothing(services, fake_llm, kind, payload, error):
    # The root always proposes its three children again; STALLED proposes nothing; BROKEN's
    # answers never validate.
    children = [subtopic(MATCH), subtopic(STALLED), subtopic(BROKEN)]
    fake_llm.when(EXPAND.where(re.compile(r"^Node: " + re.escape(BROKEN) + "$", re.MULTILINE)), INVALID)
    fake_llm.when(EXPAND, ExpandScript({TOPIC: children, STALLED: []}))
    run_id = _finished(services, {"subnodes": 3, "max_depth": 1})
    match = by_label(services, run_id, MATCH)
    assert steer_and_wait(services, run_id, "prune", {"node_id": match.id}).status == CommandStatus.DONE
    ids = {
        "root": root_of(services, run_id).id,
        "pruned": match.id,
        "stalled": by_label(services, run_id, STALLED).id,
        "broken": by_label(services, run_id, BROKEN).id,
    }
    if "another run" in error:
        ids["other_run"] = root_of(services, _finished(services, FLAT, question="Apollo program")).id
    before, reports = graph_state(services, run_id), len(services.repo.list_reports(run_id))
    assert error in steer_refused(services, run_id, kind, payload(ids))
    assert graph_state(services, run_id) == before
    assert len(services.repo.list_reports(run_id)) == reports


def test_bad_steering_on_a_running_run_fails_and_the_run_goes_on(services, scripted):
    run_id, gate = _gated_run(services, scripted, _reflect_about(MATCH), SMALL)
    root = root_of(services, run_id)
    with pytest.raises(ValueError, match="subtopic: String should have at least 1 character"):
        services.runner.steer(run_id, "add_subtopic", {"node_id": root.id, "subtopic": ""})
    command = services.runner.steer(run_id, "add_subtopic", {"node_id": root.id, "subtopic": "   "})
    command = release_and_finish(services, run_id, gate, command.id)
    assert command.status == CommandStatus.FAILED and "subtopic is empty" in command.error
    nodes = tree(services, run_id)
    assert len(nodes) == 7 and all(n.status == NodeStatus.DONE for n in nodes)
    assert _article(services, run_id) is not None


def test_unsupported_steering_kind_is_refused(services, scripted):
    run_id = _finished(services, FLAT)
    with pytest.raises(UnsupportedCommand, match="does not support 'deepen'"):
        services.runner.steer(run_id, "deepen", {"node_id": root_of(services, run_id).id})
    assert services.repo.list_commands(run_id) == []


# ====================================================================== resume


def _finished_nodes(services, run_id: str) -> dict[int, tuple]:
    return {
        n.id: (n.label, n.content, n.finished_at, [s.id for s in services.repo.sources_for_node(n.id)])
        for n in tree(services, run_id)
        if n.status == NodeStatus.DONE
    }


def _queries_of(nodes) -> set[str]:
    return {TOPIC if n.parent_id is None else kw for n in nodes for kw in n.data["keywords"]}


def _resume_and_check(services, run_id: str, searcher, start: int, **budget) -> None:
    done_before = _finished_nodes(services, run_id)
    done_queries = _queries_of(n for n in tree(services, run_id) if n.id in done_before)
    searched = len(searcher.queries)
    assert done_before and searched > start
    services.runner.resume(run_id, **budget)
    run = services.runner.wait(run_id, timeout=30)
    assert run.status == RunStatus.DONE, (run.status, run.error)
    after = _finished_nodes(services, run_id)
    assert {i: after[i] for i in done_before} == done_before  # same ids, content, sources, times
    assert not done_queries & set(searcher.queries[searched:])  # finished nodes were not searched again
    run_queries = searcher.queries[start:]
    assert len(run_queries) == len(set(run_queries))  # every query of the run was searched once
    nodes = tree(services, run_id)
    assert len(nodes) == 7 and all(n.status == NodeStatus.DONE for n in nodes)
    assert [p.data["step"] for p in versions(services, run_id, POOL)] == [0, 1, 2]
    assert _article(services, run_id) is not None


def test_a_stopped_run_resumes_without_retrieving_again(services, scripted):
    searcher = count_searches(services)
    run_id, gate = _gated_run(services, scripted, _reflect_about(MATCH), SMALL)
    services.runner.stop(run_id)
    gate.opened.set()
    run = services.runner.wait(run_id, timeout=30)
    assert run.status == RunStatus.STOPPED and run.stop_reason == "stopped by the user"
    assert len(tree(services, run_id)) == 3 and _article(services, run_id) is None
    _resume_and_check(services, run_id, searcher, 0)


def test_a_run_stopped_by_its_budget_resumes_without_retrieving_again(services, fake_llm):
    fake_llm.when(EXPAND, ExpandScript())
    searcher = count_searches(services)
    full = services.repo.get_run(_finished(services))
    start = len(searcher.queries)
    run_id = run_to_end(
        services, TOPIC, "omnithink", SMALL, max_tokens=(full.prompt_tokens + full.completion_tokens) // 2
    )
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.STOPPED and "budget" in run.stop_reason
    assert _article(services, run_id) is None
    _resume_and_check(services, run_id, searcher, start, max_tokens=10**9)


# ====================================================================== the CLI


def _freshwiki_topic() -> str:
    with FRESHWIKI.open(encoding="utf-8") as handle:
        return json.loads(handle.readline())["topic"]


def test_cli_runs_omnithink_on_a_freshwiki_topic(prebuilt_corpus_home, capsys, tmp_path):
    topic = _freshwiki_topic()
    out_file = tmp_path / "article.md"
    code, out, err = cli_run(
        capsys, "run", topic, "--method", "omnithink", "--llm", "fake", "--search", "local", "--out", str(out_file)
    )
    assert code == cli.EXIT_OK, err
    run, nodes, sources = stored_run(run_id_of(out))
    assert run.status == RunStatus.DONE and run.method == "omnithink" and run.search_mode == "local"
    assert {n.kind for n in nodes} == {"topic", "subtopic"} and max(n.depth for n in nodes) <= 2
    assert all(n.status == NodeStatus.DONE for n in nodes)
    assert sources and all(s.kind == "corpus" for s in sources)

    body, source_lines = split_report(out_file.read_text(encoding="utf-8"))
    # The article's sections are the outline's: their headings stay headings (any other heading
    # line of the model's text is prose: tests/engine/export/test_untrusted_structure.py).
    assert body.startswith(f"# {topic}") and "\n## " in body
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", body)}
    refs = []
    for line in source_lines:
        match = SOURCE_LINE.match(line)
        assert match, f"not a source entry: {line!r}"
        refs.append(match.group(5))
    assert cited and cited == set(range(1, len(source_lines) + 1))
    assert all(ref.split("/", 1)[0] in BUNDLED_DATASETS for ref in refs)
    assert any(ref.startswith(f"freshwiki/{topic}") for ref in refs), refs


def test_cli_runs_omnithink_against_an_openai_compatible_server(prebuilt_corpus_home, capsys, monkeypatch):
    with FakeOpenAIServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        code, out, err = cli_run(
            capsys,
            "run",
            TOPIC,
            "--method",
            "omnithink",
            "--llm",
            "openai",
            "--search",
            "local",
            "--param",
            "max_depth=1",
            "--param",
            "subnodes=2",
            "--quiet",
        )
        requests = server.requests
    assert code == cli.EXIT_OK, err
    run, nodes, sources = stored_run(run_id_of(out))
    assert run.status == RunStatus.DONE and run.llm_calls == len(requests)
    assert run.params["max_depth"] == 1 and run.params["subnodes"] == 2
    assert len(nodes) == 3 and all(n.status == NodeStatus.DONE for n in nodes) and sources
    # Structured calls (reflection, expansion, outline) carried their JSON schema through the real client.
    schemas = {(r.get("response_format") or {}).get("json_schema", {}).get("name") for r in requests}
    assert {"Reflection", "Expansion", "Outline"} <= schemas
    code, md, err = cli_run(capsys, "export", run.id, "--format", "md")
    assert code == cli.EXIT_OK, err
    body, source_lines = split_report(md)
    assert {int(n) for n in re.findall(r"\[(\d+)\]", body)} == set(range(1, len(source_lines) + 1))


def test_the_pool_keeps_no_source_numbers_a_reader_cannot_resolve():
    """A reflection copies its sources' `[n]` into its insights; each prompt numbers its own sources,
    so in the pool `[1]` named a different source in every concept, with no source list to look it
    up. The pool keeps the concept without them, and a pool stored before still shows none."""
    from engine.methods.omnithink.pool import merge

    result = merge(
        [
            "First for Women is a woman's magazine in the USA [1].",
            "The magazine was part of Enoble Media Group [2, 3]; it closed in 2011 [4].",
        ],
        [],
    )
    assert result.pool == [
        "First for Women is a woman's magazine in the USA.",
        "The magazine was part of Enoble Media Group; it closed in 2011.",
    ]
    # A year in brackets and an index are no citation markers: they stay. Ranges and glued markers go.
    assert merge(["Founded [1844] in Philadelphia."], []).pool == ["Founded [1844] in Philadelphia."]
    assert merge(["Its list a[0] held it."], []).pool == ["Its list a[0] held it."]
    assert merge(["Women's magazines[1-3] sold[4]well."], []).pool == ["Women's magazines sold well."]
    stored = ConceptPool(
        step=1,
        concepts=["Arthur's Magazine was a literary periodical [1]."],
        added=["Arthur's Magazine was a literary periodical [1]."],
    )
    assert stored.panel_markdown() == "- **new** · Arthur's Magazine was a literary periodical."
