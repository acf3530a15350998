"""The node panel: a node's label, the caption its kind's data model gives, its answer (rendered
safely) with the cited sources, its usage, status or error, and the steering commands its method
declares for it (`MethodContract.commands_for`), each with its payload form."""

from __future__ import annotations

import streamlit as st
from pydantic import ValidationError

from components.commands import command_controls
from components.live_run import RunReads, node_sources
from components.node_text import node_answer, node_error
from components.safe_markdown import render, sanitize
from engine.methods.contract import MethodContract, NodeData, NodeDataError
from engine.safe_text import inline_text
from engine.services import Services
from storage.models import Node, NodeStatus, Run

PRUNED = "Pruned: nothing grows under this node and the report leaves it out."
NOTHING_APPLIES = "No command applies to this node now."
NO_STEERING = "This method has no steering."


def node_data(contract: MethodContract | None, node: Node) -> NodeData | None:
    """The node's data read by its kind's model (None when the kind is unknown or the data does not fit)."""
    if contract is None or node.kind not in contract.node_kinds:
        return None
    try:
        return contract.node_kinds[node.kind].read(node)
    except (ValidationError, NodeDataError, LookupError, TypeError, ValueError):
        return None


def node_caption(contract: MethodContract | None, node: Node) -> str:
    """The kind's one-line description of the node ("" when its data does not fit its model)."""
    data = node_data(contract, node)
    return data.caption() if data is not None else ""


def steering_actions(services: Services, run: Run, node: Node, contract: MethodContract | None) -> None:
    if node.status == NodeStatus.PRUNED:
        st.caption(PRUNED)
        return
    if contract is None:
        st.caption(f"This app does not serve the method '{sanitize(run.method)}', so the run cannot be steered here.")
        return
    if not any(spec.targets_node for spec in contract.commands.values()):
        st.caption(NO_STEERING)
        return
    specs = contract.commands_for(node)
    if not specs:
        st.caption(NOTHING_APPLIES)
        return
    command_controls(services, run, specs, key=f"steer-{run.id}-{node.id}", node=node)


def node_panel(services: Services, run: Run, node: Node, contract: MethodContract | None = None,
               reads: RunReads | None = None) -> None:
    st.markdown(f"**Node {node.id}** · {node.kind} · layer {node.depth} · *{node.status}*")
    st.markdown(f"#### {inline_text(node.label)}")  # our heading; the label inside it is plain text
    caption = node_caption(contract, node)
    if caption:
        st.caption(sanitize(caption))
    if node.status == NodeStatus.FAILED and node.error:
        node_error(node.error)
    sources, all_sources = node_sources(services, reads, node)
    if node.content:
        node_answer(node, node_data(contract, node), all_sources)
    elif node.status in (NodeStatus.PENDING, NodeStatus.RUNNING):
        st.caption("Working on it…" if node.status == NodeStatus.RUNNING else "Waiting for its turn.")
    if sources:
        with st.expander(f"Sources gathered ({len(sources)})"):
            for source in sources:
                render(st, f"- **{source.title}** — {source.url or source.ref}\n\n  {source.snippet[:300]}")
    st.caption(f"Tokens {node.prompt_tokens + node.completion_tokens:,} · cost ${node.cost:.4f} · "
               f"LLM time {node.latency_s:.1f} s")
    steering_actions(services, run, node, contract)
    with st.expander("Details (the node's stored data)"):
        st.json(node.data or {}, expanded=False)
