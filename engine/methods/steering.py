"""The steering toolkit every method shares: look a command up in the method's declarations,
validate its payload, resolve and check its target node, apply it, record the outcome.

A command is checked twice: when it is queued (`check`, so the person who sent it hears at once
what was wrong and nothing is stored) and when it is applied (the node may have changed since).
A refused command changes nothing stored but its own status and error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.contract import (
    CommandPayload,
    CommandRejected,
    CommandSpec,
    MethodContract,
    NodeCommand,
    UnsupportedCommand,
)
from storage.models import Command, Node
from storage.statuses import NodeStatus

if TYPE_CHECKING:
    from engine.graph import RunGraph
    from engine.methods.base import Method, P, RunContext


def _spec(contract: MethodContract, kind: str) -> CommandSpec:
    spec = contract.commands.get(kind)
    if spec is None:
        allowed = ", ".join(sorted(contract.commands)) or "none"
        raise UnsupportedCommand(f"the {contract.method} method does not support '{kind}' (it supports: {allowed})")
    return spec


def _statuses(spec: CommandSpec) -> str:
    return " or ".join(sorted(spec.statuses))


def target(
    contract: MethodContract, graph: RunGraph, spec: CommandSpec, payload: CommandPayload, *, queueing: bool = False
) -> Node | None:
    """The node a command acts on, checked against what the command declares."""
    if not isinstance(payload, NodeCommand):
        return None
    try:
        node = graph.node(payload.node_id)
    except LookupError as exc:
        raise CommandRejected(f"'{spec.name}' needs a node of this run: {exc}") from None
    if node.kind not in spec.kinds:
        kinds = ", ".join(contract.node_kinds[k].label.lower() for k in sorted(spec.kinds))
        what = contract.node_kinds[node.kind].label.lower() if node.kind in contract.node_kinds else node.kind
        raise CommandRejected(f"'{spec.label}' applies to {kinds} nodes; this node is a {what} node")
    if node.status == NodeStatus.PRUNED and NodeStatus.PRUNED not in spec.statuses:
        raise CommandRejected("this node is pruned; nothing grows under a pruned node (restore it first)")
    if node.status not in spec.statuses and not (queueing and node.status in NodeStatus.UNFINISHED):
        # A node still being worked on may reach the status the command needs by the time it is
        # applied (a running node that fails, then is retried): checked again then.
        raise CommandRejected(f"this node is {node.status}; '{spec.label}' needs a node that is {_statuses(spec)}")
    if not spec.on_root and node.parent_id is None:
        raise CommandRejected(f"'{spec.label}' does not apply to the question itself")
    return node


def check(contract: MethodContract, graph: RunGraph, kind: str, payload: dict[str, Any] | None) -> CommandPayload:
    """Validate a command before it is queued; raises UnsupportedCommand or CommandRejected."""
    spec = _spec(contract, kind)
    parsed = spec.parse(payload)
    node = target(contract, graph, spec, parsed, queueing=True)
    if spec.precheck is not None:
        parsed = spec.precheck(graph, parsed, node) or parsed
    return parsed


def apply(ctx: RunContext[P], method: Method[P], command: Command) -> set[str]:
    """Validate and apply one command; the outputs to rewrite. Raises when it cannot be applied."""
    contract = method.contract()
    spec = _spec(contract, command.kind)
    payload = spec.parse(command.payload)
    node = target(contract, ctx.graph, spec, payload)
    if spec.precheck is not None:  # again: the run may have moved on since it was queued
        payload = spec.precheck(ctx.graph, payload, node) or payload
    return set(method.apply(ctx, spec, payload, node) or ())


def apply_and_record(ctx: RunContext[P], method: Method[P], command: Command) -> set[str] | None:
    """`apply`, with the outcome recorded on the command at once (a refusal fails the command, not
    the run): what the command then grows is the run's work, and a stop or a kill during it must
    not leave the command to be applied a second time. The outputs to rewrite; None when refused."""
    try:
        rewrite = apply(ctx, method, command)
    except (UnsupportedCommand, LookupError, ValueError) as exc:
        ctx.complete_command(command.id, ok=False, error=str(exc))
        return None
    ctx.complete_command(command.id)
    return rewrite
