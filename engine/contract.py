"""What a method declares about itself, as typed data: its node kinds, edge kinds, commands, run
state and view. The app, the CLI, the storage layer (`RunGraph`) and the contract tests are built
from these declarations, the way the parameter form is built from `Params`, so none of them needs
to know a method by name. No Streamlit here: a declaration says *what* to show; `components/`
decides how.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, Literal, Protocol, Self, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
)

from engine.knowledge.prompts import STEPS as KNOWLEDGE_STEPS
from storage.models import Node
from storage.statuses import NodeStatus

ALL_STATUSES = frozenset({NodeStatus.PENDING, NodeStatus.RUNNING, NodeStatus.DONE, NodeStatus.FAILED})


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_NamedT = TypeVar("_NamedT", bound=_Named)


class ContractError(TypeError):
    """A method's declarations contradict each other (a bug in the method, found at import)."""


class NodeDataError(ValueError):
    """What a method tried to store in a node's `data` does not fit its kind's model (a bug)."""


class UnsupportedCommand(ValueError):
    """The method does not support this steering command (or not on this node)."""


class CommandRejected(ValueError):
    """A steering command that cannot be applied; the message says what was wrong and what to do.
    Nothing stored changes. `errors`: the payload's validation errors (pydantic's), when that is why,
    so a form can say them in its own words."""

    def __init__(self, message: str, errors: Sequence[Mapping[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.errors = errors or []


# --------------------------------------------------------------------------- node kinds


class Lenient(BaseModel):
    """A read-only view of stored data that a kill or a hand edit may have spoiled: other keys are
    ignored, and a field that does not validate reads as its default, so one spoiled field never
    fails the read (`Coverage`, DEoT's `StoredSolve`)."""

    model_config = ConfigDict(extra="ignore")

    @field_validator("*", mode="wrap")
    @classmethod
    def _unreadable_is_default(cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        try:
            return handler(value)
        except ValidationError:
            return cls.model_fields[str(info.field_name)].get_default()


class NodeData(BaseModel):
    """Base of every node kind's `Node.data` model. Unknown keys are errors, so what a node holds is
    exactly what its kind declares. Every field has a default: a node is created with what it *is*
    and filled in as it is worked on, one validated write at a time."""

    model_config = ConfigDict(extra="forbid")

    # Written by the shared prune: what the node was before, so an export can tell and a restore can
    # bring it back; and which prune took it (the node the person pruned), so restoring that branch
    # brings back what went with it and nothing pruned on its own.
    status_before_prune: str | None = Field(default=None, description="The node's status before it was pruned.")
    pruned_with: int | None = Field(default=None, description="The node whose prune took this one.")

    @classmethod
    def of(cls, node: Node) -> Self:
        """The node's data as this model: a typed read (`CellData.of(node).row`), validated whole."""
        return cls.model_validate(node.data or {})

    def caption(self) -> str:
        """One line the node panel shows under the label (e.g. which engine proposed the node)."""
        return ""

    # With declared fields, the node's content is shown too, first, under this heading when it is set
    # (the research agent's search: its cited summary, beside the query and the ranked documents).
    content_heading: ClassVar[str] = ""

    def reader_fields(self) -> dict[str, str | list[str]] | None:
        """The node's answer as named fields (e.g. a summary's), for the node panel to show each under
        its own heading (`engine.reader_text.readable_sections`); None: show the node's content."""
        return None

    def knowledge_graph(self) -> KnowledgeGraphRef | None:
        """The stored knowledge graph a reader may browse from this node, for kinds that declare
        `NodeKind.browses_knowledge`; None: none."""
        return None


@dataclass(frozen=True)
class KnowledgeGraphRef:
    """Which stored knowledge graph a node read from (`engine/knowledge/`: its key, "" while none is
    recorded) and the entity names to offer a reader first (those the node's knowledge names)."""

    key: str
    entities: tuple[str, ...] = ()


@dataclass(frozen=True)
class Variant:
    """A fill colour for one value of a data field (e.g. DEoT's `engine`: breadth, depth, user)."""

    value: object  # compared with ==: a string, a bool...
    colour: str
    legend: str


Shape = Literal["dot", "box", "diamond", "square", "triangle", "triangleDown", "star", "ellipse", "hexagon"]


@dataclass(frozen=True)
class NodeKind:
    """One kind of node: the model of its `data` and how it shows on the map and in the legend."""

    name: str
    data: type[NodeData]
    label: str  # singular, for people: "Question", "Subtopic"
    colour: str  # fill, unless a variant or the depth palette applies
    legend: str  # what a node of this kind is, in the legend
    shape: Shape = "dot"
    # A data field whose value picks the fill among `variants` (first match wins).
    colour_field: str | None = None
    variants: tuple[Variant, ...] = ()
    # Fill by depth instead (information trees: lighter as the tree deepens).
    depth_palette: tuple[str, ...] = ()
    # Its success means the run answered something (a run none of whose answering nodes succeeded
    # is `failed`, not `done`).
    answers: bool = False
    # Larger when `Node.priority` is higher.
    size_by_priority: bool = True
    # The node panel offers the knowledge graph browser around the entities its data names: the
    # data model implements `NodeData.knowledge_graph` (the graph's key, the names to offer).
    browses_knowledge: bool = False

    def fill(self, node: Node) -> str:
        if self.colour_field:
            value = (node.data or {}).get(self.colour_field)
            for variant in self.variants:
                if value == variant.value:
                    return variant.colour
        if self.depth_palette:
            return self.depth_palette[min(node.depth, len(self.depth_palette) - 1)]
        return self.colour

    def validate_data(self, data: Mapping[str, Any] | BaseModel, *, node_id: int | None = None) -> dict[str, Any]:
        """The JSON to store for `data` (only the keys given), or NodeDataError."""
        if isinstance(data, BaseModel):
            data = data.model_dump(mode="json", exclude_unset=True)
        try:
            model = self.data.model_validate(dict(data))
        except ValidationError as exc:
            where = f"node {node_id}" if node_id is not None else "a new node"
            raise NodeDataError(f"{where} ({self.name}): data does not fit {self.data.__name__}: {exc}") from exc
        return model.model_dump(mode="json", exclude_unset=True)

    def read(self, node: Node) -> NodeData:
        return self.data.of(node)


@dataclass(frozen=True)
class EdgeKind:
    """One kind of edge. Structural edges (parent → child) shape the tree layouts; the others
    (a backtrack, a column link, a relation) are drawn over it."""

    name: str
    label: str
    legend: str = ""
    dashes: bool = False
    colour: str = "#B0B0B0"
    structural: bool = True
    # The edge's target starts only once its source is done (MTQA's thought below a thought): the
    # evaluation's critical path follows it as it follows a parent link.
    waits: bool = False


CHILD_EDGE = EdgeKind("child", "child", "", structural=True)


# --------------------------------------------------------------------------- commands


class CommandPayload(BaseModel):
    """Base of a command's payload. Unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")
    # Fields the command's precheck fills in when it is queued (what a number the person typed names
    # now), never asked in its form.
    resolved_fields: ClassVar[frozenset[str]] = frozenset()


class NodeCommand(CommandPayload):
    """A payload that targets one node of the run."""

    node_id: int = Field(description="The node to act on.")


@dataclass(frozen=True)
class CommandSpec:
    """A steering command: what it is called, its payload model, where it applies."""

    name: str
    label: str  # the button
    help: str  # the button's help, and the CLI's
    payload: type[CommandPayload] = CommandPayload
    # Node kinds it applies to (a node command) — empty for a run-level command.
    kinds: frozenset[str] = frozenset()
    # The statuses the target node must have (a pruned node takes no command).
    statuses: frozenset[str] = ALL_STATUSES
    # False when the root (the user's own question) cannot take it (e.g. prune).
    on_root: bool = True
    # Whether it may reopen a finished run (every command so far may).
    on_finished_run: bool = True
    # Done message shown after it is queued.
    done: str = "Command queued"
    # False for a command kept under a second name (the runner's generic `regenerate_report` where a
    # method offers its own): it is accepted, but the app shows no button for it.
    listed: bool = True
    # It rewrites outputs (the report, an outline) and grows nothing: on a stopped run it writes them
    # from the graph as it stands and the run stays stopped; it never makes a report outdated.
    report_only: bool = False
    # What the node's own data must say for the command to be offered (None: anything), so that a
    # button the method would refuse is not shown (FGDIP's Mark impossible on a node you marked).
    # The method still checks the command when it applies it.
    offered_when: Callable[[Mapping[str, Any]], bool] | None = None
    # A check of the payload against the stored run before the command is queued (the graph, the
    # parsed payload, the target node or None), raising CommandRejected: "there is no lesson 5" is
    # said at once, nothing is queued, and the form keeps what was typed. `steering.apply` runs it
    # again before the method applies the command (the run may have moved on in between). It may
    # return the payload with its `resolved_fields` filled in (MTQA: the id of the unit a number
    # names when the command is sent), which is what is queued and checked again.
    precheck: Callable[[Any, CommandPayload, Node | None], CommandPayload | None] | None = None

    @property
    def targets_node(self) -> bool:
        return issubclass(self.payload, NodeCommand)

    def applies_to(self, node: Node) -> bool:
        """Whether the command is accepted on this node (the declared kinds, statuses and root)."""
        return (
            self.targets_node
            and node.kind in self.kinds
            and node.status in self.statuses
            and (self.on_root or node.parent_id is not None)
        )

    def offered_on(self, node: Node) -> bool:
        """Whether the app offers it there: accepted, and not one the method would refuse (`offered_when`)."""
        return self.applies_to(node) and (self.offered_when is None or self.offered_when(node.data or {}))

    def parse(self, raw: Mapping[str, Any] | None) -> CommandPayload:
        """The validated payload, or CommandRejected naming the field and what to do."""
        try:
            return self.payload.model_validate(dict(raw or {}))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in error['loc']) or 'payload'}: {error['msg']}" for error in exc.errors()
            )
            raise CommandRejected(f"'{self.name}' got a payload it cannot use ({problems})", exc.errors()) from None

    def form_fields(self) -> dict[str, Any]:
        """The payload fields a person fills in (the target node is chosen on the map)."""
        return {
            name: info
            for name, info in self.payload.model_fields.items()
            if name != "node_id" and name not in self.payload.resolved_fields
        }


def restore_command(kinds: frozenset[str], output: str = "report") -> CommandSpec:
    """Undo a prune: the pruned branch comes back as it was (`RunGraph.restore`)."""
    return CommandSpec(
        "restore",
        "Restore",
        f"Bring this pruned branch back as it was; the {output} includes it again.",
        NodeCommand,
        kinds=kinds,
        statuses=frozenset({NodeStatus.PRUNED}),
        on_root=False,
        done="Restored",
    )


REGENERATE_REPORT = "regenerate_report"
# A report's data key naming the node the report answers from (FGDIP's accepted answer, the research
# agent's answer): a finished run opens on that node in the app.
ANSWER_NODE = "answer_node"


def regenerate_report_command(label: str = "Rewrite report", *, listed: bool = True) -> CommandSpec:
    return CommandSpec(
        REGENERATE_REPORT,
        label,
        "Write the report again from the current tree (on a stopped run, "
        "a partial report of what it found; the run stays stopped).",
        done="Rewriting the report",
        listed=listed,
        report_only=True,
    )


# --------------------------------------------------------------------------- run state


class RunStateModel(BaseModel):
    """Base of a run-state model (stored apart from nodes and reports, one version per save)."""

    model_config = ConfigDict(extra="forbid")

    def panel_markdown(self) -> str:
        """The side panel's body (Markdown; rendered through the safe renderer)."""
        return ""

    def panel_caption(self) -> str:
        """One line above the panel's body."""
        return ""

    @classmethod
    def history_markdown(cls, versions: Sequence[RunStateModel]) -> str:
        """How the state grew over its versions, oldest first ("" for none)."""
        return ""


@dataclass(frozen=True)
class RunStateSpec:
    """A named, versioned, typed piece of run-level state (a concept pool, an error memory, a
    matrix, knowledge units)."""

    name: str
    model: type[RunStateModel]
    title: str  # the panel's title
    schema: int = 1  # bump when the model changes incompatibly
    expanded: bool = True  # the panel starts open
    # What the panel says before the state's first version is stored: a panel that is missing reads
    # as a feature that is missing.
    empty: str = "Nothing yet."


# --------------------------------------------------------------------------- view


class Layout(str, Enum):
    TREE = "tree"  # top-down, levelled by depth
    SEARCH_TREE = "search_tree"  # a tree whose non-structural edges (backtracks) are drawn over it
    GRID = "grid"  # rows × columns: each node's (row, column) from `ViewSpec.position`
    NETWORK = "network"  # free, force-directed


@dataclass(frozen=True)
class Notice:
    """Something the reader should know about the run now, with an optional command to offer."""

    text: str
    command: str | None = None


# The tab beside the map that shows the selected node; `ViewSpec.side_tab` names the other one.
NODE_TAB = "Node"


@dataclass(frozen=True)
class FocusUnit:
    """A knowledge unit a node used, as the knowledge graph tab highlights it: its source's title, its
    triples (subject, relation, object: the graph's entity names) and whether the node cites it."""

    title: str
    triples: tuple[tuple[str, str, str], ...] = ()
    cited: bool = False


@dataclass(frozen=True)
class KnowledgeFocus:
    """What the knowledge graph tab draws for the selected node: the stored graph (its key, "" while
    none is recorded), the units the node used, and one line saying whose units they are."""

    key: str
    units: tuple[FocusUnit, ...] = ()
    says: str = ""


@dataclass(frozen=True)
class KnowledgeTab:
    """A tab beside the map that draws the run's knowledge graph (MTQA's), its title and, for the
    selected node (None: none yet) among the run's nodes, what to highlight (None: nothing to draw)."""

    title: str
    focus: Callable[[Sequence[Node], Node | None], KnowledgeFocus | None]


@dataclass(frozen=True)
class ViewSpec:
    layout: Layout = Layout.TREE
    # Run-state names shown as side panels, in this order.
    panels: tuple[str, ...] = ()
    # The name of the tab beside the map that holds the run-state panels and the run-level commands
    # (the other tab is the selected node): what a reader looks for there, e.g. "Error memory".
    side_tab: str = "Run"
    # Grid layouts: a node's (row, column), or None for nodes outside the grid (e.g. the root).
    position: Callable[[Node], tuple[int, int] | None] | None = None
    # A third tab beside the map drawing the run's knowledge graph around the selected node's units.
    knowledge_tab: KnowledgeTab | None = None


# --------------------------------------------------------------------------- steps (narration)

# What a step log says for an LLM call whose prompt the method does not declare.
GENERIC_STEP = "asking the model"
# Steps of the layers any method may use (the knowledge layer's extraction and keywords), so their
# calls are told in plain words whichever method made them; a method's own declaration wins.
SHARED_STEPS: Mapping[str, str] = KNOWLEDGE_STEPS


# --------------------------------------------------------------------------- the whole contract


@dataclass(frozen=True)
class MethodContract:
    """Everything declared, indexed; built once per method class (`Method.contract()`)."""

    method: str
    node_kinds: Mapping[str, NodeKind]
    edge_kinds: Mapping[str, EdgeKind]
    commands: Mapping[str, CommandSpec]
    run_states: Mapping[str, RunStateSpec]
    view: ViewSpec = field(default_factory=ViewSpec)
    # Prompt name (`PromptMessages.name`) -> what the model is doing, in a reader's words
    # ("summarising what the sources say"): the step log and "Now:" say it for every LLM call.
    steps: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        method: str,
        node_kinds: Sequence[NodeKind],
        edge_kinds: Sequence[EdgeKind],
        commands: Sequence[CommandSpec],
        run_states: Sequence[RunStateSpec],
        view: ViewSpec,
        steps: Mapping[str, str] | None = None,
    ) -> MethodContract:
        def index(items: Iterable[_NamedT], what: str) -> dict[str, _NamedT]:
            out: dict[str, _NamedT] = {}
            for item in items:
                if item.name in out:
                    raise ContractError(f"{method}: {what} '{item.name}' is declared twice")
                out[item.name] = item
            return out

        kinds = index(node_kinds, "node kind")
        edges = index([CHILD_EDGE, *[e for e in edge_kinds if e.name != "child"]], "edge kind")
        cmds = index(commands, "command")
        states = index(run_states, "run state")
        for kind in kinds.values():
            if kind.browses_knowledge and kind.data.knowledge_graph is NodeData.knowledge_graph:
                raise ContractError(
                    f"{method}: node kind '{kind.name}' offers the knowledge graph browser, so "
                    f"{kind.data.__name__} must say which graph (NodeData.knowledge_graph)"
                )
        for command in cmds.values():
            unknown = command.kinds - kinds.keys()
            if unknown:
                raise ContractError(f"{method}: command '{command.name}' names undeclared node kinds {sorted(unknown)}")
            if command.kinds and not command.targets_node:
                raise ContractError(
                    f"{method}: command '{command.name}' applies to nodes, so its payload must be a NodeCommand"
                )
        for panel in view.panels:
            if panel not in states:
                raise ContractError(f"{method}: the view shows run state '{panel}', which is not declared")
        if not view.side_tab.strip() or view.side_tab.strip() == NODE_TAB:
            raise ContractError(f"{method}: the side tab needs a name other than '{NODE_TAB}' (ViewSpec.side_tab)")
        if view.knowledge_tab is not None and view.knowledge_tab.title.strip() in (NODE_TAB, view.side_tab.strip(), ""):
            raise ContractError(f"{method}: the knowledge graph tab needs a name of its own (KnowledgeTab.title)")
        if view.layout == Layout.GRID and view.position is None:
            raise ContractError(f"{method}: a grid layout needs ViewSpec.position")
        for prompt, words in (steps or {}).items():
            if not words.strip():
                raise ContractError(f"{method}: the step for prompt '{prompt}' has no words")
        return cls(method, kinds, edges, cmds, states, view, dict(steps or {}))

    def kind(self, name: str) -> NodeKind:
        try:
            return self.node_kinds[name]
        except KeyError:
            raise NodeDataError(
                f"{self.method} declares no node kind '{name}' (it declares: {', '.join(self.node_kinds)})"
            ) from None

    def edge(self, name: str) -> EdgeKind:
        try:
            return self.edge_kinds[name]
        except KeyError:
            raise NodeDataError(
                f"{self.method} declares no edge kind '{name}' (it declares: {', '.join(self.edge_kinds)})"
            ) from None

    def state(self, name: str) -> RunStateSpec:
        try:
            return self.run_states[name]
        except KeyError:
            raise NodeDataError(f"{self.method} declares no run state '{name}'") from None

    def step_words(self, prompt: str) -> str:
        """What the model is doing when it is sent this prompt (a generic wording when undeclared)."""
        return self.steps.get(prompt) or SHARED_STEPS.get(prompt) or GENERIC_STEP

    def commands_for(self, node: Node) -> list[CommandSpec]:
        """The commands to offer on this node."""
        return [c for c in self.commands.values() if c.listed and c.offered_on(node)]

    @property
    def steers_nodes(self) -> bool:
        """Whether any of its commands acts on a node (so a finished run can be steered from the map)."""
        return any(c.targets_node for c in self.commands.values())

    @property
    def run_commands(self) -> list[CommandSpec]:
        """The run-level commands to offer."""
        return [c for c in self.commands.values() if c.listed and not c.targets_node]

    @property
    def growing_commands(self) -> frozenset[str]:
        """The commands that change what the run's outputs describe (all but the rewrites)."""
        return frozenset(name for name, spec in self.commands.items() if not spec.report_only)

    @property
    def answer_kinds(self) -> frozenset[str]:
        return frozenset(k.name for k in self.node_kinds.values() if k.answers)

    @property
    def steerable_kinds(self) -> frozenset[str]:
        return frozenset(k for c in self.commands.values() for k in c.kinds)
