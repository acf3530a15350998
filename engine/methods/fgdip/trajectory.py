"""How a branch's trajectory and a layer's sibling nodes are written into prompts (thought n,
action n, observation n, as in the paper's listings). Observations are retrieved text and model
output: they go between data markers."""

from __future__ import annotations

from collections.abc import Sequence

from engine.citations import strip_markers
from engine.prompting import inert
from engine.safe_text import inline_text
from storage.models import Node


def action_text(data: dict) -> str:
    return f"{data.get('action', 'search')}[{data.get('argument', '')}]"


def action_markdown(data: dict) -> str:
    """The action as a reader sees it (node panel, content, report path): the model's argument as
    text (`inline_text`), so it shows verbatim and cannot make a link, a citation or a line of its
    own; not a code span, whose characters a later `markdown_block` would show as entities; without
    storage markers, which would count as citations wherever the text is numbered."""
    return inline_text(strip_markers(action_text(data)))


def render_path(path: Sequence[Node], *, observation_chars: int = 800) -> str:
    lines = []
    for number, node in enumerate(path, start=1):
        data = node.data or {}
        lines.append(f"Thought {number}: {inert(data.get('thought', ''))}")
        lines.append(f"Action {number}: {inert(action_text(data))}")
        observation = inert((data.get("observation") or "(not run yet)")[:observation_chars])
        lines.append(f"Observation {number}: <<<{observation}>>>")
    return "\n".join(lines) or "(no steps yet: this is the first one)"


def render_siblings(siblings: Sequence[Node], *, observation_chars: int = 300) -> str:
    blocks = []
    for node in siblings:
        data = node.data or {}
        observation = inert((data.get("observation") or "(not run yet)")[:observation_chars])
        blocks.append(f"Thought: {inert(data.get('thought', ''))}\nAction: {inert(action_text(data))}\n"
                      f"Obs: <<<{observation}>>>")
    return "\n\n".join(blocks) or "(none yet: this is the first)"


def label_for(action: str, argument: str, order: int | None = None) -> str:
    text = f"{action}[{' '.join(argument.split())}]"
    if len(text) > 80:
        text = text[:77] + "…]"
    return text if order is None else f"({order}) {text}"
