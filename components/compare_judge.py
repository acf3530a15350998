"""The judges' verdicts on a pair of compared runs: pick a pair and a protocol (DEoT's five criteria
or MTQA's), press Judge, read each criterion's verdict in both orders with the judge's reasons.
Verdicts are stored (judgments), so a reopened comparison shows the last one. The judge's reasons are
model text: they are shown only in st.dataframe cells."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import pandas as pd
import streamlit as st

from components.app_state import active_llm, start_local_model
from engine.evaluate.compare import JudgeInputError, judge_compared, latest_verdict
from engine.evaluate.judges import PAIRWISE_PROTOCOLS, PairwiseResult, get_protocol
from engine.llm.protocol import LLMError
from engine.reads import RunStatus
from engine.safe_text import inline_text
from engine.services import Services

_ORDER = {"ab": "A shown first", "ba": "B shown first"}

# Words first; the variables only as where to change it (issue 43: the caption was the variables).
JUDGE_NOTE = (
    "A verdict that flips with the order is a tie. The judge is the run's own model unless another "
    "is set for judging pairs (environment variable THOUGHTMAP_MODEL_JUDGE_PAIRWISE, or "
    "THOUGHTMAP_MODEL_JUDGE for every judge)."
)


def judge_panel(services: Services, run_ids: Sequence[str]) -> None:
    st.subheader("Judges")
    runs = {run_id: services.reads.get_run(run_id) for run_id in run_ids}
    titles = {
        run_id: (services.methods[r.method].title if r.method in services.methods else r.method)
        for run_id, r in runs.items()
    }
    cols = st.columns([3, 3, 1], vertical_alignment="bottom")
    pair = cols[0].selectbox(
        "Pair (A vs B)",
        list(combinations(run_ids, 2)),
        key="compare-pair",
        format_func=lambda p: f"{titles[p[0]]} vs {titles[p[1]]}",
    )
    # A protocol from the paper of a method compared here starts chosen (MTQA vs FGDIP: MTQA's win
    # rate, not DEoT's open-ended criteria); the first one otherwise.
    names = list(PAIRWISE_PROTOCOLS)
    own = [runs[r].method for r in run_ids if runs[r].method in PAIRWISE_PROTOCOLS]
    protocol = cols[1].selectbox(
        "Protocol",
        names,
        index=names.index(own[0]) if own else 0,
        key="compare-protocol",
        format_func=lambda n: PAIRWISE_PROTOCOLS[n].title,
    )
    unfinished = [titles[r] for r in pair if runs[r].status in RunStatus.ACTIVE]
    pressed = cols[2].button(
        "Judge",
        key="compare-judge",
        disabled=bool(unfinished),
        help="Asks the judge model twice, once in each order (A first, then B first).",
    )
    if unfinished:
        st.caption(f"Judge when {' and '.join(unfinished)} {'has' if len(unfinished) == 1 else 'have'} finished.")
    if pressed:
        kind = active_llm(services)
        if kind == "local" and not start_local_model(services):
            return
        try:
            with st.spinner("The judge is comparing the two reports, in both orders…"):
                judge_compared(services, pair[0], pair[1], protocol=protocol, llm_kind=kind)
        except JudgeInputError as exc:
            st.error(inline_text(str(exc)))
        except LLMError as exc:
            st.error(
                inline_text(
                    f"The judge could not answer: {exc.user_message}. Check the model in Settings, "
                    "then press Judge again."
                )
            )
    found = latest_verdict(services, pair[0], pair[1], protocol=protocol)
    if found is None:
        st.caption("No verdict for this pair and protocol yet.")
        return
    _verdict(*found, titles={"a": titles[pair[0]], "b": titles[pair[1]], "tie": "tie"}, protocol=protocol)


def _verdict(result: PairwiseResult, row, *, titles: dict[str, str], protocol: str) -> None:
    spec = get_protocol(protocol)
    st.caption(
        inline_text(
            f"{spec.title} · judge {row.model} · {row.calls} calls · "
            f"{row.prompt_tokens + row.completion_tokens:,} tokens · ${row.cost:.4f}"
        )
    )
    if not result.valid:
        errors = "; ".join(f"{_ORDER[r.order]}: {r.error}" for r in result.rounds if not r.valid)
        st.warning(
            inline_text(
                f"The judge's answers stayed invalid ({errors}), so this comparison counts for no "
                "one. Use a stronger judge model (THOUGHTMAP_MODEL_JUDGE_PAIRWISE)."
            )
        )
        return
    records = []
    for criterion in spec.criteria:
        record = {"Criterion": criterion.title, "Verdict": titles[result.criteria[criterion.key].winner]}
        for round_ in result.rounds:
            verdict = round_.criteria[criterion.key]
            record[_ORDER[round_.order]] = titles[verdict.winner]
            record[f"Why ({_ORDER[round_.order]})"] = verdict.reason
        records.append(record)
    st.dataframe(
        pd.DataFrame(records),
        hide_index=True,
        key="compare-verdict",
        column_config={c: st.column_config.TextColumn(width="large") for c in records[0] if c.startswith("Why")},
    )
    st.caption(JUDGE_NOTE)
