"""Small graph steps shared by methods."""

from __future__ import annotations

from engine.methods.base import RunContext
from storage.models import Node, NodeStatus


def ensure_root(ctx: RunContext, *, kind: str = "question") -> Node:
    """The run's root node (the user's question), created once."""
    root = ctx.graph.root()
    if root is None:
        root = ctx.graph.add(kind=kind, label=ctx.question, content=ctx.question, status=NodeStatus.DONE, depth=0)
    return root


def child_of_kind(ctx: RunContext, parent: Node, kind: str) -> Node | None:
    for child in ctx.graph.children(parent):
        if child.kind == kind:
            return child
    return None
