"""Text from outside (model replies, web pages) with lone surrogates or NUL (issue 10, finding 7).

A chat completion holding the JSON escape "\\ud800" decodes to a Python str with a lone surrogate,
which no database, file or terminal can encode; PostgreSQL's text also refuses NUL. Such a reply
must not fail the run: the text is cleaned where it enters the program. The model side is driven
through the real openai client against `FakeOpenAIServer`.
"""

from __future__ import annotations

import json
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engine import cli
from engine.config import LLMSettings, load_settings
from engine.llm.fake_server import FakeOpenAIServer
from engine.llm.limits import ConcurrencyLimiter
from engine.llm.openai_compat import OpenAICompatibleLLM
from engine.llm.protocol import ChatRequest, Message
from engine.search.fetch import PageFetcher
from engine.services import build_services
from engine.text import storable_text
from storage.models import NodeStatus, RunStatus

QUESTION = "Why is the sky blue?"


# ====================================================================== the cleaning function


@pytest.mark.parametrize(
    "raw, clean",
    [
        ("plain text, ünïcode and 😀", "plain text, ünïcode and 😀"),
        ("a\ud800b", "a\ufffdb"),
        ("end\udfff", "end\ufffd"),
        ("\ude00\ud83d", "\ufffd\ufffd"),  # a low then a high surrogate: not a pair
        ("\ud83d\ude00", "😀"),  # a pair that arrived as two code points is joined
        ("nul\x00here\x00", "nulhere"),
        ("both\x00\ud800", "both\ufffd"),
    ],
)
def test_storable_text(raw, clean):
    assert storable_text(raw) == clean
    storable_text(raw).encode("utf-8")  # what every database, file and terminal needs


# ====================================================================== the adapter


def _llm(base_url: str) -> OpenAICompatibleLLM:
    settings = LLMSettings(base_url=base_url, api_key="sk-test", model="fake-model", timeout_s=2.0, max_retries=0)
    return OpenAICompatibleLLM(settings, ConcurrencyLimiter(2), sleep=lambda _s: None, rng=random.Random(1))


def test_a_reply_with_a_lone_surrogate_and_nul_is_cleaned_by_the_adapter():
    with FakeOpenAIServer() as server:
        # The fake server JSON-encodes this as "\ud800" and "\u0000": what a broken server sends.
        server.enqueue(content="Rayleigh \ud800 scattering\x00.")
        response = _llm(server.base_url).chat(ChatRequest(messages=(Message("user", QUESTION),)))
    assert response.text == "Rayleigh \ufffd scattering."


# ====================================================================== a whole run


def _stored(run_id: str):
    services = build_services(load_settings())
    try:
        return services.repo.get_run(run_id), services.repo.list_nodes(run_id)
    finally:
        services.close()


@pytest.mark.parametrize(
    "content",
    [
        # The lone surrogate arrives in the HTTP response (decoded by the openai client)...
        '{"answer": "Rayleigh \ud800 scattering\x00 of sunlight.", "confidence": "high"}',
        # ...or inside the model's own JSON, decoded when the structured answer is parsed.
        json.dumps({"answer": "Rayleigh \ud800 scattering\x00 of sunlight.", "confidence": "high"}),
    ],
)
def test_a_run_whose_model_reply_holds_a_lone_surrogate_finishes(capsys, monkeypatch, tmp_path, content):
    with FakeOpenAIServer() as server:
        server.enqueue(content=content)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        capsys.readouterr()
        code = cli.main(
            [
                "run",
                QUESTION,
                "--method",
                "direct",
                "--llm",
                "openai",
                "--search",
                "none",
                "--quiet",
                "--out",
                str(tmp_path / "report.md"),
            ]
        )
        out, err = capsys.readouterr()

    assert code == cli.EXIT_OK, err
    run, nodes = _stored(out.strip())
    assert run.status == RunStatus.DONE
    answer = next(n for n in nodes if n.kind == "answer")
    assert answer.status == NodeStatus.DONE
    assert answer.content == "Rayleigh \ufffd scattering of sunlight."
    assert "Rayleigh \ufffd scattering of sunlight." in (tmp_path / "report.md").read_text(encoding="utf-8")


# ====================================================================== a web page


class _PageHandler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):  # noqa: N802 - http.server naming
        body = {
            "/nul.txt": (b"Okapis\x00 live in the Ituri forest.", "text/plain; charset=utf-8"),
            "/nul.html": (
                b"<html><head><title>Oka\x00pi</title></head><body><article><p>Okapis\x00 live "
                b"in the Ituri rainforest of the Congo.</p></article></body></html>",
                "text/html; charset=utf-8",
            ),
        }[self.path]
        self.send_response(200)
        self.send_header("Content-Type", body[1])
        self.send_header("Content-Length", str(len(body[0])))
        self.end_headers()
        self.wfile.write(body[0])


@pytest.fixture
def page_server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _PageHandler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("path", ["/nul.txt", "/nul.html"])
def test_a_fetched_page_has_no_nul(page_server, path):
    page = PageFetcher(allow_private=True, trust_env=False).fetch(page_server + path)
    assert "Okapis live" in page.text
    assert "\x00" not in page.text and "\x00" not in page.title
