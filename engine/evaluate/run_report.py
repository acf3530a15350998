"""A stored run as the judges read it: its question, its final report (stored with `[[S<id>]]`
markers) and its sources by id. Read through the Repository: judges never talk SQL."""

from __future__ import annotations

from engine.claim_support import JudgedRun
from engine.graph import PARTIAL_REPORT
from storage.repository import Repository
from storage.statuses import RunStatus


class JudgeInputError(ValueError):
    """A run that cannot be judged (no final report yet): says what to do."""


def load_judged_run(repo: Repository, run_id: str) -> JudgedRun:
    """The run (an id or a unique prefix) with its latest final report; JudgeInputError without one."""
    run = repo.find_run(run_id)
    report = repo.latest_report(run.id)
    if report is None or not report.markdown.strip():
        raise JudgeInputError(
            f"run {run.id} has no final report to judge (status {run.status}). "
            f"Finish it first: thoughtmap resume {run.id}"
        )
    if report.data.get(PARTIAL_REPORT) and run.status != RunStatus.DONE:
        raise JudgeInputError(
            f"run {run.id} stopped before its end ({run.stop_reason or run.status}): its report is "
            f"partial. Finish it first: thoughtmap resume {run.id}"
        )
    sources = {source.id: source for source in repo.list_sources(run.id) if source.id is not None}
    return JudgedRun(
        run_id=run.id,
        question=run.question,
        report=report.markdown,
        sources=sources,
        model=str(run.llm_info.get("model", "")),
        report_id=report.id,
    )


__all__ = ["JudgeInputError", "JudgedRun", "load_judged_run"]
