"""Browser (end-to-end) fixtures: the Streamlit app as a subprocess on 127.0.0.1 and Debian's
Chromium driven by Playwright.

* ``app_home``: this test's THOUGHTMAP_HOME with the prebuilt bundled corpus copied in.
* ``streamlit_app``: a started `StreamlitApp` on ``app_home`` (stopped at teardown); it can be
  restarted on the same home (``.restart()``) to check what survives a server restart.
* ``page``: a Chromium page (downloads accepted) whose dialogs are recorded in ``page.dialogs``.
* ``shot(page, name)``: a full-page screenshot saved to ``test-artifacts/<test>-<name>.png``
  (a failing test also leaves ``<test>-FAILED.png`` and prints the end of the Streamlit log).
* ``app_repo``: the app's repository, opened from the test process.

Page helpers below read the Streamlit widgets as a person sees them, and read the mind map's nodes
through the test hook its frame exposes (`window.__thoughtmap`). They poll: the page reruns under
them.

Chromium comes from Debian (``/usr/bin/chromium``; scripts/test installs it); Playwright never
downloads a browser. Without it these tests are skipped, except under scripts/test
(``E2E_REQUIRE_CHROMIUM=1``), where its absence is an error.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.methods.registry import METHODS
from tests.support.progress_line import parse_progress

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = Path(os.environ.get("E2E_CHROMIUM") or "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Generous: a loaded 2-core CI machine runs pytest, the Streamlit server, its run threads and Chromium.
STARTUP_TIMEOUT_S = 90
UI_TIMEOUT_MS = 30_000


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class StreamlitApp:
    """`streamlit run app.py` on 127.0.0.1, offline (fake LLM unless `env` says otherwise, bundled
    corpus), logging to a file."""

    def __init__(
        self,
        home: Path,
        *,
        fake_latency: float = 0.15,
        log_dir: Path,
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
    ) -> None:
        self.home = home
        self.fake_latency = fake_latency
        # As in tests/conftest.py: the fake LLM and no built-in embedding model unless a test asks.
        self.extra_env = {"THOUGHTMAP_LLM": "fake", "THOUGHTMAP_BUILTIN_EMBEDDINGS": "0", **(env or {})}
        self.log_dir = log_dir
        self.args = list(args or [])  # more `streamlit run` options (a secrets file for sign-in)
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "THOUGHTMAP_"))}
        env.update(THOUGHTMAP_HOME=str(self.home), THOUGHTMAP_FAKE_LATENCY=str(self.fake_latency), PYTHONUNBUFFERED="1")
        env.update(self.extra_env)
        self.starts += 1
        self.log_path = self.log_dir / f"streamlit-{self.starts}.log"
        streamlit = Path(sys.executable).with_name("streamlit")
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [
                    str(streamlit),
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
                    "--server.fileWatcherType",
                    "none",
                    *self.args,
                ],
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._wait_healthy()

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"streamlit exited with {self.process.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=5) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.25)
        raise RuntimeError(f"streamlit did not answer on {self.url} within {STARTUP_TIMEOUT_S} s:\n{self.log()}")

    def stop(self) -> None:
        if self.process is None:
            return
        process, self.process = self.process, None
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=20)

    def restart(self) -> None:
        """Stop the server and start a new one on the same home (and port)."""
        self.stop()
        self.start()

    def log(self) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")[-4000:]
        except (AttributeError, OSError):
            return ""


def _failed(request) -> bool:
    report = getattr(request.node, "rep_call", None)
    return report is None or report.failed


def _artifact_name(request) -> str:
    return re.sub(r"\W+", "-", request.node.name).strip("-")


@pytest.fixture
def app_home(prebuilt_corpus_home) -> Path:
    return prebuilt_corpus_home


def serving(app: StreamlitApp, request):
    """Start `app` and yield it; stop it afterwards, printing the end of its log when the test
    failed (the body of an app fixture: `yield from serving(StreamlitApp(...), request)`)."""
    try:
        app.start()
        yield app
    finally:
        app.stop()
        if _failed(request):
            print(f"--- end of the Streamlit log ({app.log_path}) ---\n{app.log()}")


def serving_fake_llm(fake, home: Path, log_dir: Path, request, *, latency_s: float = 0.1):
    """Start the app on an OpenAI-compatible endpoint that is `fake` (a `FakeLLM` scripted by prompt
    name in the test process, served by `FakeOpenAIServer`), so the app's own run threads call it;
    the body of an app fixture: `yield from serving_fake_llm(fake, app_home, tmp_path, request)`."""
    from engine.llm.fake_server import FakeOpenAIServer

    with FakeOpenAIServer(fake, latency_s=latency_s) as server:
        app = StreamlitApp(
            home,
            log_dir=log_dir,
            env={"THOUGHTMAP_LLM": "openai", "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test"},
        )
        yield from serving(app, request)


@pytest.fixture
def streamlit_app(app_home, tmp_path, request):
    yield from serving(StreamlitApp(app_home, log_dir=tmp_path), request)


@pytest.fixture(scope="session")
def chromium():
    if not CHROMIUM.exists():
        message = f"Chromium is not installed at {CHROMIUM} (scripts/test installs Debian's chromium)"
        if os.environ.get("E2E_REQUIRE_CHROMIUM") == "1":
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(chromium, request):
    context = chromium.new_context(accept_downloads=True, viewport={"width": 1500, "height": 1100})
    context.set_default_timeout(UI_TIMEOUT_MS)
    page = context.new_page()
    page.dialogs = []

    def on_dialog(dialog) -> None:
        page.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    # Requests the page sends past this machine (the app runs offline: there should be none).
    page.outside_requests = []

    def on_request(req) -> None:
        parts = urllib.parse.urlsplit(req.url)
        if parts.scheme in ("http", "https", "ws", "wss") and parts.hostname not in ("127.0.0.1", "localhost", "::1"):
            page.outside_requests.append(req.url)

    page.on("request", on_request)
    try:
        yield page
    finally:
        if _failed(request):
            ARTIFACTS.mkdir(exist_ok=True)
            try:
                page.screenshot(path=str(ARTIFACTS / f"{_artifact_name(request)}-FAILED.png"), full_page=True)
            except Exception as exc:  # noqa: BLE001 - best effort; the failure itself is reported
                print(f"no failure screenshot: {exc}")
        context.close()


@pytest.fixture
def shot(request) -> Callable:
    ARTIFACTS.mkdir(exist_ok=True)
    test = _artifact_name(request)

    def take(page, name: str) -> Path:
        path = ARTIFACTS / f"{test}-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


@pytest.fixture
def app_repo(app_home):
    """The app's repository, read from the test process (the same SQLite file in app_home)."""
    from engine.config import load_settings
    from storage import Repository, open_database

    db = open_database(load_settings().database_url)
    try:
        yield Repository(db)
    finally:
        db.dispose()


# ------------------------------------------------------------------ one app for a whole module
# Starting an app server costs seconds on this machine: a module whose tests each make runs of their
# own (with a question of their own, counted apart) shares one, on a home of its own.


def module_home(tmp_path_factory, bundled_corpus, name: str) -> Path:
    """A THOUGHTMAP_HOME for one module's app, holding a copy of the bundled corpus index."""
    home = tmp_path_factory.mktemp(f"{name}-home")
    bundled_corpus.store.backup_to(home / "corpus.sqlite3")
    return home


def module_app(home: Path, tmp_path_factory, name: str):
    """Start one app on `home` for a module and stop it after (the body of a module fixture:
    `yield from module_app(home, tmp_path_factory, "checks")`)."""
    app = StreamlitApp(home, log_dir=tmp_path_factory.mktemp(f"{name}-logs"))
    try:
        app.start()
        yield app
    finally:
        app.stop()


def home_repo(home: Path):
    """The repository of the app on `home`, read from the test process (the body of a fixture)."""
    from engine.config import load_settings
    from storage import Repository, open_database

    db = open_database(load_settings({"THOUGHTMAP_HOME": str(home)}).database_url)
    try:
        yield Repository(db)
    finally:
        db.dispose()


def log_on_failure(app: StreamlitApp, request):
    """After a test of a shared app: the end of its log when the test failed (the body of an
    autouse fixture: `yield from log_on_failure(app, request)`)."""
    yield
    if _failed(request):
        print(f"--- end of the Streamlit log ({app.log_path}) ---\n{app.log()}")


# ------------------------------------------------------------------ page helpers

MAP_IFRAME = "iframe[title='components.mindmap.thoughtmap_map']"


def rgb(colour: str) -> tuple[int, int, int]:
    """(r, g, b) of "#rrggbb" (as declared) or "rgb(r, g, b)"/"rgba(r, g, b, a)" (as vis paints a node
    with an opacity)."""
    if colour.startswith("#"):
        return tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
    channels = re.fullmatch(r"rgba?\((\d+),\s*(\d+),\s*(\d+)(?:,\s*[\d.]+)?\)", colour.strip())
    if channels is None:
        raise ValueError(f"not a colour the map paints: {colour!r}")
    return tuple(int(c) for c in channels.groups())


# The map's fill colours for DEoT nodes, as DEoT declares them (a variant per engine): the question,
# a breadth aspect, a depth follow-up.
_DEOT_FILLS = {v.value: v.colour for v in METHODS["deot"].contract().node_kinds["question"].variants}
ROOT_FILL, BREADTH_FILL, DEPTH_FILL = (rgb(_DEOT_FILLS[e]) for e in ("root", "breadth", "depth"))


def map_frame(page):
    return page.frame_locator(MAP_IFRAME)


# The map's window, reached from the page: Streamlit may replace the map's iframe while the page
# reruns (an element above it appearing or going), leaving two for a moment or one still loading;
# the last one whose vis Network is up is the map. Reading it this way never waits on a loading frame.
_MAP_HOOK_JS = """(arg) => {
  const [what, nth] = Array.isArray(arg) ? arg : [arg, -1];
  const hook = [...document.querySelectorAll("iframe[title='components.mindmap.thoughtmap_map']")]
    .map((f) => { try { return f.contentWindow.__thoughtmap; } catch (e) { return null; } })
    .filter((h) => h && h.network).at(nth);
  if (!hook) return what === "nodes" ? [] : {nodes: [], map: {}};
  return what === "nodes" ? hook.nodes() : {nodes: hook.nodes(), map: hook.map()};
}"""


def map_nodes(page, nth: int | None = None) -> list[dict]:
    """Every node of the map as the frame draws it (`window.__thoughtmap.nodes()` in
    components/mindmap_frontend/map.js): id, number, fill, border, hidden, selected, centre (x, y in
    the canvas's CSS pixels), inView (the centre), wholeInView (the shape and its label), fontPx.
    Empty while no map is up. `nth`: which of several maps on the page (Compare), the last by default."""
    return page.evaluate(_MAP_HOOK_JS, "nodes") if nth is None else page.evaluate(_MAP_HOOK_JS, ["nodes", nth])


def poll(page, check, *, timeout: float = 60, interval: float = 0.25, what: str = "condition"):
    """Call `check` until it returns something truthy; return that (or fail after `timeout` s).
    Waits with the page's clock: Playwright's sync API handles browser events only inside its calls."""
    deadline = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < deadline:
        try:
            value = check()
        except Exception as exc:  # noqa: BLE001 - the page reruns under us (detached elements...): try again
            last_error = exc
            value = None
        if value:
            return value
        page.wait_for_timeout(interval * 1000)
    raise AssertionError(
        f"timed out after {timeout} s waiting for {what}" + (f" (last error: {last_error})" if last_error else "")
    )


def choose_method(page, title: str) -> None:
    """Choose the method titled `title` in Explore's Method selectbox."""
    method = page.get_by_role("combobox", name="Method", exact=True)

    def choose():
        # The page may rerun under the open list (the question box commits when it loses focus): retry.
        if method.input_value() == title:
            return True
        if method.get_attribute("aria-expanded") != "true":
            method.click(timeout=3_000)
        page.get_by_role("option", name=title).click(timeout=3_000)
        return method.input_value() == title

    poll(page, choose, timeout=60, what=f"the method '{title}' to be chosen")


def metric(page, label: str) -> str:
    """A field of the run's one-line progress header ("Status", "Nodes done", "Tokens", "Cost",
    "active", "wall"), as shown."""
    text = page.locator(".st-key-run-progress").inner_text(timeout=5_000)
    fields = parse_progress(text)
    if fields is None:
        raise AssertionError(f"not a progress line: {text!r}")
    return fields[label]


def nodes_done(page) -> tuple[int, int]:
    """The "Nodes done" metric, "x / y": finished nodes and nodes in the tree."""
    done, total = re.fullmatch(r"(\d+) / (\d+)", metric(page, "Nodes done")).groups()
    return int(done), int(total)


def panel_node(page) -> int:
    """The stored id of the node the node panel shows (its header reads "Node #2 · question · layer 1
    · done", the node's number in its run; the id is in the header container's key class)."""
    header = page.locator('[class*="st-key-node-panel-"]').first
    classes = header.get_attribute("class", timeout=5_000) or ""
    return int(re.search(r"st-key-node-panel-(\d+)", classes).group(1))


def node_selectbox(page):
    """The Node selectbox (a combobox whose input holds the selected option's label)."""
    return page.get_by_role("combobox", name="Node", exact=True)


def open_node_list(page) -> None:
    page.locator('[data-testid="stSelectbox"]').filter(has=node_selectbox(page)).get_by_role(
        "button", name="Open"
    ).click()


def node_options(page) -> list[str]:
    """The labels the Node selectbox offers (opens and closes its list; a rerun may close it first)."""

    def read():
        if node_selectbox(page).get_attribute("aria-expanded") != "true":
            open_node_list(page)
        options = page.get_by_role("option")
        options.first.wait_for(timeout=3_000)
        return options.all_inner_texts()

    labels = poll(page, read, timeout=30, what="the Node options")
    page.keyboard.press("Escape")
    return labels


def choose_node(page, number: int) -> None:
    """Choose the node numbered `number` in its run (engine/node_numbers.py) in the Node selectbox."""

    def choose():
        if node_selectbox(page).get_attribute("aria-expanded") != "true":
            open_node_list(page)
        page.get_by_role("option").filter(has_text=re.compile(rf"^#{number} ")).click(timeout=3_000)
        return True

    poll(page, choose, timeout=30, what=f"node #{number} in the Node selectbox")


def _dots(page) -> list[dict]:
    """Every visible (not collapsed) node of the map, as the canvas helpers use it: id, fill (r, g, b)
    as drawn, centre (x, y), size (w, h, pixels), inView, selected, and the canvas's size. Nodes and the
    canvas are read in one call, so a dot always matches its canvas."""
    drawn = page.evaluate(_MAP_HOOK_JS, "map")
    size = drawn["map"]
    return [
        {
            "id": n["id"],
            "fill": rgb(n["fill"]),
            "x": n["x"],
            "y": n["y"],
            "w": n["size"],
            "h": n["size"],
            "pixels": n["size"] ** 2,
            "inView": n["inView"],
            "selected": n["selected"],
            "canvasWidth": size.get("width"),
            "canvasHeight": size.get("height"),
        }
        for n in drawn["nodes"]
        if not n["hidden"]
    ]


def map_dots(page, colour) -> list[dict]:
    """The nodes in view filled with `colour` (r, g, b), as `_dots` describes them. Compare dots of
    two reads by id: the map may have moved between them."""
    return [d for d in _dots(page) if d["fill"] == tuple(colour) and d["inView"]]


def all_dots(page) -> list[dict]:
    """Every DEoT node drawn on the map (in view or not: a readable scale may leave some outside)."""
    fills = {ROOT_FILL, BREADTH_FILL, DEPTH_FILL}
    return [d for d in _dots(page) if d["fill"] in fills]


def settled_map(page, *, timeout: float = 60) -> list[dict]:
    """The map's nodes once two samples half a second apart agree (the map redraws after reruns)."""
    previous: list = []

    def check():
        nonlocal previous
        dots = all_dots(page)
        key = sorted((round(d["x"]), round(d["y"])) for d in dots)
        stable = dots and key == previous
        previous = key
        return stable and dots

    return poll(page, check, timeout=timeout, interval=0.5, what="the map to settle")


def well_inside(dot: dict, margin: float = 30) -> bool:
    return (
        margin < dot["x"] < dot["canvasWidth"] - margin
        and margin < dot["y"] < dot["canvasHeight"] - 90
        and dot["w"] > 8
        and dot["h"] > 8
    )


def download_report(page, tmp_path: Path) -> str:
    """Open the Report page from the sidebar and download the Markdown report; its text."""
    open_page(page, "Report", page.get_by_role("button", name="Download Markdown"))
    with page.expect_download() as download_info:
        page.get_by_role("button", name="Download Markdown").click()
    path = tmp_path / "report.md"
    download_info.value.save_as(path)
    return path.read_text(encoding="utf-8")


def assert_citations_resolve(report: str) -> set[int]:
    """The report cites inline, and every [n] is listed under Sources (numbered 1..N in order)."""
    body, sep, sources = report.partition("\n## Sources\n")
    assert sep, "the report has a Sources section"
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", body)}
    listed = [int(n) for n in re.findall(r"^\[(\d+)\] ", sources, flags=re.MULTILINE)]
    assert cited, "the report cites sources"
    assert sorted(listed) == listed and set(listed) == cited, (cited, listed)
    assert listed == list(range(1, len(listed) + 1))
    return cited


def choose_option(page, label: str, option: str) -> None:
    """Pick `option` in the selectbox labelled `label`, as a person does with a long list: type it,
    then take it. (Clicking an option far down an open list failed with "element is not stable"
    while the list was still settling.)"""
    box = page.get_by_role("combobox", name=label, exact=True)

    def choose():
        # A click that lands while the page reruns can leave the list closed: open it again, as
        # choose_node does, instead of waiting 30 s for an option that is not there.
        if box.get_attribute("aria-expanded") != "true":
            box.click()
        box.fill("")
        page.keyboard.type(option)
        page.get_by_role("option", name=option, exact=True).click(timeout=3_000)
        return True

    poll(page, choose, timeout=30, what=f"'{option}' in the {label} list")


def open_parameters(page) -> None:
    """Open Explore's Parameters expander (the method's generated parameter form). A click that lands
    while the page reruns can be lost (the expander stays shut): clicked again, once the page is idle,
    until it is open."""
    summary = page.locator('[data-testid="stExpander"] summary').filter(has_text="Parameters")

    def opened() -> bool:
        if summary.first.evaluate("s => s.parentElement.open"):
            return True
        if app_idle(page):
            summary.first.click()
        return False

    poll(page, opened, what="the Parameters expander to open")


APP_IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'


def app_idle(page) -> bool:
    """The page's script is not running (Streamlit marks its root with the script's state)."""
    return page.locator(APP_IDLE).count() > 0


def open_page(page, name: str, landmark, *, timeout: float = 60) -> None:
    """Follow the sidebar's link to page `name` until `landmark` (a locator of that page) shows.
    A click that lands while the page reruns (a run's last redraw, a live map's tick) can be lost
    on a loaded machine: the Report page's picker never came after its link was clicked once. So
    the link is clicked again, only while the page is idle and not there yet."""
    link = page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=name)

    def there() -> bool:
        if landmark.first.is_visible():
            return True
        if app_idle(page):
            link.click(timeout=5_000)
        return False

    poll(page, there, timeout=timeout, interval=1, what=f"the {name} page")


def type_number(page, label: str, value: float, *, leave: str = "Enter") -> None:
    """Type into a number box and leave it (Streamlit takes the value on Enter or Tab), until the
    page holds it. Typed while an earlier box's rerun is landing, the box is drawn again from the
    app's state and the text typed is gone: a benchmark started with no budget when three boxes
    were typed in a row on a busy machine. So: typed when the page is idle, and again if lost."""
    box = page.get_by_label(label, exact=True)
    text = str(value)

    def shows_value() -> bool:  # as a number: the box may format it ("0.50" for 0.5)
        try:
            return float(box.input_value(timeout=2_000)) == float(value)
        except ValueError:  # empty, or text that is no number
            return False

    def held() -> bool:
        if not app_idle(page):
            return False
        if not shows_value():
            box.fill(text)
            box.press(leave)
            return False  # looked at again once its own rerun has had its turn
        return True

    poll(page, held, what=f"the {label!r} box to hold {text}")


def click_map_node(page, node_id: int) -> None:
    """Click a node on the map, as a reader does: at its centre (from the map's test hook), once
    the page is idle and the node has stayed where it is for half a second. The map is drawn again
    after every rerun (a tab switched, a panel opened): a position read before it moved clicks
    empty canvas."""
    previous = None

    def still() -> dict | None:
        nonlocal previous
        node = next((n for n in map_nodes(page) if n["id"] == str(node_id)), None)
        spot = node and (round(node["x"]), round(node["y"]))
        steady = node is not None and node["inView"] and spot == previous and app_idle(page)
        previous = spot
        return node if steady else None

    node = poll(page, still, interval=0.5, what=f"node {node_id} to stay in view on the map")
    frame = page.locator(MAP_IFRAME).last.bounding_box()
    # The canvas sits under the frame's toolbar: the hook's centres are in the canvas's pixels.
    top = page.frame_locator(MAP_IFRAME).last.locator("#map").evaluate("(el) => el.getBoundingClientRect().top")
    page.mouse.click(frame["x"] + node["x"], frame["y"] + node["y"] + top)


def node_panel_column(page):
    """The node panel's column (the one with the Node selectbox)."""
    return (
        page.locator('[data-testid="stColumn"]').filter(has=page.get_by_role("combobox", name="Node", exact=True)).last
    )


# Every edge as vis draws it (ends, colour, dashes, hidden), from the map's Network (the frame's test hook).
_EDGES_JS = """() => {
  const net = window.__thoughtmap.network;
  return Object.values(net.body.edges).map((e) => ({
    from: String(e.fromId), to: String(e.toId), colour: e.options.color.color,
    dashes: Boolean(e.options.dashes), hidden: Boolean(e.options.hidden)}));
}"""

# Pixels of a colour ("#rrggbb") on the map's canvas, within a tolerance per channel.
_PIXELS_JS = """(body, colour) => {
  const canvas = document.querySelector('#map canvas');
  const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  const [R, G, B] = [1, 3, 5].map(i => parseInt(colour.slice(i, i + 2), 16));
  let n = 0;
  for (let i = 0; i < data.length; i += 4)
    if (Math.abs(data[i] - R) < 20 && Math.abs(data[i + 1] - G) < 20 && Math.abs(data[i + 2] - B) < 20) n++;
  return n;
}"""


def map_edges(page) -> list[dict]:
    """Every edge of the map as vis draws it: from and to (node ids), colour, dashes, hidden."""
    return map_frame(page).locator("body").evaluate(_EDGES_JS)


def canvas_pixels(page, colour: str) -> int:
    """How many pixels of the map's canvas are painted in `colour` ("#rrggbb", give or take 20 per channel)."""
    return map_frame(page).locator("body").evaluate(_PIXELS_JS, colour)
