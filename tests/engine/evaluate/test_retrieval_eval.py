"""The retrieval evaluation's metrics on hand-made rankings with known answers, and its runner on a
scripted searcher and clock (engine/evaluate/retrieval_eval.py)."""

from __future__ import annotations

import math

import pytest

from engine.evaluate.datasets import Item
from engine.evaluate.retrieval_eval import (
    all_gold_at,
    distinct_titles,
    evaluate_retrieval,
    gold_keys,
    ndcg_at,
    recall_at,
    reciprocal_rank,
    score_ranking,
)
from engine.search.protocol import Hit


def test_a_title_counts_once_at_its_best_rank_compared_as_recall_compares_titles():
    titles = ["Alpha", "beta", "ALPHA", "Beta - Wikipedia", "", "Gamma (1988)", "Gamma"]
    assert distinct_titles(titles) == ["alpha", "beta", "gamma (1988)", "gamma"]
    assert gold_keys(["Alpha", " ", "Gamma  (1988)"]) == {"alpha", "gamma (1988)"}


def test_recall_at_k_is_the_share_of_gold_titles_in_the_first_k():
    ranking = ["x", "a", "y", "b", "z"]
    gold = {"a", "b"}
    assert recall_at(ranking, gold, 1) == 0.0
    assert recall_at(ranking, gold, 2) == 0.5
    assert recall_at(ranking, gold, 4) == 1.0
    assert recall_at(ranking, {"a", "b", "c", "d"}, 20) == 0.5


def test_all_gold_needs_every_gold_title_in_the_first_k():
    ranking = ["x", "a", "y", "b"]
    assert all_gold_at(ranking, {"a", "b"}, 3) == 0.0
    assert all_gold_at(ranking, {"a", "b"}, 4) == 1.0
    assert all_gold_at(ranking, {"a", "c"}, 10) == 0.0


def test_ndcg_discounts_gold_titles_by_rank_over_the_ideal_ranking():
    gold = {"a", "b"}
    assert ndcg_at(["a", "b", "x"], gold, 10) == pytest.approx(1.0)
    assert ndcg_at(["b", "a"], gold, 10) == pytest.approx(1.0)
    # Gold at ranks 2 and 4: (1/log2 3 + 1/log2 5) / (1 + 1/log2 3).
    expected = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert ndcg_at(["x", "a", "y", "b"], gold, 10) == pytest.approx(expected)
    assert ndcg_at(["x", "a", "y", "b"], gold, 10) == pytest.approx(0.6509209298)
    # Only the first k count: the second gold title at rank 4 is outside k = 3.
    assert ndcg_at(["x", "a", "y", "b"], gold, 3) == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    assert ndcg_at(["x", "y"], gold, 10) == 0.0


def test_ndcg_ideal_holds_at_most_k_gold_titles():
    gold = {f"g{i}" for i in range(12)}
    # Ten gold titles fill the first ten ranks: the best possible, although two more exist.
    assert ndcg_at([f"g{i}" for i in range(10)], gold, 10) == pytest.approx(1.0)


def test_reciprocal_rank_is_of_the_first_gold_title_in_the_whole_ranking():
    assert reciprocal_rank(["a", "x"], {"a"}) == 1.0
    assert reciprocal_rank(["x", "y", "b", "a"], {"a", "b"}) == pytest.approx(1 / 3)
    assert reciprocal_rank([f"x{i}" for i in range(30)] + ["a"], {"a"}) == pytest.approx(1 / 31)
    assert reciprocal_rank(["x", "y"], {"a"}) == 0.0


def test_score_ranking_deduplicates_titles_before_ranking():
    # Two chunks of "Paris" take one rank: "Lyon" is the second document, not the third.
    score = score_ranking(["Paris", "paris", "Lyon", "Nice"], ["Lyon", "Paris"], item_id="q1", seconds=0.25)
    assert score.item_id == "q1" and score.seconds == 0.25
    assert score.all_gold_at_10 == 1.0
    assert score.recall_at_k == {2: 1.0, 5: 1.0, 10: 1.0, 20: 1.0}
    assert score.ndcg_at_10 == pytest.approx(1.0)
    assert score.reciprocal_rank == 1.0


def test_an_item_without_gold_titles_is_not_scored():
    assert score_ranking(["Paris"], []) is None
    assert score_ranking(["Paris"], ["  "]) is None


class ScriptedSearcher:
    """Answers each question with fixed titles; each search advances a scripted clock by its own
    duration, so the runner's timing is known exactly."""

    description = "scripted searcher"

    def __init__(self, answers: dict[str, list[str]], seconds: dict[str, float]) -> None:
        self.answers = answers
        self.seconds = seconds
        self.now = 0.0
        self.calls: list[tuple[str, int]] = []

    def clock(self) -> float:
        return self.now

    def search(self, query: str, k: int = 5) -> list[Hit]:
        self.calls.append((query, k))
        self.now += self.seconds[query]
        return [
            Hit(title=t, ref=f"c/{t}#{i}", snippet="", text="", kind="corpus")
            for i, t in enumerate(self.answers[query][:k])
        ]


def _item(item_id: str, question: str, gold: list[str]) -> Item:
    return Item(dataset="test", id=item_id, question=question, answer_type="short", supporting_titles=gold)


def test_runner_scores_every_item_with_gold_titles_and_times_each_search_after_warm_up():
    answers = {
        "q1": ["A", "B", "x"],  # both gold first: all-gold 1, nDCG 1, RR 1
        "q2": ["x", "C", "y", "z"],  # one of two gold at rank 2: all-gold 0, recall@2 .5
        "q3": ["x", "y", "E"],  # gold at rank 3
        "q4": ["F"],  # no gold titles: skipped, never searched
        "q5": ["x"] * 3 + ["y", "G"],  # "x" thrice is one document: G is the third
    }
    seconds = {"q1": 0.001, "q2": 0.002, "q3": 0.003, "q4": 0.5, "q5": 0.004}
    searcher = ScriptedSearcher(answers, seconds)
    items = [
        _item("1", "q1", ["A", "B"]),
        _item("2", "q2", ["C", "D"]),
        _item("3", "q3", ["E"]),
        _item("4", "q4", []),
        _item("5", "q5", ["G"]),
    ]
    seen = []

    report = evaluate_retrieval(
        searcher,
        items,
        depth=7,
        warmup=2,
        dataset="test",
        retriever="bm25",
        reranker="none",
        clock=searcher.clock,
        progress=lambda d, n: seen.append((d, n)),
    )

    # Two warm-up searches (the first two scored questions), then one timed search per scored item.
    assert searcher.calls == [("q1", 7), ("q2", 7), ("q1", 7), ("q2", 7), ("q3", 7), ("q5", 7)]
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert (report.items, report.skipped, report.depth) == (4, 1, 7)
    assert (report.dataset, report.retriever, report.reranker, report.searcher) == (
        "test",
        "bm25",
        "none",
        "scripted searcher",
    )
    assert report.all_gold_at_10 == pytest.approx((1 + 0 + 1 + 1) / 4)
    assert report.recall_at_k[2] == pytest.approx((1 + 0.5 + 0 + 0) / 4)
    assert report.recall_at_k[5] == pytest.approx((1 + 0.5 + 1 + 1) / 4)
    assert report.mrr == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 3) / 4)
    ndcg_q2 = (1 / math.log2(3)) / (1 + 1 / math.log2(3))
    assert report.ndcg_at_10 == pytest.approx((1 + ndcg_q2 + 2 * (1 / math.log2(4))) / 4)
    # Timed searches of 1, 2, 3 and 4 ms; numpy's linear-interpolated percentiles.
    assert report.p50_ms == pytest.approx(2.5)
    assert report.p95_ms == pytest.approx(3.85)
    assert [s.item_id for s in report.scores] == ["1", "2", "3", "5"]


def test_runner_json_holds_every_field_the_cli_prints():
    searcher = ScriptedSearcher({"q": ["A"]}, {"q": 0.002})
    report = evaluate_retrieval(
        searcher,
        [_item("1", "q", ["A"])],
        warmup=0,
        dataset="d",
        retriever="dense",
        reranker="builtin",
        clock=searcher.clock,
    )
    assert report.to_json() == {
        "dataset": "d",
        "retriever": "dense",
        "reranker": "builtin",
        "searcher": "scripted searcher",
        "depth": 50,
        "items": 1,
        "skipped": 0,
        "all_gold_at_10": 1.0,
        "ndcg_at_10": 1.0,
        "mrr": 1.0,
        "recall_at_k": {"2": 1.0, "5": 1.0, "10": 1.0, "20": 1.0},
        "p50_ms": pytest.approx(2.0),
        "p95_ms": pytest.approx(2.0),
    }


def test_runner_with_no_scorable_item_reports_no_metric():
    searcher = ScriptedSearcher({}, {})
    report = evaluate_retrieval(searcher, [_item("1", "q", [])], clock=searcher.clock)
    assert searcher.calls == []
    assert (report.items, report.skipped) == (0, 1)
    assert report.all_gold_at_10 is None and report.mrr is None and report.p95_ms is None
    assert report.recall_at_k == {2: None, 5: None, 10: None, 20: None}
