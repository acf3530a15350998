"""The node panel: a node's label, the caption its kind's data model gives, then steering (what the
node is doing now, and the commands its method declares for it, `MethodContract.commands_for`, each
with its payload form and, under its button, what became of it: queued, applied or refused), then
its answer (rendered safely) with the cited sources, its usage, status or error. Steering comes
before the node's long text, so the buttons and what they did stay in view."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st
from pydantic import ValidationError

from components.command_outcome import Outcomes
from components.commands import command_controls
from components.knowledge_browser import knowledge_browser
from components.live_run import RunReads, node_sources
from components.node_text import node_answer, node_error
from components.safe_markdown import render_source, sanitize
from components.step_log import command_label, command_node, current_steps
from engine.contract import REGENERATE_REPORT, Layout, MethodContract, NodeData, NodeDataError
from engine.node_numbers import node_numbers
from engine.reads import Command, CommandStatus, Node, NodeStatus, Run, RunEvent
from engine.safe_text import inline_text
from engine.services import Services

PRUNED = "Pruned: nothing grows under this node and the report leaves it out."
NOTHING_APPLIES = "No command applies to this node now."
NO_STEERING = "This method has no steering."
# The method steers the whole run (the research agent's add a query, drop a source), not single nodes.
RUN_STEERING_ONLY = (
    "This method is steered as a whole, not node by node: see its commands in the {tab} tab beside this one."
)


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


def when_it_applies(
    contract: MethodContract | None, command: Command, node: Node, number: int, step: str | None
) -> str:
    """What a queued command waits for, said plainly ("#3 is summarising …; the prune applies
    when that step ends")."""
    label = command_label(contract, command.kind).lower()
    if command.status == CommandStatus.TAKEN:
        return f"Applying the {label} now."
    if node.status == NodeStatus.RUNNING:
        doing = step or "being worked on"
        return f"#{number} is {doing}; the {label} applies when that step ends."
    return f"The {label} applies at the run's next step."


def node_outcomes(
    contract: MethodContract | None, node: Node, commands: Sequence[Command], number: int, step: str | None
) -> Outcomes:
    """The node's commands on their way (queued, applying) and the latest finished one (applied, or
    refused with the reason), each to be said under its button."""
    return Outcomes.of(
        contract,
        [c for c in commands if command_node(c) == node.id],
        explain=lambda command: when_it_applies(contract, command, node, number, step),
    )


def steering_actions(
    services: Services, run: Run, node: Node, contract: MethodContract | None, outcomes: Outcomes
) -> None:
    """The node's commands, each with what became of it under its button."""
    if node.status == NodeStatus.PRUNED:
        st.caption(PRUNED)
        specs = contract.commands_for(node) if contract is not None else []
        # The method may undo it (Restore); the Prune that did it is said where its button was.
        command_controls(services, run, specs, key=f"steer-{run.id}-{node.id}", node=node, outcomes=outcomes)
        return
    if contract is None:
        st.caption(f"This app does not serve the method '{sanitize(run.method)}', so the run cannot be steered here.")
        outcomes.draw_others(())  # what was sent to it before, said in the stored words
        return
    if not contract.steers_nodes:
        # Rewriting the report is not steering: a method that offers only that has none.
        steers_run = any(spec.name != REGENERATE_REPORT for spec in contract.run_commands)
        st.caption(
            RUN_STEERING_ONLY.format(tab=f"“{inline_text(contract.view.side_tab)}”") if steers_run else NO_STEERING
        )
        return
    specs = contract.commands_for(node)
    if not specs:
        st.caption(NOTHING_APPLIES)
    command_controls(services, run, specs, key=f"steer-{run.id}-{node.id}", node=node, outcomes=outcomes)


def node_panel(
    services: Services,
    run: Run,
    node: Node,
    contract: MethodContract | None = None,
    reads: RunReads | None = None,
    *,
    commands: Sequence[Command] = (),
    events: Sequence[RunEvent] = (),
    numbers: dict[int, int] | None = None,
) -> None:
    number = (numbers if numbers is not None else node_numbers(reads.nodes if reads else [node])).get(node.id, 0)
    # The node's number in its run for the reader; its stored id only in the container's key (a
    # class on the page), for the browser tests.
    with st.container(key=f"node-panel-{node.id}"):
        # A grid's place is its row and column (the caption says them): "layer" means nothing there.
        layer = "" if contract is not None and contract.view.layout == Layout.GRID else f" · layer {node.depth}"
        st.markdown(f"**Node #{number}** · {node.kind}{layer} · *{node.status}*")
    st.markdown(f"#### {inline_text(node.label)}")  # our heading; the label inside it is plain text
    caption = node_caption(contract, node)
    if caption:
        # One line by contract (`NodeData.caption`), often quoting model or page text (an action's
        # argument, a query, a short answer): plain text, never a link, list or heading.
        st.caption(inline_text(caption))
    # Steering first: what the node is doing, the buttons, each with what became of its commands.
    step = current_steps(events).get(node.id) if node.status == NodeStatus.RUNNING else None
    if step:
        st.caption(inline_text(f"Now: {step}"))
    steering_actions(services, run, node, contract, node_outcomes(contract, node, commands, number, step))
    if node.status == NodeStatus.FAILED and node.error:
        node_error(node.error)
    sources, all_sources = node_sources(services, reads, node)
    data = node_data(contract, node)
    if node.content and node.parent_id is None and " ".join(node.content.split()) == " ".join(run.question.split()):
        # A root that holds the question (not an answer): written as asked (its Markdown is not
        # rendered, as in the map and the question line), and not twice when the heading above
        # already shows it whole.
        if " ".join(node.content.split()) != " ".join(node.label.split()):
            st.markdown(inline_text(node.content))
    elif node.content:
        node_answer(node, data, all_sources, number)
    elif node.status in (NodeStatus.PENDING, NodeStatus.RUNNING):
        st.caption("Working on it…" if node.status == NodeStatus.RUNNING else "Waiting for its turn.")
    if sources:
        with st.expander(f"Sources gathered ({len(sources)})"):
            for source in sources:
                render_source(st, source.title, source.url or source.ref, source.snippet)
    knowledge_browser(services, run, node, contract, data, reads)
    st.caption(
        f"Tokens {node.prompt_tokens + node.completion_tokens:,} · cost ${node.cost:.4f} · "
        f"LLM time {node.latency_s:.1f} s"
    )
    with st.expander("Details (the node's stored data)"):
        st.json(node.data or {}, expanded=False)
