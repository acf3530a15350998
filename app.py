"""Thoughtmap web app: routes to the pages; everything else lives in pages/ and components/."""

import streamlit as st

from components.app_state import get_services
from components.identity import gate, sidebar

# An emoji favicon is drawn by the page itself; a ":material/…" one is fetched from Google's font
# servers, which an offline machine cannot reach (a failed request on every page).
st.set_page_config(page_title="Thoughtmap", page_icon="🧠", layout="wide")

# Sign-in first (when `[auth]` is configured): nothing of any page is drawn for someone not signed in.
services = get_services()
sidebar(services, gate(services))

navigation = st.navigation(
    [
        st.Page("pages/explore.py", title="Explore", icon=":material/explore:", default=True),
        st.Page("pages/sessions.py", title="Sessions", icon=":material/history:"),
        st.Page("pages/report.py", title="Report", icon=":material/description:"),
        st.Page("pages/evaluate.py", title="Evaluate", icon=":material/analytics:"),
        st.Page("pages/compare.py", title="Compare", icon=":material/compare:"),
        st.Page("pages/settings.py", title="Settings", icon=":material/settings:"),
    ]
)
navigation.run()
