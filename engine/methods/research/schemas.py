"""The research agent's structured output: one reasoning turn. Summaries and the answer are prose
(their citation markers are checked in code, `markers.py`). Everything here is model text: stored
and shown, never executed."""

from __future__ import annotations

from pydantic import BaseModel, Field


class AgentTurn(BaseModel):
    """One turn of the agent: its reasoning, whether it needs another search, and the query."""

    reasoning: str = Field(
        description="What the findings establish, what is still missing or unclear, and why "
        "another search is or is not needed."
    )
    need_more_search: bool = Field(description="true to run another search before answering; false to answer now.")
    next_query: str = Field(
        default="",
        max_length=300,
        description="The next search query when need_more_search is true: specific, new, a few words; empty otherwise.",
    )
