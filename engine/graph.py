"""The run's graph as a method sees it: write-through, bound to one run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.redact import redact_secrets
from engine.search.protocol import Hit
from storage.models import Node, NodeStatus, Source
from storage.repository import GraphSnapshot, Repository, SourceInput


class RunGraph:
    """Every node a method adds or finishes is stored at once, so the UI sees it live and a
    resumed run continues from it."""

    def __init__(self, repo: Repository, run_id: str) -> None:
        self.repo = repo
        self.run_id = run_id

    def add(self, *, kind: str, label: str, parent: Node | int | None = None, content: str = "",
            status: str = NodeStatus.PENDING, depth: int | None = None, priority: float = 0.0,
            data: dict[str, Any] | None = None, edge_kind: str = "child") -> Node:
        parent_node = self.node(parent) if isinstance(parent, int) else parent
        if depth is None:
            depth = parent_node.depth + 1 if parent_node else 0
        return self.repo.add_node(
            self.run_id, kind=kind, label=label, content=content,
            parent_id=parent_node.id if parent_node else None, status=status, depth=depth,
            priority=priority, data=data, edge_kind=edge_kind,
        )

    def node(self, node_id: int) -> Node:
        node = self.repo.get_node(node_id)
        if node.run_id != self.run_id:
            raise LookupError(f"node {node_id} belongs to another run")
        return node

    def start(self, node: Node) -> Node:
        return self.repo.start_node(node.id)

    def finish(self, node: Node, *, content: str | None = None, data: dict[str, Any] | None = None,
               label: str | None = None) -> Node:
        return self.repo.finish_node(node.id, content=content, data=data, label=label)

    def fail(self, node: Node, error: str, *, data: dict[str, Any] | None = None) -> Node:
        # Errors quote URLs (an endpoint, a fetched page): never store credentials from them.
        return self.repo.fail_node(node.id, redact_secrets(error), data=data)

    def update(self, node: Node, *, merge_data: dict[str, Any] | None = None, **values: Any) -> Node:
        return self.repo.update_node(node.id, merge_data=merge_data, **values)

    def nodes(self, *, kind: str | None = None, status: str | None = None) -> list[Node]:
        return self.repo.list_nodes(self.run_id, kind=kind, status=status)

    def children(self, node: Node) -> list[Node]:
        return self.repo.children(node.id)

    def root(self) -> Node | None:
        roots = [n for n in self.nodes() if n.parent_id is None]
        return roots[0] if roots else None

    def snapshot(self) -> GraphSnapshot:
        return self.repo.snapshot(self.run_id)

    def add_sources(self, hits: Sequence[Hit], *, node: Node | None = None) -> list[Source]:
        inputs = [
            SourceInput(ref=h.ref, title=h.title, snippet=h.snippet, text=h.text, kind=h.kind,
                        url=h.url, score=h.score)
            for h in hits
        ]
        return self.repo.add_sources(self.run_id, inputs, node_id=node.id if node else None)

    def link_sources(self, node: Node, source_ids: Sequence[int]) -> None:
        """Link already stored sources to a node (e.g. the ones its answer cites)."""
        self.repo.link_sources(node.id, source_ids)

    def sources(self, node: Node | None = None) -> list[Source]:
        return self.repo.sources_for_node(node.id) if node else self.repo.list_sources(self.run_id)

    def save_report(self, markdown: str, *, data: dict[str, Any] | None = None, kind: str = "final") -> None:
        self.repo.save_report(self.run_id, markdown, kind=kind, data=data)

    def has_report(self, kind: str = "final") -> bool:
        return self.repo.latest_report(self.run_id, kind) is not None
