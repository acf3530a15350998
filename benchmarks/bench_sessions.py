"""Sessions at 200, 1,000 and 10,000 stored runs: how long its first page takes to show in Chromium.

A script, not a test: it measures and prints (`--write` replaces its section in docs/benchmarks.md).

    .venv/bin/python benchmarks/bench_sessions.py [--sizes 200,1000,10000] [--loads 3] [--write]
    .venv/bin/python benchmarks/bench_sessions.py --app-root /tmp/old-checkout   # "before"

For each size, a fresh THOUGHTMAP_HOME gets that many runs through the `Repository` (questions of
several lengths, methods and statuses in turn), the app is started on it (`streamlit run app.py`
from `--app-root`, by default this checkout: pointing it at a checkout of an older commit measures
"before"), and Debian's Chromium opens /sessions `--loads` times. Measured from the navigation to:

- **first card**: the first run card's Open button is visible;
- **page shown**: every card of the page is (20 now; 200 before paging);
- **sidebar**: from Settings, the sidebar's Sessions link to the first card (no page load: how a
  person usually arrives);
- **oldest**: after pressing Oldest, the last page's label and its oldest run are shown (paged app only).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import facts_block, machine_facts, publish, stop_server, table, wait_until_serving  # noqa: E402
from benchmarks.bench_ui import CHROMIUM, free_port  # noqa: E402

SECTION = "bench_sessions"
METHODS = ("deot", "rag", "direct", "mtqa", "fgdip")
STATUSES = ("done", "done", "done", "failed", "stopped")


def fill(home: Path, n: int) -> None:
    """`n` runs in the home's database, the oldest first (as a person's history grows)."""
    os.environ["THOUGHTMAP_HOME"] = str(home)
    from engine.config import load_settings
    from storage import Repository, open_database

    db = open_database(load_settings().database_url)
    repo = Repository(db)
    for i in range(n):
        words = " ".join(["about the history of research"] * (1 + i % 4))
        run = repo.create_run(question=f"Stored question {i:05d} {words}?", method=METHODS[i % len(METHODS)], params={})
        repo.set_status(run.id, STATUSES[i % len(STATUSES)])
    db.dispose()


class App:
    def __init__(self, home: Path, root: Path) -> None:
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "THOUGHTMAP_"))}
        env.update(THOUGHTMAP_HOME=str(home), THOUGHTMAP_LLM="fake")
        self.log = home / "streamlit.log"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                "app.py",
                "--server.headless",
                "true",
                "--server.address",
                "127.0.0.1",
                "--server.port",
                str(self.port),
                "--browser.gatherUsageStats",
                "false",
            ],
            cwd=root,
            env=env,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )
        wait_until_serving(f"http://127.0.0.1:{self.port}", self.proc, self.log)

    def close(self) -> None:
        stop_server(self.proc)


def measure(browser, app: App, n: int, loads: int) -> dict:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    first, shown, sidebar, oldest = [], [], [], []
    opens = page.locator('[data-testid="stButton"]').filter(has_text="Open")
    for _ in range(loads):
        started = time.perf_counter()
        page.goto(f"http://127.0.0.1:{app.port}/sessions")
        opens.first.wait_for(timeout=120_000)
        first.append(time.perf_counter() - started)
        expected = min(n, 20) if page.get_by_text("Page 1 of").count() else min(n, 200)
        page.wait_for_function(
            f"document.querySelectorAll('[data-testid=\"stButton\"]').length >= {expected}", timeout=120_000
        )
        shown.append(time.perf_counter() - started)
        # As a person usually arrives: from another page of the app, by the sidebar (no page load).
        page.goto(f"http://127.0.0.1:{app.port}/settings")
        page.get_by_text("Local corpus", exact=True).first.wait_for(timeout=120_000)
        started = time.perf_counter()
        page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name="Sessions").click()
        opens.first.wait_for(timeout=120_000)
        sidebar.append(time.perf_counter() - started)
        button = page.get_by_role("button", name="Oldest", exact=True)
        if button.count():
            started = time.perf_counter()
            button.first.click()
            page.get_by_text("Stored question 00000", exact=False).first.wait_for(timeout=120_000)
            oldest.append(time.perf_counter() - started)
    page.close()
    return {
        "first": statistics.median(first),
        "shown": statistics.median(shown),
        "sidebar": statistics.median(sidebar),
        "oldest": statistics.median(oldest) if oldest else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="200,1000,10000")
    parser.add_argument("--loads", type=int, default=3)
    parser.add_argument("--app-root", type=Path, default=ROOT)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    results = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
        for n in (int(s) for s in args.sizes.split(",")):
            with tempfile.TemporaryDirectory(prefix="bench-sessions-") as tmp:
                home = Path(tmp)
                fill(home, n)
                app = App(home, args.app_root.resolve())
                try:
                    results[n] = measure(browser, app, n, args.loads)
                finally:
                    app.close()
            print(f"{n} runs: {results[n]}", file=sys.stderr, flush=True)
        browser.close()
    rows = [
        [
            f"{n:,}",
            f"{r['first']:.2f}",
            f"{r['shown']:.2f}",
            f"{r['sidebar']:.2f}",
            "" if r["oldest"] is None else f"{r['oldest']:.2f}",
        ]
        for n, r in results.items()
    ]
    command = " ".join([".venv/bin/python benchmarks/bench_sessions.py", *sys.argv[1:]])
    body = "\n".join(
        [
            "## Sessions at scale (`bench_sessions.py`)",
            "",
            facts_block(command, machine_facts()),
            "",
            f"App from `{args.app_root}`; medians of {args.loads} page loads, seconds from navigation.",
            "",
            table(
                [
                    "runs stored",
                    "page load → first card",
                    "page load → page shown",
                    "sidebar link → first card",
                    "Oldest pressed → oldest run shown",
                ],
                rows,
            ),
            "",
        ]
    )
    publish(SECTION, body, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
