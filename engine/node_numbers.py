"""Node numbers a person reads: #1, #2, ... per run, in the order the run created its nodes.

Stored ids are global across runs ("Node 117" in a 4-node run); a reader needs the number within
the run. Ids only grow and nodes are never deleted (pruning marks them), so a node's rank among its
run's ids is stable for the life of the run: the map, the node panel, the step log and the exports
all number nodes with this one function."""

from __future__ import annotations

from collections.abc import Iterable

from storage.models import Node


def node_numbers(nodes: Iterable[Node]) -> dict[int, int]:
    """Stored node id -> its 1-based number within its run (the nodes of one run)."""
    ids = sorted({node.id for node in nodes if node.id is not None})
    return {node_id: index for index, node_id in enumerate(ids, start=1)}
