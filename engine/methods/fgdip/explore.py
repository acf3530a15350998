"""The Explore Algorithm (section 3.4) as pure functions over the stored tree: which node the
depth-first search takes next, what a path (a branch's trajectory) is, whether moving there is a
backtrack. Every decision is read from the stored nodes, so a resumed run takes the same path.

Order: a node you forced (and what grows under it) first; then branches whose answer was not
rejected; then depth-first pre-order, siblings sure before maybe (the Step Evaluator's tiers,
appendix A.4), and in the order they were generated. Impossible nodes are never taken."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from engine.methods.fgdip.kinds import ANSWER, QUESTION, SEARCH_KINDS, answer_of, explored_order, step_of
from storage.models import Node, stored_id
from storage.statuses import NodeStatus

_TIER = {"sure": 0, "maybe": 1, None: 1}  # unjudged (Step Evaluator off): generation order only


@dataclass(frozen=True)
class Tree:
    """The stored nodes of one run, indexed."""

    nodes: dict[int, Node]

    @classmethod
    def of(cls, nodes: Iterable[Node]) -> Tree:
        return cls({stored_id(n): n for n in nodes})

    def children(self, node: Node, kinds: frozenset[str] = SEARCH_KINDS) -> list[Node]:
        return sorted((n for n in self.nodes.values() if n.parent_id == node.id and n.kind in kinds), key=stored_id)

    def path(self, node: Node) -> list[Node]:
        """The branch's trajectory: from its first-layer node down to `node` (the question left out)."""
        chain = []
        current: Node | None = node
        while current is not None and current.kind != QUESTION:
            chain.append(current)
            current = self.nodes.get(current.parent_id) if current.parent_id is not None else None
        return chain[::-1]

    def parent(self, node: Node) -> Node:
        """The stored parent of a node that has one (an answer's step); a KeyError for the root."""
        if node.parent_id is None:
            raise KeyError(f"node {node.id} is the root: it has no parent")
        return self.nodes[node.parent_id]

    def branch(self, node: Node) -> Node:
        """The first-layer node of `node`'s branch."""
        path = self.path(node)
        return path[0] if path else node

    def search_nodes(self) -> list[Node]:
        return sorted((n for n in self.nodes.values() if n.kind in SEARCH_KINDS), key=stored_id)

    def answers(self) -> list[Node]:
        return sorted((n for n in self.nodes.values() if n.kind == ANSWER), key=stored_id)

    def last_explored(self) -> Node | None:
        explored = [(order, n) for n in self.nodes.values() if (order := explored_order(n)) is not None]
        return max(explored, key=lambda pair: pair[0], default=(0, None))[1]

    def next_order(self) -> int:
        last = self.last_explored()
        return 1 if last is None else (explored_order(last) or 0) + 1

    def backtracks(self) -> int:
        return sum(n.kind in SEARCH_KINDS and step_of(n).backtrack_from is not None for n in self.nodes.values())


def explorable(node: Node) -> bool:
    if node.kind not in SEARCH_KINDS or node.status != NodeStatus.DONE:
        return False
    data = step_of(node)
    return data.explored_order is None and (data.verdict != "impossible" or data.forced)


def _lineage_forced(tree: Tree, node: Node) -> bool:
    return any(step_of(n).forced for n in tree.path(node))


def order_key(tree: Tree, node: Node) -> tuple[bool, bool, tuple[tuple[bool, int, int | None], ...]]:
    path = tree.path(node)
    ended = bool(step_of(tree.branch(node)).branch_ended)
    return (
        not _lineage_forced(tree, node),
        ended,
        tuple((not step_of(n).forced, _TIER.get(step_of(n).verdict, 1), n.id) for n in path),
    )


def _below_your_impossible(tree: Tree, node: Node) -> bool:
    """Whether a node above `node` was marked impossible by you: what it had generated before is
    out of the search too, unless you ask for that node itself."""
    return any(step_of(n).verdict == "impossible" and step_of(n).judged_by == "you" for n in tree.path(node)[:-1])


def candidates(tree: Tree, can_take: Callable[[Node], bool] = lambda _node: True) -> list[Node]:
    """The nodes the search may take next: explorable, not below a node you ruled out (unless you
    forced them), and that `can_take` (the limits: a node that could not grow is not worth a step)."""
    return [
        n
        for n in tree.search_nodes()
        if explorable(n) and (step_of(n).forced or not _below_your_impossible(tree, n)) and can_take(n)
    ]


def next_node(tree: Tree, can_take: Callable[[Node], bool] = lambda _node: True) -> Node | None:
    """The node the search explores next, or None when nothing is left."""
    return min(candidates(tree, can_take), key=lambda n: order_key(tree, n), default=None)


def forced_waiting(tree: Tree, can_take: Callable[[Node], bool] = lambda _node: True) -> bool:
    """Whether what you asked to explore (a node you forced or an entity you added, and what grows
    under it) still has a node to take, its lineage having reached no answer that settles the
    search: steering a finished run explores that lineage down to an answer, not one layer."""
    settled = [
        a for a in tree.answers() if a.status == NodeStatus.DONE and answer_of(a).verdict in ("accepted", "unchecked")
    ]
    answered = {n.id for a in settled for n in tree.path(tree.parent(a)) if a.parent_id in tree.nodes}
    for node in candidates(tree, can_take):
        forced = [n for n in tree.path(node) if step_of(n).forced]
        if forced and forced[-1].id not in answered:
            return True
    return False


def backtrack_source(tree: Tree, target: Node) -> Node | None:
    """Where the search leaves from when it moves to `target` (None: it simply goes deeper). The
    source is the last node explored (its rejected answer, when it had one)."""
    last = tree.last_explored()
    if last is None or target.parent_id == last.id:
        return None
    answers = [a for a in tree.answers() if a.parent_id == last.id]
    return answers[-1] if answers else last


def settled_answer(tree: Tree) -> Node | None:
    """The answer that ends the search: accepted, or unchecked (no Answer Evaluator)."""
    done = [
        a for a in tree.answers() if a.status == NodeStatus.DONE and answer_of(a).verdict in ("accepted", "unchecked")
    ]
    return done[-1] if done else None


def final_answer(tree: Tree) -> tuple[Node | None, bool]:
    """The answer to report and whether it passed: the settled one, else the last rejected one."""
    settled = settled_answer(tree)
    if settled is not None:
        return settled, True
    done = [a for a in tree.answers() if a.status == NodeStatus.DONE and answer_of(a).short_answer]
    return (done[-1] if done else None), False


def distinct(values: Sequence[str], most: int) -> list[str]:
    """Cleaned, without case-insensitive repeats, at most `most`."""
    seen: set[str] = set()
    out: list[str] = []
    for value in values:
        text = " ".join(str(value).split()).strip(" \"'")
        if text and text.casefold() not in seen and len(text) <= 200:
            seen.add(text.casefold())
            out.append(text)
    return out[:most]
