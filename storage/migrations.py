"""Ordered, recorded schema migrations (in the manner of simonw/llm's migrations.py).

Each migration runs once, in order, and is recorded in `schema_migrations`. Migration 1 creates
the tables. Later migrations must check before they alter (the inspector is passed in), because a
database created from scratch already has the current columns through migration 1.

Several processes may open a new database at the same moment (the app and a few CLI commands):
the pending migrations run under a database-wide lock, in one transaction that also creates
`schema_migrations`, so exactly one process applies them and the others find them recorded.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

from sqlalchemy import MetaData, delete, inspect, select, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.schema import CreateTable
from sqlmodel import SQLModel

from storage import models

Migration = Callable[[Connection], None]

# The PostgreSQL advisory lock that serialises migrations (advisory locks are per database).
_PG_LOCK_KEY = zlib.crc32(b"thoughtmap.schema_migrations")


def _m001_initial_tables(conn: Connection) -> None:
    tables = [
        models.table_of(models.Run),
        models.table_of(models.Node),
        models.table_of(models.Edge),
        models.table_of(models.Source),
        models.table_of(models.NodeSource),
        models.table_of(models.LLMCall),
        models.table_of(models.Command),
        models.table_of(models.Report),
    ]
    SQLModel.metadata.create_all(conn, tables=tables, checkfirst=True)


def _m002_run_warning(conn: Connection) -> None:
    # A `done` run that had failures says so (engine.methods.base.RunOutcome).
    if "warning" not in {c["name"] for c in inspect(conn).get_columns("runs")}:
        conn.execute(text("ALTER TABLE runs ADD COLUMN warning TEXT NOT NULL DEFAULT ''"))


# Report kinds that were OmniThink's run-level state before run_states existed.
_STATE_REPORT_KINDS = ("concept_pool", "outline")

# Edges worth keeping: the first of each (run, src, dst, kind), both ends nodes of the edge's run
# (the new keys refuse anything else; the old code never wrote such edges).
_KEPT_EDGES = """
    FROM edges e
    WHERE e.id IN (SELECT MIN(id) FROM edges GROUP BY run_id, src, dst, kind)
      AND EXISTS (SELECT 1 FROM nodes n WHERE n.id = e.src AND n.run_id = e.run_id)
      AND EXISTS (SELECT 1 FROM nodes n WHERE n.id = e.dst AND n.run_id = e.run_id)
"""


def _m003_edges_and_run_states(conn: Connection) -> None:
    models.table_of(models.RunState).create(conn, checkfirst=True)
    inspector = inspect(conn)
    # A database made by migration 1 of this release already has the new edges.
    if inspector.has_table("edges") and "data" not in {c["name"] for c in inspector.get_columns("edges")}:
        _upgrade_edges(conn)
    if inspector.has_table("reports"):
        _move_state_reports(conn)


def _upgrade_edges(conn: Connection) -> None:
    """Edges of migration 1 -> data JSON, unique (run, src, dst, kind), keys to nodes of the run."""
    conn.execute(text("CREATE UNIQUE INDEX uq_nodes_run_id_id ON nodes (run_id, id)"))
    if conn.dialect.name == "sqlite":
        # SQLite cannot add constraints: rebuild the table (create new, copy, drop old, rename),
        # from the model's own definition; dropping the old table drops its indexes, whose names
        # (global in SQLite) the model's indexes then take again.
        meta = MetaData()
        for table in (models.table_of(models.Run), models.table_of(models.Node)):
            table.to_metadata(meta)  # what the new table's keys refer to
        conn.execute(CreateTable(models.table_of(models.Edge).to_metadata(meta, name="edges_new")))
        conn.execute(
            text(
                "INSERT INTO edges_new (id, run_id, src, dst, kind, data) "
                "SELECT e.id, e.run_id, e.src, e.dst, e.kind, '{}'" + _KEPT_EDGES
            )
        )
        conn.execute(text("DROP TABLE edges"))
        conn.execute(text("ALTER TABLE edges_new RENAME TO edges"))
        for index in models.table_of(models.Edge).indexes:
            index.create(conn)
        return
    # PostgreSQL alters in place (ADD COLUMN needs a default for the rows already there).
    conn.execute(text("ALTER TABLE edges ADD COLUMN data JSON NOT NULL DEFAULT '{}'"))
    conn.execute(text("DELETE FROM edges WHERE id NOT IN (SELECT e.id" + _KEPT_EDGES + ")"))
    conn.execute(text("ALTER TABLE edges ADD CONSTRAINT uq_edges_run_src_dst_kind UNIQUE (run_id, src, dst, kind)"))
    for end in ("src", "dst"):
        conn.execute(
            text(
                f"ALTER TABLE edges ADD CONSTRAINT fk_edges_{end}_node FOREIGN KEY (run_id, {end}) "
                "REFERENCES nodes (run_id, id) ON DELETE CASCADE"
            )
        )


def _move_state_reports(conn: Connection) -> None:
    """OmniThink's concept pool and outline versions: from `reports` to `run_states`."""
    reports = models.table_of(models.Report)
    rows = conn.execute(select(reports).where(reports.c.kind.in_(_STATE_REPORT_KINDS)).order_by(reports.c.id)).all()
    if not rows:
        return
    versions: Counter[tuple[str, str]] = Counter()
    states = []
    for row in rows:
        versions[(row.run_id, row.kind)] += 1
        data = row.data
        if row.kind == "outline" and isinstance(data, dict) and "markdown" not in data:
            data = {**data, "markdown": row.markdown}  # the outline's text was only in the report
        states.append(
            {
                "run_id": row.run_id,
                "name": row.kind,
                "version": versions[(row.run_id, row.kind)],
                "schema": 1,
                "data": data,
                "created_at": row.created_at,
            }
        )
    conn.execute(models.table_of(models.RunState).insert(), states)
    conn.execute(delete(reports).where(reports.c.kind.in_(_STATE_REPORT_KINDS)))


def _m004_run_events(conn: Connection) -> None:
    # The step log (RunEvent): a new table, so a database of any earlier release just gains it.
    models.table_of(models.RunEvent).create(conn, checkfirst=True)


def _m005_evaluation(conn: Connection) -> None:
    # The evaluation harness's tables, and the sources a run may not see (a benchmark item's answer).
    if "search_exclusions" not in {c["name"] for c in inspect(conn).get_columns("runs")}:
        conn.execute(text("ALTER TABLE runs ADD COLUMN search_exclusions JSON NOT NULL DEFAULT '{}'"))
    for model in (models.Benchmark, models.BenchmarkItem, models.Judgment):
        models.table_of(model).create(conn, checkfirst=True)


def _m006_benchmark_judges(conn: Connection) -> None:
    # The judges a benchmark adds per item (a database made by migration 5 of this release has it).
    if "judges" not in {c["name"] for c in inspect(conn).get_columns("benchmarks")}:
        conn.execute(text("ALTER TABLE benchmarks ADD COLUMN judges JSON NOT NULL DEFAULT '[]'"))


def _m007_knowledge_graphs(conn: Connection) -> None:
    # The knowledge layer's tables (MTQA): new tables only, so a database of any earlier release
    # just gains them; the graph row first, as the others refer to it.
    for model in (
        models.KnowledgeGraph,
        models.KnowledgeChunk,
        models.KnowledgeEntity,
        models.KnowledgeRelation,
        models.KnowledgeEntityChunk,
        models.KnowledgeRelationChunk,
    ):
        models.table_of(model).create(conn, checkfirst=True)


def _m010_deot_layers_count_the_question(conn: Connection) -> None:
    # DEoT's max_layers now counts the question as layer 1, as its paper and its authors' code do:
    # a stored run (and a stored benchmark's DEoT values) keep the tree they asked for, one more.
    if not {"method", "params"} <= {c["name"] for c in inspect(conn).get_columns("runs")}:
        return  # a database from before runs had parameters: no DEoT run to keep
    runs = models.table_of(models.Run)
    for row in conn.execute(select(runs.c.id, runs.c.params).where(runs.c.method == "deot")).all():
        params = row.params if isinstance(row.params, dict) else {}
        if isinstance(params.get("max_layers"), int):
            conn.execute(
                runs.update()
                .where(runs.c.id == row.id)
                .values(params={**params, "max_layers": params["max_layers"] + 1})
            )
    benchmarks = models.table_of(models.Benchmark)
    if not inspect(conn).has_table("benchmarks"):
        return
    for row in conn.execute(select(benchmarks.c.id, benchmarks.c.params)).all():
        values = (row.params or {}).get("deot") if isinstance(row.params, dict) else None
        if isinstance(values, dict) and isinstance(values.get("max_layers"), int):
            conn.execute(
                benchmarks.update()
                .where(benchmarks.c.id == row.id)
                .values(params={**row.params, "deot": {**values, "max_layers": values["max_layers"] + 1}})
            )


def _m011_endpoint_cooldowns(conn: Connection) -> None:
    # Distributed execution: an endpoint's 429 quiets every worker (a new table only).
    models.table_of(models.EndpointCooldown).create(conn, checkfirst=True)


def _m012_benchmark_balance(conn: Connection) -> None:
    # The item field a benchmark's sample was balanced on, so the sample can be derived again.
    if "balance" not in {c["name"] for c in inspect(conn).get_columns("benchmarks")}:
        conn.execute(text("ALTER TABLE benchmarks ADD COLUMN balance TEXT NOT NULL DEFAULT ''"))


def _m013_api_tokens(conn: Connection) -> None:
    # `thoughtmap serve`'s bearer tokens (a new table only).
    models.table_of(models.ApiToken).create(conn, checkfirst=True)


# The tables whose rows belong to a person, given a `user_id` by migration 14.
_OWNED_TABLES = ("runs", "benchmarks", "api_tokens")


def _m014_users_and_ownership(conn: Connection) -> None:
    # Teams: people, shares, and an owner for every run, benchmark and API token. Everything made
    # before belongs to the local user; the first admin to sign in takes it over (`UserStore`).
    models.table_of(models.User).create(conn, checkfirst=True)
    models.table_of(models.RunShare).create(conn, checkfirst=True)
    for table in _OWNED_TABLES:
        if "user_id" not in {c["name"] for c in inspect(conn).get_columns(table)}:
            conn.execute(text(f"ALTER TABLE {table} ADD COLUMN user_id INTEGER"))
        if f"ix_{table}_user_id" not in {i["name"] for i in inspect(conn).get_indexes(table)}:
            conn.execute(text(f"CREATE INDEX ix_{table}_user_id ON {table} (user_id)"))
    users = models.table_of(models.User)
    local = conn.execute(
        select(users.c.id).where(users.c.issuer == models.LOCAL_ISSUER, users.c.subject == models.LOCAL_SUBJECT)
    ).scalar()
    if local is None:
        local = conn.execute(
            users.insert()
            .values(
                issuer=models.LOCAL_ISSUER,
                subject=models.LOCAL_SUBJECT,
                email="",
                name="Local user",
                is_admin=True,
                created_at=models.utcnow(),
            )
            .returning(users.c.id)
        ).scalar_one()
    for table in _OWNED_TABLES:
        conn.execute(text(f"UPDATE {table} SET user_id = :local WHERE user_id IS NULL"), {"local": local})


MIGRATIONS: list[tuple[int, str, Migration]] = [
    (1, "initial tables", _m001_initial_tables),
    (2, "runs.warning", _m002_run_warning),
    (3, "edges: data, unique, node keys; run_states (from concept_pool/outline reports)", _m003_edges_and_run_states),
    (4, "run_events (the step log)", _m004_run_events),
    (5, "runs.search_exclusions; benchmarks, benchmark_items, judgments", _m005_evaluation),
    (6, "benchmarks.judges", _m006_benchmark_judges),
    (
        7,
        "kg_graphs, kg_chunks, kg_entities, kg_relations and their chunk links (knowledge graphs)",
        _m007_knowledge_graphs,
    ),
    (
        10,
        "DEoT runs' max_layers counts the question as layer 1 (the paper's count)",
        _m010_deot_layers_count_the_question,
    ),
    (11, "endpoint_cooldowns (an endpoint's 429 shared by every worker)", _m011_endpoint_cooldowns),
    (12, "benchmarks.balance", _m012_benchmark_balance),
    (13, "api_tokens (the HTTP API's bearer tokens, hashed)", _m013_api_tokens),
    (14, "users, run_shares; runs, benchmarks and api_tokens get an owner (the local user)", _m014_users_and_ownership),
]


def _recorded(conn: Connection) -> set[int]:
    if not inspect(conn).has_table("schema_migrations"):
        return set()
    return {row[0] for row in conn.execute(text("SELECT version FROM schema_migrations"))}


def applied_versions(engine: Engine) -> list[int]:
    with engine.connect() as conn:
        return sorted(_recorded(conn))


@contextmanager
def _sqlite_write_lock(engine: Engine) -> Iterator[Connection]:
    # BEGIN IMMEDIATE takes the write lock before anything is read, so no other process can act
    # between our check and our create; the busy timeout (storage/db.py) makes the others wait.
    # AUTOCOMMIT keeps pysqlite from issuing its own (deferred) BEGIN.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.exec_driver_sql("ROLLBACK")
            raise
        conn.exec_driver_sql("COMMIT")


@contextmanager
def _postgres_lock(engine: Engine) -> Iterator[Connection]:
    # A transaction-scoped advisory lock: released by the commit (or rollback) of the same
    # transaction that holds the DDL, so the next process sees the tables when it gets the lock.
    with engine.begin() as conn:
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
        yield conn


def _locked_transaction(engine: Engine) -> AbstractContextManager[Connection]:
    dialect = engine.dialect.name
    if dialect == "sqlite":
        return _sqlite_write_lock(engine)
    if dialect == "postgresql":
        return _postgres_lock(engine)
    return engine.begin()  # other databases: one transaction, no cross-process lock


def migrate(engine: Engine) -> list[int]:
    """Apply the pending migrations; returns the versions applied now (by this process)."""
    if set(applied_versions(engine)) >= {version for version, _name, _m in MIGRATIONS}:
        return []  # the usual start-up: nothing to do, no write lock taken
    done: list[int] = []
    with _locked_transaction(engine) as conn:
        models.table_of(models.SchemaMigration).create(conn, checkfirst=True)
        recorded = _recorded(conn)  # checked under the lock: another process may have just finished
        for version, name, migration in MIGRATIONS:
            if version in recorded:
                continue
            migration(conn)
            conn.execute(
                models.table_of(models.SchemaMigration)
                .insert()
                .values(version=version, name=name, applied_at=models.utcnow())
            )
            done.append(version)
    return done
