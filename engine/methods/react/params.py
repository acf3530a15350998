"""ReAct's parameters, with the defaults of its HotpotQA setting (Yao et al., 2022: at most 7 steps)."""

from __future__ import annotations

from pydantic import Field

from engine.methods.base import (
    MethodParams,
    read_pages_field,
    relevance_floor_field,
    yes_no_field,
)


class ReactParams(MethodParams):
    quick_profile = {"max_steps": 4, "top_k": 2}

    max_steps: int = Field(
        default=7,
        ge=2,
        le=30,
        description="Thought-action-observation steps before the answer must be given (ReAct's HotpotQA "
        "setting: 7). The last one may only finish.",
    )
    top_k: int = Field(default=3, ge=1, le=20, description="Passages each Search action returns as its observation.")
    observation_chars: int = Field(
        default=600,
        ge=100,
        le=4000,
        description="Characters of each passage shown in an observation (ReAct shows a page's first sentences).",
    )
    relevance_floor: float = relevance_floor_field()
    read_pages: int = read_pages_field(3)
    yes_no: bool = yes_no_field()
