"""Reports: each version kept; the latest final one is the run's report. (Mixed into `storage.repository.Repository`.)"""

from __future__ import annotations

from typing import Any

from sqlalchemy import update
from sqlmodel import col, select

from storage.models import (
    Report,
    Run,
)
from storage.repository_base import (
    RepositoryBase,
)


class ReportRows(RepositoryBase):
    def save_report(
        self, run_id: str, markdown: str, *, kind: str = "final", data: dict[str, Any] | None = None
    ) -> Report:
        """A new version of the run's report, with the run's version bump. (An executing run's
        reports go with its journal's batches instead: `RunJournal.add_report`.)"""
        report = Report(run_id=run_id, kind=kind, markdown=markdown, data=data or {})
        with self._session() as s:
            s.add(report)
            s.exec(update(Run).where(col(Run.id) == run_id).values(version=Run.version + 1))
            s.commit()  # id from the INSERT, the rest set here: no re-read
        return report

    def latest_report(self, run_id: str, kind: str = "final") -> Report | None:
        with self._session() as s:
            return s.exec(
                select(Report)
                .where(Report.run_id == run_id, Report.kind == kind)
                .order_by(col(Report.id).desc())
                .limit(1)
            ).first()

    def list_reports(self, run_id: str) -> list[Report]:
        with self._session() as s:
            return list(s.exec(select(Report).where(Report.run_id == run_id).order_by(col(Report.id))).all())
