"""The database engine factory: SQLite (WAL, busy timeout, foreign keys) or PostgreSQL.

A database the configuration names but that cannot be used is said here, where the engine is
made, as a `ConfigError` (engine/config_values.py) in one line that names the variable and the fix
and never holds a password: a URL that is not one, a port out of range, a kind of database we do
not support, a server that does not answer, a SQLite file that cannot be written.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.engine.interfaces import DBAPIConnection, DBAPICursor
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError
from sqlalchemy.pool import ConnectionPoolEntry
from sqlmodel import Session, create_engine

from engine.config_values import ConfigError
from engine.redact import redact_secrets, redact_url
from storage.migrations import MIGRATIONS, applied_versions, migrate

DATABASE_VARIABLE = "THOUGHTMAP_DATABASE_URL"
URL_FORMS = "sqlite:///path/to/file.sqlite3 or postgresql://user:password@host:5432/dbname"
# The PostgreSQL driver the project ships (psycopg 3). `postgres://` is how libpq, Heroku and most
# hosting panels spell PostgreSQL, but SQLAlchemy dropped that name; and `postgresql://` alone
# means whichever driver SQLAlchemy prefers. Both are taken as this driver.
POSTGRES_DRIVERNAME = "postgresql+psycopg"


class DatabaseURLError(ConfigError):
    """THOUGHTMAP_DATABASE_URL is not a usable database URL: not a URL, a port out of range, a kind
    of database other than SQLite and PostgreSQL, a driver that is not installed."""


class DatabaseUnavailable(ConfigError):
    """The database the configuration names cannot be opened: its server does not answer or refuses
    us, or the SQLite file (or its folder) cannot be written, e.g. on a read-only mount."""


@dataclass
class Database:
    url: str
    engine: Engine
    # Opened for reading only: the SQLite file cannot be written (`open_database(read_only_ok=True)`).
    read_only: bool = False

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    @property
    def display_url(self) -> str:
        """The URL with any password hidden, for notices and logs."""
        return make_url(self.url).render_as_string(hide_password=True)

    def dispose(self) -> None:
        self.engine.dispose()


class Store:
    """Base of the stores that own a group of tables (evaluation, knowledge graphs): one session per
    operation, objects usable after their session closed."""

    def __init__(self, db: Database) -> None:
        self.db = db

    @contextmanager
    def _session(self) -> Iterator[Session]:
        with Session(self.db.engine, expire_on_commit=False) as session:
            yield session


BUSY_TIMEOUT_S = 30


def _switch_to_wal(cursor: DBAPICursor) -> None:
    # Switching a new database to WAL needs an exclusive lock, and SQLite answers "database is
    # locked" at once, without the busy timeout, while another process starting at the same moment
    # holds one: wait here as the busy timeout would.
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _sqlite_pragmas(
    dbapi_connection: DBAPIConnection,  # pragma: no cover - driver callback
    _record: ConnectionPoolEntry,
) -> None:
    cursor = dbapi_connection.cursor()
    _switch_to_wal(cursor)
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_S * 1000}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def parse_database_url(url: str, variable: str = DATABASE_VARIABLE) -> URL:
    """`url` as SQLAlchemy's URL, PostgreSQL's usual spellings taken as our driver; DatabaseURLError
    (the value shown without its password) when it cannot name a database we can open."""
    shown = f"{variable}={redact_url(url)}"
    try:
        parsed = make_url(url)
    except ValueError:  # SQLAlchemy's int() of the port
        raise DatabaseURLError(
            f"{shown} cannot be used: its port must be a number from 1 to 65535. Use {URL_FORMS}"
        ) from None
    except ArgumentError:
        raise DatabaseURLError(f"{shown} is not a database URL. Use {URL_FORMS}") from None
    backend, _, driver = parsed.drivername.partition("+")
    if backend in ("postgres", "postgresql"):
        parsed = parsed.set(drivername=f"postgresql+{driver}" if driver else POSTGRES_DRIVERNAME)
    elif backend not in ("sqlite", "postgresql"):
        raise DatabaseURLError(
            f"{shown} cannot be used: runs are stored in SQLite or PostgreSQL, not "
            f"'{parsed.drivername}'. Use {URL_FORMS}"
        )
    if parsed.port is not None and not 1 <= parsed.port <= 65535:
        raise DatabaseURLError(f"{shown} cannot be used: its port must be a number from 1 to 65535. Use {URL_FORMS}")
    return parsed


def open_database(
    url: str, *, run_migrations: bool = True, read_only_ok: bool = False, variable: str = DATABASE_VARIABLE
) -> Database:
    """Open (and by default migrate) the database at `url`.

    `read_only_ok`: a SQLite file that cannot be written is opened for reading (`Database.read_only`)
    instead of refused, for commands that only read. `variable` is what messages name as the place
    to fix (THOUGHTMAP_HOME when the database is the default one in it).
    """
    parsed = parse_database_url(url, variable)
    if parsed.get_backend_name() == "sqlite":
        return _open_sqlite(parsed, run_migrations=run_migrations, read_only_ok=read_only_ok, variable=variable)
    try:
        engine = create_engine(parsed, pool_pre_ping=True, pool_size=10, max_overflow=20)
    except (NoSuchModuleError, ImportError):  # a driver we do not ship (psycopg2, asyncpg...)
        raise DatabaseURLError(
            f"{variable}={redact_url(url)} cannot be used: its driver "
            f"'{parsed.drivername}' is not installed. Use {URL_FORMS}"
        ) from None
    db = Database(url=parsed.render_as_string(hide_password=False), engine=engine)
    if run_migrations:
        _migrate(
            db,
            parsed,
            variable,
            fix=f"Start the database server, or correct the host, port, user, password or database name in {variable}",
        )
    return db


def _open_sqlite(parsed: URL, *, run_migrations: bool, read_only_ok: bool, variable: str) -> Database:
    url = parsed.render_as_string(hide_password=False)
    database = parsed.database
    if not database or database == ":memory:":
        db = Database(url=url, engine=_sqlite_engine(url))
        if run_migrations:
            migrate(db.engine)
        return db
    path = Path(database).expanduser()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DatabaseUnavailable(
            f"{variable}: the folder {path.parent} for the SQLite database cannot be "
            f"created ({exc.strerror or exc}). Point {variable} at a writable place"
        ) from None
    if _writable(path):
        db = Database(url=url, engine=_sqlite_engine(url))
        if run_migrations:
            _migrate(db, parsed, variable, fix=f"Point {variable} at a SQLite file this user can write")
        return db
    if not read_only_ok:
        raise DatabaseUnavailable(
            f"{variable}: the SQLite database {path} cannot be written (a read-only mount, or no permission "
            f"on the file or its folder). Make it writable, or point {variable} at a writable copy; "
            "reading works as it is: thoughtmap list, show, export"
        )
    return _open_sqlite_read_only(url, path, variable, check_version=run_migrations)


def _sqlite_engine(url: str) -> Engine:
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_S},
        pool_size=10,
        max_overflow=20,
    )
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _writable(path: Path) -> bool:
    """Whether this process can write the SQLite file, with the -wal and -shm files WAL keeps beside
    it. access(2) answers for this user, and says no on a read-only mount even to root, whom file
    modes do not stop."""
    if not path.exists():
        return os.access(path.parent, os.W_OK | os.X_OK)
    if not os.access(path, os.W_OK):
        return False
    return os.access(path.parent, os.W_OK | os.X_OK) or all(
        os.access(f"{path}{suffix}", os.W_OK) for suffix in ("-wal", "-shm")
    )


def _open_sqlite_read_only(url: str, path: Path, variable: str, *, check_version: bool) -> Database:
    if not path.exists():
        raise DatabaseUnavailable(
            f"{variable}: there is no database at {path} and its folder cannot be written "
            f"(a read-only mount?). Point {variable} at a writable place"
        )
    wal = Path(f"{path}-wal")
    # A WAL database opens read-only only with its -shm file beside it, or created there, or when
    # SQLite is told the file is immutable. Nobody can write a file in a folder nobody can write
    # (a read-only mount), so it is immutable then; unless its -wal still holds writes not yet
    # copied into it, which only a normal read-only open reads.
    immutable = not os.access(path.parent, os.W_OK) and not (wal.exists() and wal.stat().st_size > 0)
    uri = f"file:{quote(str(path))}?mode=ro" + ("&immutable=1" if immutable else "")
    engine = create_engine(
        url,
        creator=lambda: sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=BUSY_TIMEOUT_S),
        pool_size=10,
        max_overflow=20,
    )
    db = Database(url=url, engine=engine, read_only=True)
    try:
        pending = {version for version, _name, _migration in MIGRATIONS} - set(applied_versions(engine))
    except OperationalError as exc:
        db.dispose()
        raise DatabaseUnavailable(
            f"{variable}: the SQLite database {path} cannot be written, and reading it "
            f"failed too ({_reason(exc, None)}). Make it writable, or point {variable} "
            "at a writable copy"
        ) from None
    if check_version and pending:
        db.dispose()
        raise DatabaseUnavailable(
            f"{variable}: the SQLite database {path} was written by an older release and "
            "must be upgraded, which writes, but it cannot be written. Make it writable "
            "once (any thoughtmap command upgrades it), or point "
            f"{variable} at a writable copy"
        )
    return db


def _migrate(db: Database, parsed: URL, variable: str, *, fix: str) -> None:
    """Apply pending migrations: the first connection, so a database that cannot be reached or
    written is said here, with `fix`."""
    try:
        migrate(db.engine)
    except OperationalError as exc:
        db.dispose()
        sqlite = parsed.get_backend_name() == "sqlite"
        what = (
            f"cannot open the SQLite database {parsed.database}"
            if sqlite
            else f"cannot connect to the database at {redact_url(db.url)}"
        )
        raise DatabaseUnavailable(f"{variable}: {what} ({_reason(exc, parsed.password)}). {fix}") from None


def _reason(exc: OperationalError, password: str | None) -> str:
    """The driver's reason in a few words: libpq's first line ends with the cause ('connection to
    server at "127.0.0.1", port 5432 failed: Connection refused'); no password in it."""
    lines = str(exc.orig or exc).strip().splitlines() or ["unknown error"]
    cause = lines[0].rsplit(": ", 1)[-1].strip() or lines[0]
    return redact_secrets(cause, known=(password,) if password else ())
