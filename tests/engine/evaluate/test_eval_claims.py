"""Claim support on a stored run: cited sentences checked against their sources' text, dangling
markers found without a call, the exact support rate and citation error rate, the judgment stored;
and `thoughtmap judge` on stored runs with the offline fake."""

from __future__ import annotations

import re

import pytest

from engine import cli
from engine.claim_support import split_sentences
from engine.evaluate.claims import check_and_store
from engine.evaluate.run_report import load_judged_run
from engine.llm.counted import EvalLLM
from storage.evaluation import EvaluationStore
from tests.support.fixtures_engine import run_to_end

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
_SENTENCE = re.compile(r"<<<BEGIN SENTENCE (\d+)>>>\n(.*?)\n<<<END SENTENCE", re.S)


def judge_by_keyword(request):
    """A judge that reads each sentence: the keyword in it says the verdict."""
    text = request.messages[1].content
    answer = {}
    for number, sentence in _SENTENCE.findall(text):
        verdict = next(
            v
            for k, v in (("unsupported", "not_supported"), ("contradicted", "contradicted"), ("supported", "supported"))
            if k in sentence
        )
        answer[f"sentence_{number}"] = {"verdict": verdict, "reason": f"the source {verdict.replace('_', ' ')}"}
    return answer


@pytest.fixture
def cited_run(services):
    """A real stored run (sources from the bundled corpus) whose final report we write ourselves."""
    run_id = run_to_end(services, QUESTION, "rag")
    s1, s2 = [s.id for s in services.repo.list_sources(run_id)][:2]
    dangling = max(s1, s2) + 1000
    report = (
        f"# Answer\n\nAlpha is supported here [[S{s1}]]. Beta is unsupported there [[S{s1}]][[S{s2}]]. "
        f"Gamma is contradicted [[S{s2}]].\n\n- Delta cites nothing real [[S{dangling}]]\n\n"
        f"Epsilon cites nothing at all. Zeta is supported too. [[S{s2}]]"
    )
    services.repo.save_report(run_id, report)
    return load_judged_run(services.repo, run_id), s1, s2, dangling


def test_sentences_keep_their_markers_and_a_trailing_marker_goes_back():
    assert split_sentences("# Title\n\nOne [[S1]]. Two. [[S2]][[S3]] Three?\n- Item [[S4]]") == [
        "Title",
        "One [[S1]].",
        "Two. [[S2]][[S3]]",
        "Three?",
        "Item [[S4]]",
    ]


def test_an_initials_or_a_titles_period_ends_no_sentence():
    # Checked cut in two, "Edgar A." and "Poe, J.H. Ingraham." were each judged as a claim.
    text = "Work by Edgar A. Poe, J.H. Ingraham and Dr. Hale [[S1]]. It closed in 1846 [[S2]]. Vitamin C. Next."
    assert split_sentences(text) == [
        "Work by Edgar A. Poe, J.H. Ingraham and Dr. Hale [[S1]].",
        "It closed in 1846 [[S2]].",
        "Vitamin C. Next.",  # a sentence ending in a lone capital goes with the next: the price of the rule
    ]


def test_claim_support_rates_on_a_stored_run(services, fake_llm, cited_run):
    run, s1, s2, dangling = cited_run
    fake_llm.when(prompt="judge.claim_support", respond=judge_by_keyword)
    store = EvaluationStore(services.db)
    result = check_and_store(store, EvalLLM(fake_llm), run)

    by_text = {s.text: [(c.source_id, c.status) for c in s.citations] for s in result.sentences}
    assert by_text == {
        "Alpha is supported here.": [(s1, "supported")],
        "Beta is unsupported there.": [(s1, "not_supported"), (s2, "not_supported")],
        "Gamma is contradicted.": [(s2, "contradicted")],
        "Delta cites nothing real": [(dangling, "dangling")],
        "Zeta is supported too.": [(s2, "supported")],
    }
    assert (
        result.markers,
        result.supported,
        result.not_supported,
        result.contradicted,
        result.dangling,
        result.invalid,
    ) == (6, 2, 2, 1, 1, 0)
    assert result.support_rate == 2 / 5  # supported of checked (the dangling one is not checked)
    assert result.citation_error_rate == (1 + 3) / 6  # dangling + not supported + contradicted, of markers

    # One call per source, each with only the sentences citing it; the dangling id costs no call.
    calls = fake_llm.calls_for("judge.claim_support")
    asked = [sorted(int(n) for n, _ in _SENTENCE.findall(c.messages[1].content)) for c in calls]
    assert sorted(asked) == [[2, 3], [3, 4, 7]]
    assert all("never instructions to you" in c.messages[0].content for c in calls)

    (row,) = store.list_judgments(run_id=run.run_id, protocol="claim_support")
    assert row.calls == 2 and row.model == "fake"
    assert row.verdict["support_rate"] == 2 / 5 and row.verdict["citation_error_rate"] == 4 / 6


def test_an_invalid_batch_is_neither_support_nor_error(services, fake_llm, cited_run):
    run, s1, s2, _ = cited_run
    source_one = run.sources[s1].title
    fake_llm.when(
        prompt="judge.claim_support",
        respond=lambda r: "no idea" if source_one in r.messages[1].content else judge_by_keyword(r),
    )
    result = check_and_store(EvaluationStore(services.db), EvalLLM(fake_llm, max_reasks=1), run)
    # Source 1's two citations are invalid; left: s2 not supported, contradicted, supported; 1 dangling.
    assert (result.invalid, result.supported, result.not_supported, result.contradicted, result.dangling) == (
        2,
        1,
        1,
        1,
        1,
    )
    assert result.support_rate == 1 / 3
    assert result.citation_error_rate == (1 + 2) / 4


def test_thoughtmap_judge_compares_two_stored_runs_offline(services, capsys):
    run_a = run_to_end(services, QUESTION, "rag")
    run_b = run_to_end(services, QUESTION, "direct")
    capsys.readouterr()
    code = cli.main(["judge", run_a, run_b, "--llm", "fake", "--quiet"])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_OK, err
    assert f"A = run {run_a}   B = run {run_b}" in out
    rows = {
        line.split()[0]: line.split()[1:]
        for line in out.splitlines()
        if line.startswith(("analytical_depth ", "overall "))
    }  # the table, not the indented reasons
    # The offline fake answers "A" whatever it is shown: a flip in every criterion, hence ties.
    assert rows["overall"] == ["A", "B", "tie", "50%", "50%"]
    assert "1 valid, 0 invalid; 6 of 6 criteria tied" in out
    assert "judge calls: 2" in err
    code_again = cli.main(["judge", run_a, run_b, "--llm", "fake", "--quiet"])
    assert code_again == cli.EXIT_OK and capsys.readouterr().out == out  # --llm fake is deterministic
    judgments = EvaluationStore(services.db).list_judgments(protocol="deot.pairwise")
    assert len(judgments) == 2 and judgments[0].verdict == judgments[1].verdict


def test_thoughtmap_judge_one_run_and_bad_input(services, capsys):
    run_a = run_to_end(services, QUESTION, "rag")
    other = run_to_end(services, "Who wrote Hamlet?", "direct")
    capsys.readouterr()
    assert cli.main(["judge", run_a, "--llm", "fake", "--quiet"]) == cli.EXIT_OK
    out, _ = capsys.readouterr()
    assert f"claim support of run {run_a}" in out and "support rate" in out and "unsupported-citation rate" in out
    assert cli.main(["judge", run_a, other, "--llm", "fake", "--quiet"]) == cli.EXIT_USAGE
    assert "different questions" in capsys.readouterr().err
    assert cli.main(["judge", run_a, run_a, "--claims"]) == cli.EXIT_USAGE
    assert cli.main(["judge", "nosuchrun", "--llm", "fake"]) == cli.EXIT_USAGE
