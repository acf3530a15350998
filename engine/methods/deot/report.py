"""DEoT's final report (paper 3.5): every answered, unpruned node's summary in tree order, given to
the report writer with the run's sources, plus the analysis metrics. Rewritten only when the set of
answered nodes changed (or on request)."""

from __future__ import annotations

from engine.citations import (
    attribute_uncited,
    cited_source_ids,
    number_citations,
    source_blocks,
    to_stored_markers,
)
from engine.methods.base import RunContext
from engine.methods.coverage import save_uncovered_report, uncovered_section
from engine.methods.deot import prompts
from engine.methods.deot.kinds import QuestionData
from engine.methods.deot.params import DeotParams
from engine.reader_text import REPORT_NOT_WRITTEN, UNWRITTEN, first_readable
from engine.safe_text import inline_text, one_line
from storage.models import Node
from storage.statuses import NodeStatus


def included(questions: list[Node]) -> list[Node]:
    """Answered, unpruned question nodes in tree order (depth first, best priority first)."""
    by_parent: dict[int | None, list[Node]] = {}
    for q in questions:
        by_parent.setdefault(q.parent_id, []).append(q)
    ordered: list[Node] = []
    stack = list(reversed(by_parent.get(None, [])))
    while stack:
        current = stack.pop()
        if current.status == NodeStatus.PRUNED:
            continue
        if current.status == NodeStatus.DONE:
            ordered.append(current)
        stack.extend(reversed(sorted(by_parent.get(current.id, []), key=lambda n: (-n.priority, n.id))))
    return ordered


def metrics(questions: list[Node], answered: list[Node]) -> dict[str, int]:
    live = [QuestionData.model_validate(q.data) for q in questions if q.status != NodeStatus.PRUNED]
    decisions = [d.expansion.decision for d in live if d.expansion]
    steered = [s for d in live for s in d.steered_analyses]
    return {
        "total_nodes": len(answered),
        "max_depth": max((n.depth for n in answered), default=0),
        "breadth_analyses": decisions.count("BREADTH") + steered.count("BREADTH"),
        "depth_analyses": decisions.count("DEPTH") + steered.count("DEPTH"),
    }


def cited_findings(answered: list[Node]) -> str:
    """Each analysed node's key findings that cite a source, as stored (with their markers), one list
    item each. The report's own text: the node's question (the model's) is escaped, and the finding
    put on one line, so neither can start a heading, a list or a block of its own."""
    lines = []
    for node in answered:
        summary = QuestionData.model_validate(node.data).summary
        finding = summary.key_findings.strip() if summary else ""
        if finding and cited_source_ids(finding):
            lines.append(f"- **{inline_text(node.label)}** {one_line(finding)}")
    return "\n".join(lines)


def write(ctx: RunContext[DeotParams], questions: list[Node], *, method: str, force: bool) -> None:
    params = ctx.params
    answered = included(questions)
    signature = [[n.id, n.finished_at.isoformat() if n.finished_at else ""] for n in answered]
    latest = ctx.graph.report()
    if (
        not force
        and latest is not None
        and latest.data.get("signature") == signature
        and not latest.data.get(UNWRITTEN)
    ):
        return
    counts = metrics(questions, answered)
    if not answered:
        ctx.graph.save_report(
            "_No question node was answered, so there is nothing to report yet._",
            data={"method": method, "signature": signature, "metrics": counts},
        )
        return

    uncovered = [n for n in answered if QuestionData.model_validate(n.data).not_covered]
    if len(uncovered) == len(answered):
        # Nothing was covered: said by us, with what was searched, not written by the model from nothing.
        stored = [QuestionData.model_validate(n.data) for n in uncovered]
        searched = [query for data in stored for query in data.uncovered_queries]
        nearest = [hit.title for data in stored for hit in data.dropped_as_unrelated]
        save_uncovered_report(ctx, searched, nearest, {"method": method, "signature": signature, "metrics": counts})
        return
    answered = [n for n in answered if not QuestionData.model_validate(n.data).not_covered]
    all_sources = {s.id: s for s in ctx.graph.sources() if s.id is not None}
    numbering: dict[int, int] = {}
    summaries = []
    for node in answered:
        rendered = number_citations(node.content, all_sources.keys(), start=numbering)
        numbering = {sid: n for n, sid in rendered.numbering.items()}
        data = QuestionData.model_validate(node.data)
        header = f"### Node {node.id} · layer {node.depth} · {data.engine}" + (
            f" · aspect: {data.aspect}" if data.aspect else ""
        )
        summaries.append(f"{header}\nQuery: {node.label}\n\n{rendered.text}")
    ordered_sources = [all_sources[sid] for sid, _ in sorted(numbering.items(), key=lambda kv: kv[1])]
    written = first_readable(
        lambda: ctx.llm.text(
            prompts.FINAL_REPORT.render(
                today=ctx.today.isoformat(),
                question=ctx.question,
                sources=source_blocks(ordered_sources, max_chars=600) if ordered_sources else "(no sources)",
                node_summaries="\n\n".join(summaries),
                **counts,
            ),
            purpose="report",
            max_tokens=params.report_max_tokens,
        )
    )
    if written is None:
        # Never the model's "Field required." as the report: say so, keep the tree's cited findings.
        findings = cited_findings(answered)
        own = f"\n\n## Key findings from the tree\n\n{findings}" if findings else ""
        ctx.graph.save_report(
            REPORT_NOT_WRITTEN,
            own=own,
            data={"method": method, "signature": signature, "metrics": counts, UNWRITTEN: True},
        )
        return
    text = written
    text, attributed = attribute_uncited(text, ordered_sources) if params.attribute_citations else (text, 0)
    body, invalid = to_stored_markers(text.strip(), ordered_sources)
    findings = "" if cited_source_ids(body) else cited_findings(answered)
    own = ""
    if findings:
        # The writer cited nothing (small models often do) but the tree holds cited findings:
        # keep them, as written and cited by the nodes, so the report still shows its evidence.
        own = (
            "\n\n## Key findings from the tree\n\n_The report writer cited no sources; these are "
            "the cited findings of the analysed nodes._\n\n" + findings
        )
    metrics_md = (
        "\n\n## Analysis metrics\n\n"
        f"- Question nodes analysed: {counts['total_nodes']}\n"
        f"- Maximum depth: {counts['max_depth']}\n"
        f"- Breadth analyses: {counts['breadth_analyses']}\n"
        f"- Depth analyses: {counts['depth_analyses']}\n"
    )
    ungrounded = [n for n in answered if QuestionData.model_validate(n.data).no_relevant_source]
    if ungrounded:
        metrics_md += (
            f"- Nodes with no relevant source (their findings are the model's own, uncited): "
            f"{len(ungrounded)} of {len(answered)}\n"
        )
    own += uncovered_section([n.label for n in uncovered])
    ctx.graph.save_report(
        body,
        own=own + metrics_md,
        data={
            "method": method,
            "signature": signature,
            "metrics": counts,
            "invalid_citations": invalid,
            "attributed_citations": attributed,
            "findings_appended": bool(findings),
        },
    )
