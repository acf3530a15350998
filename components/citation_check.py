"""The Report page's citation check: every cited sentence of the run's report checked against the
source it cites (engine/evaluate/claims.py), with the support rate and the unsupported-citation rate.

The check is asked for (a button: it costs one judge call per cited source); its result is stored
as a judgment and shown again whenever the run is opened. Sentences, reasons and source titles are
model or web text: they go into a dataframe (plain text cells), never into HTML.
"""

from __future__ import annotations

import streamlit as st

from components import identity
from engine.citations import number_citations
from engine.evaluate.claims import PROTOCOL, ClaimSupportResult
from engine.evaluate.run_report import JudgeInputError
from engine.llm.protocol import LLMError
from engine.reads import Reads
from engine.safe_text import inline_text

_VERDICT_WORDS = {
    "supported": "supported",
    "not_supported": "not in the source",
    "contradicted": "contradicted",
    "dangling": "points to no source",
    "invalid": "the judge gave no valid verdict",
}


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _report_judged(reads: Reads, run_id: str, report_id: int | None, checked_at):
    """The report the check judged: by its id, or (a check stored before the id was kept) the final
    report that was the latest when the check was stored. None when it is not found."""
    finals = [r for r in reads.list_reports(run_id) if r.kind == "final"]
    if report_id is not None:
        return next((r for r in finals if r.id == report_id), None)
    finals = [r for r in finals if r.created_at <= checked_at]
    return finals[-1] if finals else None


def citation_check(services, run_id: str, llm_kind: str) -> None:
    with st.expander("Citation check: does each cited source say what the sentence claims?"):
        report = services.reads.latest_report(run_id)
        if report is None:
            st.caption("The run has no final report yet: finish or resume it first.")
            return
        # A check is stored with the run and spends the model: only the run's owner runs it.
        if identity.may_change(services, services.reads.get_run(run_id)) and st.button(
            "Check every cited sentence",
            key=f"check-citations-{run_id}",
            help="One judge call per cited source (THOUGHTMAP_MODEL_JUDGE_CLAIMS picks the model).",
        ):
            try:
                with st.spinner("Checking the citations against their sources..."):
                    services.check_citations(run_id, llm_kind)
            except (JudgeInputError, LLMError) as exc:
                # The message can carry the endpoint's own response text: shown as text, not Markdown.
                st.error(f"The check could not run: {inline_text(str(getattr(exc, 'user_message', exc)))}")
        stored = services.reads.judgments(run_id, PROTOCOL)
        if not stored:
            st.caption("Not checked yet.")
            return
        latest = stored[-1]
        result = ClaimSupportResult.model_validate(latest.verdict)
        cols = st.columns(4)
        cols[0].metric("Support rate", _percent(result.support_rate), help="Supported citations over those judged.")
        cols[1].metric(
            "Unsupported citations",
            _percent(result.citation_error_rate),
            help="Citations pointing nowhere, or to a source that does not say (or contradicts) the claim.",
        )
        cols[2].metric("Citations", result.markers)
        cols[3].metric("Judge calls", latest.calls)
        judged = _report_judged(services.reads, run_id, result.report_id, latest.created_at) or report
        if judged.id != report.id:
            # The report was written again after the check: its verdicts are of the earlier text,
            # numbered as that text numbered its sources.
            st.warning(
                f"This check was of an earlier version of the report (written {judged.created_at:%Y-%m-%d %H:%M});"
                " the report was written again since. Check again to judge the current one."
            )
        sources = {s.id: s for s in services.reads.list_sources(run_id)}
        numbers = {sid: n for n, sid in number_citations(judged.markdown, sources).numbering.items()}
        rows = [
            {
                "Sentence": check.text,
                "Source": f"[{numbers[c.source_id]}]" if c.source_id in numbers else "?",
                "Verdict": _VERDICT_WORDS[c.status],
                "Why": c.reason,
            }
            for check in result.sentences
            for c in check.citations
        ]
        st.dataframe(rows, hide_index=True, width="stretch")
        st.caption(f"Checked {latest.created_at:%Y-%m-%d %H:%M} with {latest.model or 'the run’s model'}.")
