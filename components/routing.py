"""Every page runs through app.py's `st.navigation`, even when a deep link is the first request."""

from __future__ import annotations

import runpy
from pathlib import Path

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager

APP = Path(__file__).resolve().parents[1] / "app.py"


def through_the_app() -> None:
    """Called first by every page. Streamlit keeps a `pages/` folder's old mode (each file a page of
    its own, app.py never run: no wide layout, a sidebar of file names) until app.py's
    `st.navigation` has run once in the server. A bookmark opened first after a start
    (`/evaluate?benchmark=...`) ran its page that way, and so did every session after it until
    someone opened the home page. Here app.py runs instead, in this same script run (its navigation
    finds this page by its address, and the widgets' events of this run are not lost), then this
    run of the page alone stops."""
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        runpy.run_path(str(APP), run_name="__main__")
        st.stop()
