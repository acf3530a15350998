"""The run's graph as a method sees it: bound to one run, checked against the method's
declarations. It is a method's only door to storage. While a run executes, its step log, LLM calls
and node updates are gathered and stored together (`engine/write_behind.py`); everything else is
written through. While it executes, the graph is the only writer of the run's nodes, reports, run
states and sources, so it reads them once and then answers from memory (`RunGraph.__init__`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from engine import narration
from engine.contract import GENERIC_STEP, MethodContract, NodeData, NodeDataError, RunStateModel
from engine.redact import redact_secrets
from engine.search.protocol import Hit
from engine.write_behind import RunJournal
from storage.models import Edge, Node, Report, Source, row_copy, stored_id, utcnow
from storage.repository import GraphSnapshot, NodeInput, Repository, SourceInput
from storage.rows_batch import RunEnding
from storage.statuses import NodeStatus

D = TypeVar("D", bound=NodeData)
S = TypeVar("S", bound=RunStateModel)

# Report data key: the report was written from a stopped run's graph (its value: why it stopped).
PARTIAL_REPORT = "partial"
# Report data key: where the method's own text (`save_report`'s `own`) starts in the stored Markdown.
OWN_TEXT_FROM = "own_text_from"
# Report data key: the section titles the method planned (`save_report`'s `headings`): the model's
# heading lines with these words stay headings; any other is prose (`safe_text.sectioned_prose`).
OWN_HEADINGS = "own_headings"


@dataclass
class NewNode:
    """One node for `RunGraph.add_many`."""

    kind: str
    label: str
    parent: Node | None = None
    content: str = ""
    status: str = NodeStatus.PENDING
    priority: float = 0.0
    data: Mapping[str, Any] | BaseModel = field(default_factory=dict)
    edge_kind: str = "child"
    depth: int | None = None


def report_outdated(repo: Repository, run_id: str, report: Report, steering: Iterable[str]) -> bool:
    """`report` was written before the run's last applied steering command (one of `steering`)."""
    applied = repo.last_command_applied_at(run_id, steering)
    return applied is not None and _naive(applied) > _naive(report.created_at)


def _naive(moment: datetime) -> datetime:
    # SQLite hands back naive UTC times, PostgreSQL aware ones: compared as naive UTC.
    return moment.replace(tzinfo=None) if moment.tzinfo is None else moment.astimezone(UTC).replace(tzinfo=None)


def _copy(node: Node) -> Node:
    """A node of its own for a caller: what it changes changes no one else's (nor the mirror)."""
    return row_copy(node)


def _copy_source(source: Source) -> Source:
    return row_copy(source)


class RunGraph:
    """Every node a method adds or finishes is stored, so the UI sees it live and a resumed run
    continues from it: at once, or with a `journal`, within its delay (a read of nodes sees what
    this graph gathered: from memory while it executes, else stored first). With a contract, every node's `data`, every
    edge kind and every run state is checked against what the method declared (`NodeDataError`
    otherwise: a bug)."""

    def __init__(
        self, repo: Repository, run_id: str, contract: MethodContract | None = None, journal: RunJournal | None = None
    ) -> None:
        self._repo = repo
        self.run_id = run_id
        self.contract = contract
        self._journal = journal
        # The columns this graph has set on each node through the journal: a node handed back by
        # `update` shows them (the row itself may not be stored yet).
        self._set: dict[int, dict[str, Any]] = {}
        # The latest `data` of every node this graph has read or written. While a run executes,
        # its graph is the only writer of its nodes' data (steering is applied by the run's own
        # thread), so a merge can be computed here and written without reading the row first.
        self._data: dict[int, dict[str, Any]] = {}
        self._lock = threading.Lock()
        # The last step narrated per node (None: the run itself), so a repeat of the same step
        # (one task after another, each reading its search results) is not logged again.
        self._steps: dict[int | None, str] = {}
        self._partial = ""  # set inside `partial_reports`
        # The refs of the run's stored sources, while it executes (read at its first add).
        self._source_refs: set[str] | None = None
        # While the run executes (a journal, until `settle`): every node of the run as this graph
        # last wrote or read it, read from storage once, so reads of nodes cost no query and wait
        # for no batch. Its graph is the only writer of its nodes then (steering is applied by the
        # run's own thread). Usage totals, which storage computes from the calls, are as last
        # read: no method reads them.
        self._mirroring = journal is not None
        self._mirror: dict[int, Node] | None = None
        # Likewise the run's latest report of each kind and the data of its latest run states, while
        # it executes (this graph writes them).
        self._reports: dict[str, Report | None] = {}
        # A first execution (from `has_no_nodes`): nothing of the run was stored before it, so
        # every report, source and link of the run is this graph's, and it knows them all: the run's
        # sources (the latest row of each, as its last write returned it) and each node's links.
        self._fresh = False
        self._sources_by_id: dict[int, Source] = {}
        self._links: dict[int, dict[int, int]] = {}  # node id -> source id -> rank (the first kept)
        self._unknown_links: set[int] = set()
        self._adding_sources = threading.Lock()
        self._states: dict[str, dict[str, Any] | None] = {}
        self._saving_state = threading.Lock()

    # A read only fills in nodes not seen yet: a read that started before a write of this graph
    # may return it after, and must not put older data back.
    def _seen(self, node: Node) -> Node:
        with self._lock:
            self._data.setdefault(stored_id(node), dict(node.data or {}))
        return node

    def _written(self, node: Node) -> Node:
        with self._lock:
            self._data[stored_id(node)] = dict(node.data or {})
            if self._mirror is not None:
                self._mirror[stored_id(node)] = _copy(node)
        return node

    def _mirrored(self) -> dict[int, Node] | None:
        """The mirror of the run's nodes (see `__init__`), read at the first read; None when the
        run is not executing here. Call with `_lock` held: a write that ends while it is read is
        applied to it after, and one stored before is in what is read."""
        if not self._mirroring:
            return None
        if self._mirror is None:
            if self._journal is not None:
                self._journal.flush_nodes()
            nodes = self._repo.list_nodes(self.run_id)
            self._mirror = {stored_id(n): n for n in nodes}
            for node in nodes:
                self._data.setdefault(stored_id(node), dict(node.data or {}))
        return self._mirror

    def _gathering(self) -> RunJournal | None:
        """The journal while it gathers (until `settle`): a write made beside it leaves the run's
        version bump to the journal's next batch (`journal.bump()`) instead of bumping itself."""
        with self._lock:
            return self._journal if self._mirroring else None

    def has_no_nodes(self, *, first_execution: bool = False) -> None:
        """The run has no node yet (its stored count is 0, as it starts executing): the mirror
        starts empty, and the first read of nodes costs no query. On its first execution it has no
        report either (only an execution writes one), so no read of a report costs a query."""
        with self._lock:
            if self._mirroring and self._mirror is None:
                self._mirror = {}
                self._fresh = first_execution
                if first_execution:
                    self._source_refs = set()

    def _from_mirror(self, keep: Callable[[Node], bool]) -> list[Node] | None:
        """Copies of the mirrored nodes `keep` keeps, by id; None when there is no mirror."""
        with self._lock:
            mirror = self._mirrored()
            if mirror is None:
                return None
            return [_copy(mirror[node_id]) for node_id in sorted(mirror) if keep(mirror[node_id])]

    def _seen_all(self, nodes: list[Node]) -> list[Node]:
        with self._lock:
            for node in nodes:
                self._data.setdefault(stored_id(node), dict(node.data or {}))
        return nodes

    def _sync(self) -> None:
        """Store what the journal gathered, before a read of the graph as a whole."""
        if self._journal is not None:
            self._journal.flush()

    def _synced(self) -> Repository:
        """The repository, once the node updates the journal gathered are stored: a read of nodes
        (their status, content and data may be among them). Other writes and reads need not wait:
        nothing gathered is theirs, and calls and step-log lines change no node row."""
        if self._journal is not None:
            self._journal.flush_nodes()
        return self._repo

    def settle(self, ending: RunEnding | None = None) -> bool:
        """Store everything gathered and write through from now on (the run's execution ends):
        reads go to storage again (the runner's own writes follow, e.g. nodes left running put back).
        `ending` (how the run ended) is stored with the last batch when there is a journal: True
        when it was; else the caller stores it."""
        with self._lock:
            self._mirroring, self._mirror, self._reports, self._states = False, None, {}, {}
            self._fresh, self._sources_by_id, self._links, self._unknown_links = False, {}, {}, set()
        if self._journal is None:
            return False
        self._journal.close(ending)
        return ending is not None

    # ------------------------------------------------------------------ checks

    def _checked(
        self, kind: str, data: Mapping[str, Any] | BaseModel | None, node_id: int | None = None
    ) -> dict[str, Any]:
        if data is None:
            return {}
        if self.contract is None:
            return data.model_dump(mode="json", exclude_unset=True) if isinstance(data, BaseModel) else dict(data)
        return self.contract.kind(kind).validate_data(data, node_id=node_id)

    def _check_kind(self, kind: str) -> None:
        if self.contract is not None:
            self.contract.kind(kind)

    def _check_edge(self, kind: str) -> None:
        if self.contract is not None:
            self.contract.edge(kind)

    # ------------------------------------------------------------------ nodes

    def add(
        self,
        *,
        kind: str,
        label: str,
        parent: Node | int | None = None,
        content: str = "",
        status: str = NodeStatus.PENDING,
        depth: int | None = None,
        priority: float = 0.0,
        data: Mapping[str, Any] | BaseModel | None = None,
        edge_kind: str = "child",
    ) -> Node:
        self._check_kind(kind)
        self._check_edge(edge_kind)
        parent_node = self.node(parent) if isinstance(parent, int) else parent
        if depth is None:
            depth = parent_node.depth + 1 if parent_node else 0
        return self._add_inputs(
            [
                NodeInput(
                    kind=kind,
                    label=label,
                    content=content,
                    parent_id=parent_node.id if parent_node else None,
                    status=status,
                    depth=depth,
                    priority=priority,
                    data=self._checked(kind, data),
                    edge_kind=edge_kind,
                )
            ]
        )[0]

    def add_many(self, nodes: Sequence[NewNode]) -> list[Node]:
        """Several nodes in one transaction (e.g. the children a step proposed)."""
        inputs = []
        for new in nodes:
            self._check_kind(new.kind)
            self._check_edge(new.edge_kind)
            depth = new.depth if new.depth is not None else (new.parent.depth + 1 if new.parent else 0)
            inputs.append(
                NodeInput(
                    kind=new.kind,
                    label=new.label,
                    parent_id=new.parent.id if new.parent else None,
                    content=new.content,
                    status=new.status,
                    depth=depth,
                    priority=new.priority,
                    data=self._checked(new.kind, new.data),
                    edge_kind=new.edge_kind,
                )
            )
        return self._add_inputs(inputs) if inputs else []

    def _add_inputs(self, inputs: Sequence[NodeInput]) -> list[Node]:
        # Stored at once (the method needs their ids); while the journal gathers, it counts them
        # and bumps the run's version with its next batch.
        journal = self._gathering()
        added = self._repo.add_nodes(self.run_id, inputs, counted=journal is None)
        if journal is not None:
            journal.count_nodes(len(added))
        return [self._written(n) for n in added]

    def node(self, node_id: int) -> Node:
        with self._lock:
            mirror = self._mirrored()
            if mirror is not None and node_id in mirror:
                return _copy(mirror[node_id])
        node = self._synced().get_node(node_id)
        if node.run_id != self.run_id:
            raise LookupError(f"node {node_id} belongs to another run")
        return self._seen(node)

    def data(self, node: Node, model: type[D] | None = None) -> D:
        """A node's data as its kind's model (typed read)."""
        if model is not None:
            return model.of(node)
        if self.contract is None:
            raise NodeDataError("typed data needs the method's contract")
        return self.contract.kind(node.kind).read(node)  # type: ignore[return-value]

    def start(self, node: Node) -> Node:
        return self.update(node, status=NodeStatus.RUNNING, started_at=utcnow(), error="")

    def finish(
        self,
        node: Node,
        *,
        content: str | None = None,
        data: Mapping[str, Any] | BaseModel | None = None,
        label: str | None = None,
    ) -> Node:
        values: dict[str, Any] = {"status": NodeStatus.DONE, "finished_at": utcnow()}
        if content is not None:
            values["content"] = content
        if label is not None:
            values["label"] = label
        return self.update(node, merge_data=data, **values)

    def fail(self, node: Node, error: str, *, data: Mapping[str, Any] | BaseModel | None = None) -> Node:
        # Errors quote URLs (an endpoint, a fetched page): never store credentials from them.
        error = redact_secrets(error)
        failed = self.update(node, merge_data=data, status=NodeStatus.FAILED, error=error, finished_at=utcnow())
        # The step log says why in a reader's words; the technical text stays in the event's data.
        self.narrate(narration.plain_failure(error), node_id=node.id, kind=narration.FAILED, error=error[:2000])
        return failed

    def update(
        self,
        node: Node,
        *,
        merge_data: Mapping[str, Any] | BaseModel | None = None,
        replace_data: Mapping[str, Any] | BaseModel | None = None,
        **values: Any,
    ) -> Node:
        """Set columns; `merge_data` is merged into the node's data, `replace_data` replaces it."""
        if "data" in values:
            raise TypeError("use merge_data= or replace_data=, so the data is checked against the node's kind")
        node_id = stored_id(node)
        if self._journal is not None:
            return self._gathered_update(self._journal, node, node_id, merge_data, replace_data, values)
        with self._lock:  # one writer of a node's data at a time, so no merge is lost
            if replace_data is not None:
                values["data"] = self._checked(node.kind, replace_data, node_id)
            elif merge_data is not None:
                merge = self._checked(node.kind, merge_data, node_id)
                if node_id in self._data:
                    values["data"] = {**self._data[node_id], **merge}
                else:  # never seen here: let storage merge with what is stored
                    updated = self._repo.update_node(node_id, merge_data=merge or None, **values)
                    self._data[stored_id(updated)] = dict(updated.data or {})
                    return updated
            updated = self._repo.update_node(node_id, **values)
            self._data[stored_id(updated)] = dict(updated.data or {})
            return updated

    def _gathered_update(
        self,
        journal: RunJournal,
        node: Node,
        node_id: int,
        merge_data: Mapping[str, Any] | BaseModel | None,
        replace_data: Mapping[str, Any] | BaseModel | None,
        values: dict[str, Any],
    ) -> Node:
        """`update` through the journal: the node's new values are gathered, and the node is handed
        back as this graph has made it (usage totals as last read)."""
        if merge_data is not None and replace_data is None:
            with self._lock:
                known = node_id in self._data
            if not known:  # never seen here: its stored data is what the merge goes over
                self.node(node_id)
        with self._lock:  # one writer of a node's data at a time, so no merge is lost
            if replace_data is not None:
                values["data"] = self._checked(node.kind, replace_data, node_id)
            elif merge_data is not None:
                values["data"] = {**self._data[node_id], **self._checked(node.kind, merge_data, node_id)}
            journal.update_node(node_id, values)
            if "data" in values:
                self._data[node_id] = dict(values["data"])
            columns = self._set.setdefault(node_id, {})
            columns.update(values)
            mirror = self._mirror  # not read here if it is not yet: that would store what is gathered
            base = mirror.get(node_id, node) if mirror is not None else node
            updated = Node(**{**base.model_dump(), **columns, "data": dict(self._data.get(node_id, node.data or {}))})
            if mirror is not None and updated.run_id == self.run_id:
                mirror[node_id] = _copy(updated)
            return updated

    def nodes(self, *, kind: str | None = None, status: str | None = None) -> list[Node]:
        mirrored = self._from_mirror(lambda n: (not kind or n.kind == kind) and (not status or n.status == status))
        if mirrored is not None:
            return mirrored
        return self._seen_all(self._synced().list_nodes(self.run_id, kind=kind, status=status))

    def frontier(self, kinds: Iterable[str], statuses: Iterable[str] = NodeStatus.UNFINISHED) -> list[Node]:
        """The nodes of these kinds that still have work (pending or running by default), by id."""
        kinds, statuses = set(kinds), set(statuses)
        mirrored = self._from_mirror(lambda n: n.kind in kinds and n.status in statuses)
        if mirrored is not None:
            return mirrored
        return self._seen_all(self._synced().frontier(self.run_id, list(kinds), list(statuses)))

    def children(self, node: Node) -> list[Node]:
        parent_id = stored_id(node)
        if node.run_id == self.run_id:
            mirrored = self._from_mirror(lambda n: n.parent_id == parent_id)
            if mirrored is not None:
                return mirrored
        return self._seen_all(self._synced().children(parent_id))

    def root(self) -> Node | None:
        return next((n for n in self.nodes() if n.parent_id is None), None)

    def snapshot(self) -> GraphSnapshot:
        self._sync()  # the run's row too: its totals and version
        return self._repo.snapshot(self.run_id)

    def prune(self, node: Node, *, kinds: Iterable[str] | None = None) -> list[Node]:
        """Prune `node` and everything under it (of `kinds`, when given); returns what was pruned."""
        if node.parent_id is None:
            raise ValueError("the question itself cannot be pruned; stop or delete the run instead")
        wanted = set(kinds) if kinds is not None else None
        by_parent: dict[int | None, list[Node]] = {}
        for other in self.nodes():
            if wanted is None or other.kind in wanted:
                by_parent.setdefault(other.parent_id, []).append(other)
        pruned, stack = [], [node]
        while stack:
            current = stack.pop()
            if current.status != NodeStatus.PRUNED:
                pruned.append(
                    self.update(
                        current,
                        status=NodeStatus.PRUNED,
                        merge_data={"status_before_prune": current.status, "pruned_with": node.id},
                    )
                )
            stack.extend(by_parent.get(current.id, []))
        return pruned

    def restore(self, node: Node) -> list[Node]:
        """Undo the prune of `node`: it and what was pruned with it get their status back (a node that
        was being worked on is pending again, so the method takes it up); returns what was restored.
        A node pruned with another is restored with that one; one under a pruned node, after it."""
        if node.status != NodeStatus.PRUNED:
            raise ValueError(f"node {node.id} is {node.status}, not pruned: there is nothing to restore")
        with_ = (node.data or {}).get("pruned_with")
        if with_ is not None and with_ != node.id:
            raise ValueError(f"node {node.id} was pruned with node {with_}: restore node {with_}")
        parent = self.node(node.parent_id) if node.parent_id is not None else None
        if parent is not None and parent.status == NodeStatus.PRUNED:
            raise ValueError(f"node {node.id} is under the pruned node {parent.id}: restore node {parent.id} first")
        by_parent: dict[int | None, list[Node]] = {}
        for other in self.nodes(status=NodeStatus.PRUNED):
            by_parent.setdefault(other.parent_id, []).append(other)
        restored, stack = [], [node]
        while stack:
            current = stack.pop()
            data = current.data or {}
            # Pruned by an earlier release (no `pruned_with`): taken as part of the branch.
            if current.id != node.id and data.get("pruned_with") not in (node.id, None):
                continue  # pruned on its own, before: stays pruned
            before = data.get("status_before_prune") or NodeStatus.DONE
            status = NodeStatus.PENDING if before == NodeStatus.RUNNING else before
            restored.append(
                self.update(current, status=status, merge_data={"status_before_prune": None, "pruned_with": None})
            )
            stack.extend(by_parent.get(current.id, []))
        return restored

    # ------------------------------------------------------------------ narration

    def narrate(self, text: str, *, node_id: int | None = None, kind: str = "step", **data: Any) -> None:
        """One line of the run's step log, in plain words (`engine/narration.py`: the kinds).
        `data` is for the machine-readable side (counts, the technical error); it must be JSON."""
        if kind not in narration.KINDS:
            raise ValueError(f"unknown event kind '{kind}' (one of: {', '.join(narration.KINDS)})")
        with self._lock:
            if kind == narration.STEP:
                if self._steps.get(node_id) == text:
                    return
                self._steps[node_id] = text
            else:
                self._steps.pop(node_id, None)  # after a search or a failure, the same step is news
        (self._journal or self._repo).add_event(self.run_id, kind, text, node_id=node_id, data=data)

    def narrate_call(self, prompt: str, *, node_id: int | None, attempt: int = 1) -> None:
        """The step an LLM call is, in the words the method declares for its prompt."""
        words = self.contract.step_words(prompt) if self.contract is not None else GENERIC_STEP
        if attempt > 1:
            words += " (asking again: the last answer did not have the expected form)"
        self.narrate(words, node_id=node_id, kind=narration.STEP, prompt=prompt, attempt=attempt)

    # ------------------------------------------------------------------ edges

    def link(self, src: Node | int, dst: Node | int, kind: str, *, data: Mapping[str, Any] | None = None) -> None:
        """An edge of any declared kind between two nodes of this run (unique per kind: an edge
        already there is kept as it is). While the run executes, stored with the journal's next
        batch (both nodes are stored already)."""
        self._check_edge(kind)
        src_id = src if isinstance(src, int) else stored_id(src)
        dst_id = dst if isinstance(dst, int) else stored_id(dst)
        journal = self._gathering()
        if journal is not None:
            # Checked here, as the database's keys would: a batch it refused would be tried again.
            with self._lock:
                mirror = self._mirrored() or {}
                strangers = [node_id for node_id in (src_id, dst_id) if node_id not in mirror]
            if strangers:
                raise ValueError(f"node {strangers[0]} is not a node of run '{self.run_id}'")
            journal.add_edge(src_id, dst_id, kind, dict(data or {}))
        else:
            self._repo.add_edge(self.run_id, src_id, dst_id, kind, data=dict(data or {}))

    def unlink(self, src: Node | int, dst: Node | int, kind: str) -> bool:
        """Remove the edge src -> dst of this kind (a link the graph no longer has); whether it was there."""
        src_id = src if isinstance(src, int) else stored_id(src)
        dst_id = dst if isinstance(dst, int) else stored_id(dst)
        if self._journal is not None:
            self._journal.flush_edges()
        return self._repo.remove_edge(self.run_id, src_id, dst_id, kind)

    def edges(self, kind: str | None = None) -> list[Edge]:
        if self._journal is not None:
            self._journal.flush_edges()
        return self._repo.list_edges(self.run_id, kind=kind)

    # ------------------------------------------------------------------ run state

    def state(self, name: str, model: type[S] | None = None) -> S | None:
        """The latest version of a run state, as its declared model (None before the first save)."""
        with self._lock:
            if self._mirroring and self._fresh:
                self._states.setdefault(name, None)  # a first execution: none stored before its own
            known, mirroring = name in self._states, self._mirroring
            data = self._states.get(name)
        if not known:
            stored = self._repo.latest_run_state(self.run_id, name)
            data = None if stored is None else stored.data
            if mirroring:
                with self._lock:
                    if self._mirroring:
                        self._states.setdefault(name, data)
                        data = self._states[name]
        if data is None:
            return None
        return self._state_model(name, model).model_validate(data)

    def state_history(self, name: str, model: type[S] | None = None) -> list[S]:
        kind = self._state_model(name, model)
        if self._journal is not None:
            self._journal.flush_states()  # versions may be gathered, not stored yet
        return [kind.model_validate(s.data) for s in self._repo.list_run_states(self.run_id, name)]

    def save_state(self, name: str, value: RunStateModel) -> None:
        """Store a new version of a run state."""
        schema = 1
        if self.contract is not None:
            spec = self.contract.state(name)
            if not isinstance(value, spec.model):
                raise NodeDataError(f"run state '{name}' must be a {spec.model.__name__}, not {type(value).__name__}")
            schema = spec.schema
        data = value.model_dump(mode="json")
        with self._saving_state:  # the remembered latest is the stored latest (saves take turns anyway)
            journal = self._gathering()
            if journal is None:
                self._repo.save_run_state(self.run_id, name, data, schema=schema)
            else:
                # Gathered: stored with the run's next batch, its version the next in order; this
                # graph answers reads of it meanwhile. A save cost the step 5 ms of its path.
                journal.save_state(name, data, schema)
            with self._lock:
                if self._mirroring:
                    self._states[name] = data

    def _state_model(self, name: str, model: type[S] | None) -> type[S]:
        if model is not None:
            return model
        if self.contract is None:
            raise NodeDataError("typed run state needs the method's contract")
        return self.contract.state(name).model  # type: ignore[return-value]

    # ------------------------------------------------------------------ sources

    def add_sources(self, hits: Sequence[Hit], *, node: Node | None = None) -> list[Source]:
        """Store hits as the run's sources, linked to `node` in their order."""
        return self.add_source_batches([hits], node=node)[0]

    def add_source_batches(self, batches: Sequence[Sequence[Hit]], *, node: Node | None = None) -> list[list[Source]]:
        """`add_sources` of each batch in turn (several searches' results, each ranked within its
        own), stored in one write."""
        inputs = [
            [
                SourceInput(
                    ref=h.ref, title=h.title, snippet=h.snippet, text=h.text, kind=h.kind, url=h.url, score=h.score
                )
                for h in hits
            ]
            for hits in batches
        ]
        node_id = node.id if node else None
        journal = self._gathering()
        if journal is None:
            return self._repo.add_source_batches(self.run_id, inputs, node_id=node_id)
        # Executing: this graph is the only writer of the run's sources, so it knows which refs are
        # stored (read once). One add at a time: what storage returns is then remembered in the
        # order it was stored (two reads of one page united by parallel adds keep the text of the
        # later). SQLite takes one writer at a time anyway.
        with self._adding_sources:
            with self._lock:
                known = self._source_refs
                # A first execution knows every stored source's text as well: nothing is read back.
                texts = (
                    {source.ref: source.text for source in self._sources_by_id.values()}
                    if self._fresh and self._mirroring
                    else None
                )
            if known is None:
                known = self._repo.source_refs(self.run_id)
            stored = self._repo.add_source_batches(
                self.run_id, inputs, node_id=node_id, stored_refs=known, stored_texts=texts, bump=False
            )
            with self._lock:
                self._source_refs = known | self._source_refs if self._source_refs else set(known)
                self._source_refs |= {item.ref for batch in inputs for item in batch}
                if self._fresh and self._mirroring:
                    for sources in stored:
                        self._sources_by_id.update((stored_id(source), source) for source in sources)
                        if node_id is not None:
                            self._remember_links(node_id, [stored_id(source) for source in sources])
        journal.bump()
        return stored

    def _remember_links(self, node_id: int, source_ids: Sequence[int]) -> None:
        """As storage links them: ranked by first position, a link already there keeps its rank."""
        links = self._links.setdefault(node_id, {})
        first: dict[int, int] = {}
        for position, source_id in enumerate(source_ids):
            first.setdefault(source_id, position)
        for source_id, rank in first.items():
            links.setdefault(source_id, rank)

    def link_sources(self, node: Node, source_ids: Sequence[int]) -> None:
        """Link already stored sources to a node (e.g. the ones its answer cites)."""
        journal = self._gathering()
        with self._adding_sources:
            if journal is not None:  # ids known, nothing to read back: stored with the next batch
                journal.link_sources(stored_id(node), source_ids)
            else:
                self._repo.link_sources(stored_id(node), source_ids)
            with self._lock:
                if all(sid in self._sources_by_id for sid in source_ids):
                    self._remember_links(stored_id(node), source_ids)
                else:  # a source this graph did not store: the node's links are read from storage
                    self._unknown_links.add(stored_id(node))

    def sources(self, node: Node | None = None) -> list[Source]:
        """A node's sources by rank (then id), or the run's by id."""
        with self._lock:
            if self._fresh and self._mirroring:
                if node is None:
                    return [_copy_source(self._sources_by_id[sid]) for sid in sorted(self._sources_by_id)]
                if stored_id(node) in (self._mirror or {}) and stored_id(node) not in self._unknown_links:
                    links = self._links.get(stored_id(node), {})
                    return [
                        _copy_source(self._sources_by_id[sid])
                        for sid in sorted(links, key=lambda sid: (links[sid], sid))
                    ]
        if self._journal is not None:
            self._journal.flush_links()  # a node's links may be gathered, not stored yet
        return self._repo.sources_for_node(stored_id(node)) if node else self._repo.list_sources(self.run_id)

    # ------------------------------------------------------------------ reports

    def save_report(
        self,
        markdown: str,
        *,
        data: dict[str, Any] | None = None,
        kind: str = "final",
        own: str = "",
        headings: Sequence[str] = (),
    ) -> None:
        """`markdown`: the report's text as the model wrote it (or a page, a document): untrusted, it is
        shown as prose and makes no structure (`engine/report.py`). `own`: what the method adds
        after it, its own sections and notes, whose headings, lists and quotes stay; any untrusted
        piece in it must be escaped where it is put in (`safe_text.inline_text`). Stored as one
        text, `markdown + own`, with where `own` starts (`OWN_TEXT_FROM`). `headings`: the section
        titles the method planned (an outline): in `markdown`, a heading line with one of these
        titles stays a heading (`OWN_HEADINGS`), every other line is prose."""
        if self._partial:
            data = {**(data or {}), PARTIAL_REPORT: self._partial}
        if headings:
            data = {**(data or {}), OWN_HEADINGS: [str(title) for title in headings]}
        if own:
            data = {**(data or {}), OWN_TEXT_FROM: len(markdown)}
        journal = self._gathering()
        if journal is None:
            self._repo.save_report(self.run_id, markdown + own, kind=kind, data=data)
            return
        # Gathered: stored with the run's next batch (the last one, with how the run ended, as a
        # method writes its report at its end); this graph answers reads of it meanwhile.
        report = Report(run_id=self.run_id, kind=kind, markdown=markdown + own, data=data or {})
        journal.add_report(report)
        with self._lock:
            if self._mirroring:
                self._reports[kind] = report

    @contextmanager
    def partial_reports(self, reason: str) -> Iterator[None]:
        """Reports saved inside are marked partial (`PARTIAL_REPORT`: why the run stopped), so the
        run's next completion writes its report again (`Method.write_outputs`)."""
        self._partial = reason or "the run stopped"
        try:
            yield
        finally:
            self._partial = ""

    def report(self, kind: str = "final") -> Report | None:
        with self._lock:
            if kind not in self._reports and self._mirroring and self._fresh:
                self._reports[kind] = None
            if kind in self._reports:
                known = self._reports[kind]
                return None if known is None else row_copy(known)
            mirroring = self._mirroring
        report = self._repo.latest_report(self.run_id, kind)
        if mirroring:
            with self._lock:
                if self._mirroring and kind not in self._reports:
                    self._reports[kind] = report
        return report

    def has_report(self, kind: str = "final") -> bool:
        return self.report(kind) is not None

    def report_outdated(self, kind: str = "final") -> bool:
        """The latest report was written before the last steering command applied to the run: a
        command whose growth was stopped, killed or failed left it describing the graph before."""
        report = self.report(kind)
        if report is None or self.contract is None:
            return False
        # A rewrite changes nothing the report describes, whenever it was recorded.
        return report_outdated(self._repo, self.run_id, report, self.contract.growing_commands)
