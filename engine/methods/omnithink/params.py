"""OmniThink parameters (arXiv 2501.09751, sections 3.1-3.3 and its public app's defaults)."""

from __future__ import annotations

from pydantic import Field

from engine.methods.base import MethodParams, read_pages_field, relevance_floor_field


class OmniThinkParams(MethodParams):
    quick_profile = {
        "max_depth": 1,
        "subnodes": 2,
        "search_results": 3,
        "keywords_per_subtopic": 1,
        "max_sections": 3,
        "section_words": 120,
        "attribute_citations": True,
    }

    max_depth: int = Field(
        default=2,
        ge=1,
        le=5,
        description="Maximum retrieval depth K (the paper's): how many levels of subtopics may grow below the "
        "topic, one expansion/reflection step each; 2 is the topic plus two levels. The authors' code counts "
        "the topic as a level: its depth is this plus 1 (their run.sh's --depth 3 is max_depth 2 here).",
    )
    subnodes: int = Field(
        default=3,
        ge=1,
        le=6,
        description="k: the most sub-nodes (subtopics) one leaf may get when it is expanded.",
    )
    search_results: int = Field(
        default=5,
        ge=1,
        le=20,
        description="Results per search query (the paper retrieves 5 web pages per query).",
    )
    relevance_floor: float = relevance_floor_field()
    read_pages: int = read_pages_field(5)  # the paper (and STORM's retrievers) read the 5 pages
    keywords_per_subtopic: int = Field(
        default=2,
        ge=1,
        le=4,
        description="Search queries (keywords) per subtopic.",
    )
    prefix_topic: bool = Field(
        default=False,
        description="Put the topic before each subtopic keyword in its search. Off: the keywords are searched "
        "as the model wrote them (the paper). On helps a small local corpus, whose keyword search needs the "
        "topic's words to stay on topic; on the web it narrows results.",
    )
    snippets_per_section: int = Field(
        default=3,
        ge=1,
        le=10,
        description="Evidence per heading: the information tree's sources most similar to the section's title, "
        "and as many again for each subsection title (the paper: the 3 most similar by Sentence-BERT). "
        "Similarity by the configured embeddings endpoint (THOUGHTMAP_EMBEDDINGS_URL), BM25 without one.",
    )
    max_sections: int = Field(
        default=6,
        ge=2,
        le=12,
        description="Most top-level sections in the outline.",
    )
    section_words: int = Field(
        default=250,
        ge=80,
        le=1500,
        description="Target length of each section in words (article length = sections x this).",
    )
    attribute_citations: bool = Field(
        default=False,
        description="Add a citation [n] to a sentence of a section that cites nothing but is clearly drawn "
        "from the section's source n (most of its words are in it). For small models that forget to cite "
        "(the paper's writer cites by itself); counted per section in the article's data.",
    )
