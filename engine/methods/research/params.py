"""The research agent's parameters. Defaults from the paper's appendix C (table 4) and its agent
prompt: the search API's top K = 100, the reranker's top N = 10, up to 5 searches by the agent,
temperature 0.6, the summarizer's 8,192 and the agent's 20,480 output tokens. The paper sets no
limit on reasoning turns; `max_turns` bounds them (one more than the searches, for the answer)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from engine.methods.base import MethodParams, relevance_floor_field

RerankerChoice = Literal["auto", "builtin", "none", "bm25", "llm", "endpoint"]


class ResearchParams(MethodParams):
    quick_profile = {
        "search_top_k": 20,
        "rerank_top_n": 4,
        "read_pages": 4,
        "max_searches": 1,
        "max_turns": 2,
        "doc_chars": 600,
        "summary_max_tokens": 500,
        "answer_max_tokens": 900,
        "citation_retries": 1,
    }

    search_top_k: int = Field(
        default=100,
        ge=1,
        le=300,
        description="K: documents the search returns per query, before reranking (the paper: 100; 300 in its "
        "competition runs). The web returns fewer.",
    )
    rerank_top_n: int = Field(
        default=10,
        ge=1,
        le=50,
        description="N: the best reranked documents the summarizer reads per search (the paper: 10).",
    )
    read_pages: int = Field(
        default=10,
        ge=0,
        le=50,
        description="Web results only: how many of the reranked top N have their page fetched, its main text "
        "extracted and the passages that match the query kept (up to the document length below) for the "
        "summarizer, instead of the search engine's snippet (the paper's search returns whole documents). "
        "0: snippets only. Corpus documents are read whole anyway.",
    )
    reranker: RerankerChoice = Field(
        default="auto",
        description="What reranks the K documents: none (the search's own order: on the local corpus the hybrid "
        "search already fuses word match, the embedding model and the hops, and no built-in reranker measured better "
        "on every gold set); builtin (offline, fast: the search's order fused with the built-in embedding model's "
        "cosine order; better on single-hop questions, worse on multi-hop ones); bm25 (word match over the K documents: measured to rank worse than the search, kept for "
        "comparison); llm (the paper's pointwise yes/no judgment by the run's model, one call per document, scored "
        "by the probability of 'yes' when the endpoint returns logprobs); endpoint (the /rerank server set by "
        "THOUGHTMAP_RERANK_URL); auto: THOUGHTMAP_RERANKER's choice (the endpoint when one is configured, else "
        "none).",
    )
    max_searches: int = Field(
        default=5,
        ge=0,
        le=20,
        description="Most searches the agent may issue after the first one, which is the question itself (the "
        "paper's agent prompt allows 5).",
    )
    max_turns: int = Field(
        default=6,
        ge=1,
        le=30,
        description="Most reasoning turns of the agent; each turn decides whether to search again. When the "
        "limits are met the agent writes its answer.",
    )
    relevance_floor: float = relevance_floor_field()
    doc_chars: int = Field(
        default=1500,
        ge=200,
        le=20000,
        description="How much of each document the summarizer reads (characters).",
    )
    summary_max_tokens: int = Field(
        default=8192, ge=64, le=32000, description="Upper bound on a summary's length, in tokens (the paper: 8,192)."
    )
    answer_max_tokens: int = Field(
        default=20480,
        ge=128,
        le=64000,
        description="Upper bound on the final answer's length, in tokens (the paper: 20,480).",
    )
    temperature: float = Field(
        default=0.6,
        ge=0.0,
        le=2.0,
        description="Sampling temperature of the agent and the summarizer (the paper: 0.6).",
    )
    citation_retries: int = Field(
        default=2,
        ge=0,
        le=5,
        description="How many times a summary or the answer is written again when it cites a document that was "
        "not retrieved or writes a malformed marker; after that the bad markers are removed and flagged.",
    )
    check_citations: bool = Field(
        default=True,
        description="Check every cited sentence of the answer against the text of the source it cites "
        "(supported, not supported, contradicted): one call per cited source. Gives the run's support rate "
        "and unsupported-citation rate.",
    )
