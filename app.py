"""Thoughtmap web app: routes to the pages; everything else lives in pages/ and components/."""

import streamlit as st

st.set_page_config(page_title="Thoughtmap", page_icon="🧭", layout="wide")

navigation = st.navigation([
    st.Page("pages/explore.py", title="Explore", icon="🧭", default=True),
    st.Page("pages/sessions.py", title="Sessions", icon="🗂️"),
    st.Page("pages/report.py", title="Report", icon="📄"),
    st.Page("pages/settings.py", title="Settings", icon="⚙️"),
])
navigation.run()
