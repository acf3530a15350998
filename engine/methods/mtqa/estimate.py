"""MTQA's cost formula: the calls `method.py` makes for one question.

Per question: one keywords call (the knowledge layer's), one extraction call per chunk of the
question's documents (the knowledge layer's; a bundled-corpus passage is far below the 1,200-token
chunk, so one chunk per document kept by the relevance floor), then one call per thought (m·n) and
one per column summary (n). Retrievals are not LLM calls.

How many of the `documents` retrieved pass the relevance floor is a property of the question and the
corpus, not of the parameters: the expected share is an assumption (`KEPT_SHARE`), the low end keeps
one document, the high end all of them plus a re-ask of every structured answer.
"""

from __future__ import annotations

from engine.llm.structured import DEFAULT_MAX_REASKS
from engine.methods.estimate import CostEstimate, Tally
from engine.methods.mtqa.params import MtqaParams

# Share of the retrieved documents kept by the relevance floor: an assumption from the bundled
# corpus, where a multi-hop question's top documents share its words (the contract suite's question
# keeps all 10 and 5 of 5; a question with fewer matches keeps fewer).
KEPT_SHARE = 0.8
# Prompt tokens: instructions, plus each knowledge unit shown (its triples and up to `unit_chars`
# characters of source text), plus the thoughts a summary reads; chars / 4.
THOUGHT_BASE, SUMMARY_BASE, KEYWORDS_PROMPT, EXTRACTION_BASE = 330, 300, 250, 600
TRIPLES_PER_UNIT_TOKENS = 40
# Completion tokens: capped outputs are assumed to fill this share of their cap.
FILL = 0.6
KEYWORDS_COMPLETION, EXTRACTION_COMPLETION = 60, 400


def estimate(params: MtqaParams) -> CostEstimate:
    m, n = params.rows, params.columns
    documents = max(1, round(params.documents * KEPT_SHARE))
    unit_tokens = (0 if params.no_source_text else params.unit_chars // 4) + (
        0 if params.no_triples else TRIPLES_PER_UNIT_TOKENS
    )
    units = params.units * unit_tokens
    thought = round(FILL * params.thought_tokens)
    summary = round(FILL * params.summary_tokens)
    passed = round(thought * sum(sum(row) for row in params.weights()) / max(1, (m - 1) * max(1, n - 1)))

    # Collection scope reads a graph `thoughtmap kg build` made (accounted there): no extraction.
    extracting = params.scope == "question"
    tally = Tally()
    if extracting:
        tally.add(
            "extract entities and relations from each chunk",
            documents,
            prompt=EXTRACTION_BASE + 300,
            completion=EXTRACTION_COMPLETION,
        )
    tally.add("the question's keywords", 1, prompt=KEYWORDS_PROMPT, completion=KEYWORDS_COMPLETION)
    tally.add(
        "think each cell of the matrix",
        m * n,
        prompt=THOUGHT_BASE + units + passed + (summary if n > 1 else 0),
        completion=thought,
    )
    tally.add(
        "summarise and correct each column",
        n,
        prompt=SUMMARY_BASE + (0 if params.no_correction else units) + m * thought,
        completion=summary,
    )
    low = (1 if extracting else 0) + 1 + m * n + n
    high = (1 + (params.documents if extracting else 0) + m * n + n) * (1 + DEFAULT_MAX_REASKS)
    how = f"{m} × {n} thoughts and {n} summaries (one call each), the question's keywords, and " + (
        f"about {documents} extraction calls for the documents kept of {params.documents}"
        if extracting
        else "no extraction (the collection's graph is built once, by `thoughtmap kg build`)"
    )
    return tally.estimate(low=low, high=high, how=how)
