"""The engine and sessions of one service process, owned by the app's lifespan.

SQLite runs in WAL mode with a busy timeout, and write transactions start with
``BEGIN IMMEDIATE`` so concurrent writers queue instead of failing half-way; PostgreSQL uses
psycopg 3 with a bounded connect timeout so an unreachable server turns into a quick 503.

Every statement runs under ``database_statement_timeout``: PostgreSQL's ``statement_timeout``,
and on SQLite a progress handler that interrupts a statement running past its deadline, so no
request can hold a connection (and through the pool, the service) for long.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry

from app.settings import Settings

_WRITE = "gpuprov_write"
#: the key of a connection's statement deadline in its pool record's ``info``
_DEADLINE = "gpuprov_deadline"
#: SQLite virtual-machine instructions between two deadline checks (a check costs ~50 ns)
_PROGRESS_STEPS = 10_000


#: Text is exchanged as UTF-8 whatever the database's encoding: a database created in the C
#: locale is SQL_ASCII, where psycopg would otherwise hand back bytes, which SQLAlchemy cannot
#: read (a traceback at the first connection). The migrations' engine uses the same.
POSTGRES_CONNECT_ARGS: dict[str, str] = {"client_encoding": "utf8"}


def make_engine(settings: Settings) -> Engine:
    """Build the engine for the configured database URL."""
    url = settings.database_url
    if settings.is_sqlite:
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 30},
            pool_size=settings.database_pool_size,
            max_overflow=20,
            pool_timeout=settings.database_pool_timeout,
            # error messages (logged) never carry parameters: they can hold token hashes
            hide_parameters=True,
        )
        _configure_sqlite(engine)
        _limit_sqlite_statements(engine, settings.database_statement_timeout)
        return engine
    timeout_ms = max(1, round(settings.database_statement_timeout * 1000))
    return create_engine(
        url,
        connect_args={
            **POSTGRES_CONNECT_ARGS,
            "connect_timeout": settings.database_connect_timeout,
            "options": f"-c statement_timeout={timeout_ms}",
        },
        pool_size=settings.database_pool_size,
        max_overflow=settings.database_max_overflow,
        pool_timeout=settings.database_pool_timeout,
        hide_parameters=True,
        # no pre-ping (a round trip per checkout): a connection the server dropped fails its
        # request with a 503, SQLAlchemy then discards the pool and the retry reconnects
    )


def _configure_sqlite(engine: Engine) -> None:
    # The documented SQLAlchemy recipe: stop pysqlite's own transaction handling and emit BEGIN
    # ourselves, so reads share a snapshot and writers take the lock up front.
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        immediate = conn.get_execution_options().get(_WRITE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def _limit_sqlite_statements(engine: Engine, timeout: float) -> None:
    """Interrupt a SQLite statement that runs longer than ``timeout`` seconds.

    Each connection gets a progress handler reading a deadline that each statement sets when it
    starts; SQLite then fails the statement with "interrupted". The deadline covers executing the
    statement and fetching its rows, except for streamed results (the export), whose rows are
    read at the pace of the client; it is cleared when the transaction ends so a commit never
    trips over the deadline of an earlier statement.
    """
    never = float("inf")

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        deadline = [never]
        record.info[_DEADLINE] = deadline
        dbapi_connection.set_progress_handler(
            lambda: 1 if time.monotonic() > deadline[0] else 0, _PROGRESS_STEPS
        )

    def _set(conn: Connection, value: float) -> None:
        deadline = conn.connection.info.get(_DEADLINE)
        if deadline is not None:
            deadline[0] = value

    @event.listens_for(engine, "before_cursor_execute")
    def _start(conn: Connection, *_: Any) -> None:
        _set(conn, time.monotonic() + timeout)

    @event.listens_for(engine, "after_cursor_execute")
    def _executed(
        conn: Connection, _cursor: Any, _sql: str, _params: Any, context: Any, *_: Any
    ) -> None:
        # rows of a streamed result are fetched at the pace of the client
        if context is not None and context.execution_options.get("stream_results"):
            _set(conn, never)

    for name in ("commit", "rollback"):
        event.listen(engine, name, lambda conn: _set(conn, never))


class Database:
    """One engine with a session factory for reads and one for write transactions."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.engine = make_engine(settings)
        self._read = sessionmaker(self.engine, expire_on_commit=False)
        self._write = sessionmaker(
            self.engine.execution_options(**{_WRITE: True}), expire_on_commit=False
        )

    def session(self, *, write: bool = False) -> Session:
        """A new session; ``write=True`` takes SQLite's write lock when its transaction begins."""
        return (self._write if write else self._read)()

    @contextmanager
    def transaction(self, *, write: bool = False) -> Iterator[Session]:
        """A session whose transaction commits on success and rolls back on error."""
        with self.session(write=write) as session, session.begin():
            yield session

    @contextmanager
    def lookup(self) -> Iterator[Connection]:
        """A connection for a single read, outside any transaction on PostgreSQL: a lookup made
        on every request then costs one round trip instead of three (BEGIN, query, ROLLBACK),
        and no ROLLBACK discards the connection's prepared statements."""
        with self.engine.connect() as conn:
            # SQLite keeps its own BEGIN recipe (_configure_sqlite): AUTOCOMMIT would undo it
            if not self.settings.is_sqlite:
                conn.execution_options(isolation_level="AUTOCOMMIT")
            yield conn

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()
