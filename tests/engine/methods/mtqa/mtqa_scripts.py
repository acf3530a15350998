"""Scripted fake-LLM answers for MTQA's tests: thoughts whose paragraphs say which cell wrote them
(so a test can see exactly which paragraphs were passed down), and summaries with a short answer."""

from __future__ import annotations

import re
import threading

from engine.llm.fake import FakeLLM, request_text
from engine.llm.protocol import ChatRequest

THOUGHT, SUMMARY, MERGE = "mtqa.thought", "mtqa.summary", "mtqa.merge"
SUMMARY_TEXT = "mtqa.summary_text"
_CELL = re.compile(r"You are thought (\d+) of \d+ in column (\d+)")
SHORT_ANSWER = "Arthur's Magazine"


def cell_of(request: ChatRequest) -> tuple[int, int]:
    """(row, column), 1-based, of the thought a request asks for."""
    row, column = _CELL.search(request_text(request)).groups()
    return int(row), int(column)


def paragraph(row: int, column: int, step: int) -> str:
    return f"Strategy r{row}c{column} step {step} reads the first unit [1]."


def labelled_thoughts(fake: FakeLLM, paragraphs: int = 5, before=None) -> FakeLLM:
    """Every thought answers `paragraphs` paragraphs naming its cell; `before(request)` runs first
    (a gate, a recorder)."""

    def respond(request: ChatRequest) -> dict:
        if before is not None:
            before(request)
        row, column = cell_of(request)
        return {"paragraphs": [paragraph(row, column, step) for step in range(1, paragraphs + 1)]}

    return fake.when(prompt=THOUGHT, respond=respond)


def summaries(fake: FakeLLM) -> FakeLLM:
    answer = {
        "checks": [{"thought": 1, "verdict": "corrected", "correction": "The date was wrong [1]."}],
        "paragraphs": ["Arthur's Magazine (1844) came before First for Women (1989) [1]."],
        "short_answer": SHORT_ANSWER + " [1]",
    }
    fake.when(prompt=SUMMARY, respond=answer)
    return fake.when(prompt=MERGE, respond={k: v for k, v in answer.items() if k != "checks"})


class Overlap:
    """Records how many thoughts are being answered at once (the most seen)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = 0
        self.most = 0

    def enter(self) -> None:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)

    def leave(self) -> None:
        with self._lock:
            self.now -= 1
