"""The judges' verdicts on a pair of compared runs.

The pairwise judges (engine/evaluate/judges.py: DEoT's five criteria and MTQA's, both orders) are
being built on another branch; until they are merged the Judge button stays disabled and says so,
rather than show a verdict nobody asked a judge for."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import streamlit as st

from engine.services import Services

JUDGES_PENDING = ("The pairwise judges (DEoT's five criteria, MTQA's) are not in this build yet: "
                  "the Judge button is disabled until they are merged.")


def judge_panel(services: Services, run_ids: Sequence[str]) -> None:
    st.subheader("Judges")
    titles = {}
    for run_id in run_ids:
        run = services.repo.get_run(run_id)
        titles[run_id] = f"{services.methods[run.method].title if run.method in services.methods else run.method}"
    pairs = list(combinations(run_ids, 2))
    cols = st.columns([4, 1], vertical_alignment="bottom")
    cols[0].selectbox("Pair", pairs, format_func=lambda p: f"{titles[p[0]]} vs {titles[p[1]]}", key="compare-pair")
    cols[1].button("Judge", key="compare-judge", disabled=True, help=JUDGES_PENDING)
    st.caption(JUDGES_PENDING)
