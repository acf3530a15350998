"""OmniThink against its paper and its authors' code (issue 17, items 5-7), as traces on the
scripted fake: each section's evidence is the top k sources for its title and for each subsection
title, by similarity when an embeddings endpoint is configured (here `FakeOpenAIServer`'s
deterministic /v1/embeddings) and by BM25 otherwise; subtopics search their bare keywords (the topic
in front only with `prefix_topic`); `max_depth` says how it relates to the authors' depth."""

from __future__ import annotations

from engine.llm.fake_server import FakeOpenAIServer, fake_embedding
from engine.methods.omnithink.params import OmniThinkParams
from engine.search.embeddings import Embedder, EmbeddingsSettings, OpenAIEmbeddings, cosine, hit_text
from storage.models import RunStatus
from tests.engine.methods.omnithink.omnithink_scripts import (
    EXPAND,
    POLISH_OUTLINE,
    TOPIC,
    WRITE_SECTION,
    ExpandScript,
    count_searches,
    live,
    outline,
    section_writer,
    tree,
)
from tests.support.fixtures_engine import run_to_end

SECTIONS = outline("Background", ("The match", ["First half", "Second half"]), "Media coverage")


def _run(services, params: dict) -> str:
    run_id = run_to_end(services, TOPIC, "omnithink", params)
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.DONE, (run.status, run.error)
    return run_id


def _tree_sources(services, run_id):
    by_ref = {}
    for node in live(services, run_id):
        for source in services.repo.sources_for_node(node.id):
            by_ref.setdefault(source.ref, source)
    return list(by_ref.values())


def test_section_evidence_is_the_top_k_for_the_title_and_each_subsection_by_similarity(services, fake_llm):
    fake_llm.when(EXPAND, ExpandScript())
    fake_llm.when(POLISH_OUTLINE, SECTIONS)
    fake_llm.when(WRITE_SECTION, section_writer())
    with FakeOpenAIServer() as server:
        services.runner.services.provide(
            Embedder, OpenAIEmbeddings(EmbeddingsSettings(base_url=server.base_url, model="fake-embed"))
        )
        run_id = _run(services, {"subnodes": 2, "max_depth": 1, "snippets_per_section": 2})
        asked = [text for request in server.embedding_requests for text in request["input"]]
    sources = _tree_sources(services, run_id)
    sections = services.repo.latest_report(run_id).data["sections"]
    assert [s["title"] for s in sections] == ["Background", "The match", "Media coverage"]
    match = sections[1]
    assert [h["heading"] for h in match["evidence"]["headings"]] == ["The match", "First half", "Second half"]
    for section in sections:
        evidence = section["evidence"]
        assert (
            evidence["by"]
            == f"embeddings: embeddings fake-embed at {services.runner.services.get(Embedder).settings.base_url}"
        )
        for heading in evidence["headings"]:
            # The bare heading is what is compared (no topic in front), as in the paper.
            assert heading["heading"] in asked
            scores = {s.id: cosine(fake_embedding(heading["heading"]), fake_embedding(hit_text(s))) for s in sources}
            best = sorted(scores, key=lambda sid: -scores[sid])[:2]
            assert len(heading["sources"]) == 2
            assert sorted(scores[sid] for sid in heading["sources"]) == sorted(scores[sid] for sid in best)
        assert section["snippets"] == list(dict.fromkeys(i for h in evidence["headings"] for i in h["sources"]))
    # The section writer was shown exactly that evidence: the title's, then each subsection's.
    assert len(fake_llm.calls_for(WRITE_SECTION, first_try_only=True)) == 3


def test_without_embeddings_the_evidence_is_ranked_by_bm25(services, fake_llm):
    fake_llm.when(EXPAND, ExpandScript())
    fake_llm.when(POLISH_OUTLINE, SECTIONS)
    run_id = _run(services, {"subnodes": 2, "max_depth": 1})
    assert services.runner.services.get(Embedder) is None
    for section in services.repo.latest_report(run_id).data["sections"]:
        assert section["evidence"]["by"] == "bm25"
        assert all(len(h["sources"]) <= 3 for h in section["evidence"]["headings"])


def test_subtopics_search_their_bare_keywords_and_the_switch_puts_the_topic_first(services, fake_llm):
    searcher = count_searches(services)
    fake_llm.when(EXPAND, ExpandScript())
    run_id = _run(services, {"subnodes": 2, "max_depth": 1})
    keywords = [kw for n in tree(services, run_id) if n.parent_id is not None for kw in n.data["keywords"]]
    assert keywords and sorted(searcher.queries) == sorted([TOPIC, *keywords])
    searcher.queries.clear()
    run_id = _run(services, {"subnodes": 2, "max_depth": 1, "prefix_topic": True})
    keywords = [kw for n in tree(services, run_id) if n.parent_id is not None for kw in n.data["keywords"]]
    assert sorted(searcher.queries) == sorted([TOPIC, *(f"{TOPIC} {kw}" for kw in keywords)])


def test_max_depth_counts_levels_below_the_topic_and_says_so(services, fake_llm):
    help_text = OmniThinkParams.model_fields["max_depth"].description
    assert "authors' code" in help_text and "plus 1" in help_text
    fake_llm.when(EXPAND, ExpandScript())
    run_id = _run(services, {"subnodes": 1, "max_depth": 2})
    assert max(n.depth for n in tree(services, run_id)) == 2  # the topic and two levels
