"""1- and 2-hop neighbour expansion over the graph (MTQA Step 2 (3)): from the entities the keys
matched, the entities one and two relations away. Relations are undirected (a relation joins two
entities whichever way it was written), as in LightRAG."""

from __future__ import annotations

from collections.abc import Iterable


def adjacency(edges: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for a, b in edges:
        if a == b:
            continue
        out.setdefault(a, set()).add(b)
        out.setdefault(b, set()).add(a)
    return out


def expand(
    seeds: Iterable[str], neighbours: dict[str, set[str]], hops: int, per_hop: int | None = None
) -> dict[str, int]:
    """Entity key -> its distance in relations from the nearest seed (0 for the seeds), for every
    entity within `hops`. With `per_hop`, each hop keeps at most that many new entities, the most
    connected first (then by key): a hub such as a country would otherwise pull in half the graph."""
    if hops < 0:
        raise ValueError("hops must be 0 or more")
    distance = {seed: 0 for seed in seeds}
    frontier = sorted(distance)
    for hop in range(1, hops + 1):
        found = {n for key in frontier for n in neighbours.get(key, ()) if n not in distance}
        ranked = sorted(found, key=lambda k: (-len(neighbours.get(k, ())), k))
        if per_hop is not None:
            ranked = ranked[:per_hop]
        for key in ranked:
            distance[key] = hop
        frontier = ranked
        if not frontier:
            break
    return distance
