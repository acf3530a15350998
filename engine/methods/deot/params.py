"""DEoT parameters, with the paper's defaults (arXiv 2504.07872, sections 3.3-3.5)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from engine.methods.base import MethodParams, read_pages_field, relevance_floor_field

TOOL_NAMES = ("news_search", "info_search", "event_extractor", "history_analyzer", "direct_reasoning")


class DeotParams(MethodParams):
    quick_profile = {
        "max_nodes": 5,
        "root_breadth": True,
        "optimize_query": False,
        "validate_results": False,
        "validate_plans": False,
        "llm_planner": False,
        "max_plan_attempts": 1,
        "search_results": 3,
        "event_extractor": False,
        "history_analyzer": False,
        "direct_reasoning": False,
        "summary_words": 120,
        "tool_max_tokens": 250,
        "report_max_tokens": 700,
        "attribute_citations": True,
    }

    max_layers: int = Field(
        default=3,
        ge=1,
        le=8,
        description="Maximum layer depth, counting your question as layer 1 (as the paper and its authors' "
        "code do): 3 means your question plus two levels of follow-up questions; 1 answers your question only.",
    )
    max_nodes: int = Field(
        default=15,
        ge=1,
        le=200,
        description="Maximum number of question nodes in the tree, the user's question included.",
    )
    max_aspects: int = Field(
        default=3,
        ge=1,
        le=8,
        description="How many distinct aspects the Breadth Engine proposes per expansion (the paper uses 3).",
    )
    paper_engines: bool = Field(
        default=False,
        description="The paper's Engine Controller and Breadth Engine: the controller chooses only BREADTH or "
        "DEPTH (the branch ends at the layer or node limit), an unusable controller answer defaults to BREADTH, "
        "and the Breadth Engine is asked for exactly max_aspects aspects. Off (ours): the controller may also "
        "answer STOP when a branch is answered well enough, an unusable answer stops that branch, and the "
        "Breadth Engine gives at most max_aspects distinct aspects.",
    )
    root_breadth: bool = Field(
        default=False,
        description="Open your question with the breadth engine instead of asking the Engine Controller "
        "(the paper asks the controller for every node, which nearly always answers BREADTH at the first "
        "layer; on a small model this saves a call and never ends a run at its root).",
    )
    optimize_query: bool = Field(
        default=True,
        description="Base Prompter: refine the user's question first (temporal context, clearer terms, "
        "standard entity names).",
    )
    validate_results: bool = Field(
        default=True,
        description="Result Validation: fact-check each node's task results and summary; a summary found "
        "INVALID is written again with the fact check's issues as feedback.",
    )
    max_summary_attempts: int = Field(
        default=3,
        ge=1,
        le=5,
        description="Result Validation: how many summaries a node may write while the fact check finds "
        "factual errors (the first included; the authors' code allows 3).",
    )
    invalid_summary: Literal["flag", "drop"] = Field(
        default="flag",
        description="What happens to a node whose last summary the fact check still finds INVALID: flag keeps "
        "it with the issues shown beside it (and given to the report writer); drop fails the node, so its "
        "summary reaches neither the tree's growth nor the report (the authors' code).",
    )
    llm_planner: bool = Field(
        default=True,
        description="Planner: the LLM decomposes each node's query into 1-3 tool tasks (the paper). Off, each "
        "node runs one search of its own query with Information Search: a call less per node, for small models.",
    )
    validate_plans: bool = Field(
        default=True,
        description="Plan Validation: an LLM validator checks each plan for completeness and redundancy "
        "(the format is always checked in code).",
    )
    max_plan_attempts: int = Field(
        default=3,
        ge=1,
        le=6,
        description="How many times the Planner may produce a plan for a node when Plan Validation "
        "rejects it (the first plan included).",
    )
    search_results: int = Field(
        default=5,
        ge=1,
        le=5,
        description="Most articles or passages one search task may return (the paper caps news search at 5).",
    )
    relevance_floor: float = relevance_floor_field()
    read_pages: int = read_pages_field(5)  # the paper's search agents answer from the articles
    news_search: bool = Field(
        default=True,
        description="Toolbox: News Search agent (a short dated answer "
        "with its sources, written from a search; web search first when the run's search "
        "includes the web, else the run's search).",
    )
    info_search: bool = Field(
        default=True,
        description="Toolbox: Information Search agent (a short dated "
        "answer with its sources, written from the run's search).",
    )
    event_extractor: bool = Field(
        default=True, description="Toolbox: Event Extractor (what, who, when, where, consequences, figures)."
    )
    history_analyzer: bool = Field(
        default=True, description="Toolbox: History Analyzer (historical parallels and their outcomes)."
    )
    direct_reasoning: bool = Field(
        default=True, description="Toolbox: Direct Reasoning (logical analysis and inference)."
    )
    summary_words: int = Field(
        default=300,
        ge=80,
        le=1500,
        description="Word limit of each node's structured summary (the paper's executor uses 300).",
    )
    tool_max_tokens: int = Field(
        default=700,
        ge=100,
        le=4000,
        description="Upper bound on each tool's answer, in tokens (Information Search stays within 500).",
    )
    attribute_citations: bool = Field(
        default=False,
        description="Add a citation [n] to sentences that cite nothing but are clearly drawn from source n "
        "(most of their words are in it). For small models that forget to cite; counted apart in the node data.",
    )
    report_max_tokens: int = Field(
        default=2500,
        ge=200,
        le=16000,
        description="Upper bound on the length of the final report, in tokens.",
    )

    @model_validator(mode="after")
    def _at_least_one_tool(self) -> DeotParams:
        if not self.enabled_tools():
            raise ValueError(
                "switch on at least one tool (news_search, info_search, event_extractor, "
                "history_analyzer or direct_reasoning)"
            )
        return self

    def enabled_tools(self) -> list[str]:
        return [name for name in TOOL_NAMES if getattr(self, name)]
