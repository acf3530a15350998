"""MTQA over the real knowledge layer (engine/knowledge, opened through `RunContext.knowledge`) on
the scripted fake LLM: the knowledge graph is built from the question's documents, its keyword and
extraction calls are accounted to the knowledge base node, the matrix adds exactly m·n + n calls;
a collection whose graph was never built fails the run with what to do."""

from __future__ import annotations

import threading
from collections import Counter

from engine.citations import cited_source_ids
from engine.knowledge.fake import extraction_answer, keywords_answer
from engine.llm.protocol import LLMConnectionError
from storage.models import NodeStatus, RunStatus
from tests.support.fixtures_engine import run_to_end

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"


def test_the_knowledge_layer_builds_the_questions_graph_and_the_matrix_adds_m_n_plus_n_calls(services, fake_llm):
    run_id = run_to_end(services, QUESTION, "mtqa", {"rows": 2, "columns": 3, "documents": 4})
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.DONE, run.error
    nodes = {n.id: n for n in services.repo.list_nodes(run_id)}
    base = next(n for n in nodes.values() if n.kind == "knowledge")
    assert base.status == NodeStatus.DONE
    assert base.data["chunks"] == len(base.data["documents"]) >= 1  # a corpus passage is one chunk
    assert base.data["entities"] > 0 and base.data["relations"] > 0 and base.data["keywords_ready"]
    assert base.data["units"] and all(u["source_id"] for u in base.data["units"])

    prompts = Counter(r.prompt for r in fake_llm.calls)
    assert prompts["mtqa.thought"] == 2 * 3 and prompts["mtqa.summary"] == 3
    assert prompts["knowledge.keywords"] == 1 and prompts["knowledge.extract"] == base.data["chunks"]
    by_node = Counter(nodes[c.node_id].kind for c in services.repo.list_llm_calls(run_id) if c.node_id)
    assert by_node == {"knowledge": 1 + base.data["chunks"], "cell": 6, "summary": 3}
    assert cited_source_ids(services.repo.latest_report(run_id).markdown)


def test_a_collection_whose_graph_is_not_built_fails_the_run_saying_what_to_do(services, fake_llm):
    run_id = run_to_end(
        services, QUESTION, "mtqa", {"rows": 1, "columns": 1, "scope": "collection", "collection": "hotpotqa"}
    )
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.FAILED
    base = next(n for n in services.repo.list_nodes(run_id) if n.kind == "knowledge")
    assert base.status == NodeStatus.FAILED and "thoughtmap kg build --collection hotpotqa" in base.error
    assert not fake_llm.calls  # nothing was asked of the model


def test_a_run_on_a_collection_graph_built_part_way_says_how_much_of_it_was_extracted(services, fake_llm):
    """A build stopped by its budget leaves part of the registered passages extracted: a run reading
    that graph says so on its knowledge node instead of passing for a whole collection's (review 14)."""
    from engine import cli
    from engine.methods.mtqa.kinds import KnowledgeData

    assert (
        cli.main(
            [
                "kg",
                "build",
                "--collection",
                "hotpotqa",
                "--limit",
                "40",
                "--llm",
                "fake",
                "--quiet",
                "--max-tokens",
                "3000",
            ]
        )
        == cli.EXIT_STOPPED
    )
    run_id = run_to_end(
        services, QUESTION, "mtqa", {"rows": 1, "columns": 1, "scope": "collection", "collection": "hotpotqa"}
    )
    base = next(n for n in services.repo.list_nodes(run_id) if n.kind == "knowledge")
    caption = KnowledgeData.model_validate(base.data).caption()
    assert base.data["chunks"] == 40 and 0 < base.data["chunks_done"] < 40
    assert f"(incomplete: {base.data['chunks_done']} of 40 passages extracted)" in caption


def test_the_questions_keywords_are_asked_while_its_chunks_are_extracted(services, fake_llm):
    """The keywords need the question only: they take a slot of the extraction's wave instead of a
    call of their own after it. Each extraction waits for the keywords call (on an event, the clock
    only a cap): asked after the extraction, the keywords would find every extraction answered."""
    keywords_asked = threading.Event()
    seen = []

    def keywords(request):
        keywords_asked.set()
        return keywords_answer(request)

    def extraction(request):
        seen.append(keywords_asked.wait(timeout=60))
        return extraction_answer(request)

    fake_llm.when(prompt="knowledge.keywords", respond=keywords)
    fake_llm.when(prompt="knowledge.extract", respond=extraction)
    run_id = run_to_end(services, QUESTION, "mtqa", {"rows": 1, "columns": 1, "documents": 4}, timeout=180)
    assert services.repo.get_run(run_id).status == RunStatus.DONE
    assert len(seen) >= 2 and all(seen)
    assert Counter(r.prompt for r in fake_llm.calls)["knowledge.keywords"] == 1


def test_keywords_asked_beside_an_extraction_that_failed_are_kept_for_the_resume(services, fake_llm):
    fake_llm.when(prompt="knowledge.extract", respond="I cannot help with that.", times=2 * 3)
    run_id = run_to_end(services, QUESTION, "mtqa", {"rows": 1, "columns": 1, "documents": 2})
    [knowledge] = services.repo.list_nodes(run_id, kind="knowledge")
    assert knowledge.status == NodeStatus.FAILED and "extraction failed on all 2 chunks" in knowledge.error
    assert knowledge.data["keywords_ready"] and knowledge.data["detailed_keywords"]

    services.runner.resume(run_id)
    assert services.runner.wait(run_id, timeout=60).status == RunStatus.DONE
    prompts = Counter(r.prompt for r in fake_llm.calls)
    assert prompts["knowledge.keywords"] == 1  # asked once, beside the failed extraction


def test_keywords_asked_beside_an_extraction_the_endpoint_failed_are_kept_for_the_resume(services, fake_llm):
    # Every chunk's call fails on the endpoint: the extraction raises, and the run fails saying so.
    fake_llm.when(prompt="knowledge.extract", respond=LLMConnectionError("the endpoint went away"), times=2)
    run_id = run_to_end(services, QUESTION, "mtqa", {"rows": 1, "columns": 1, "documents": 2})
    run = services.repo.get_run(run_id)
    assert run.status == RunStatus.FAILED and "the endpoint went away" in run.error
    [knowledge] = services.repo.list_nodes(run_id, kind="knowledge")
    assert knowledge.data["keywords_ready"] and knowledge.data["detailed_keywords"]

    services.runner.resume(run_id)
    assert services.runner.wait(run_id, timeout=60).status == RunStatus.DONE
    assert Counter(r.prompt for r in fake_llm.calls)["knowledge.keywords"] == 1
