"""The research agent's cost formula: the calls `method.py` makes, counted along the path a run is
expected to take within its limits.

Per search: one summary (plus `citation_retries` more when its markers are bad) and, with the llm
reranker, one yes/no judgment per document found (K). Per agent turn: one call. Then the answer
(plus its retries) and, with `check_citations`, one claim-support call per cited source (per 8
sentences citing it).

Expected path (an assumption, no capable endpoint was measured here; the paper reports 1.03-1.20
searches by its agent besides the question's): the question's search, one search the agent asks
for, then the answer at the next turn (or at once when `max_searches` is used up); every marker
good at the first try; the answer cites four sources. The scripted fake (`--llm fake`) takes
exactly this path. The high end: every search and turn the limits allow, every text retried.
"""

from __future__ import annotations

from engine.methods.estimate import CostEstimate, Tally, capped_tokens
from engine.methods.research.params import ResearchParams

EXPECTED_AGENT_SEARCHES = 1
EXPECTED_CITED_SOURCES = 4
# Prompt tokens: the instructions plus the documents (characters / 4); the fake's texts on the
# bundled corpus; web pages fill `doc_chars` more often.
SUMMARY_BASE, AGENT_TOKENS, ANSWER_BASE, CHECK_TOKENS, JUDGE_TOKENS = 320, 700, 600, 700, 250
COMPLETION = {"summary": 300, "agent": 150, "check": 150}


def estimate(params: ResearchParams) -> CostEstimate:
    agent_searches = min(EXPECTED_AGENT_SEARCHES, params.max_searches, params.max_turns)
    # A turn follows each search while both limits leave room; the last one decides to answer.
    turns = agent_searches + int(agent_searches < params.max_searches and agent_searches < params.max_turns)
    searches = 1 + agent_searches
    doc_tokens = min(params.doc_chars, 1200) // 4
    checks = EXPECTED_CITED_SOURCES * params.check_citations
    rerank = params.reranker == "llm"

    tally = Tally()
    tally.add(
        "judge each document's relevance (llm reranker)",
        searches * params.search_top_k * rerank,
        prompt=JUDGE_TOKENS,
        completion=1,
    )
    tally.add(
        "summarise each search's documents",
        searches,
        prompt=SUMMARY_BASE + params.rerank_top_n * doc_tokens,
        completion=min(COMPLETION["summary"], params.summary_max_tokens),
    )
    tally.add("reason and decide whether to search again", turns, prompt=AGENT_TOKENS, completion=COMPLETION["agent"])
    tally.add(
        "write the long-form answer",
        1,
        prompt=ANSWER_BASE + 300 * searches,
        completion=min(capped_tokens(params.answer_max_tokens), 1500),
    )
    tally.add(
        "check each cited sentence against its source", checks, prompt=CHECK_TOKENS, completion=COMPLETION["check"]
    )

    retries = 1 + params.citation_retries
    most_searches = 1 + min(params.max_searches, params.max_turns)
    low = 1 + min(1, params.max_turns) + 1 + int(params.check_citations) + rerank * params.search_top_k
    high = (
        most_searches * (retries + rerank * params.search_top_k)
        + params.max_turns
        + retries
        + params.check_citations * most_searches * params.rerank_top_n
    )
    how = (
        f"{searches} searches (the question's and {agent_searches} by the agent) and {turns} turns, then the "
        f"answer and {checks} citation checks; up to {most_searches} searches and {params.max_turns} turns"
    )
    return tally.estimate(low=low, high=high, how=how)
