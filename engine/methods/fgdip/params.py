"""FGDIP parameters (Yan, Wu and Zhou: "Feedback-Guided Dynamic Interactive Planning", sections 3-5
and appendix A). The paper fixes k = 3 nodes per generation (A.3) and the three verdict tiers (A.4);
it gives no depth, node or backtrack limit, so those bound the search the way ReAct-style HotpotQA
agents are bounded (a handful of steps per trajectory)."""

from __future__ import annotations

from pydantic import Field

from engine.methods.base import MethodParams, relevance_floor_field


class FgdipParams(MethodParams):
    quick_profile = {
        "siblings": 2,
        "max_depth": 4,
        "max_nodes": 14,
        "max_backtracks": 2,
        "max_entities": 2,
        "search_results": 2,
        "observation_chars": 500,
    }

    siblings: int = Field(
        default=3,
        ge=1,
        le=5,
        description="k: how many sibling nodes the node generator proposes when a node is expanded (the paper "
        "uses k = 3).",
    )
    max_depth: int = Field(
        default=6,
        ge=2,
        le=10,
        description="Most steps on one branch, the entity's search included. A node at this depth must finish "
        "with an answer (the paper sets no limit; ReAct's HotpotQA agents stop after about 7 steps).",
    )
    max_nodes: int = Field(
        default=40,
        ge=3,
        le=200,
        description="Most entity and step nodes in the search tree; when only one more layer fits, that layer "
        "must answer.",
    )
    max_backtracks: int = Field(
        default=5,
        ge=0,
        le=50,
        description="How many times the search may leave a dead or rejected path for another one before it gives up.",
    )
    max_entities: int = Field(
        default=4,
        ge=1,
        le=8,
        description="Most key entities the Multivariate Information Extractor may give (one branch each).",
    )
    extractor: bool = Field(
        default=True,
        description="Multivariate Information Extractor: one first-layer branch per key entity of the question. "
        "Off (the paper's ablation), the node generator opens the question like any other node.",
    )
    step_evaluator: bool = Field(
        default=True,
        description="Step Evaluator: judge every new node sure / maybe / impossible, explore sure first, prune "
        "impossible. Off (the paper's ablation), nodes are explored in the order they were generated.",
    )
    answer_evaluator: bool = Field(
        default=True,
        description="Answer Evaluator and error analysis: check each candidate answer solves the question and "
        "is on topic; a rejected one is analysed, remembered and the search backtracks. Off (the paper's "
        "ablation), the first answer ends the search.",
    )
    yes_no: bool = Field(
        default=False,
        description="Yes/no mode (StrategyQA): the final answer is 'yes' or 'no'.",
    )
    search_results: int = Field(
        default=3,
        ge=1,
        le=10,
        description="Results per search; the first relevant one is the page a Lookup reads.",
    )
    relevance_floor: float = relevance_floor_field()
    read_pages: int = Field(
        default=1,
        ge=0,
        le=5,
        description="Web results only: how many of a search's results have their page fetched and read (up to "
        "20,000 characters each) instead of the search engine's snippet. The first is the page the search "
        "shows and Lookup searches, as ReAct's Wikipedia page; 0: snippets only.",
    )
    temperature: float = Field(
        default=0.7,
        ge=0.0,
        le=2.0,
        description="Sampling temperature of the node generator, so siblings can differ (the paper samples at 0.7).",
    )
    observation_chars: int = Field(
        default=800,
        ge=200,
        le=4000,
        description="How much of a retrieved page an observation keeps (characters).",
    )
