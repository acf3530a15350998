"""OmniThink prompts, in our own words, following the fields and flow of the paper's listings 1-5
(expand, reflect, write outline / polish outline, write section, polish article) and appendix J
(the expansion decision)."""

from engine.prompting import Prompt

EXPAND = Prompt(
    name="omnithink.expand",
    system=(
        "You are an analyst deciding how to deepen research on a subject. You see one node of an "
        "information tree (its subtopic and what was retrieved for it) and the conceptual pool (what "
        "we understand of the subject so far). Decide whether this node needs further expansion. If it "
        "does, name up to $k broad categories that would deepen or widen our understanding, guided by "
        "the gaps in the conceptual pool, each with up to $keywords search-engine queries. Categories "
        "must not repeat ones already explored. If the node is complete enough, answer expand=false "
        "with no categories."
    ),
    user=(
        "Subject: $topic\n"
        "Node: $node\n"
        "Categories already explored: $explored\n\n"
        "Conceptual pool:\n$pool\n\n"
        "Information retrieved for this node:\n$info"
    ),
)

REFLECT = Prompt(
    name="omnithink.reflect",
    system=(
        "You reflect on newly retrieved information the way a careful researcher would. Read it against "
        "the conceptual pool we already hold, keep only what enriches it, and distil each new point into "
        "one concise insight. Do not restate insights already in the pool. Then judge whether the "
        "information gathered so far is sufficient to write a thorough, well-sourced article on the "
        "subject."
    ),
    user="Subject: $topic\n\nConceptual pool so far:\n$pool\n\nNew information:\n$info",
)

DRAFT_OUTLINE = Prompt(
    name="omnithink.draft_outline",
    system=(
        "You plan the outline of an encyclopedic report page. Give its top-level sections in a logical "
        "order, with subsections where they help. Do not use the topic itself as a section title."
    ),
    user="Topic: $topic\nAt most $max_sections sections.",
)

POLISH_OUTLINE = Prompt(
    name="omnithink.polish_outline",
    system=(
        "You improve a draft outline of a report page using what was learned while researching it (the "
        "conceptual pool): add, merge, reorder or rename sections so the outline covers the key points, "
        "flows logically and guides the writing well. Do not use the topic itself as a section title."
    ),
    user="Topic: $topic\nAt most $max_sections sections.\n\nDraft outline:\n$draft\n\nConceptual pool:\n$pool",
)

WRITE_SECTION = Prompt(
    name="omnithink.write_section",
    system=(
        "You write one section of an encyclopedic article from the collected information only. Style: "
        "concise yet informative, formal yet accessible. Cite the numbered sources inline after each "
        "claim, like [1] or [2][3]; cite only the numbers listed; do not add a references list. Start "
        "with the section title as a '## ' heading and use '### ' for its subsections. About $words words."
    ),
    user="Sources:\n\n$sources\n\nTopic of the page: $topic\nSection to write: $section",
)

POLISH_ARTICLE = Prompt(
    name="omnithink.polish_article",
    system=(
        "You are a faithful editor. Find information repeated across the sections of the article and "
        "delete the repetitions; never delete anything that is not repeated. Keep every inline citation "
        "like [3] attached to its claim and keep the heading structure. Tighten vague wording. Return the "
        "whole revised article in Markdown and nothing else."
    ),
    user="Article to polish:\n\n$article",
)
