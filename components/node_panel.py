"""The node panel: a node's question, answer (rendered safely), sources, usage, status or error,
and the steering actions the run's method supports for it."""

from __future__ import annotations

import streamlit as st

from components.safe_markdown import render, sanitize
from engine.citations import number_citations
from engine.methods.base import UnsupportedCommand
from engine.methods.registry import get_method
from engine.runner import RunnerError
from engine.services import Services
from storage.models import Node, NodeStatus, Run

STEERING_LABELS = {
    "expand": "Expand", "deepen": "Go deeper", "prune": "Prune", "ask": "Ask", "retry": "Retry",
    "add_subtopic": "Add subtopic",
}


def _steer(services: Services, run: Run, kind: str, payload: dict, done_message: str) -> None:
    try:
        services.runner.steer(run.id, kind, payload)
    except (UnsupportedCommand, RunnerError, ValueError, LookupError) as exc:
        st.error(f"Could not {STEERING_LABELS.get(kind, kind).lower()}: {exc}")
    else:
        # A full rerun: the run may have been reopened, and the live view must start polling again.
        st.session_state["flash"] = done_message
        st.rerun(scope="app")


def steering_actions(services: Services, run: Run, node: Node) -> None:
    method = get_method(run.method)
    allowed = method.steering
    if node.kind not in method.steerable_kinds:
        st.caption("This node cannot be steered." if method.steerable_kinds else "This method has no steering.")
        return
    key = f"steer-{run.id}-{node.id}"
    if node.status == NodeStatus.PRUNED:
        st.caption("Pruned: nothing grows under this node and the report leaves it out.")
        return
    cols = st.columns(3)
    if "expand" in allowed and node.status == NodeStatus.DONE:
        with cols[0]:
            n = st.number_input("New branches", min_value=1, max_value=8, value=2, key=f"{key}-n")
            if st.button("Expand", key=f"{key}-expand", help="Grow new branches (aspects or subtopics) under this node"):
                _steer(services, run, "expand", {"node_id": node.id, "n": int(n)}, f"Expanding node {node.id}")
    if "deepen" in allowed and node.status == NodeStatus.DONE:
        with cols[1]:
            if st.button("Go deeper", key=f"{key}-deepen", help="Ask the Depth Engine for one follow-up question"):
                _steer(services, run, "deepen", {"node_id": node.id}, f"Going deeper on node {node.id}")
    if "prune" in allowed:
        with cols[2]:
            if st.button("Prune", key=f"{key}-prune", help="Stop this branch and leave it out of the report"):
                _steer(services, run, "prune", {"node_id": node.id}, f"Pruned node {node.id}")
    if "retry" in allowed and node.status == NodeStatus.FAILED:
        if st.button("Retry", key=f"{key}-retry", help="Solve this node again"):
            _steer(services, run, "retry", {"node_id": node.id}, f"Retrying node {node.id}")
    if "ask" in allowed:
        question = st.text_input("Your follow-up question", key=f"{key}-q", placeholder="Ask your own question under this node")
        if st.button("Ask", key=f"{key}-ask"):
            if not question.strip():
                st.error("Type a follow-up question first.")
            else:
                _steer(services, run, "ask", {"node_id": node.id, "question": question.strip()}, "Question added")
    if "add_subtopic" in allowed:
        subtopic = st.text_input("Your subtopic", key=f"{key}-sub", placeholder="Add your own subtopic under this node")
        if st.button("Add subtopic", key=f"{key}-add"):
            if not subtopic.strip():
                st.error("Type a subtopic first.")
            else:
                _steer(services, run, "add_subtopic", {"node_id": node.id, "subtopic": subtopic.strip()},
                       "Subtopic added")


def node_panel(services: Services, run: Run, node: Node) -> None:
    repo = services.repo
    st.markdown(f"**Node {node.id}** · {node.kind} · layer {node.depth} · *{node.status}*")
    render(st, f"#### {node.label}")
    engine = (node.data or {}).get("engine")
    if engine:
        extra = (node.data or {}).get("aspect")
        st.caption(f"Engine: {engine}" + (f" · aspect: {sanitize(extra)}" if extra else ""))
    if node.status == NodeStatus.FAILED and node.error:
        st.error(node.error)
    sources = repo.sources_for_node(node.id)
    all_ids = [s.id for s in repo.list_sources(run.id)]
    if node.content:
        rendered = number_citations(node.content, all_ids)
        render(st, rendered.text)
        by_id = {s.id: s for s in repo.list_sources(run.id)}
        if rendered.numbering:
            st.markdown("**Cited sources**")
            for number, source_id in sorted(rendered.numbering.items()):
                source = by_id[source_id]
                where = source.url or source.ref
                render(st, f"[{number}] {source.title} — {where}")
    elif node.status in (NodeStatus.PENDING, NodeStatus.RUNNING):
        st.caption("Working on it…" if node.status == NodeStatus.RUNNING else "Waiting for its turn.")
    if sources:
        with st.expander(f"Sources gathered ({len(sources)})"):
            for source in sources:
                render(st, f"- **{source.title}** — {source.url or source.ref}\n\n  {source.snippet[:300]}")
    st.caption(f"Tokens {node.prompt_tokens + node.completion_tokens:,} · cost ${node.cost:.4f} · "
               f"LLM time {node.latency_s:.1f} s")
    steering_actions(services, run, node)
    with st.expander("Details (plan, tasks, validation)"):
        st.json(node.data or {}, expanded=False)
