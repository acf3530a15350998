"""A run's services, asked by type (engine/run_services.py): what is provided is what a method gets,
by the Protocol or class it asks for; what is not provided (or taken back) is None."""

from __future__ import annotations

from engine.run_services import RunServices
from engine.runner import RunControl
from engine.search.embeddings import Embedder
from engine.search.fetch import PageFetcher
from engine.search.rerank import BM25Reranker, RerankEndpoint


class _Words:
    """An embedder in the shape of the seam: one vector per text."""

    description = "words"

    def embed(self, texts):
        return [[float(len(t))] for t in texts]


def test_each_service_is_found_by_the_type_it_was_provided_as():
    embedder, fetcher = _Words(), PageFetcher(allow_private=False, trust_env=False)
    services = RunServices({Embedder: embedder, PageFetcher: fetcher, RerankEndpoint: None})
    assert services.get(Embedder) is embedder
    assert services.get(PageFetcher) is fetcher
    assert services.get(RerankEndpoint) is None  # provided as None: the run goes without
    assert repr(services) == "RunServices(Embedder, PageFetcher)"


def test_a_service_is_provided_later_replaced_and_taken_back():
    services = RunServices()
    assert services.get(RerankEndpoint) is None
    first, second = BM25Reranker(), BM25Reranker()
    services.provide(RerankEndpoint, first)
    services.provide(RerankEndpoint, second)
    assert services.get(RerankEndpoint) is second
    services.provide(RerankEndpoint, None)
    assert services.get(RerankEndpoint) is None


def test_the_runner_hands_its_services_to_every_run(services):
    fetcher = PageFetcher(allow_private=True, trust_env=False)
    services.runner.services.provide(PageFetcher, fetcher)
    run = services.runner.create_run(question="What is a fjord?", method="direct", llm_info=services.llm_info("fake"))
    method = services.runner.methods["direct"]()
    control = RunControl(services.repo, run.id, poll_s=0.2, heartbeat_s=5.0)
    ctx = services.runner._context(services.repo.get_run(run.id), method, control)
    assert ctx.service(PageFetcher) is fetcher
    assert ctx.service(Embedder) is services.embedder
