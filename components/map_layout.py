"""Node positions the map computes itself (vis-network places the plain trees and the networks).

The trees grow left to right, as a mind map: a level per depth, side by side in columns wide enough
for a wrapped label, siblings stacked below each other. `tree_positions` is used when edges are drawn
over the tree (vis's hierarchical layout would count them as parent → child relations);
`grid_positions` places a grid view's rows × columns."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from engine.reads import Node

LEVEL_SEPARATION = 300  # px between tree levels (left to right; a wrapped label is about 270 px wide)
NODE_SPACING = 135  # px between neighbouring leaves (top to bottom: a dot and a label of up to five lines)
GRID_COLUMN = 260  # px between grid columns
GRID_ROW = 150  # px between grid rows


def tree_positions(nodes: Sequence[Node]) -> dict[int, tuple[float, float]]:
    """Left-to-right tree positions from the structural tree alone (`parent_id`, `depth`): leaves one
    below the other in the order the nodes were created, each parent centred beside its children."""
    by_id = {n.id: n for n in nodes}
    children: dict[int, list[int]] = {}
    roots: list[int] = []
    for node in sorted(nodes, key=lambda n: n.id):
        if node.parent_id is not None and node.parent_id in by_id and node.parent_id != node.id:
            children.setdefault(node.parent_id, []).append(node.id)
        else:
            roots.append(node.id)
    slots: dict[int, float] = {}
    next_slot = 0.0
    seen: set[int] = set()
    for root in roots:
        stack = [(root, False)]
        while stack:
            node_id, children_placed = stack.pop()
            if children_placed:
                kids = [k for k in children.get(node_id, []) if k in slots]
                if kids:
                    slots[node_id] = (slots[kids[0]] + slots[kids[-1]]) / 2
                else:
                    slots[node_id] = next_slot
                    next_slot += 1
                continue
            if node_id in seen:  # a cycle in parent ids (never stored, but the map must not hang)
                continue
            seen.add(node_id)
            stack.append((node_id, True))
            stack.extend((kid, False) for kid in reversed(children.get(node_id, [])))
        next_slot += 0.5  # a gap between separate trees
    return _centred(
        {node_id: (by_id[node_id].depth * LEVEL_SEPARATION, slot * NODE_SPACING) for node_id, slot in slots.items()},
        axis=1,
    )


def _centred(positions: dict[int, tuple[float, float]], axis: int) -> dict[int, tuple[float, float]]:
    """Positions shifted so the drawing is centred on 0 along `axis` (0: x, 1: y), the direction in
    which it grows as nodes are added: a camera kept across updates keeps the middle in view."""
    if not positions:
        return positions
    values = [p[axis] for p in positions.values()]
    shift = (min(values) + max(values)) / 2
    if axis == 0:
        return {node_id: (x - shift, y) for node_id, (x, y) in positions.items()}
    return {node_id: (x, y - shift) for node_id, (x, y) in positions.items()}


def grid_positions(
    nodes: Sequence[Node], position: Callable[[Node], tuple[int, int] | None]
) -> dict[int, tuple[float, float]]:
    """Rows × columns from the view's `position(node)`; nodes without one in a row above the grid
    (above row 0 at least, so they do not move when a row above the others appears), centred."""
    placed: dict[int, tuple[int, int]] = {}
    outside: list[Node] = []
    for node in nodes:
        try:
            where = position(node)
        except (LookupError, TypeError, ValueError, AttributeError):  # odd stored data: off the grid
            where = None
        if where is None:
            outside.append(node)
        else:
            placed[node.id] = (int(where[0]), int(where[1]))
    if placed:
        top = min(0, *(row for row, _ in placed.values()))
        columns = [column for _, column in placed.values()]
        centre = (min(columns) + max(columns)) / 2
    else:
        top, centre = 0, 0.0
    positions = {node_id: (column * GRID_COLUMN, row * GRID_ROW) for node_id, (row, column) in placed.items()}
    for index, node in enumerate(outside):
        offset = index - (len(outside) - 1) / 2
        positions[node.id] = ((centre + offset) * GRID_COLUMN, (top - 1) * GRID_ROW)
    return _centred(positions, axis=0)
