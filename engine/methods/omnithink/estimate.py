"""OmniThink's cost formula: the calls `method.py` makes, counted within the bounds the parameters set.

The information tree grows a layer per step up to depth K (`max_depth`): each layer's new nodes are
reflected into the pool in one call, then every leaf above depth K is asked whether and how to
expand (one call each) and gets up to k (`subnodes`) subtopics. Then the outline (a draft and a
polish: two calls), one call per section, and one polish of the article.

The expected shape is the full tree (every leaf expanded into k subtopics, the pool never judged
"sufficient" early) with `max_sections` sections: the bound a capable model usually reaches. A model
that stops expanding early or writes fewer sections makes fewer calls (the low end). The scripted
fake (`--llm fake`) grows the full tree but writes 3 sections (its filler's default list length),
which the test's ±30 % absorbs.
"""

from __future__ import annotations

from engine.methods.estimate import CostEstimate, Tally, words_to_tokens
from engine.methods.omnithink.params import OmniThinkParams

# Prompt tokens, measured on the scripted fake's default run over the bundled corpus
# (`benchmarks/bench_estimate.py`: characters / 4). A node's retrieved text enters the reflect
# prompt at up to 1,500 characters (`_reflect`), the whole prompt at up to 12,000.
REFLECT_BASE, REFLECT_PER_NODE, REFLECT_MAX = 200, 375, 3200
EXPAND_PROMPT = 980
OUTLINE_PROMPTS = (250, 380)  # draft, polish
SECTION_BASE, SECTION_PER_SNIPPET = 100, 225  # a snippet is cut at 900 characters
POLISH_BASE = 150
# Completion tokens of the structured outputs: an assumption sized to their schemas (the fake's
# fillers write 45-80 tokens; a real model's insights and subtopics are longer).
REFLECT_COMPLETION, EXPAND_COMPLETION, OUTLINE_COMPLETION = 150, 120, 150


def estimate(params: OmniThinkParams) -> CostEstimate:
    k, depth = params.subnodes, params.max_depth
    layers = [k**d for d in range(depth + 1)]  # nodes per layer of the full tree
    section_tokens = words_to_tokens(params.section_words)
    article_tokens = params.max_sections * section_tokens

    tally = Tally()
    for width in layers:
        tally.add(
            "reflect new findings into the pool",
            1,
            prompt=min(REFLECT_MAX, REFLECT_BASE + REFLECT_PER_NODE * width),
            completion=REFLECT_COMPLETION,
        )
    tally.add("decide how to expand each leaf", sum(layers[:-1]), prompt=EXPAND_PROMPT, completion=EXPAND_COMPLETION)
    tally.add("draft the outline", 1, prompt=OUTLINE_PROMPTS[0], completion=OUTLINE_COMPLETION)
    tally.add("polish the outline", 1, prompt=OUTLINE_PROMPTS[1], completion=OUTLINE_COMPLETION)
    tally.add(
        "write each section",
        params.max_sections,
        prompt=SECTION_BASE + SECTION_PER_SNIPPET * params.snippets_per_section,
        completion=section_tokens,
    )
    tally.add("polish the article", 1, prompt=POLISH_BASE + article_tokens, completion=article_tokens)

    # Low: the pool is sufficient after the root's reflection (no expansion), the outline has its
    # minimum of 2 sections.
    low = 1 + 2 + 2 + 1
    # High: every section's text unreadable once and asked again (`first_readable`).
    high = tally.calls + params.max_sections
    how = (
        f"an information tree of {sum(layers)} nodes (depth {depth}, {k} subtopics per leaf): "
        f"{len(layers)} reflections and {sum(layers[:-1])} leaf decisions; outline, "
        f"{params.max_sections} sections and a polish"
    )
    return tally.estimate(low=low, high=high, how=how)
