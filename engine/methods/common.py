"""Small graph steps shared by methods."""

from __future__ import annotations

from concurrent.futures import Future

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


def wait_all(futures: list[Future]) -> None:
    """Wait for every future, then re-raise the first error (a stop, the budget, an unreachable
    endpoint). Waiting for all first means no node is left half-written when the run ends."""
    first: BaseException | None = None
    for future in futures:
        try:
            future.result()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            first = first or exc
    if first is not None:
        raise first
