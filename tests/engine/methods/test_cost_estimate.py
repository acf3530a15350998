"""The cost estimate before Start (`Method.estimate`): for every registered method and the test-only
grid method, a default run on the scripted fake LLM (paper values, then the quick profile) makes a
number of LLM calls within ±30 % of the estimate and inside its low-high range. Then the pure
helpers: money from the price table, a benchmark's items × methods, the line the pages show."""

from __future__ import annotations

import pytest

from engine.evaluate.estimate import (
    BenchmarkEstimate,
    NoEstimate,
    benchmark_estimate,
    estimate_line,
    price,
    tokens_text,
)
from engine.llm.pricing import ModelPrice, PriceTable
from engine.methods.base import Method
from engine.methods.deot.estimate import tree_shape
from engine.methods.deot.params import DeotParams
from engine.methods.estimate import CostEstimate, Tally
from engine.methods.params import build_params_with_profile
from engine.services import Services
from storage.models import RunStatus
from tests.engine.methods.test_method_contract import make_services
from tests.support.contract_helpers import QUESTION, methods

METHODS = methods()
TOLERANCE = 0.30


@pytest.fixture(scope="module")
def services(tmp_path_factory, bundled_corpus):
    home = tmp_path_factory.mktemp("estimate-home")
    bundled_corpus.store.backup_to(home / "corpus.sqlite3")
    built = make_services(home)
    yield built
    built.close()


def measured_calls(services: Services, cls: type[Method], params) -> int:
    run = services.runner.create_run(
        question=QUESTION, method=cls.name, params=params, llm_info=services.llm_info("fake"), search_mode="local"
    )
    services.runner.start(run.id)
    final = services.runner.wait(run.id, timeout=120)
    assert final.status == RunStatus.DONE, f"{cls.name}: the run ended {final.status}: {final.error}"
    assert final.llm_calls == len(services.repo.list_llm_calls(run.id))
    return final.llm_calls


@pytest.mark.parametrize("profile", ["paper", "quick"])
@pytest.mark.parametrize("cls", list(METHODS.values()), ids=list(METHODS))
def test_estimate_within_30_percent_of_a_default_run(services, cls, profile):
    params = build_params_with_profile(cls.Params, {}, method=cls.name, profile=profile)
    estimate = cls.estimate(params)
    assert isinstance(estimate, CostEstimate), f"{cls.name} declares no cost formula"
    measured = measured_calls(services, cls, params)
    assert abs(estimate.calls - measured) <= TOLERANCE * measured, (
        f"{cls.name} ({profile}): estimated {estimate.calls} calls, the run made {measured}"
    )
    assert estimate.low <= measured <= estimate.high, (
        f"{cls.name} ({profile}): {measured} calls is outside the range {estimate.low}-{estimate.high}"
    )
    assert estimate.prompt_tokens > 0 and estimate.completion_tokens > 0 and estimate.how


def test_deot_tree_follows_the_node_budget_and_layers():
    # The paper's three layers (the question is layer 1): root, 3 children, 9 grandchildren.
    assert tree_shape(DeotParams(), children_per_expansion=3) == tree_shape(
        DeotParams(max_nodes=15), children_per_expansion=3
    )
    shape = tree_shape(DeotParams(), children_per_expansion=3)
    assert (shape.nodes, shape.expansions) == (13, 4)
    # A fourth layer: 2 of the 9 grandchildren expanded within the 15-node budget.
    deeper = tree_shape(DeotParams(max_layers=4), children_per_expansion=3)
    assert (deeper.nodes, deeper.expansions) == (15, 6)
    assert tree_shape(DeotParams(max_layers=2), children_per_expansion=3).nodes == 4
    assert tree_shape(DeotParams(max_layers=1), children_per_expansion=3).expansions == 0
    assert tree_shape(DeotParams(max_nodes=1), children_per_expansion=3).nodes == 1


def test_estimate_follows_the_parameters():
    deot = METHODS["deot"]
    small, large = deot.estimate(DeotParams(max_nodes=5)), deot.estimate(DeotParams(max_nodes=40, max_layers=5))
    assert small.calls < large.calls and small.tokens < large.tokens
    # Switching the validators off removes a plan validation and a fact check per node.
    lean = deot.estimate(DeotParams(validate_plans=False, validate_results=False))
    assert deot.estimate(DeotParams()).calls - lean.calls == 2 * 13
    omni = METHODS["omnithink"]
    assert omni.estimate(omni.Params(max_sections=10)).calls == omni.estimate(omni.Params(max_sections=6)).calls + 4
    # MTQA's collection scope reads a graph built beforehand: no extraction call is counted.
    mtqa = METHODS["mtqa"]
    per_question = mtqa.estimate(mtqa.Params(documents=10))
    collection = mtqa.estimate(mtqa.Params(documents=10, scope="collection", collection="hotpotqa"))
    assert per_question.calls - collection.calls == round(10 * 0.8) and "no extraction" in collection.how


def test_price_counts_input_and_output_tokens_at_the_models_price():
    estimate = Tally().add("answer", 2, prompt=500_000, completion=250_000).estimate(low=2, high=2, how="two calls")
    prices = PriceTable({"m": ModelPrice(input=1.0, output=4.0)})
    assert price(estimate, prices, "m") == pytest.approx(1.0 * 1 + 4.0 * 0.5)
    assert price(estimate, prices, "unlisted-local-model") is None


def test_estimate_line_says_calls_range_tokens_and_money():
    estimate = Tally().add("answer", 92, prompt=1000, completion=300).estimate(low=7, high=185, how="")
    line = estimate_line(estimate, prices=PriceTable(), model="gpt-4o-mini")
    cost = (92 * 1000 * 0.15 + 92 * 300 * 0.60) / 1e6
    assert line == f"About 92 LLM calls (7-185), ~{tokens_text(92 * 1300)} tokens (≈${cost:.2f} on gpt-4o-mini)"
    assert estimate_line(estimate, prices=PriceTable(), model="qwen\x1b[31m\nx").endswith(
        "(no price listed for qwen x)"
    )


def test_benchmark_multiplies_items_by_methods():
    params = {name: METHODS[name].Params() for name in ("direct", "rag", "deot")}
    bench = benchmark_estimate(METHODS, params, items=20)
    assert isinstance(bench, BenchmarkEstimate)
    per_item = sum(METHODS[n].estimate(p).calls for n, p in params.items())
    assert bench.total.calls == 20 * per_item
    assert bench.total.prompt_tokens == 20 * sum(METHODS[n].estimate(p).prompt_tokens for n, p in params.items())
    assert bench.line(prices=PriceTable(), model="gpt-4o-mini").startswith(
        f"20 items × 3 methods: about {20 * per_item:,} LLM calls"
    )


def test_a_method_without_a_formula_is_named():
    class Unpriced(METHODS["direct"]):  # no `name`: not registered, no formula of its own
        @classmethod
        def estimate(cls, params):
            return None

    with pytest.raises(NoEstimate, match="'plain'"):
        benchmark_estimate({"plain": Unpriced}, {"plain": Unpriced.Params()}, items=3)


# ---------------------------------------------------------------------- the Explore page


@pytest.fixture
def app_services(prebuilt_corpus_home):
    """The app's own Services (the cached `get_services()`), built in this test's home."""
    from components import app_state

    app_state.get_services.clear()
    built = app_state.get_services()
    yield built
    built.close()
    app_state.get_services.clear()


def test_explore_shows_the_estimate_before_start_and_follows_the_parameters(app_services):
    from engine.safe_text import inline_text
    from tests.pages.test_app_pages import assert_no_exception, open_page, texts

    def shown(params) -> str:
        line = estimate_line(METHODS["deot"].estimate(params), prices=app_services.prices, model="fake")
        return inline_text(line)

    at = open_page()
    assert shown(DeotParams()) in texts(at.caption)
    at.number_input(key="params-deot.max_nodes").set_value(5).run()
    assert_no_exception(at)
    assert shown(DeotParams(max_nodes=5)) in texts(at.caption)
    assert shown(DeotParams()) not in texts(at.caption)
    # A value the parameters refuse: no estimate, and no run started.
    for tool in ("news_search", "info_search", "event_extractor", "history_analyzer", "direct_reasoning"):
        at.checkbox(key=f"params-deot.{tool}").uncheck()
    at.run()
    assert any(t.startswith("No cost estimate: a parameter value is not valid") for t in texts(at.caption))
    # Another method: its own formula.
    at.selectbox(key="method").set_value("direct").run()
    direct = METHODS["direct"]
    line = estimate_line(direct.estimate(direct.Params()), prices=app_services.prices, model="fake")
    assert inline_text(line) in texts(at.caption)
    assert app_services.repo.list_runs() == []
