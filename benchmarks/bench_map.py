"""The mind map at 50, 200 and 500 nodes (issue 43): how long a run's map takes to open and to take
one live update, and where the map starts on a 1440×900 page; before and after a change to the map.

A script, not a test: it measures and prints, it never asserts on time.

    .venv/bin/python benchmarks/bench_map.py [--app-root DIR]      # one checkout (default this one)
    git archive 14a9ba5 | (mkdir -p /tmp/map-before && tar -x -C /tmp/map-before)
    .venv/bin/python benchmarks/bench_map.py --before-root /tmp/map-before --write

With `--before-root`, the app is started from that checkout first ("before"), then from this one
("after"), each on its own fresh THOUGHTMAP_HOME and trees, in the same sitting, so both see the
same machine. The trees, app launcher, browser hooks and the live-update measurement are
`bench_ui.py`'s (breadth-3 DEoT trees of HotpotQA questions written through the `Repository`, the
run marked running so the page polls); what this script adds:

* **open**: navigation → the end of the first canvas frame drawn while the map's vis Network holds
  all N nodes (the map is there), and → the last canvas frame of the load (it has settled: Streamlit
  sends the frame several render messages while a page loads), with the main-thread long tasks
  (> 50 ms, time the page does not answer input) summed over that span;
* **update**: one node added while the page is open, from the render message reaching the map's
  frame to vis's last redraw for it (`bench_ui.bench_updates`);
* **map top**: the map frame's top edge on the Explore page of an open run at 1440×900, px.
"""

from __future__ import annotations

import argparse
import random
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import facts_block, machine_facts, publish, table  # noqa: E402
from benchmarks.bench_ui import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    App,
    Tree,
    View,
    add_size_args,
    bench_updates,
    chromium_missing,
    f0,
    med,
    parse_sizes,
    question_pool,
    wait_for,
)

SECTION = "bench_map"
TOP_VIEWPORT = {"width": 1440, "height": 900}
SETTLE_S = 6.0  # a load's canvas frames are collected this long after the map is first drawn

# Added to bench_ui's init script (which opens a record per canvas frame at `clearRect`): each frame
# also records how many nodes the map's vis Network holds, and ends at its last text as well as at
# its last arc (a frame may draw labels after the last dot).
FRAME_NODES_JS = r"""
(() => {
  const P = CanvasRenderingContext2D.prototype;
  const clearRect = P.clearRect, fillText = P.fillText;
  const last = () => window.__tm && window.__tm.frames[window.__tm.frames.length - 1];
  P.clearRect = function (...a) {
    const result = clearRect.apply(this, a);
    const frame = last(), hook = window.__thoughtmap;
    if (frame) frame.n = hook && hook.network ? hook.network.body.nodeIndices.length : 0;
    return result;
  };
  P.fillText = function (...a) {
    const frame = last();
    if (frame) frame.end = window.__tm.now();
    return fillText.apply(this, a);
  };
})();
"""

FRAMES_JS = (
    "(() => { const w = [...document.querySelectorAll(\"iframe[title='components.mindmap.thoughtmap_map']\")]"
    ".map(f => f.contentWindow).filter(w => { try { return w.__tm && w.__thoughtmap && w.__thoughtmap.network; }"
    " catch (e) { return false; } }).pop(); return w ? w.__tm.frames : []; })()"
)


@dataclass
class Opened:
    drawn_ms: float
    settled_ms: float
    longtask_ms: float


def open_map(browser, app: App, tree: Tree) -> Opened:
    n = len(tree)
    view = View(browser, app, tree.id, extra_init=FRAME_NODES_JS)
    try:

        def full_frames() -> list[dict]:
            return [f for f in view.page.evaluate(FRAMES_JS) if f.get("n", 0) >= n and f.get("end")]

        wait_for(full_frames, 120, 0.05, f"the map of {n} nodes drawn")
        time.sleep(SETTLE_S)
        frames, nav = full_frames(), view.nav
        drawn, settled = min(f["end"] for f in frames), max(f["end"] for f in frames)
        tasks = view.page_state()["longtasks"]
        return Opened(drawn - nav, settled - nav, sum(d for t, d in tasks if nav <= t <= settled))
    finally:
        view.close()


def map_top(browser, app: App, tree: Tree) -> float:
    """The map frame's top edge (px from the top of the page) on the Explore page at 1440×900."""
    context = browser.new_context(viewport=TOP_VIEWPORT)
    try:
        page = context.new_page()
        page.goto(f"{app.url}/?run={tree.id}")
        frame = page.locator("iframe[title='components.mindmap.thoughtmap_map']").last
        frame.wait_for(timeout=120_000)
        page.wait_for_timeout(3000)  # the first reruns settle (notices, progress line)
        return frame.bounding_box()["y"]
    finally:
        context.close()


@dataclass
class Measured:
    root: Path
    opened: dict[int, list[Opened]]
    updates: dict[int, tuple[float, float, float]]  # render message → last redraw, of it in vis, server
    top: float


def measure(browser_factory, root: Path, sizes: Sequence[int], loads: int, updates: int, seed: int) -> Measured:
    """Start the app from `root` on a fresh home with fresh trees and measure it."""
    import os

    tmp = Path(tempfile.mkdtemp(prefix="thoughtmap-bench-map-"))
    saved = os.environ.get("THOUGHTMAP_HOME")
    app = services = None
    try:
        home = tmp / "home"
        home.mkdir()
        os.environ["THOUGHTMAP_HOME"] = str(home)
        from engine.config import load_settings
        from engine.services import build_services

        services = build_services(load_settings())
        services.searcher("local")  # the bundled index, built before the app starts
        owner = f"{socket.gethostname()}:{os.getpid()}:bench"
        pool = question_pool()
        trees = {n: Tree(services.repo, f"A research question grown to {n} nodes", owner, pool) for n in sizes}
        for n, tree in trees.items():
            tree.grow_to(n)
        print(f"[{root}] starting the app...", file=sys.stderr)
        app = App(home, root)
        browser = browser_factory()
        try:
            warm = View(browser, app, trees[sizes[0]].id)  # the first load imports the app's pages
            wait_for(lambda: warm.network_nodes() == sizes[0], 120, 0.1, "the warm-up page")
            warm.close()
            top = map_top(browser, app, trees[sizes[0]])
            opened = {}
            for n in sizes:
                print(f"[{root}] opening {n} nodes...", file=sys.stderr)
                opened[n] = [open_map(browser, app, trees[n]) for _ in range(loads)]
            rng = random.Random(seed)
            live = {}
            for n in sizes:
                print(f"[{root}] live updates at {n} nodes...", file=sys.stderr)
                samples = bench_updates(browser, app, trees[n], updates, rng).samples
                live[n] = (
                    med([s.msg_to_draw_ms for s in samples]),
                    med([s.vis_ms for s in samples]),
                    med([s.server_ms for s in samples]),
                )
        finally:
            browser.close()
        return Measured(root, opened, live, top)
    finally:
        if app is not None:
            app.close(failed=sys.exc_info()[0] is not None)
        if services is not None:
            services.close()
        shutil.rmtree(tmp, ignore_errors=True)
        if saved is None:
            os.environ.pop("THOUGHTMAP_HOME", None)
        else:
            os.environ["THOUGHTMAP_HOME"] = saved


def render(results: list[tuple[str, Measured]], loads: int, updates: int) -> str:
    rows = []
    for label, m in results:
        for n, samples in m.opened.items():
            live = m.updates[n]
            rows.append(
                [
                    label,
                    n,
                    f0(med([s.drawn_ms for s in samples])),
                    f0(med([s.settled_ms for s in samples])),
                    f0(med([s.longtask_ms for s in samples])),
                    f0(live[0]),
                    f0(live[1]),
                    f0(live[2]),
                ]
            )
    out = [
        table(
            [
                "code",
                "nodes",
                "open: map drawn ms",
                "open: settled ms",
                "open: long tasks ms",
                "update: render message → last redraw ms",
                "of which in vis DataSet ops ms",
                "update: server fragment run ms",
            ],
            rows,
        )
    ]
    out.append(
        f"\nMedians of {loads} page loads and {updates} live updates per size. Map top on the Explore "
        "page of an open run at 1440×900: " + ", ".join(f"{label} {m.top:.0f} px" for label, m in results) + ".\n"
    )
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--write", action="store_true", help="replace this section in docs/benchmarks.md")
    parser.add_argument("--before-root", type=Path, help="a checkout of the older code, measured first")
    parser.add_argument(
        "--app-root",
        type=Path,
        default=ROOT,
        help='the checkout measured ("after" with --before-root; default this one)',
    )
    add_size_args(parser, updates=6)
    args, sizes, command = parse_sizes(parser, argv, "bench_map.py")
    if chromium_missing():
        return 2
    from playwright.sync_api import sync_playwright

    facts = machine_facts()
    after = "after" if args.before_root else "this checkout" if args.app_root.resolve() == ROOT else str(args.app_root)
    roots = ([("before", args.before_root.resolve())] if args.before_root else []) + [(after, args.app_root.resolve())]
    results = []
    with sync_playwright() as pw:

        def browser():
            return pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)

        for label, root in roots:
            results.append((label, measure(browser, root, sizes, args.loads, args.updates, args.seed)))
    body = (
        "## The mind map at 50-500 nodes (`bench_map.py`)\n\n"
        + facts_block(command, facts)
        + (
            "Browser: Debian's Chromium, headless, through Playwright, viewport 1400×1000; the app (`streamlit run "
            "app.py`, offline fake LLM, SQLite) on the same machine"
            + (f", “before” started from `{args.before_root}`" if args.before_root else "")
            + ".\n\n"
        )
        + render(results, args.loads, args.updates)
    )
    publish(SECTION, body, args.write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
