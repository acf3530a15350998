"""What a run on `--llm fake` grows, written without what differs between two equal runs.

A run's row ids (nodes, sources, the run itself), its timestamps and the order in which parallel
calls finished differ from run to run; the tree does not. `canonical_tree` names each node by its
path from the root (siblings sorted by what they hold), each source by its `ref`, and rewrites
every id a node, edge or report refers to (`[[S12]]` markers, `source_id`, `created`, the run's
id, MTQA's knowledge-unit ids, ...) into those names and drops clocks (and today's date), so two runs of the same question and parameters give the same JSON.

`tests/engine/methods/test_fake_trees.py` compares every method's tree with the one recorded in
`tests/support/fake_trees/<method>.json`. To record them again after a change that is meant to change
what a method grows: `.venv/bin/python -m tests.support.fake_trees` (then read the diff before you commit).
"""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from storage.repository import Repository
from tests.support.progress_wait import wait_for_run

RECORDED = Path(__file__).resolve().parent / "fake_trees"
QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
# Built-in methods whose trees are recorded: the five papers' methods and the three baselines.
METHODS = ("deot", "omnithink", "mtqa", "fgdip", "research", "rag", "direct", "react")

SOURCE_MARKER = re.compile(r"\[\[S(\d+)\]\]")
KNOWLEDGE_UNIT = re.compile(r"\bkg\d+-c\d+\b")  # MTQA's unit ids: rows of the knowledge store
# Keys whose integer values are node ids, and keys whose integer values are source ids.
NODE_ID_KEYS = {"created", "node_id", "node_ids", "parent_id", "backtrack_from", "answer_node", "summary_node", "tree"}
SOURCE_ID_KEYS = {"source_id", "source_ids", "page_source", "sources", "snippets"}
# Lists kept in row-id order: sorted again once their ids are names.
ID_ORDERED_KEYS = {"tree"}
# Keys that hold a clock reading, a measured duration, a cache signature made of ids and clocks, or
# an offset into text that holds ids (whose digits vary in number).
VOLATILE_KEYS = {
    "started_at",
    "finished_at",
    "created_at",
    "latency_s",
    "elapsed_s",
    "seconds",
    "signature",
    "own_text_from",
}


def _today() -> set[str]:
    return {date.today().isoformat(), datetime.now(UTC).date().isoformat()}


class _Names:
    def __init__(self, nodes: dict[int, str], sources: dict[int, str], run_id: str = ""):
        self.nodes, self.sources, self.run_id = nodes, sources, run_id

    def text(self, value: str) -> str:
        if self.run_id:
            value = value.replace(self.run_id, "RUN")
        for today in _today():  # "searched ... on 2026-12-03"
            value = value.replace(today, "TODAY")
        value = KNOWLEDGE_UNIT.sub("kg-unit", value)  # each unit's `ref` says which one it is
        return SOURCE_MARKER.sub(lambda m: f"[[{self.sources.get(int(m.group(1)), 'S?' + m.group(1))}]]", value)

    def value(self, value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: self.value(v, k) for k, v in value.items() if k not in VOLATILE_KEYS}
        if isinstance(value, list):
            items = [self.value(v, key) for v in value]
            return sorted(items, key=json.dumps) if key in ID_ORDERED_KEYS else items
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, int) and not isinstance(value, bool):
            if key in NODE_ID_KEYS:
                return self.nodes.get(value, f"node?{value}")
            if key in SOURCE_ID_KEYS:
                return self.sources.get(value, f"source?{value}")
        return value


def canonical_tree(repo: Repository, run_id: str) -> dict[str, Any]:
    run = repo.get_run(run_id)
    sources = sorted(repo.list_sources(run_id), key=lambda s: s.ref)
    source_names = {s.id: f"S:{s.ref}" for s in sources}
    nodes = repo.list_nodes(run_id)
    children: dict[int | None, list[Any]] = {}
    for node in nodes:
        children.setdefault(node.parent_id, []).append(node)
    # Siblings are ordered by what they hold with every id blanked, so ids cannot decide the order.
    blank = _Names({}, {}, run_id)

    def holding(node: Any) -> str:
        return json.dumps([node.kind, node.label, node.content, blank.value(node.data)], sort_keys=True, default=str)

    node_names: dict[int, str] = {}

    def name(parent: int | None, prefix: str) -> None:
        for index, child in enumerate(sorted(children.get(parent, []), key=holding)):
            node_names[child.id] = f"{prefix}{index}"
            name(child.id, f"{prefix}{index}.")

    name(None, "N")
    names = _Names(node_names, source_names, run_id)
    linked: dict[int, list[str]] = {}
    for link in repo.node_source_links(run_id):
        linked.setdefault(link.node_id, []).append(source_names[link.source_id])
    return {
        "run": {
            "status": run.status,
            "node_count": run.node_count,
            "llm_calls": run.llm_calls,
            "error": run.error,
            "stop_reason": run.stop_reason,
            "warning": run.warning,
        },
        "nodes": [
            {
                "name": node_names[n.id],
                "kind": n.kind,
                "status": n.status,
                "depth": n.depth,
                "label": names.text(n.label),
                "content": names.text(n.content),
                "error": n.error,
                "data": names.value(n.data),
                "sources": sorted(linked.get(n.id, [])),
            }
            for n in sorted(nodes, key=lambda n: node_names[n.id])
        ],
        "edges": sorted(
            [node_names[e.src], node_names[e.dst], e.kind, json.dumps(names.value(e.data), sort_keys=True)]
            for e in repo.list_edges(run_id)
        ),
        "sources": [{"ref": s.ref, "kind": s.kind, "title": s.title} for s in sources],
        "reports": sorted(
            (
                {"kind": r.kind, "markdown": names.text(r.markdown), "data": names.value(r.data)}
                for r in repo.list_reports(run_id)
            ),
            key=lambda r: json.dumps(r, sort_keys=True),
        ),
        "run_states": sorted(s.name for s in repo.list_run_states(run_id)),
    }


def grow(services: Any, method: str) -> dict[str, Any]:
    """Run `method` with its default parameters on the fake LLM and the bundled corpus."""
    run = services.runner.create_run(
        question=QUESTION, method=method, params={}, llm_info=services.llm_info("fake"), search_mode="local"
    )
    services.runner.start(run.id)
    wait_for_run(services.repo, run.id, what=f"{method} on the fake LLM to end")
    return canonical_tree(services.repo, run.id)


def dumps(tree: dict[str, Any]) -> str:
    return json.dumps(tree, indent=1, sort_keys=True, ensure_ascii=False, default=str) + "\n"


def record(methods: tuple[str, ...] = METHODS) -> None:  # pragma: no cover - run by hand
    import os
    import tempfile

    # As the tests run it (tests/conftest.py): nothing from this shell's settings, BM25 ranking.
    for key in [k for k in os.environ if k.startswith(("OPENAI_", "THOUGHTMAP_"))]:
        os.environ.pop(key)
    os.environ.update(
        THOUGHTMAP_HOME=tempfile.mkdtemp(prefix="fake-trees-"), THOUGHTMAP_LLM="fake", THOUGHTMAP_BUILTIN_EMBEDDINGS="0"
    )
    from engine.config import load_settings
    from engine.llm.fake import FakeLLM
    from engine.services import build_services

    services = build_services(load_settings())
    services.use_llm("fake", FakeLLM())
    RECORDED.mkdir(exist_ok=True)
    for method in methods:
        (RECORDED / f"{method}.json").write_text(dumps(grow(services, method)), encoding="utf-8")
        print(f"recorded {method}")
    services.close()


if __name__ == "__main__":  # pragma: no cover
    record(tuple(sys.argv[1:]) or METHODS)
