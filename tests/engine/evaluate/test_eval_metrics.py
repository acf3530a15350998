"""The evaluation metrics against values worked out by hand (engine/evaluate/metrics.py)."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

import pytest

from engine.evaluate.metrics import (
    Recall,
    bootstrap_ci,
    citation_error_rate,
    critical_path_seconds,
    exact_match,
    f1,
    heading_recall,
    information_diversity,
    knowledge_density,
    lcs_length,
    normalize_answer,
    retrieval_recall,
    rouge_l,
    text_vectors,
    yes_no,
    yes_no_accuracy,
)
from storage.models import LLMCall, Node

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)

# --- EM / F1: the SQuAD v1.1 script's behaviour ------------------------------------------------


def test_normalize_answer_follows_the_squad_script() -> None:
    # Lower-case, punctuation removed (a hyphen joins the words), articles dropped, spaces collapsed.
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("A tale of an apple, the END.") == "tale of apple end"
    # Articles only as whole words; ASCII punctuation only, as the script's string.punctuation.
    assert normalize_answer("Theatre anthem") == "theatre anthem"
    assert normalize_answer("Mary’s") == "mary’s"


def test_exact_match_ignores_case_articles_and_punctuation() -> None:
    assert exact_match("the Beatles.", ["Beatles"]) == 1.0
    assert exact_match("Beatles", ["The Rolling Stones", "the beatles"]) == 1.0  # any alias
    assert exact_match("The Beatles band", ["Beatles"]) == 0.0


def test_f1_partial_overlap_is_the_token_harmonic_mean() -> None:
    # prediction tokens eiffel tower in paris, gold eiffel tower: P = 2/4, R = 2/2, F1 = 2/3.
    assert f1("the Eiffel Tower in Paris", ["Eiffel Tower"]) == pytest.approx(2 / 3)
    # A repeated token counts once per gold occurrence: P = 1/2, R = 1, F1 = 2/3.
    assert f1("Paris Paris", ["paris"]) == pytest.approx(2 / 3)
    assert f1("London", ["Paris"]) == 0.0


def test_f1_takes_the_best_gold_alias() -> None:
    # "York": P = 1/3, R = 1 -> 0.5; "New York": P = 2/3, R = 1 -> 0.8.
    assert f1("New York City", ["York", "New York"]) == pytest.approx(0.8)


def test_f1_yes_no_rule_of_the_hotpotqa_script() -> None:
    # "yes it is" shares "yes" with the gold, but a closed answer must match whole.
    assert f1("yes it is", ["yes"]) == 0.0
    assert f1("yes", ["yes it is"]) == 0.0
    assert f1("No.", ["no"]) == 1.0
    assert f1("noanswer", ["no answer"]) == 0.0


def test_empty_answers_score_as_the_squad_v1_script_does() -> None:
    # Both normalise to "": equal strings (EM 1), but no common token (v1.1's F1 is 0).
    assert exact_match("The", ["a"]) == 1.0
    assert f1("The", ["a"]) == 0.0


def test_golds_must_be_a_list() -> None:
    with pytest.raises(ValueError, match="non-empty list"):
        f1("Paris", "Paris")
    with pytest.raises(ValueError, match="non-empty list"):
        exact_match("Paris", [])


# --- yes / no ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Yes.", True),
        ("yes, because the river is longer", True),
        ("True", True),
        ("**Answer:** Yes", True),
        ("The answer is no.", False),
        ("no, because it was built later", False),
        ("False", False),
        ("Probably not", None),
        ("Nobody knows", None),
        ("", None),
        # Any punctuation, not only ASCII's.
        ("“Yes”", True),
        ("‘No’", False),
        ("Yes—it would", True),
        ("No…", False),
        ("Yesterday", None),
        # Joined words are no answer.
        ("No-one knows", None),
        ("No-brainer: yes", None),
        ("Yes/no, it depends", None),
    ],
)
def test_yes_no_reads_the_first_word(text: str, expected: bool | None) -> None:
    assert yes_no(text) is expected


def test_yes_no_accuracy() -> None:
    assert yes_no_accuracy("Yes, it did.", "yes") == 1.0
    assert yes_no_accuracy("No", "True") == 0.0
    assert yes_no_accuracy("It depends", "no") == 0.0  # neither yes nor no is wrong
    with pytest.raises(ValueError, match="not a yes/no answer"):
        yes_no_accuracy("yes", "Paris")


# --- retrieval recall -------------------------------------------------------------------------

RETRIEVED = ["Foo - Wikipedia", "bar", "FOO", "Baz  Quux", "Qux", "Zed"]
GOLD = ["Foo", "  qux "]


def test_recall_any_gold_and_all_gold_differ_within_k() -> None:
    # First 3 distinct titles: foo ("Foo - Wikipedia" and "FOO" are one), bar, baz quux: one gold of two.
    assert retrieval_recall(RETRIEVED, GOLD, k=3) == Recall(any_gold=1.0, all_gold=0.0, fraction=0.5)
    # k = 4 reaches qux.
    assert retrieval_recall(RETRIEVED, GOLD, k=4) == Recall(any_gold=1.0, all_gold=1.0, fraction=1.0)
    assert retrieval_recall(["bar", "Baz quux"], GOLD) == Recall(any_gold=0.0, all_gold=0.0, fraction=0.0)


def test_a_year_in_parentheses_names_another_article() -> None:
    # The distractor "Bunkhouse Stampede" of a HotpotQA item is not its gold "Bunkhouse Stampede (1988)".
    assert retrieval_recall(["Bunkhouse Stampede"], ["Bunkhouse Stampede (1988)"]).any_gold == 0.0
    assert retrieval_recall(["Battle of Cambrai (1917)"], ["Battle of Cambrai (1918)"]).any_gold == 0.0
    assert retrieval_recall(["Battle of Cambrai (1918) — Wikipedia"], ["Battle of Cambrai (1918)"]).all_gold == 1.0


def test_recall_without_gold_is_undefined() -> None:
    assert retrieval_recall(RETRIEVED, []) is None
    assert retrieval_recall(RETRIEVED, [" "]) is None
    with pytest.raises(ValueError, match="k must be at least 1"):
        retrieval_recall(RETRIEVED, GOLD, k=0)


# --- knowledge density and information diversity ---------------------------------------------


def test_knowledge_density_counts_unique_units_per_token() -> None:
    units = ["The Eiffel Tower is in Paris.", "the eiffel tower is in  Paris", "It opened in 1889.", "  "]
    assert knowledge_density(units, 10) == pytest.approx(2 / 10)
    assert knowledge_density([], 0) == 0.0
    with pytest.raises(ValueError):
        knowledge_density(["a fact"], 0)
    with pytest.raises(ValueError):
        knowledge_density([], -1)


def test_information_diversity_on_fixed_vectors() -> None:
    assert information_diversity([[1, 0, 0], [0, 1, 0], [0, 0, 1]]) == pytest.approx(1.0)
    assert information_diversity([[1, 2], [2, 4], [3, 6]]) == pytest.approx(0.0, abs=1e-12)
    # Pairs: (1,0)-(0,1) differ by 1; (1,0)-(1,1) and (0,1)-(1,1) by 1 - 1/sqrt 2.
    assert information_diversity([[1, 0], [0, 1], [1, 1]]) == pytest.approx((3 - math.sqrt(2)) / 3)
    # A page without words has no direction: it is left out, not counted as different.
    assert information_diversity([[1, 0], [0, 0], [1, 0]]) == pytest.approx(0.0, abs=1e-12)
    assert information_diversity([[1, 0]]) == 0.0
    with pytest.raises(ValueError):
        information_diversity([[1, 0], [1, 0, 0]])


def test_text_vectors_are_smooth_tf_idf() -> None:
    vectors = text_vectors(["Apple banana", "apple cherry"])
    # Vocabulary apple, banana, cherry; idf(apple) = ln(3/3) + 1 = 1, idf(banana) = ln(3/2) + 1.
    idf = math.log(3 / 2) + 1
    norm = math.sqrt(1 + idf**2)
    assert vectors[0] == pytest.approx([1 / norm, idf / norm, 0.0])
    assert vectors[1] == pytest.approx([1 / norm, 0.0, idf / norm])
    assert text_vectors(["Apple banana", "apple cherry"]) == vectors  # deterministic
    assert information_diversity(text_vectors(["red sky", "red sky"])) == pytest.approx(0.0, abs=1e-12)
    assert information_diversity(text_vectors(["red sky", "green grass"])) == pytest.approx(1.0)
    assert text_vectors(["!", "?"]) == [[], []]


# --- FreshWiki outline and article ------------------------------------------------------------


def test_heading_recall_is_storms_soft_recall() -> None:
    reference = ["History", "Early life", "Career", "References", "External links", "See also"]
    assert heading_recall(["## 1. History", "Early life", "Career"], reference) == pytest.approx(1.0)
    # Orthogonal TF-IDF vectors: card(R) = 3, card(G) = 1, card(R ∪ G) = 3 -> (3 + 1 - 3) / 3.
    assert heading_recall(["Career", "Notes", "Further reading"], reference) == pytest.approx(1 / 3)
    assert heading_recall(["Awards"], reference) == pytest.approx(0.0)
    assert heading_recall([], reference) == 0.0
    assert heading_recall(["# 2.1 2020 election"], ["2020 election"]) == pytest.approx(1.0)
    assert heading_recall(["# Election"], ["2020 election"]) < 1.0  # the year is part of the heading
    with pytest.raises(ValueError, match="no headings"):
        heading_recall(["History"], ["References", "See also"])


def test_heading_recall_with_partial_similarity() -> None:
    # cos(a, b) = s = 1/sqrt 2: card(R) = card(G) = 1, card(R ∪ G) = 2 / (1 + s), recall = 2s / (1 + s).
    vectors = {"a": [1.0, 0.0], "b": [1.0, 1.0]}
    s = 1 / math.sqrt(2)
    recall = heading_recall(["b"], ["a"], vectorize=lambda headings: [vectors[h] for h in headings])
    assert recall == pytest.approx(2 * s / (1 + s))


def test_rouge_l_by_hand() -> None:
    # Lin's example: LCS("the gunman kill police", "police killed the gunman") = "the gunman": 2/4, 2/4.
    assert rouge_l("the gunman kill police", "police killed the gunman") == pytest.approx(0.5)
    # LCS 4 of 5 candidate tokens, all 4 reference tokens: F = 2 * 0.8 * 1 / 1.8.
    assert rouge_l("Police killed the GUNMAN, yesterday.", "police killed the gunman") == pytest.approx(8 / 9)
    assert rouge_l("", "police") == 0.0
    assert rouge_l("fire", "police") == 0.0


def _lcs_table(a: list[str], b: list[str]) -> int:
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def test_lcs_length_agrees_with_the_textbook_table() -> None:
    rng = random.Random(7)
    for _ in range(200):
        a = [rng.choice("abcde") for _ in range(rng.randint(0, 25))]
        b = [rng.choice("abcde") for _ in range(rng.randint(0, 25))]
        assert lcs_length(a, b) == _lcs_table(a, b), (a, b)


def test_lcs_length_on_article_length_texts() -> None:
    rng = random.Random(11)
    article = [f"w{rng.randint(0, 500)}" for _ in range(5000)]
    every_other = article[::2]  # a subsequence: the LCS is all of it
    assert lcs_length(article, every_other) == len(every_other)
    assert lcs_length(every_other, article) == len(every_other)


# --- citation error rate ----------------------------------------------------------------------


def test_citation_error_rate() -> None:
    assert citation_error_rate(10, 1, 2) == pytest.approx(0.3)
    assert citation_error_rate(0, 0, 0) == 0.0
    with pytest.raises(ValueError):
        citation_error_rate(2, 2, 1)
    with pytest.raises(ValueError):
        citation_error_rate(-1, 0, 0)


# --- bootstrap --------------------------------------------------------------------------------


def test_bootstrap_ci_is_deterministic_and_bounded() -> None:
    values = [0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.5, 0.25]
    mean, low, high = bootstrap_ci(values, seed=3)
    assert mean == pytest.approx(sum(values) / len(values))
    assert min(values) <= low <= mean <= high <= max(values)
    assert bootstrap_ci(values, seed=3) == (mean, low, high)
    _, narrow_low, narrow_high = bootstrap_ci(values, seed=3, confidence=0.5)
    assert low <= narrow_low and narrow_high <= high


def test_bootstrap_ci_degenerate_inputs() -> None:
    assert bootstrap_ci([0.7]) == (0.7, 0.7, 0.7)
    assert bootstrap_ci([0.4, 0.4, 0.4]) == pytest.approx((0.4, 0.4, 0.4))
    with pytest.raises(ValueError):
        bootstrap_ci([])
    with pytest.raises(ValueError):
        bootstrap_ci([1.0, 0.0], confidence=1.0)
    with pytest.raises(ValueError):
        bootstrap_ci([1.0, 0.0], resamples=0)


# --- critical path ----------------------------------------------------------------------------


def _tree() -> tuple[list[Node], list[LLMCall]]:
    #        1 (2.0)
    #       /       \
    #  2 (3.0+1.0)   3 (1.5)      siblings 2 and 3 run concurrently
    #                 |
    #                 4 (5.0)
    nodes = [
        Node(id=1, run_id="r", kind="question"),
        Node(id=2, run_id="r", parent_id=1, kind="answer"),
        Node(id=3, run_id="r", parent_id=1, kind="aspect"),
        Node(id=4, run_id="r", parent_id=3, kind="answer"),
    ]
    # One after the other in time (each ends an hour after the one before), as a run's own calls are.
    calls = [
        LLMCall(run_id="r", node_id=node_id, latency_s=seconds, created_at=T0 + timedelta(hours=i))
        for i, (node_id, seconds) in enumerate(
            [(1, 2.0), (2, 3.0), (2, 1.0), (3, 1.5), (4, 5.0), (None, 0.5), (None, 1.0)]
        )
    ]
    return nodes, calls


def test_critical_path_takes_the_slowest_chain_plus_run_level_calls() -> None:
    nodes, calls = _tree()
    # 1 -> 2: 6.0 s; 1 -> 3 -> 4: 8.5 s; plus planning and report, 1.5 s. (All calls: 14.0 s.)
    assert critical_path_seconds(nodes, calls) == pytest.approx(10.0)
    # A call whose node is unknown cannot be placed on a branch: it counts in sequence.
    extra = LLMCall(run_id="r", node_id=99, latency_s=0.25)
    assert critical_path_seconds(nodes, [*calls, extra]) == pytest.approx(10.25)
    assert critical_path_seconds([], calls[-2:]) == pytest.approx(1.5)


def test_a_nodes_concurrent_calls_count_once_on_the_critical_path() -> None:
    """MTQA extracts its chunks concurrently under one node: their latencies overlap in time (each
    includes waiting for the model), so the node weighs the span they covered, not their sum."""
    nodes = [Node(id=1, run_id="r", kind="question"), Node(id=2, run_id="r", parent_id=1, kind="knowledge")]
    end = T0 + timedelta(seconds=100)
    wave = [
        LLMCall(run_id="r", node_id=2, latency_s=s, created_at=end - timedelta(seconds=10 - s))
        for s in (4.0, 7.0, 10.0)
    ]  # all started at 90 s; ended at 94, 97 and 100 s
    later = LLMCall(run_id="r", node_id=2, latency_s=2.0, created_at=end + timedelta(seconds=5))  # 103-105 s
    assert critical_path_seconds(nodes, wave) == pytest.approx(10.0)
    assert critical_path_seconds(nodes, [*wave, later]) == pytest.approx(12.0)
    # Calls stored without a time (hand-made) are taken one after the other.
    bare = [LLMCall(run_id="r", node_id=2, latency_s=1.5, created_at=None) for _ in range(2)]
    assert critical_path_seconds(nodes, bare) == pytest.approx(3.0)


def test_critical_path_refuses_a_cycle() -> None:
    nodes = [Node(id=1, run_id="r", parent_id=2, kind="x"), Node(id=2, run_id="r", parent_id=1, kind="x")]
    with pytest.raises(ValueError, match="cycle"):
        critical_path_seconds(nodes, [])


def test_the_critical_path_follows_the_dependencies_a_method_declares() -> None:
    """MTQA hangs a column's thoughts and its summary off one parent; the thought below waits for the
    one above (α > 0) and the summary for every thought: a chain of 40 s, not two 10 s siblings."""
    nodes = [
        Node(id=1, run_id="r", kind="knowledge"),
        Node(id=2, run_id="r", parent_id=1, kind="cell"),
        Node(id=3, run_id="r", parent_id=1, kind="cell"),
        Node(id=4, run_id="r", parent_id=1, kind="summary"),
    ]

    def calls(*ends: float) -> list[LLMCall]:  # node n's one 10 s call, ending ends[n - 1] s in
        return [
            LLMCall(run_id="r", node_id=n, latency_s=10.0, created_at=T0 + timedelta(seconds=end))
            for n, end in enumerate(ends, start=1)
        ]

    chained = calls(10, 20, 30, 40)
    assert critical_path_seconds(nodes, chained) == pytest.approx(20.0)  # the tree alone
    waits = [(2, 3), (2, 4), (3, 4)]
    assert critical_path_seconds(nodes, chained, waits=waits) == pytest.approx(40.0)
    # α = 0: the second thought does not wait for the first; the summary waits for both.
    assert critical_path_seconds(nodes, calls(10, 20, 20, 30), waits=[(2, 4), (3, 4)]) == pytest.approx(30.0)
    with pytest.raises(ValueError, match="cycle"):
        critical_path_seconds(nodes, chained, waits=[(3, 2), (2, 3)])


def test_a_wait_holds_back_only_what_the_node_did_after_its_source() -> None:
    """FGDIP's backtrack: the branch it comes back to was judged at the start, beside the branch that
    failed (10 s each, concurrently); after the failed branch's answer (20 s more), the search
    generates the next step from that branch (5 s, a call of the branch's node). The wait holds back
    the 5 s, not the judgement made at the start: 35 s in all, never more than the run took."""
    nodes = [
        Node(id=1, run_id="r", kind="question"),
        Node(id=2, run_id="r", parent_id=1, kind="entity"),
        Node(id=3, run_id="r", parent_id=1, kind="entity"),
        Node(id=4, run_id="r", parent_id=2, kind="answer"),
    ]

    def call(node_id: int, start: float, latency: float) -> LLMCall:
        return LLMCall(
            run_id="r", node_id=node_id, latency_s=latency, created_at=T0 + timedelta(seconds=start + latency)
        )

    calls = [call(2, 0, 10), call(3, 0, 10), call(4, 10, 20), call(3, 30, 5)]
    assert critical_path_seconds(nodes, calls) == pytest.approx(30.0)  # the tree alone: 2 then 4
    assert critical_path_seconds(nodes, calls, waits=[(4, 3)]) == pytest.approx(35.0)
    # Stored times carry the storage's delay: a call that started within 0.25 s of its source's end
    # came after it; one that started a second before ran beside it; one without a time waits.
    assert critical_path_seconds(nodes, [*calls[:3], call(3, 29.8, 5)], waits=[(4, 3)]) == pytest.approx(35.0)
    assert critical_path_seconds(nodes, [*calls[:3], call(3, 29, 5)], waits=[(4, 3)]) == pytest.approx(30.0)
    untimed = LLMCall(run_id="r", node_id=3, latency_s=5.0, created_at=None)
    assert critical_path_seconds(nodes, [*calls[:3], untimed], waits=[(4, 3)]) == pytest.approx(35.0)
    # A node whose every call came after its source waits whole (MTQA's thought below a thought).
    assert critical_path_seconds(
        nodes, [call(2, 0, 10), call(4, 10, 20), call(3, 30, 5)], waits=[(4, 3)]
    ) == pytest.approx(35.0)


def test_strategyqa_answers_given_as_strings_are_read_as_yes_or_no(tmp_path) -> None:
    import json

    from engine.evaluate.datasets import DatasetError, _strategyqa

    path = tmp_path / "strategyqa.json"
    path.write_text(
        json.dumps(
            [
                {"qid": "a", "question": "Q1?", "answer": "yes"},
                {"qid": "b", "question": "Q2?", "answer": "True"},
                {"qid": "c", "question": "Q3?", "answer": False},
            ]
        ),
        encoding="utf-8",
    )
    assert [i.answers for i in _strategyqa(path, "strategyqa")] == [["yes"], ["yes"], ["no"]]
    path.write_text(json.dumps([{"qid": "d", "question": "Q4?", "answer": "maybe"}]), encoding="utf-8")
    with pytest.raises(DatasetError, match="'d' has the answer 'maybe'"):
        list(_strategyqa(path, "strategyqa"))
