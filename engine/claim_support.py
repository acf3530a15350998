"""Claim support, the citations layer that the research agent (at run time, on its own answer) and
the evaluation harness (`thoughtmap judge`, the benchmark's claims judge) share: every cited sentence
of a report checked against the text of the source it cites.

The stored report cites with `[[S<source id>]]` markers (engine/citations.py). It is split into
sentences that keep their markers (a marker written after the full stop belongs to the sentence
before it). Each (sentence, cited source) pair is one citation:

- a marker whose id is not one of the run's sources is **dangling** (no call is made);
- the others are judged **supported**, **not_supported** or **contradicted** by the source's text.

Calls are batched per source (at most `BATCH` sentences a call): the source's text is sent once for
all the sentences citing it, which is most of the tokens, while every sentence still gets its own
verdict field (one required field per sentence number, so the schema itself demands a verdict for
each and nothing else). A batch whose answer stays invalid after the bounded re-asks marks its
citations **invalid**: they are neither support nor error and are left out of both rates.

support rate = supported / checked (checked: citations with a valid verdict); unsupported-citation
rate (stored as `citation_error_rate`) = `citation_error_rate(markers, dangling, not_supported +
contradicted)` over the markers that were dangling or validly checked. Calls use the purpose
`judge_claims` (THOUGHTMAP_MODEL_JUDGE_CLAIMS, else THOUGHTMAP_MODEL_JUDGE, else THOUGHTMAP_MODEL). The
harness stores a result as a judgment with protocol `claim_support` (`engine/evaluate/claims.py`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any, Literal

from pydantic import BaseModel, Field, computed_field, create_model

from engine.citations import NOT_AN_ABBREVIATION, number_citations, strip_markers
from engine.llm.counted import EvalLLM
from engine.llm.protocol import StructuredOutputError
from engine.prompting import DATA_RULE, Prompt, quoted
from engine.safe_text import shown_text
from storage.models import Source


@dataclass(frozen=True)
class JudgedRun:
    run_id: str
    question: str
    report: str  # as stored: citations are `[[S<source id>]]` markers
    sources: dict[int, Source]
    model: str  # what the run ran on (the judged model, not the judge)
    report_id: int | None = None  # the stored report judged (None: a text not stored as a report)

    def answer_text(self) -> str:
        """The report as a reader sees it: markers rendered `[n]` by first appearance, markers of
        unknown sources removed (a judge compares answers, it does not check citations)."""
        return number_citations(self.report, self.sources).text.strip()


def citation_error_rate(markers: int, dangling: int, unsupported: int) -> float:
    """The unsupported-citation rate (stored as `citation_error_rate`): the share of citation
    markers that point nowhere (`dangling`) or to a source that does not say what the sentence
    claims (`unsupported`). A report without markers has made no citation error (0.0).

    Not the deep research paper's "citation error rate", which is per answer: the share of final
    answers with incorrectly formatted markers (seed 002, section 4). Ours is per citation and
    also counts a well-formed marker whose source does not support its sentence."""
    if markers < 0 or dangling < 0 or unsupported < 0 or dangling + unsupported > markers:
        raise ValueError(f"bad marker counts: {markers} markers, {dangling} dangling, {unsupported} unsupported")
    return (dangling + unsupported) / markers if markers else 0.0


CLAIM_SUPPORT = Prompt(
    name="judge.claim_support",
    system=(
        "You check citations. Each numbered sentence below cites the source shown. For each sentence, "
        "on its own, decide from the source's text alone (not from what you know) whether the source "
        "supports what the sentence claims (supported), does not say it (not_supported), or says the "
        "opposite (contradicted). A sentence supported only in part is not_supported. Give a short "
        "reason for each.\n\n" + DATA_RULE
    ),
    user=("$source\n\n$sentences\n\nGive one verdict for every sentence number listed: $numbers."),
)

CLAIMS_PURPOSE = "judge_claims"
PROTOCOL = "claim_support"
BATCH = 8  # sentences per call: more and small judges start to mix sentences up
SOURCE_CHARS = 8000  # of a source's text shown to the judge

_MARKER = re.compile(r"\[\[S(\d+)\]\]")
_LEADING_MARKERS = re.compile(r"^(?:\s*\[\[S\d+\]\])+")
# A sentence ends at . ! or ? followed by space, not at an initial's or a title's period (`citations`);
# a marker or a closing quote may sit in between.
_SENTENCE_END = re.compile(rf"(?<=[.!?]){NOT_AN_ABBREVIATION}(?:[\"')\]]*)\s+")
_LIST_OR_HEADING = re.compile(r"^\s*(?:#{1,6}\s+|[-*+]\s+|\d+[.)]\s+|>\s*)")

Verdict = Literal["supported", "not_supported", "contradicted"]
Status = Literal["supported", "not_supported", "contradicted", "dangling", "invalid"]


def split_sentences(report: str) -> list[str]:
    """The report's sentences, markers kept: each line (a paragraph, list item or heading) is split
    at sentence ends; markers that open a sentence are moved back to the one they follow."""
    sentences: list[str] = []
    for line in report.splitlines():
        line = _LIST_OR_HEADING.sub("", line).strip()
        if not line:
            continue
        for piece in _SENTENCE_END.split(line):
            piece = piece.strip()
            leading = _LEADING_MARKERS.match(piece)
            if leading and sentences:
                sentences[-1] += " " + leading.group(0).strip()
                piece = piece[leading.end() :].strip()
            if piece:
                sentences.append(piece)
    return sentences


class SentenceVerdict(BaseModel):
    verdict: Verdict = Field(description="supported, not_supported or contradicted, by the source's text alone.")
    reason: str = Field(min_length=1, description="Why, briefly: what the source says or does not say.")


@lru_cache(maxsize=512)
def _batch_model(numbers: tuple[int, ...]) -> type[BaseModel]:
    """One required verdict field per sentence number asked (`sentence_12`, ...)."""
    # Any: mypy would check a spread dict of fields against create_model's own keyword parameters too.
    fields: dict[str, Any] = {f"sentence_{n}": (SentenceVerdict, ...) for n in numbers}
    return create_model("ClaimChecks", **fields)


class CitationCheck(BaseModel):
    source_id: int
    status: Status
    reason: str = ""


class SentenceCheck(BaseModel):
    number: int
    text: str = Field(description="The sentence without its markers.")
    citations: list[CitationCheck]


class ClaimSupportResult(BaseModel):
    run_id: str
    # The report version judged: a check shown after the report was written again says it was of
    # an earlier one (None in checks stored before it was kept).
    report_id: int | None = None
    sentences: list[SentenceCheck] = Field(default_factory=list, description="The cited sentences.")
    markers: int = 0  # citations: distinct (sentence, source id) pairs
    supported: int = 0
    not_supported: int = 0
    contradicted: int = 0
    dangling: int = 0
    invalid: int = 0
    truncated_sources: list[int] = Field(default_factory=list, description="Shown to the judge cut to SOURCE_CHARS.")

    @computed_field  # type: ignore[prop-decorator]  # mypy cannot type a decorated property (mypy#1362)
    @property
    def checked(self) -> int:
        return self.supported + self.not_supported + self.contradicted

    @computed_field  # type: ignore[prop-decorator]  # mypy cannot type a decorated property (mypy#1362)
    @property
    def support_rate(self) -> float | None:
        return self.supported / self.checked if self.checked else None

    @computed_field  # type: ignore[prop-decorator]  # mypy cannot type a decorated property (mypy#1362)
    @property
    def citation_error_rate(self) -> float:
        return citation_error_rate(self.markers - self.invalid, self.dangling, self.not_supported + self.contradicted)


def _plain(sentence: str) -> str:
    """The sentence as the judge reads it: no markers, no space left before punctuation."""
    return re.sub(r"\s+([.,;:!?])", r"\1", " ".join(shown_text(strip_markers(sentence)).split()))


def cited_sentences(run: JudgedRun) -> list[SentenceCheck]:
    """The report's sentences that cite, each citation dangling or still to check ("invalid" until judged)."""
    found = []
    for number, sentence in enumerate(split_sentences(run.report), start=1):
        ids = list(dict.fromkeys(int(m) for m in _MARKER.findall(sentence)))
        if ids:
            found.append(
                SentenceCheck(
                    number=number,
                    text=_plain(sentence),
                    citations=[
                        CitationCheck(source_id=i, status="invalid" if i in run.sources else "dangling") for i in ids
                    ],
                )
            )
    return found


def check_claims(
    llm: EvalLLM, run: JudgedRun, parallel: Callable[[Sequence[Callable[[], None]]], object] | None = None
) -> ClaimSupportResult:
    """Each cited sentence judged against its source, one judge call per source (in batches of
    `BATCH` sentences). The calls are independent: `parallel` (a run's `ctx.parallel`) makes them
    together; without it they are made one after the other."""
    sentences = cited_sentences(run)
    result = ClaimSupportResult(run_id=run.run_id, report_id=run.report_id, sentences=sentences)
    by_source: dict[int, list[tuple[SentenceCheck, CitationCheck]]] = defaultdict(list)
    for sentence in sentences:
        for citation in sentence.citations:
            if citation.status != "dangling":
                by_source[citation.source_id].append((sentence, citation))
    calls: list[Callable[[], None]] = []
    for source_id, pairs in by_source.items():
        source = run.sources[source_id]
        text = (source.text or source.snippet or "").strip()
        if len(text) > SOURCE_CHARS:
            text = text[:SOURCE_CHARS]
            result.truncated_sources.append(source_id)
        shown = quoted("SOURCE", f"{source.title}\n{text}")
        for start in range(0, len(pairs), BATCH):
            # Each batch writes only its own pairs' verdicts.
            calls.append(partial(_judge_batch, llm, shown, pairs[start : start + BATCH]))
    if parallel is not None:
        parallel(calls)
    else:
        for call in calls:
            call()
    for sentence in sentences:
        for citation in sentence.citations:
            setattr(result, citation.status, getattr(result, citation.status) + 1)
            result.markers += 1
    return result


def _judge_batch(llm: EvalLLM, shown_source: str, pairs: list[tuple[SentenceCheck, CitationCheck]]) -> None:
    numbers = tuple(sentence.number for sentence, _ in pairs)
    listed = "\n\n".join(quoted(f"SENTENCE {sentence.number}", sentence.text) for sentence, _ in pairs)
    messages = CLAIM_SUPPORT.render(
        source=shown_source, sentences=listed, numbers=", ".join(f"sentence_{n}" for n in numbers)
    )
    try:
        answer = llm.ask(messages, _batch_model(numbers), purpose=CLAIMS_PURPOSE)
    except StructuredOutputError as exc:
        for _, citation in pairs:
            citation.reason = f"the judge's answer was invalid: {exc}"
        return
    for sentence, citation in pairs:
        verdict: SentenceVerdict = getattr(answer, f"sentence_{sentence.number}")
        citation.status, citation.reason = verdict.verdict, verdict.reason


__all__ = [
    "BATCH",
    "CLAIMS_PURPOSE",
    "CLAIM_SUPPORT",
    "PROTOCOL",
    "CitationCheck",
    "ClaimSupportResult",
    "JudgedRun",
    "SentenceCheck",
    "check_claims",
    "citation_error_rate",
    "cited_sentences",
    "split_sentences",
]
