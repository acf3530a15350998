"""Evaluation metrics: pure functions of predictions, gold data and stored traces (no LLM, no I/O)."""

from __future__ import annotations


def citation_error_rate(markers: int, dangling: int, unsupported: int) -> float:
    """The deep research paper's citation error rate: the share of citation markers that point
    nowhere (`dangling`) or to a source that does not say what the sentence claims
    (`unsupported`). A report without markers has made no citation error (0.0)."""
    if markers < 0 or dangling < 0 or unsupported < 0 or dangling + unsupported > markers:
        raise ValueError(f"bad marker counts: {markers} markers, {dangling} dangling, {unsupported} unsupported")
    return (dangling + unsupported) / markers if markers else 0.0
