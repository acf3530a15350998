"""How a branch's trajectory and a layer's sibling nodes are written into prompts (thought n,
action n, observation n, as in the paper's listings). Observations are retrieved text and model
output: they go between data markers."""

from __future__ import annotations

from collections.abc import Sequence

from engine.methods.fgdip.kinds import action_text, step_of
from engine.prompting import inert
from storage.models import Node


def render_path(path: Sequence[Node], *, observation_chars: int = 800) -> str:
    lines = []
    for number, node in enumerate(path, start=1):
        step = step_of(node)
        lines.append(f"Thought {number}: {inert(step.thought)}")
        lines.append(f"Action {number}: {inert(action_text(step.action, step.argument))}")
        observation = inert((step.observation or "(not run yet)")[:observation_chars])
        lines.append(f"Observation {number}: <<<{observation}>>>")
    return "\n".join(lines) or "(no steps yet: this is the first one)"


def render_siblings(siblings: Sequence[Node], *, observation_chars: int = 300) -> str:
    blocks = []
    for node in siblings:
        step = step_of(node)
        observation = inert((step.observation or "(not run yet)")[:observation_chars])
        blocks.append(
            f"Thought: {inert(step.thought)}\nAction: {inert(action_text(step.action, step.argument))}\n"
            f"Obs: <<<{observation}>>>"
        )
    return "\n\n".join(blocks) or "(none yet: this is the first)"


def label_for(action: str, argument: str, order: int | None = None) -> str:
    text = f"{action}[{' '.join(argument.split())}]"
    if len(text) > 80:
        text = text[:77] + "…]"
    return text if order is None else f"({order}) {text}"
