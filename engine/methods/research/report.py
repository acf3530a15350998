"""The final report, written from the stored chain without the model: the answer (with its run-wide
citation markers; `engine/report.py` adds the source list), then the citation check sentence by
sentence, then what the agent did. The report's data carries the run's search count, support rate
and citation error rate (`metrics`), which the evaluation harness reads into its table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.citations import number_citations
from engine.contract import ANSWER_NODE
from engine.methods.research.kinds import AnswerData, answer_of, search_of
from engine.reader_text import UNWRITTEN
from engine.safe_text import inline_text
from storage.models import Node, Source
from storage.statuses import NodeStatus

NOT_WRITTEN = "_The agent has not written its answer: resume the run (or press Rewrite report once it is done)._"
_VERDICT_WORDS = {
    "supported": "supported",
    "not_supported": "not in the source",
    "contradicted": "contradicted",
    "dangling": "points to no retrieved document",
    "invalid": "no valid verdict from the check",
}


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def citation_check_section(data: AnswerData, numbering: dict[int, int]) -> list[str]:
    """One line per (sentence, cited source): the sentence, the source's report number, the verdict
    and why. Sentences are plain text here (no stored markers), so a judge reading the report does
    not count them as citations again; `engine/report.py` sanitises the whole body."""
    removed = len(data.removed_markers)
    if not data.markers and not removed:
        return ["## Citation check", "", "The answer cites no document, so no citation was checked."]
    lines = [
        "## Citation check",
        "",
        f"Support rate {_percent(data.support_rate)} · unsupported citations "
        f"{_percent(data.citation_error_rate)} · {data.markers} citations checked · "
        f"{removed} bad markers removed",
        "",
    ]
    by_id = {sid: n for n, sid in numbering.items()}
    for check in data.checks:
        number = by_id.get(check.source_id)
        cited = f"[{number}]" if number is not None else "an unknown source"
        # The sentence is the model's answer and the reason the judge's: escaped, one line each, so
        # neither can start a heading (a second "Sources"), a list entry or a citation `[n]` of its own.
        reason = f": {inline_text(check.reason)}" if check.reason else ""
        lines.append(
            f"- Sentence {check.sentence} ({cited}, {_VERDICT_WORDS.get(check.status, check.status)})"
            f" — “{inline_text(check.text)}”{reason}"
        )
    for marker in data.removed_markers:
        # Escaped, not in a code span: a removed `[[S<id>]]` of a real source would still be read as a
        # citation inside one (the report numbers its markers before any Markdown is parsed).
        lines.append(f"- A bad marker was removed from the answer: {inline_text(marker)}")
    return lines


def report(
    answer: Node | None, searches: Sequence[Node], turns: Sequence[Node], sources: Sequence[Source], method: str
) -> tuple[str, str, dict[str, Any]]:
    """(the answer, our own sections after it, report data), in Markdown with run-wide citation
    markers: `RunGraph.save_report`'s text and `own`."""
    done = [s for s in searches if s.status == NodeStatus.DONE]
    data: dict[str, Any] = {
        "method": method,
        "search_count": len(done),
        "turns": len(turns),
        "queries": [search_of(s).query for s in done],
    }
    if answer is None or answer.status != NodeStatus.DONE or not (answer.content or "").strip():
        return NOT_WRITTEN, "", {**data, UNWRITTEN: True}
    info = answer_of(answer)
    numbering = number_citations(answer.content or "", {s.id for s in sources if s.id is not None}).numbering
    parts: list[str] = []
    if info.checked:
        parts.append("\n".join(citation_check_section(info, numbering)))
    parts.append(
        f"_The agent ran {len(done)} {'search' if len(done) == 1 else 'searches'} and "
        f"{len(turns)} reasoning {'turn' if len(turns) == 1 else 'turns'}._"
    )
    metrics = {
        "search_count": len(done),
        "support_rate": info.support_rate,
        "citation_error_rate": info.citation_error_rate,
        "removed_markers": len(info.removed_markers),
    }
    own = "".join(f"\n\n{part}" for part in parts)
    return (
        answer.content.strip(),
        own,
        {
            **data,
            ANSWER_NODE: answer.id,
            "metrics": metrics,
            "support_rate": info.support_rate,
            "citation_error_rate": info.citation_error_rate,
        },
    )
