"""Issue 12's findings 3, 4, 5 and the small items of 11, each checked in Chromium at 1400×900 as
a person meets it: the Report page follows the run that is open, a double click on Start makes one
run, out-of-range parameters block Start with the reason, the corpus count follows an upload, an
uploaded file is cited by its name, Streamlit's own Deploy and Stop stay hidden, "1 run", and the
Report picker's date and id.

One app server serves the whole module (starting one costs seconds on this machine), so every test
makes the runs it needs with a question of its own and counts only those. A screenshot of each
test's decisive moment goes to test-artifacts/checks-<finding>.png."""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Error as PlaywrightError

from storage import Repository
from storage.models import RunStatus
from tests.e2e.conftest import (
    ARTIFACTS,
    StreamlitApp,
    app_idle,
    choose_option,
    download_report,
    home_repo,
    log_on_failure,
    metric,
    module_app,
    module_home,
    open_page,
    open_parameters,
    poll,
    type_number,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

VIEWPORT = {"width": 1400, "height": 900}
DIRECT = "Direct answer (baseline)"
RETRIEVE = "Retrieve and answer (baseline)"


@pytest.fixture(scope="module")
def checks_home(tmp_path_factory, bundled_corpus) -> Path:
    return module_home(tmp_path_factory, bundled_corpus, "checks")


@pytest.fixture(scope="module")
def checks_app(checks_home, tmp_path_factory):
    yield from module_app(checks_home, tmp_path_factory, "checks")


@pytest.fixture(autouse=True)
def _log_on_failure(checks_app, request):
    yield from log_on_failure(checks_app, request)


@pytest.fixture(scope="module")
def repo(checks_home):
    """The shared app's repository, read from the test process."""
    yield from home_repo(checks_home)


@pytest.fixture
def tab(page, checks_app):
    page.set_viewport_size(VIEWPORT)
    return page


def screenshot(page, finding: str, *, full_page: bool = True) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"checks-{finding}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


# ------------------------------------------------------------------ what a person does


def sidebar_link(page, name: str):
    return page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=name)


def new_research(page, app: StreamlitApp, question: str, method: str | None = None) -> None:
    """A fresh Explore page with the question typed (and a method picked)."""
    page.goto(app.url)
    page.get_by_label("Question").fill(question)
    if method is not None:
        choose_option(page, "Method", method)


def opened_run(page) -> str | None:
    match = re.search(r"[?&]run=([^&]+)", page.url)
    return match.group(1) if match else None


def start_run(page, app: StreamlitApp, question: str, method: str = DIRECT) -> str:
    """Start a run from Explore and wait until the page shows it; its id."""
    new_research(page, app, question, method)
    start = page.get_by_role("button", name="Start")

    def started() -> str | None:
        if (run_id := opened_run(page)) is not None:
            return run_id
        # A click that lands while the page reruns (after the question was typed) can be lost: the
        # page idle with no run open means it was. Start is idempotent for the same request.
        if app_idle(page):
            start.click()
        return None

    run_id = poll(page, started, what="the started run in the address")
    page.get_by_role("heading", name=question).first.wait_for()
    return run_id


def wait_finished(page, repo: Repository, run_id: str) -> None:
    poll(page, lambda: repo.get_run(run_id).status not in RunStatus.ACTIVE, timeout=120, what=f"run {run_id} to end")


def runs_asking(repo: Repository, question: str) -> list[str]:
    return [r.id for r in repo.list_runs(text=question)]


def report_picker(page) -> str:
    """The run the Report page's picker shows (its label: title · method · status · date · id)."""
    return page.get_by_role("combobox", name="Run", exact=True).input_value()


# ------------------------------------------------------------------ finding 3


def test_3_the_report_page_shows_the_run_open_in_explore(checks_app, tab, repo):
    page = tab
    older = start_run(page, checks_app, "Finding three: who painted the Mona Lisa?")
    wait_finished(page, repo, older)
    newer = start_run(page, checks_app, "Finding three: who built the Eiffel Tower?")
    wait_finished(page, repo, newer)
    assert repo.list_runs()[0].id == newer  # the newest run is not the one we open

    # The older run opened by its URL, then reloaded: only the query names it.
    page.goto(f"{checks_app.url}/?run={older}")
    page.reload()
    page.get_by_role("heading", name="Finding three: who painted the Mona Lisa?").first.wait_for()

    # "Open in the Report page" (in the run's Report section, open once the run is done).
    page.get_by_role("link", name="Open in the Report page").click()
    poll(page, lambda: report_picker(page).endswith(older), what="the Report page to show the open run")

    # The sidebar's Report link after another reload of the run's address.
    page.goto(f"{checks_app.url}/?run={older}")
    page.reload()
    page.get_by_role("heading", name="Finding three: who painted the Mona Lisa?").first.wait_for()
    open_page(page, "Report", page.get_by_role("combobox", name="Run", exact=True))
    poll(page, lambda: report_picker(page).endswith(older), what="the sidebar's Report page to show the open run")
    page.get_by_role("heading", name="Finding three: who painted the Mona Lisa?").first.wait_for()
    screenshot(page, "3")
    assert newer not in report_picker(page)


# ------------------------------------------------------------------ finding 4

COUNT_START_CLICKS = """() => {
  window.startClicks = 0;
  document.addEventListener('click', (e) => {
    if (e.target.closest('.st-key-start')) window.startClicks += 1;
  }, true);
}"""


def stable_box(page, locator) -> dict | None:
    """The element's box if it is the same half a second later (else None, to poll again)."""
    first = locator.bounding_box()
    page.wait_for_timeout(500)
    second = locator.bounding_box()
    return second if first and first == second else None


class SlowReplies:
    """The app's replies to the page held back while `held()` lasts, then delivered in order: a
    loaded server (or network), whose page still shows the Start button 150 ms after the first
    click, so the second click lands on it too. The page's own messages go through at once."""

    def __init__(self, page) -> None:
        self.holding = False
        self.queue: list = []
        page.route_web_socket(re.compile(r"/_stcore/stream$"), self._route)

    def _route(self, ws) -> None:
        server = ws.connect_to_server()
        ws.on_message(server.send)
        server.on_message(lambda message: self.queue.append((ws, message)) if self.holding else ws.send(message))

    def hold(self) -> None:
        self.holding = True

    def release(self) -> None:
        self.holding = False
        queue, self.queue = self.queue, []
        for ws, message in queue:
            ws.send(message)

    @contextmanager
    def held(self):
        self.hold()
        try:
            yield
        finally:
            self.release()


def test_4_a_double_click_on_start_makes_one_run(checks_app, tab, repo):
    page = tab
    slow = SlowReplies(page)
    question = "Finding four: why is the sky blue?"
    new_research(page, checks_app, question, DIRECT)
    start = page.locator(".st-key-start button")
    # Picking the method reruns the page and moves Start: aim once it has stopped moving.
    box = poll(page, lambda: stable_box(page, start), what="the Start button to stay in place")
    page.evaluate(COUNT_START_CLICKS)
    # Two clicks on the same spot, 150 ms apart, as a hurried person does.
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    with slow.held():
        page.mouse.click(x, y)
        page.wait_for_timeout(150)
        page.mouse.click(x, y)
        assert page.evaluate("window.startClicks") == 2, "both clicks reached the Start button"

    run_id = poll(page, lambda: opened_run(page), what="the started run in the address")
    page.get_by_role("heading", name=question).first.wait_for()
    wait_finished(page, repo, run_id)
    poll(page, lambda: metric(page, "Status") == "done", what="the page to show the run done")
    screenshot(page, "4")
    assert runs_asking(repo, question) == [run_id]
    assert opened_run(page) == run_id


# ------------------------------------------------------------------ finding 5


def test_5_out_of_range_parameters_block_start_with_the_reason(checks_app, tab, repo):
    page = tab
    question = "Finding five: how do tides work?"
    new_research(page, checks_app, question)  # the default method (DEoT)
    open_parameters(page)
    type_number(page, "Max layers", -5)
    type_number(page, "Max aspects", 999)
    page.get_by_role("button", name="Start").click()

    # Start's refusal (each field also says its own problem under it, as soon as it is entered).
    error = page.locator('[data-testid="stAlertContentError"]').filter(has_text="Could not start")
    error.first.wait_for()
    text = error.first.inner_text()
    screenshot(page, "5")
    # The message names each bad parameter by its label in the form, and what it may be.
    assert "Max layers is -5; allowed: 1 to 8" in text, text
    assert "Max aspects is 999; allowed: 1 to 8" in text, text
    assert runs_asking(repo, question) == []
    assert opened_run(page) is None


# ------------------------------------------------------------------ finding 11: small items


def corpus_count(page) -> int:
    text = page.get_by_text(re.compile(r"^[\d,]+ documents in [\d,]+ passages$")).inner_text()
    return int(text.split(" ")[0].replace(",", ""))


def upload(page, path: Path) -> None:
    """Add a file to the corpus on the Settings page."""
    page.get_by_role("button", name="Rebuild the index").wait_for()  # the page has rendered
    uploader = page.locator('[data-testid="stFileUploader"]')
    uploader.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(path))
    # The chip shows a long name shortened in the middle; its accessible name is the whole name.
    uploader.locator(f'[data-testid="stFileChip"][aria-label^="{path.name},"]').wait_for()
    page.get_by_role("button", name="Add to the corpus").click()
    page.locator('[data-testid="stAlertContentSuccess"]').filter(has_text="document(s) added").wait_for()


def test_11_the_corpus_count_follows_an_upload(checks_app, tab, tmp_path):
    page = tab
    page.goto(checks_app.url)
    sidebar_link(page, "Settings").click()
    before = poll(page, lambda: corpus_count(page), what="the corpus count")
    document = tmp_path / "finding-eleven-lighthouses.txt"
    document.write_text("Lighthouse keepers trimmed the lamp wicks every night along the coast.\n", encoding="utf-8")
    upload(page, document)
    poll(
        page,
        lambda: corpus_count(page) == before + 1,
        timeout=15,
        what=f"the corpus count to show {before + 1} without a reload",
    )
    screenshot(page, "11-corpus-count")


def test_11_an_uploaded_file_is_cited_by_its_name(checks_app, tab, repo, checks_home, tmp_path):
    page = tab
    name = "quokka-field-notes.md"
    document = tmp_path / name
    document.write_text(
        "Quokka field notes\n\nQuokkas on Rottnest Island shelter under dense shrubs "
        "at midday and forage for leaves at night.\n",
        encoding="utf-8",
    )
    page.goto(checks_app.url)
    sidebar_link(page, "Settings").click()
    upload(page, document)

    question = "Where do quokkas on Rottnest Island shelter at midday?"
    run_id = start_run(page, checks_app, question, RETRIEVE)
    wait_finished(page, repo, run_id)
    cited = [s for s in repo.list_sources(run_id) if name in (s.ref + s.title + (s.url or ""))]
    assert cited, [(s.title, s.ref, s.url) for s in repo.list_sources(run_id)]

    # The reader sees the file's name; the folder it was stored in on the server shows nowhere.
    report = download_report(page, tmp_path)
    sources = page.locator('[data-testid="stExpander"]').filter(has_text="All sources gathered by this run")
    sources.locator("summary").click()
    shown = sources.inner_text()
    screenshot(page, "11-file-name")
    assert name in shown and name in report
    server_folder = str(checks_home)
    assert server_folder not in shown and server_folder not in report and "file://" not in report
    assert server_folder not in page.locator("body").inner_text()


STREAMLIT_CONTROLS = '[data-testid="stStatusWidget"], [data-testid="stAppDeployButton"]'


def test_11_streamlit_deploy_and_stop_buttons_stay_hidden(checks_app, tab, repo):
    page = tab
    slow = SlowReplies(page)
    question = "Finding eleven: what shaped the coastline of Norway?"
    new_research(page, checks_app, question)  # DEoT at its defaults: a run that stays live a while
    page.get_by_role("button", name="Start").click()
    run_id = poll(page, lambda: opened_run(page), what="the started run in the address")
    poll(
        page,
        lambda: metric(page, "Status") == "running" and int(metric(page, "Nodes done").split(" / ")[1]) >= 3,
        timeout=60,
        what="the run to be live with a few nodes",
    )
    app_stop = page.locator(f".st-key-stop-{run_id} button").first  # a rerun may briefly keep a stale copy
    app_stop.wait_for()
    # Picking another node while the server is slow to answer (as on a loaded machine): after half
    # a second of waiting, Streamlit would put up its own "Stop" beside the app's.
    node_picker = page.get_by_role("combobox", name="Node", exact=True)
    second_node = page.get_by_role("option").nth(1)

    def node_list_open() -> bool:
        # A live run's rerun can close the list the click opened: open it again. Only when it is
        # closed: on a loaded machine a list can take longer than a poll to draw its options, and a
        # second click then closed it again.
        if node_picker.get_attribute("aria-expanded") != "true":
            node_picker.click(timeout=5_000)
        return second_node.is_visible()

    def picked_while_held() -> bool:
        # The list is opened while the replies still flow: opened while they were held, a rerun
        # half-delivered at the moment of holding could keep it from drawing its options at all (CI,
        # stop 56). Then the replies are held and the node picked. A rerun that closed the list in
        # between lets the replies go and tries again.
        poll(page, node_list_open, timeout=30, what="the Node list to open")
        slow.hold()
        try:
            second_node.click(timeout=3_000)
            return True
        except PlaywrightError:
            slow.release()
            return False

    try:
        poll(page, picked_while_held, timeout=90, what="a node picked while the replies are held")
        page.wait_for_timeout(1_500)
        screenshot(page, "11-streamlit-controls", full_page=False)  # the top bar is in the viewport
        assert page.locator(STREAMLIT_CONTROLS).count() == 0
        assert page.get_by_role("button", name="Deploy").count() == 0
        stops = page.get_by_role("button", name="Stop")
        assert (
            stops.count() >= 1
            and stops.count() == page.locator(f".st-key-stop-{run_id}").get_by_role("button", name="Stop").count()
        ), "every Stop button is the app's own"
    finally:
        slow.release()

    def stop_clicked() -> bool:
        # The replies held above now arrive together: the live run's reruns redraw the button while a
        # click waits for it (on a loaded machine, for the whole click timeout). Each try finds it anew.
        # The run may also have ended on its own meanwhile (its button then goes): nothing to stop.
        if repo.get_run(run_id).status not in RunStatus.ACTIVE:
            return True
        page.locator(f".st-key-stop-{run_id} button").first.click(timeout=5_000)
        return True

    poll(page, stop_clicked, timeout=60, what="the app's Stop to take the click")
    wait_finished(page, repo, run_id)


def test_11_sessions_says_1_run(checks_app, tab, repo):
    page = tab
    question = "Finding eleven: who discovered penicillin?"
    run_id = start_run(page, checks_app, question)
    wait_finished(page, repo, run_id)
    search = page.get_by_label("Search questions")
    open_page(page, "Sessions", search)
    search.fill("discovered penicillin")
    page.get_by_label("Search questions").press("Enter")
    caption = page.locator('[data-testid="stCaptionContainer"]').filter(has_text=re.compile(r"^\d+ runs?$"))
    poll(page, lambda: caption.inner_text() == "1 run", what="the Sessions count for one run")
    screenshot(page, "11-one-run")
    assert len(runs_asking(repo, "discovered penicillin")) == 1


def test_11_the_report_picker_shows_date_and_id(checks_app, tab, repo):
    page = tab
    for question in ("Finding eleven: what is a glacier?", "Finding eleven: what is a fjord?"):
        run_id = start_run(page, checks_app, question)
        wait_finished(page, repo, run_id)
    open_page(page, "Report", page.get_by_role("combobox", name="Run", exact=True))
    page.get_by_role("combobox", name="Run", exact=True).click()
    options = page.get_by_role("option")
    options.first.wait_for()
    labels = options.all_inner_texts()
    screenshot(page, "11-report-picker")
    page.keyboard.press("Escape")
    # Each label ends with its run's date and id (the list may draw only the options in view).
    runs = {run.id: run for run in repo.list_runs()}
    assert len(labels) >= 2 and labels[0].endswith(run_id), labels  # the newest first
    for label in labels:
        run = runs.get(label.rsplit(" · ", 1)[-1])
        assert run is not None and label.endswith(f"{run.created_at:%Y-%m-%d %H:%M} · {run.id}"), label


class HeldModelsEndpoint:
    """An OpenAI-compatible /v1/models on 127.0.0.1 that answers only when released: a slow endpoint
    whose wait the test controls, so it waits on what the page shows, not on a clock."""

    def __init__(self) -> None:
        import http.server
        import threading

        released = self.released = threading.Event()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
                released.wait(60)
                body = b'{"object": "list", "data": [{"id": "held-model", "object": "model"}]}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


def test_43_test_connection_says_it_is_connecting_while_it_waits(checks_app, tab):
    # Issue 43: seven seconds with no sign that anything was happening.
    page = tab
    endpoint = HeldModelsEndpoint()
    try:
        page.goto(checks_app.url)
        sidebar_link(page, "Settings").click()
        page.get_by_label("Base URL").fill(endpoint.url)
        page.get_by_label("Base URL").press("Enter")
        page.get_by_role("button", name="Test connection").click()
        spinner = page.locator('[data-testid="stSpinner"]').filter(has_text="Connecting to http://127.0.0.1:")
        spinner.wait_for()
        screenshot(page, "43-test-connection-spinner", full_page=False)
        endpoint.released.set()
        page.locator('[data-testid="stAlertContentSuccess"]').filter(has_text=f"Connected to {endpoint.url}").wait_for()
        assert not spinner.is_visible()
    finally:
        endpoint.close()
