"""Every page runs through app.py's `st.navigation`, even when a deep link is the first request."""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner import get_script_run_ctx

APP = Path(__file__).resolve().parents[1] / "app.py"


def _run_alone() -> bool:
    """This script run is Streamlit's `pages/`-folder navigation (which lists app.py itself as a
    page), not app.py's: decided per run, so a session that started in that mode is caught even
    after another one has left it."""
    ctx = get_script_run_ctx()
    pages = ctx.pages_manager.get_pages().values() if ctx is not None else ()
    return any(Path(str(page.get("script_path", ""))).resolve() == APP for page in pages)


def through_the_app() -> None:
    """Called first by every page. Streamlit keeps a `pages/` folder's old mode (each file a page of
    its own, app.py never run: no wide layout, a sidebar of file names) until app.py's
    `st.navigation` has run once in the server. A bookmark opened first after a start
    (`/evaluate?benchmark=...`) ran its page that way, and so did every session after it until
    someone opened the home page. Here app.py runs instead, in this same script run (its navigation
    finds this page by its address, and the widgets' events of this run are not lost), then this
    run of the page alone stops. (Executed, not imported or run as __main__: nothing process-wide,
    such as sys.argv or another session's __main__, is touched.)"""
    if PagesManager.uses_pages_directory or _run_alone():
        PagesManager.uses_pages_directory = False  # the next sessions start in app.py's navigation
        exec(
            compile(APP.read_text(encoding="utf-8"), str(APP), "exec"),
            {"__name__": "thoughtmap_app", "__file__": str(APP)},
        )
        st.stop()
