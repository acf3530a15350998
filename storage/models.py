"""Tables. A run is a persisted, growing graph: runs -> nodes/edges -> sources, plus the LLM calls,
steering commands, reports, method run states and the step log (run events) that belong to it. Method-specific node fields
live in `Node.data`."""

from __future__ import annotations

import copy
import marshal
import warnings
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar, cast

from sqlalchemy import JSON, Column, DateTime, ForeignKeyConstraint, Integer, Table, Text, UniqueConstraint
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.orm import make_transient_to_detached
from sqlmodel import Field, SQLModel

from storage.statuses import NodeStatus, RunStatus  # noqa: F401  (re-exported: the tables' status values)


def utcnow() -> datetime:
    return datetime.now(UTC)


def table_of(model: type[SQLModel]) -> Table:
    """The table of a `table=True` model: SQLModel's metaclass sets `__table__` on the class, but
    no stub declares it, so the checker cannot see `Model.__table__`."""
    table = vars(model).get("__table__")
    if not isinstance(table, Table):
        raise TypeError(f"{model.__name__} is not a table model")
    return table


class _Row(Protocol):
    id: int | None


class NeverStored(RuntimeError):
    """A row with no id where only stored rows belong: a bug. A RuntimeError, so that no method's
    handling of a task's failure (DEoT's counts ValueError among them) takes it for one."""


def stored_id(row: _Row) -> int:
    """The id of a row that was read from (or written to) the database. The id columns are
    `int | None` only for a row not inserted yet: a caller that needs an id from one has a bug."""
    if row.id is None:
        raise NeverStored(f"this {type(row).__name__.lower()} was never stored: it has no id")
    return row.id


_Table = TypeVar("_Table", bound=SQLModel)


def row_copy(row: _Table) -> _Table:
    """A detached copy of a row that shares nothing mutable with it, made as SQLAlchemy makes a row it
    loads: no validation, since the row's values were validated when it was made. About six times
    cheaper than `type(row)(**row.model_dump())` with the data deep-copied (20 µs a node instead of
    120), which a running graph's reads of its nodes would otherwise spend many times per step."""
    return _unvalidated(
        type(row), {name: _plain_copy(getattr(row, name)) for name in type(row).model_fields}, set(row.model_fields_set)
    )


def loaded_row(model: type[_Table], values: Mapping[Any, Any]) -> _Table:
    """A detached row of `model` made from a statement's returned columns (`values`, by name) as
    SQLAlchemy makes a row it loads and a closed session leaves it: no validation (the values are
    the database's), no fields set, its identity known. For RETURNING read through Core, whose
    statements are compiled once, where an ORM statement over many VALUES is compiled every time."""
    fresh = _unvalidated(model, {name: values[name] for name in model.model_fields}, set())
    make_transient_to_detached(fresh)
    return fresh


def _unvalidated(model: type[_Table], values: dict[str, Any], fields_set: set[str]) -> _Table:
    """A row of `model` holding `values`, made as SQLAlchemy makes a row it loads: no validation."""
    fresh = cast(_Table, sa_inspect(model).class_manager.new_instance())
    fresh.__dict__.update(values)
    object.__setattr__(fresh, "__pydantic_fields_set__", fields_set)
    return fresh


def _plain_copy(value: Any) -> Any:
    """A deep copy of a column's value: JSON-like data (dicts and lists of plain values) through a
    `marshal` round trip, about twice as quick as copying it by hand (a summary's units are the
    heaviest data a running graph copies); immutable values shared; anything else deep-copied.
    `marshal` refuses a subclass (a StrEnum, a dict subclass) and a datetime: data holding one is
    copied by hand, each type kept as it is. (A list held twice stays one list in `marshal`'s copy,
    as in the original; by hand it becomes two.)"""
    if isinstance(value, (str, int, float, bool, datetime)) or value is None:
        return value
    if type(value) is dict or type(value) is list:
        try:
            return marshal.loads(marshal.dumps(value))
        except ValueError:
            pass
    return _hand_copy(value)


def _hand_copy(value: Any) -> Any:
    """A deep copy of JSON-like data made by hand, four times quicker than `copy.deepcopy`."""
    if isinstance(value, (str, int, float, bool, datetime)) or value is None:
        return value
    if isinstance(value, dict):
        return {key: _hand_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_hand_copy(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_hand_copy(item) for item in value)
    return copy.deepcopy(value)


class Run(SQLModel, table=True):
    __tablename__ = "runs"

    id: str = Field(primary_key=True, max_length=32)
    question: str = Field(sa_column=Column(Text, nullable=False))
    title: str = Field(default="", max_length=300)
    method: str = Field(index=True, max_length=64)
    params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    # What the run runs on (model, endpoint, search); never an API key.
    llm_info: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    search_mode: str = Field(default="local", max_length=16)
    # Sources this run may not see (`engine/search/exclusion.py`): {"titles": [...], "urls": [...]}.
    # A benchmark item's own answer (a FreshWiki topic's article) is kept out of its retrieval.
    search_exclusions: dict[str, Any] = Field(
        default_factory=dict, sa_column=Column(JSON, nullable=False, default=dict)
    )
    status: str = Field(default=RunStatus.QUEUED, index=True, max_length=16)
    stop_reason: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    error: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    # A `done` run that still had failures says so here (e.g. "2 nodes failed; resume to retry").
    warning: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    max_tokens: int | None = None
    max_cost: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    llm_calls: int = 0
    node_count: int = 0
    # Bumped on every change to the run's graph, so a UI can poll cheaply.
    version: int = 0
    # The person the run belongs to (`users.id`): in single-user mode, the local user.
    user_id: int | None = Field(default=None, index=True)
    # The process executing the run (a worker's lease), not a person.
    owner: str = Field(default="", max_length=200)
    heartbeat_at: datetime | None = None
    created_at: datetime = Field(default_factory=utcnow, index=True)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    updated_at: datetime = Field(default_factory=utcnow)


class Node(SQLModel, table=True):
    __tablename__ = "nodes"
    # (run_id, id) is unique anyway (id is the key); the index lets edges reference a node *of
    # their run*, so the database itself refuses an edge between two runs.
    __table_args__ = (UniqueConstraint("run_id", "id", name="uq_nodes_run_id_id"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True, max_length=32, ondelete="CASCADE")
    parent_id: int | None = Field(default=None, index=True)
    kind: str = Field(max_length=32)
    label: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    content: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    status: str = Field(default=NodeStatus.PENDING, max_length=16)
    depth: int = 0
    order: int = 0  # no longer computed (it cost a COUNT per node); kept for old rows
    priority: float = 0.0
    data: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    error: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_s: float = 0.0
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    finished_at: datetime | None = None


class Edge(SQLModel, table=True):
    """A typed edge between two nodes of the same run; at most one per (src, dst, kind)."""

    __tablename__ = "edges"
    __table_args__ = (
        UniqueConstraint("run_id", "src", "dst", "kind", name="uq_edges_run_src_dst_kind"),
        # Composite keys: both ends must be nodes of this run; deleting a node deletes its edges.
        ForeignKeyConstraint(
            ["run_id", "src"], ["nodes.run_id", "nodes.id"], ondelete="CASCADE", name="fk_edges_src_node"
        ),
        ForeignKeyConstraint(
            ["run_id", "dst"], ["nodes.run_id", "nodes.id"], ondelete="CASCADE", name="fk_edges_dst_node"
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True, max_length=32, ondelete="CASCADE")
    src: int = Field(index=True)
    dst: int = Field(index=True)
    kind: str = Field(default="child", max_length=32)
    data: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class Source(SQLModel, table=True):
    """A document a run used: a web page or a corpus chunk. Unique per run by `ref`."""

    __tablename__ = "sources"
    __table_args__ = (UniqueConstraint("run_id", "ref", name="uq_sources_run_ref"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True, max_length=32, ondelete="CASCADE")
    ref: str = Field(max_length=1000)
    kind: str = Field(default="corpus", max_length=16)
    url: str | None = Field(default=None, max_length=2000)
    title: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    snippet: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    text: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    created_at: datetime = Field(default_factory=utcnow)


class NodeSource(SQLModel, table=True):
    __tablename__ = "node_sources"

    node_id: int = Field(foreign_key="nodes.id", primary_key=True, ondelete="CASCADE")
    source_id: int = Field(foreign_key="sources.id", primary_key=True, ondelete="CASCADE")
    rank: int = 0
    score: float = 0.0


class LLMCall(SQLModel, table=True):
    __tablename__ = "llm_calls"

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True, max_length=32, ondelete="CASCADE")
    node_id: int | None = Field(default=None, index=True)
    purpose: str = Field(default="default", max_length=64)
    model: str = Field(default="", max_length=200)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_s: float = 0.0
    attempts: int = 1
    ok: bool = True
    error: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    created_at: datetime = Field(default_factory=utcnow)


class CommandStatus:
    QUEUED = "queued"
    TAKEN = "taken"
    DONE = "done"
    FAILED = "failed"


class Command(SQLModel, table=True):
    """A persisted steering/control command (pause, resume, stop, expand, deepen, prune...)."""

    __tablename__ = "commands"

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True, max_length=32, ondelete="CASCADE")
    kind: str = Field(max_length=32)
    payload: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    status: str = Field(default=CommandStatus.QUEUED, index=True, max_length=16)
    error: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    created_at: datetime = Field(default_factory=utcnow)
    taken_at: datetime | None = None
    done_at: datetime | None = None


class Report(SQLModel, table=True):
    """A report version. `markdown` cites sources as ``[[S<source id>]]`` markers, which
    `engine.report` renders as ``[n]`` with a Sources section."""

    __tablename__ = "reports"

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True, max_length=32, ondelete="CASCADE")
    kind: str = Field(default="final", max_length=32)
    markdown: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    data: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


with warnings.catch_warnings():
    # The column is called `schema`, as the API's argument; pydantic warns that the name shadows
    # its deprecated `BaseModel.schema()`, which nothing calls on a table model.
    warnings.filterwarnings("ignore", message='Field name "schema"', category=UserWarning)

    class RunState(SQLModel, table=True):
        """A version of a method's run-level state (e.g. OmniThink's concept pool, its outline),
        kept apart from reports, which are what a user reads. Versions count 1, 2, 3... per run
        and name; `schema` is the version of the state model that wrote `data`."""

        __tablename__ = "run_states"
        __table_args__ = (UniqueConstraint("run_id", "name", "version", name="uq_run_states_run_name_version"),)

        id: int | None = Field(default=None, primary_key=True)
        run_id: str = Field(foreign_key="runs.id", index=True, max_length=32, ondelete="CASCADE")
        name: str = Field(max_length=64)
        version: int = 1
        # The field shadows `BaseModel.schema()` on purpose (see the filter above): the checker
        # sees a method overridden by an int, which is what is meant.
        schema: int = Field(  # type: ignore[assignment]
            default=1, sa_column=Column("schema", Integer, nullable=False, default=1)
        )
        data: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
        created_at: datetime = Field(default_factory=utcnow)


class RunEvent(SQLModel, table=True):
    """One line of a run's step log, in plain words: what the model is doing for a node (`step`),
    what was searched (`search`), what was dropped or failed and why, a steering command's progress
    (`steer`), the run's lifecycle (`run`: started, paused, resumed, stopped, finished, failed).
    `data` holds the machine-readable side (a phase, a count, the technical error)."""

    __tablename__ = "run_events"

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True, max_length=32, ondelete="CASCADE")
    # No foreign key: an event outlives nothing it names, and nodes are never deleted apart from
    # their run (whose deletion cascades here).
    node_id: int | None = Field(default=None)
    created_at: datetime = Field(default_factory=utcnow)
    kind: str = Field(max_length=16)
    text: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    data: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class BenchmarkStatus:
    RUNNING = "running"
    DONE = "done"
    STOPPED = "stopped"  # budget reached, or killed/stopped: resumable
    FAILED = "failed"


class Benchmark(SQLModel, table=True):
    """A benchmark: one dataset's items, each run by every method named, each item a stored run.
    `params` maps a method to its parameter values; `llm_info` says what it ran on (never a key)."""

    __tablename__ = "benchmarks"

    id: str = Field(primary_key=True, max_length=32)
    dataset: str = Field(max_length=64)
    methods: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    limit: int = 0
    seed: int = 0
    params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    llm_info: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    search_mode: str = Field(default="local", max_length=16)
    max_cost: float | None = None
    max_tokens: int | None = None
    concurrency: int = 2
    # LLM-judged scores added to every item (engine/evaluate/item_judges.py): claims, density, rubric.
    judges: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    # The item field the sample was balanced on (`--by level`: an equal share of each value), or "".
    balance: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    status: str = Field(default=BenchmarkStatus.RUNNING, max_length=16)
    note: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    user_id: int | None = Field(default=None, index=True)  # whose benchmark (`users.id`)
    created_at: datetime = Field(default_factory=utcnow, index=True)
    finished_at: datetime | None = None


class BenchmarkItem(SQLModel, table=True):
    """One (dataset item, method) of a benchmark: its run, the answer read from it and its scores.
    `metrics` holds the per-item numbers (EM, F1, recall, tokens, calls, seconds...); `eval_usage`
    what scoring it cost (the reader and judge calls), apart from the run's own usage."""

    __tablename__ = "benchmark_items"
    __table_args__ = (UniqueConstraint("benchmark_id", "item_id", "method", name="uq_benchmark_item_method"),)

    id: int | None = Field(default=None, primary_key=True)
    benchmark_id: str = Field(foreign_key="benchmarks.id", index=True, max_length=32, ondelete="CASCADE")
    position: int = 0  # the item's place in the dataset sample
    item_id: str = Field(max_length=200)
    method: str = Field(max_length=64)
    run_id: str | None = Field(default=None, index=True, max_length=32)
    status: str = Field(default="pending", max_length=16)  # pending, running, scored, failed
    prediction: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    metrics: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    eval_usage: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    error: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    finished_at: datetime | None = None


class Judgment(SQLModel, table=True):
    """A judge's verdict on one run (a rubric, claim support) or a pair of runs (pairwise), with
    what the judging cost. `verdict` is the judge's pydantic result as JSON."""

    __tablename__ = "judgments"

    id: int | None = Field(default=None, primary_key=True)
    run_a: str = Field(index=True, max_length=32)
    run_b: str | None = Field(default=None, index=True, max_length=32)
    benchmark_id: str | None = Field(default=None, index=True, max_length=32)
    protocol: str = Field(max_length=64)  # e.g. deot.pairwise, mtqa.pairwise, claim_support
    model: str = Field(default="", max_length=200)
    verdict: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    created_at: datetime = Field(default_factory=utcnow)


class EndpointCooldown(SQLModel, table=True):
    """Distributed execution: until when every worker holds back its calls to an LLM endpoint that
    answered HTTP 429 (storage/leases.py `SharedCooldown`; the database server's clock decides)."""

    __tablename__ = "endpoint_cooldowns"

    name: str = Field(primary_key=True, max_length=200)
    until: datetime = Field(sa_column=Column(DateTime(timezone=True), nullable=False))


class ApiToken(SQLModel, table=True):
    """A bearer token of the HTTP API (`thoughtmap token create`): only its SHA-256 is stored, with
    the first characters of the token itself so a person can tell their tokens apart."""

    __tablename__ = "api_tokens"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=100)
    token_hash: str = Field(max_length=64, unique=True)
    prefix: str = Field(max_length=16)
    created_at: datetime = Field(default_factory=utcnow)
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None
    # Whose token: every request made with it is that person's (`users.id`).
    user_id: int | None = Field(default=None, index=True)


# The user that owns everything in single-user mode, and every row made before there were users.
LOCAL_ISSUER = "thoughtmap:local"
LOCAL_SUBJECT = "local"


class User(SQLModel, table=True):
    """A person: signed in through an OpenID Connect provider (`issuer`, `subject` are its `iss`
    and `sub` claims), or the local user of single-user mode. Never holds a password or a key."""

    __tablename__ = "users"
    __table_args__ = (UniqueConstraint("issuer", "subject", name="uq_users_issuer_subject"),)

    id: int | None = Field(default=None, primary_key=True)
    issuer: str = Field(max_length=300)
    subject: str = Field(max_length=300)
    email: str = Field(default="", max_length=320, index=True)
    name: str = Field(default="", max_length=200)
    is_admin: bool = False
    created_at: datetime = Field(default_factory=utcnow)
    last_seen_at: datetime | None = None

    @property
    def is_local(self) -> bool:
        return self.issuer == LOCAL_ISSUER


class RunShare(SQLModel, table=True):
    """A run shared read-only: with one person (`user_id`), or with everyone signed in (None)."""

    __tablename__ = "run_shares"
    __table_args__ = (UniqueConstraint("run_id", "user_id", name="uq_run_shares_run_user"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", ondelete="CASCADE", index=True, max_length=32)
    user_id: int | None = Field(default=None, foreign_key="users.id", ondelete="CASCADE", index=True)
    created_at: datetime = Field(default_factory=utcnow)


class SchemaMigration(SQLModel, table=True):
    __tablename__ = "schema_migrations"

    version: int = Field(primary_key=True)
    name: str = Field(max_length=200)
    applied_at: datetime = Field(default_factory=utcnow)


# ----------------------------------------------------------------------------- knowledge graphs


class KnowledgeGraphStatus:
    EMPTY = "empty"  # created, nothing extracted yet
    BUILDING = "building"  # a build (or a run's extraction) is under way, by `owner`
    STOPPING = "stopping"  # asked to stop: the build ends after the chunks in flight
    STOPPED = "stopped"  # stopped (by the user or the budget) or killed: resumable
    DONE = "done"  # every chunk registered so far was tried (failed ones are retried by the next build)
    FAILED = "failed"  # the build ended on an error (endpoint unreachable...): resumable


class KnowledgeChunkStatus:
    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"  # the model's answer stayed unusable: retried by the next build


class KnowledgeGraph(SQLModel, table=True):
    """A knowledge graph built by the LLM (MTQA Step 1): per question (`run_id` set, deleted with its
    run) or per collection (`collection` set, built once by `thoughtmap kg build`, reused by runs).
    `key` names it uniquely ("run:<id>:<chunk tokens>", "collection:<name>:<chunk tokens>"). Progress
    and what building cost (calls, tokens, cost) are kept here, apart from any run's totals."""

    __tablename__ = "kg_graphs"

    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(max_length=300, unique=True)
    scope: str = Field(max_length=16)  # question | collection
    run_id: str | None = Field(default=None, foreign_key="runs.id", index=True, max_length=32, ondelete="CASCADE")
    collection: str | None = Field(default=None, max_length=200)
    chunk_tokens: int = 1200
    status: str = Field(default=KnowledgeGraphStatus.EMPTY, max_length=16)
    # Bumped by every merge, so a reader can keep what it derived from the graph until it changes.
    version: int = 0
    owner: str = Field(default="", max_length=200)
    error: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    llm_info: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False, default=dict))
    calls: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class KnowledgeChunk(SQLModel, table=True):
    """A chunk of a document, extracted once: `key` is the hash of its text, unique per graph, so a
    chunk already extracted is never extracted again (a resumed build, documents added twice).
    `ref` is the corpus document id or URL the chunk came from: what a run cites."""

    __tablename__ = "kg_chunks"
    __table_args__ = (UniqueConstraint("graph_id", "key", name="uq_kg_chunks_graph_key"),)

    id: int | None = Field(default=None, primary_key=True)
    graph_id: int = Field(foreign_key="kg_graphs.id", index=True, ondelete="CASCADE")
    key: str = Field(max_length=64)
    ref: str = Field(max_length=1000)
    title: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    url: str | None = Field(default=None, max_length=2000)
    kind: str = Field(default="corpus", max_length=16)
    text: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    status: str = Field(default=KnowledgeChunkStatus.PENDING, index=True, max_length=16)
    attempts: int = 0
    error: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    created_at: datetime = Field(default_factory=utcnow)
    extracted_at: datetime | None = None


class KnowledgeEntity(SQLModel, table=True):
    """An entity after deduplication: `key` is its normalised name, unique per graph."""

    __tablename__ = "kg_entities"
    __table_args__ = (UniqueConstraint("graph_id", "key", name="uq_kg_entities_graph_key"),)

    id: int | None = Field(default=None, primary_key=True)
    graph_id: int = Field(foreign_key="kg_graphs.id", index=True, ondelete="CASCADE")
    key: str = Field(max_length=300)
    name: str = Field(sa_column=Column(Text, nullable=False))
    type: str = Field(default="", max_length=100)
    description: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))


class KnowledgeRelation(SQLModel, table=True):
    """A relation after deduplication: one per pair of entities (in either direction), with the
    descriptions and keywords of every mention merged. `keywords` are its keys in the key-value index."""

    __tablename__ = "kg_relations"
    __table_args__ = (UniqueConstraint("graph_id", "pair", name="uq_kg_relations_graph_pair"),)

    id: int | None = Field(default=None, primary_key=True)
    graph_id: int = Field(foreign_key="kg_graphs.id", index=True, ondelete="CASCADE")
    # The two entity keys, sorted and joined: the relation's identity, whichever way it was written.
    pair: str = Field(max_length=700)
    source_key: str = Field(max_length=300)
    target_key: str = Field(max_length=300)
    description: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    keywords: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False, default=list))


class KnowledgeEntityChunk(SQLModel, table=True):
    """Which chunks an entity was extracted from (the values of its key)."""

    __tablename__ = "kg_entity_chunks"

    entity_id: int = Field(foreign_key="kg_entities.id", primary_key=True, ondelete="CASCADE")
    chunk_id: int = Field(foreign_key="kg_chunks.id", primary_key=True, index=True, ondelete="CASCADE")


class KnowledgeRelationChunk(SQLModel, table=True):
    """Which chunks a relation was extracted from."""

    __tablename__ = "kg_relation_chunks"

    relation_id: int = Field(foreign_key="kg_relations.id", primary_key=True, ondelete="CASCADE")
    chunk_id: int = Field(foreign_key="kg_chunks.id", primary_key=True, index=True, ondelete="CASCADE")
