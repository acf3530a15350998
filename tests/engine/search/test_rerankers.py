"""Each reranker orders a fixture as expected (issue 16): BM25 (offline), the LLM's pointwise yes/no
judgment scored by P(yes) from logprobs (the scripted fake, and the real openai client against
FakeOpenAIServer) or by the verdict when no logprobs come, and a client of a `/rerank` endpoint
(Cohere/Jina format) against a tiny HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engine.config import LLMSettings
from engine.llm.fake import FakeLLM, FakeReply, named
from engine.llm.fake_server import FakeOpenAIServer
from engine.llm.limits import ConcurrencyLimiter
from engine.llm.protocol import ChatRequest, LLMRequestError, Message, TokenLogprob
from engine.search.protocol import Hit
from engine.search.rerank import BM25Reranker, RerankEndpoint, Reranker, tokens
from engine.search.rerankers import EndpointReranker, LLMReranker, RerankError, yes_probability

QUERY = "causes of the global chip shortage"


def hit(title: str, text: str) -> Hit:
    return Hit(title=title, ref=f"fixture/{title}", snippet=text[:80], text=text, kind="corpus")


# The expected order: the document about the shortage's causes, then the one on chips, then noise.
FIXTURE = [
    hit("Potato crisps", "Crisps are thin slices of potato, fried or baked."),
    hit("Semiconductor industry", "Chip makers build semiconductors in fabs; demand for chips rose."),
    hit(
        "2020-2023 global chip shortage",
        "The global chip shortage had several causes: the pandemic, demand for chips and a shortage of fab capacity.",
    ),
]
EXPECTED = ["2020-2023 global chip shortage", "Semiconductor industry", "Potato crisps"]
JUDGE = named("rerank.judge")
P_YES = {"2020-2023 global chip shortage": 0.93, "Semiconductor industry": 0.61, "Potato crisps": 0.02}


def titles(hits: list[Hit]) -> list[str]:
    return [h.title for h in hits]


def judged_title(request: ChatRequest) -> str:
    text = "\n".join(m.content for m in request.messages)
    return next(title for title in P_YES if title in text)


def test_bm25_orders_the_fixture():
    ranked = BM25Reranker().rerank(QUERY, FIXTURE, 3)
    assert titles(ranked) == EXPECTED and ranked[0].score > ranked[1].score > ranked[2].score


def test_llm_reranker_scores_by_the_probability_of_yes():
    fake = FakeLLM()
    # The verdict text says "yes" for both relevant documents: only the logprobs can order them.
    fake.when(
        JUDGE,
        lambda r: FakeReply(
            "yes" if P_YES[judged_title(r)] > 0.5 else "no",
            top=(("yes", P_YES[judged_title(r)]), ("no", 1 - P_YES[judged_title(r)])),
        ),
    )
    reranker = LLMReranker(fake)
    assert isinstance(reranker, Reranker)
    ranked = reranker.rerank(QUERY, FIXTURE, 3)
    assert titles(ranked) == EXPECTED
    assert [round(h.score, 2) for h in ranked] == [0.93, 0.61, 0.02]
    calls = fake.calls_for(JUDGE)
    assert len(calls) == 3 and all(c.top_logprobs == 5 and c.max_tokens == 1 for c in calls)
    assert all("<<<DOCUMENT" in c.messages[1].content for c in calls)  # the page is data between markers
    assert titles(reranker.rerank(QUERY, FIXTURE, 2)) == EXPECTED[:2]


def test_llm_reranker_falls_back_to_the_verdict_without_logprobs():
    fake = FakeLLM()
    fake.when(JUDGE, lambda r: "yes" if P_YES[judged_title(r)] > 0.5 else "No.")
    ranked = LLMReranker(fake, top_logprobs=0).rerank(QUERY, FIXTURE, 3)
    assert [h.score for h in ranked] == [1.0, 1.0, 0.0]
    # Equal verdicts keep the searcher's order; the "no" goes last.
    assert titles(ranked) == ["Semiconductor industry", "2020-2023 global chip shortage", "Potato crisps"]
    assert all(c.top_logprobs == 0 for c in fake.calls_for(JUDGE))


def test_an_endpoint_refusing_logprobs_is_asked_again_without():
    class Refusing(FakeLLM):
        def chat(self, request):
            if request.top_logprobs:
                raise LLMRequestError("logprobs are not supported")
            return super().chat(request)

    fake = Refusing()
    fake.when(JUDGE, lambda r: "yes" if P_YES[judged_title(r)] > 0.5 else "no")
    reranker = LLMReranker(fake)
    assert [h.score for h in reranker.rerank(QUERY, FIXTURE, 3)] == [1.0, 1.0, 0.0]
    assert len(fake.calls_for(JUDGE)) == 3  # after the first refusal it no longer asks for logprobs


def test_yes_probability_normalises_over_yes_and_no():
    token = TokenLogprob("Yes", math.log(0.6), top=((" Yes", math.log(0.6)), ("no", math.log(0.2)), ("maybe", -1.0)))
    assert yes_probability([token]) == pytest.approx(0.75)
    assert yes_probability([TokenLogprob("perhaps", -0.1)]) is None
    assert yes_probability(None) is None


def test_llm_reranker_over_http_reads_the_servers_logprobs(monkeypatch):
    from engine.llm.openai_compat import OpenAICompatibleLLM

    fake = FakeLLM()
    fake.when(
        JUDGE, lambda r: FakeReply("yes", top=(("yes", P_YES[judged_title(r)]), ("no", 1 - P_YES[judged_title(r)])))
    )
    with FakeOpenAIServer(fake) as server:
        llm = OpenAICompatibleLLM(
            LLMSettings(base_url=server.base_url, api_key="test", model="judge"), ConcurrencyLimiter(2)
        )
        ranked = LLMReranker(llm).rerank(QUERY, FIXTURE, 3)
        bodies = server.requests
    assert titles(ranked) == EXPECTED
    assert [round(h.score, 2) for h in ranked] == [0.93, 0.61, 0.02]
    assert all(b["logprobs"] is True and b["top_logprobs"] == 5 for b in bodies)


def test_the_fakes_default_judge_grades_by_the_query_words():
    ranked = LLMReranker(FakeLLM()).rerank(QUERY, FIXTURE, 3)
    assert titles(ranked) == EXPECTED and ranked[0].score > ranked[1].score > ranked[2].score


# --------------------------------------------------------------------------- the /rerank endpoint


class RerankServer:
    """A /rerank endpoint on 127.0.0.1 scoring documents by the words they share with the query."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.bodies: list[dict] = []
        self.headers: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.bodies.append(body)
                outer.headers.append(dict(self.headers))
                if self.path != "/v1/rerank" or outer.status != 200:
                    payload, status = b'{"error": "nope"}', outer.status if outer.status != 200 else 404
                else:
                    words = set(tokens(body["query"]))
                    scores = [len(words & set(tokens(d))) / len(words) for d in body["documents"]]
                    order = sorted(range(len(scores)), key=lambda i: -scores[i])[: body["top_n"]]
                    payload = json.dumps(
                        {
                            "model": body.get("model"),
                            "results": [{"index": i, "relevance_score": scores[i]} for i in order],
                        }
                    ).encode()
                    status = 200
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_endpoint_reranker_orders_the_fixture():
    with RerankServer() as base:
        reranker = EndpointReranker(base, "bge-reranker", api_key="secret")
        ranked = reranker.rerank(QUERY, FIXTURE, 2)
    assert isinstance(reranker, Reranker)
    assert titles(ranked) == EXPECTED[:2] and ranked[0].score > ranked[1].score


def test_endpoint_reranker_sends_the_cohere_format_and_says_what_failed():
    server = RerankServer()
    with server as base:
        EndpointReranker(base + "/rerank", "bge-reranker", api_key="secret").rerank(QUERY, FIXTURE, 3)
    body, headers = server.bodies[0], server.headers[0]
    assert body["model"] == "bge-reranker" and body["query"] == QUERY and body["top_n"] == 3
    assert len(body["documents"]) == 3 and body["documents"][0].startswith("Potato crisps")
    assert headers["Authorization"] == "Bearer secret"

    with RerankServer(status=500) as base:
        with pytest.raises(RerankError, match="HTTP 500") as failed:
            EndpointReranker(base, "m").rerank(QUERY, FIXTURE, 3)
    assert "THOUGHTMAP_RERANK_URL" in failed.value.hint
    with pytest.raises(ValueError, match="http"):
        EndpointReranker("ftp://example.org/rerank")


def test_the_rerank_endpoint_is_configured_by_the_environment(tmp_path):
    from engine.config import load_settings
    from engine.services import build_services

    settings = load_settings(
        {
            "THOUGHTMAP_HOME": str(tmp_path),
            "THOUGHTMAP_RERANK_URL": "http://127.0.0.1:9/v1",
            "THOUGHTMAP_RERANK_MODEL": "bge",
            "THOUGHTMAP_RERANK_API_KEY": "rerank-secret-key",
        }
    )
    assert settings.rerank.url == "http://127.0.0.1:9/v1" and "rerank-secret-key" not in repr(settings)
    services = build_services(settings)
    try:
        endpoint = services.runner.services.get(RerankEndpoint)
        assert isinstance(endpoint, EndpointReranker) and endpoint.url == "http://127.0.0.1:9/v1/rerank"
        assert endpoint.model == "bge"
    finally:
        services.close()
    assert load_settings({"THOUGHTMAP_HOME": str(tmp_path)}).rerank.url == ""


def test_messages_are_plain_text_requests():
    fake = FakeLLM()
    LLMReranker(fake).rerank("q", [hit("t", "q text")], 1)
    request = fake.calls[0]
    assert request.prompt == "rerank.judge" and isinstance(request.messages[0], Message)
