"""What OmniThink declares: the information tree's node kinds, its run state (the conceptual pool,
versioned per reflection step, and the outline), its commands and its view."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from engine.citations import without_model_citations
from engine.contract import (
    CommandPayload,
    CommandSpec,
    NodeCommand,
    NodeData,
    NodeKind,
    RunStateModel,
    RunStateSpec,
    Variant,
    ViewSpec,
    regenerate_report_command,
    restore_command,
)
from engine.methods.common import DroppedHit
from engine.methods.omnithink import prompts
from engine.safe_text import inline_text
from storage.models import Node
from storage.statuses import NodeStatus

TOPIC, SUBTOPIC = "topic", "subtopic"
POOL, OUTLINE = "concept_pool", "outline"


class TreeExpansion(BaseModel):
    """A leaf's expansion decision (appendix J) and the sub-nodes it created."""

    model_config = ConfigDict(extra="forbid")

    expand: bool = False
    subtopics: list[dict[str, Any]] = Field(default_factory=list, description="The model's proposals as given.")
    created: list[int] = Field(default_factory=list)
    error: str = ""


class TreeNodeData(NodeData):
    """`Node.data` of a topic or subtopic of the information tree."""

    keywords: list[str] = Field(default_factory=list, description="The searches made for this node.")
    retrieved: int = 0
    search_errors: list[str] = Field(default_factory=list)
    dropped_as_unrelated: list[DroppedHit] = Field(default_factory=list)
    # Answered "the sources at hand do not cover this" (`RunContext.sources_only`): neither read into
    # the pool nor expanded, since the model would have only its own inventions to go on.
    not_covered: bool = False
    reflected_step: int | None = Field(default=None, description="The reflection step that read it into the pool.")
    expansion: TreeExpansion | None = None
    forced: bool = Field(default=False, description="Created by an Expand command.")
    user: bool = Field(default=False, description="Added by you.")

    def caption(self) -> str:
        parts = ["Added by you" if self.user else ""]
        if self.keywords:
            parts.append("Searched: " + "; ".join(self.keywords))
        return " · ".join(p for p in parts if p)


_DEPTHS = ("#2F4B7C", "#4C78A8", "#72B7B2", "#9ECAE9", "#C6DBEF")
_USER = (Variant(True, "#CE6DBD", "your own subtopic"),)

NODE_KINDS = (
    NodeKind(TOPIC, TreeNodeData, "Topic", _DEPTHS[0], "the topic you asked", shape="dot", answers=True),
    NodeKind(
        SUBTOPIC,
        TreeNodeData,
        "Subtopic",
        _DEPTHS[1],
        "information-tree subtopic, lighter with depth",
        colour_field="user",
        variants=_USER,
        depth_palette=_DEPTHS,
        answers=True,
    ),
)


class ConceptPool(RunStateModel):
    """The conceptual pool after one reflection step (Merge(I, P))."""

    step: int = -1
    concepts: list[str] = Field(default_factory=list)
    added: list[str] = Field(default_factory=list)
    duplicates: list[str] = Field(default_factory=list)
    sufficient: bool = False
    from_nodes: list[int] = Field(default_factory=list)
    error: str = ""

    def panel_caption(self) -> str:
        return f"Step {self.step} · {len(self.concepts)} concepts" + (" · judged sufficient" if self.sufficient else "")

    def panel_markdown(self) -> str:
        added = set(self.added)
        # Concepts are model text: shown as text, so `**new**` stays the only mark of ours.
        # Stored before `merge` dropped the sources' `[n]`: a pool keeps no source list to resolve them.
        return (
            "\n".join(
                f"- {'**new** · ' if c in added else ''}{inline_text(without_model_citations(c))}"
                for c in self.concepts
            )
            or "_empty_"
        )

    @classmethod
    def history_markdown(cls, versions: Sequence[RunStateModel]) -> str:
        return "\n".join(
            f"- Step {v.step}: +{len(v.added)} new, {len(v.duplicates)} duplicates merged"
            for v in versions
            if isinstance(v, ConceptPool)
        )


class OutlineState(RunStateModel):
    """The article's outline: the draft, the version polished with the pool, and why if not."""

    draft: dict[str, Any] = Field(default_factory=dict)
    outline: dict[str, Any] = Field(default_factory=dict)
    note: str = ""
    markdown: str = Field(default="", description="Kept from databases that stored the outline as a report.")

    def panel_markdown(self) -> str:
        lines = []
        for section in self.outline.get("sections", []):
            lines.append(f"1. {inline_text(section['title'])}")
            lines.extend(f"    - {inline_text(sub)}" for sub in section.get("subsections", []))
        return "\n".join(lines) or "_empty_"

    def panel_caption(self) -> str:
        return self.note


RUN_STATES = (
    RunStateSpec(POOL, ConceptPool, "Conceptual pool"),
    RunStateSpec(OUTLINE, OutlineState, "Outline", expanded=False),
)


class ExpandPayload(NodeCommand):
    n: int | None = Field(
        default=None,
        ge=1,
        le=8,
        title="New branches",
        description="How many sub-nodes to add (empty: the run's 'subnodes' parameter).",
        json_schema_extra={"placeholder": "the run's subnodes"},
    )


class AddSubtopicPayload(NodeCommand):
    subtopic: str = Field(min_length=1, max_length=300, description="Your subtopic.")
    keywords: list[str] = Field(
        default_factory=list, max_length=4, description="What to search for it (empty: the subtopic itself)."
    )


_TREE = frozenset({TOPIC, SUBTOPIC})
_LIVE = frozenset({NodeStatus.PENDING, NodeStatus.RUNNING, NodeStatus.DONE, NodeStatus.FAILED})

COMMANDS = (
    CommandSpec(
        "expand",
        "Expand",
        "Ask the model for new subtopics under this node.",
        ExpandPayload,
        kinds=_TREE,
        statuses=frozenset({NodeStatus.DONE}),
        done="Expanding",
    ),
    CommandSpec(
        "add_subtopic",
        "Add subtopic",
        "Add your own subtopic under this node; it is searched at once.",
        AddSubtopicPayload,
        kinds=_TREE,
        statuses=_LIVE,
        done="Subtopic added",
    ),
    CommandSpec(
        "prune",
        "Prune",
        "Stop this branch and leave it out of the article.",
        NodeCommand,
        kinds=_TREE,
        statuses=_LIVE,
        on_root=False,
        done="Pruned",
    ),
    restore_command(_TREE, "article"),
    CommandSpec(
        "regenerate_outline",
        "Rewrite outline",
        "Draft and polish the outline again, then the article "
        "(on a stopped run, from the tree as it stands; the run stays stopped).",
        CommandPayload,
        done="Rewriting the outline",
        report_only=True,
    ),
    CommandSpec(
        "regenerate_article",
        "Rewrite article",
        "Write the article again from the current tree (on a "
        "stopped run, from the tree as it stands; the run stays stopped).",
        CommandPayload,
        done="Rewriting the article",
        report_only=True,
    ),
    # The generic name (the runner rewrites reports with it after a retry), shown as the one above.
    regenerate_report_command("Rewrite article", listed=False),
)

VIEW = ViewSpec(panels=(POOL, OUTLINE), side_tab="Pool & outline")

# What the model is doing for each prompt, in a reader's words (the step log and "Now:").
STEPS = {
    prompts.EXPAND.name: "deciding how to expand this topic",
    prompts.REFLECT.name: "noting what the sources add",
    prompts.DRAFT_OUTLINE.name: "drafting the outline",
    prompts.POLISH_OUTLINE.name: "polishing the outline",
    prompts.WRITE_SECTION.name: "writing a section",
    prompts.POLISH_ARTICLE.name: "polishing the article",
}


def tree_of(node: Node) -> TreeNodeData:
    """A topic's or subtopic's data, typed."""
    return TreeNodeData.model_validate(node.data)
