"""`thoughtmap search-eval`: the retrieval evaluation from the CLI, its JSON equal to the runner's,
and each configuration that cannot be measured said in one line with exit 2."""

from __future__ import annotations

import json

import pytest

from engine.evaluate.datasets import load_items
from engine.evaluate.retrieval_eval import evaluate_retrieval
from engine.search.local import LocalCorpusSearcher
from tests.engine.cli.test_cli import cli_run
from tests.support.fixtures_corpus import bundled_corpus, prebuilt_corpus_home  # noqa: F401

BM25_ON_FIVE = ("search-eval", "--dataset", "hotpotqa", "--limit", "5", "--retriever", "bm25", "--reranker", "none")


def test_json_holds_sane_measurements_equal_to_the_runners(prebuilt_corpus_home, bundled_corpus, capsys):
    code, out, err = cli_run(capsys, *BM25_ON_FIVE, "--json")
    assert code == 0, err
    report = json.loads(out)  # one JSON object, nothing else on stdout
    assert (report["dataset"], report["retriever"], report["reranker"]) == ("hotpotqa-autoact", "bm25", "none")
    assert (report["items"], report["skipped"]) == (5, 0)
    recall = report["recall_at_k"]
    assert list(recall) == ["2", "5", "10", "20"]
    assert all(
        0.0 <= value <= 1.0
        for value in [report["all_gold_at_10"], report["ndcg_at_10"], report["mrr"], *recall.values()]
    )
    assert recall["2"] <= recall["5"] <= recall["10"] <= recall["20"]
    assert report["all_gold_at_10"] <= recall["10"]
    assert 0.0 < report["p50_ms"] <= report["p95_ms"]

    # The same items through the runner directly, over the same bundled index: the same numbers.
    direct = evaluate_retrieval(
        LocalCorpusSearcher(bundled_corpus.store),
        load_items("hotpotqa-autoact", limit=5),
        dataset="hotpotqa-autoact",
        retriever="bm25",
        reranker="none",
    ).to_json()
    timing = ("p50_ms", "p95_ms")
    assert {k: v for k, v in report.items() if k not in timing} == {k: v for k, v in direct.items() if k not in timing}


def test_the_table_names_what_was_measured_and_each_metric(prebuilt_corpus_home, capsys):
    code, out, err = cli_run(capsys, *BM25_ON_FIVE, "--quiet")
    assert code == 0, err
    assert err == ""
    assert "hotpotqa-autoact: 5 items scored, 0 without gold titles skipped" in out
    assert "retriever  bm25   reranker none" in out
    for label in (
        "all-gold@10",
        "nDCG@10",
        "MRR",
        "recall@2",
        "recall@5",
        "recall@10",
        "recall@20",
        "query p50",
        "query p95",
    ):
        assert any(line.startswith(label) for line in out.splitlines()), label


def test_an_unknown_dataset_is_one_line_listing_the_choices(prebuilt_corpus_home, capsys):
    code, out, err = cli_run(capsys, "search-eval", "--dataset", "squad", "--retriever", "bm25", "--reranker", "none")
    assert code == 2 and out == ""
    assert err == "thoughtmap: error: unknown dataset 'squad': choose one of hotpotqa-autoact, hotpotqa, 2wiki, nq\n"


def test_the_endpoint_reranker_without_its_url_is_one_line(prebuilt_corpus_home, capsys):
    code, out, err = cli_run(capsys, *BM25_ON_FIVE[:-1], "endpoint")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "THOUGHTMAP_RERANK_URL" in err


def test_the_llm_reranker_without_an_llm_is_one_line(prebuilt_corpus_home, capsys):
    # The tests' THOUGHTMAP_LLM is the scripted fake, which cannot judge relevance.
    code, out, err = cli_run(capsys, *BM25_ON_FIVE[:-1], "llm")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "OPENAI_BASE_URL" in err


@pytest.mark.parametrize("retriever, reranker", [("dense", "none"), ("hybrid", "none"), ("bm25", "builtin")])
def test_a_missing_embedding_model_is_one_line_not_a_bm25_measurement(
    prebuilt_corpus_home, capsys, tmp_path, monkeypatch, retriever, reranker
):
    # A run would rank by BM25 instead; a measurement labelled dense must not.
    monkeypatch.setenv("THOUGHTMAP_BUILTIN_EMBEDDINGS", "1")
    monkeypatch.setenv("THOUGHTMAP_MODELS_DIR", str(tmp_path / "no-models"))
    code, out, err = cli_run(
        capsys, "search-eval", "--dataset", "2wiki", "--limit", "2", "--retriever", retriever, "--reranker", reranker
    )
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "is not installed" in err and "thoughtmap model prepare" in err


def test_the_embedding_model_turned_off_is_one_line(prebuilt_corpus_home, capsys):
    # The tests run with THOUGHTMAP_BUILTIN_EMBEDDINGS=0 (tests/conftest.py).
    code, out, err = cli_run(capsys, "search-eval", "--dataset", "nq", "--retriever", "hybrid", "--reranker", "none")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "THOUGHTMAP_BUILTIN_EMBEDDINGS=0" in err
