"""A small website on 127.0.0.1 for the tests of reading web pages (`engine/search/pages.py`): a page
with a menu and a long article whose answer to "why is there a chip shortage" is its last
paragraph, and a dead link; `site_rows` are the ddgs rows a mocked web search returns for it."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

ANSWER = "carmakers cancelled wafer orders"  # words only the article's last paragraph has


class _Pages(BaseHTTPRequestHandler):
    requested: list[str]  # the paths asked for, in order

    def do_GET(self):  # noqa: N802 - http.server's name
        self.requested.append(self.path)
        if self.path != "/chip.html":
            self.send_error(404)
            return
        nav = "".join(f'<li><a href="/s{i}">Section {i}</a></li>' for i in range(30))
        background = "".join(
            f"<p>Background {i}: wafer fabrication plants take years to build, and each new process "
            "node costs billions of dollars in equipment and cleanroom space.</p>"
            for i in range(12)
        )
        body = (
            f"<html><head><title>Chip shortage explained</title></head><body><nav><ul>{nav}</ul></nav><article>"
            f"<h1>Chip shortage explained</h1>{background}<p>The chip shortage began when carmakers cancelled "
            "wafer orders in 2020 and foundries sold the capacity to electronics makers.</p></article>"
            "<footer>Copyright, privacy, cookies.</footer></body></html>"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def site():
    handler = type("Handler", (_Pages,), {"requested": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", handler.requested  # (base URL, paths asked for)
    httpd.shutdown()
    httpd.server_close()


def site_rows(base: str) -> list[dict]:
    return [
        {"title": "Chip shortage explained", "href": f"{base}/chip.html", "body": "Chip shortage snippet."},
        {"title": "Chip shortage archive", "href": f"{base}/gone", "body": "Chip shortage archived snippet."},
    ]
