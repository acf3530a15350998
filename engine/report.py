"""Reports and exports of a stored run.

The Markdown report numbers citations `[n]` by first appearance and lists exactly those sources,
so every `[n]` resolves. The JSON export holds the whole session: run, params, graph, sources,
usage, commands and reports.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from engine.citations import cited_source_ids, number_citations
from storage.models import Node, NodeStatus, Source
from storage.repository import Repository

EXPORT_FORMAT_VERSION = 1


def _source_line(number: int, source: Source) -> str:
    where = source.url or source.ref
    kind = "web" if source.kind == "web" else "corpus"
    title = source.title.strip() or "Untitled"
    line = f"[{number}] {title} — {where} ({kind})"
    if source.url and source.kind != "web":
        line += f" · document `{source.ref}`"
    return line


def _partial_body(nodes: list[Node]) -> str:
    """What a run without a final report has to show: its finished answers, in order."""
    parts = []
    for node in nodes:
        if node.parent_id is None or node.status != NodeStatus.DONE or not node.content.strip():
            continue
        parts.append(f"### {node.label.strip() or node.kind}\n\n{node.content.strip()}")
    return "\n\n".join(parts) or "_Nothing has been produced yet._"


def render_markdown(repo: Repository, run_id: str) -> str:
    run = repo.get_run(run_id)
    sources = {s.id: s for s in repo.list_sources(run_id)}
    report = repo.latest_report(run_id)
    if report is not None:
        body = report.markdown
        note = ""
    else:
        body = _partial_body(repo.list_nodes(run_id))
        note = f"> Partial results: the run is {run.status}" + (f" ({run.stop_reason})" if run.stop_reason else "") + ".\n\n"
    rendered = number_citations(body, sources.keys())

    model = run.llm_info.get("model") or run.llm_info.get("kind") or "?"
    lines = [
        f"# {run.title or run.question}",
        "",
        f"*Question:* {run.question}  ",
        f"*Method:* {run.method} · *Model:* {model} · *Search:* {run.search_mode} · *Status:* {run.status}  ",
        f"*Run:* `{run.id}` · *Nodes:* {run.node_count} · *Tokens:* {run.prompt_tokens + run.completion_tokens}"
        f" · *Cost:* ${run.cost:.4f}",
        "",
        note + rendered.text.strip(),
        "",
    ]
    if rendered.numbering:
        lines += ["## Sources", ""]
        for number, source_id in sorted(rendered.numbering.items()):
            lines.append(_source_line(number, sources[source_id]) + "  ")
        lines.append("")
    return "\n".join(lines)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def export_json(repo: Repository, run_id: str) -> dict[str, Any]:
    run = repo.get_run(run_id)
    nodes = repo.list_nodes(run_id)
    sources = repo.list_sources(run_id)
    report = repo.latest_report(run_id)
    return {
        "format": "thoughtmap.run",
        "format_version": EXPORT_FORMAT_VERSION,
        "run": run.model_dump(mode="json", exclude={"owner", "heartbeat_at"}),
        "params": run.params,
        "usage": {
            "prompt_tokens": run.prompt_tokens,
            "completion_tokens": run.completion_tokens,
            "total_tokens": run.prompt_tokens + run.completion_tokens,
            "cost": run.cost,
            "llm_calls": run.llm_calls,
        },
        "nodes": [n.model_dump(mode="json") for n in nodes],
        "edges": [e.model_dump(mode="json") for e in repo.list_edges(run_id)],
        "sources": [s.model_dump(mode="json") for s in sources],
        "node_sources": [l.model_dump(mode="json") for l in repo.node_source_links(run_id)],
        "llm_calls": [c.model_dump(mode="json") for c in repo.list_llm_calls(run_id)],
        "commands": [c.model_dump(mode="json") for c in repo.list_commands(run_id)],
        "report": {
            "markdown": render_markdown(repo, run_id),
            "raw": report.markdown if report else None,
            "cited_source_ids": cited_source_ids(report.markdown) if report else [],
            "created_at": _iso(report.created_at) if report else None,
        },
    }
