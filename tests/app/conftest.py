"""Service test fixtures: one migrated database per backend (SQLite file and a fresh PostgreSQL
database) and one app per backend for the whole session, with every table emptied before each
test. Tests that use `service` run once per backend.

PostgreSQL is the server at 127.0.0.1:5432 (user postgres, trust auth). When it is unreachable
the PostgreSQL half is skipped, except under CI (``CI`` set), where that is a failure.
"""

from __future__ import annotations

import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, text

from app.domain.tokens import create_token
from app.main import create_app
from app.settings import Settings
from app.storage import session as storage_session
from app.storage.migrate import upgrade
from app.storage.session import Database

_DML = re.compile(r"\s*(INSERT|UPDATE|DELETE|REPLACE)\b", re.IGNORECASE)


class WriteOutsideWriteTransaction(AssertionError):
    """A row written in a transaction that began without SQLite's write lock."""


def _guard_sqlite_writes(configure: Callable[[Any], None]) -> Callable[[Any], None]:
    """Every SQLite engine the service makes refuses a write in a transaction begun without
    the write lock (``db.transaction(write=True)``): such a transaction fails half-way with
    "database is locked" when a concurrent writer commits first, which no single-threaded test
    would see. Refusing it here makes each missing ``write=True`` a test failure (and a killed
    mutant, docs/mutation.md)."""

    def configured(engine: Any) -> None:
        configure(engine)

        @event.listens_for(engine, "before_cursor_execute")
        def _check(conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
            if _DML.match(statement) and not conn.get_execution_options().get(
                storage_session._WRITE, False
            ):
                raise WriteOutsideWriteTransaction(
                    f"written outside a write transaction: {statement[:80]}"
                )

    return configured


storage_session._configure_sqlite = _guard_sqlite_writes(storage_session._configure_sqlite)  # type: ignore[assignment]

PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=3"
#: filled by policy and catalog imports, never by a report
PROVENANCE_TABLES = ("catalog_entry", "reference_catalog", "trust_policy")
#: filled by policy changes, gate decisions and the compliance they trigger
POLICY_TABLES = ("compliance_control", "compliance_asset", "gate_decision", "promotion_policy")
#: filled by advisory imports and analyses, never by a report
ADVISORY_TABLES = (
    "advisory_analysis",
    "advisory_product_status",
    "advisory_vulnerability",
    "advisory_document",
)
#: webhook endpoints and their outbox (tests/app/test_webhooks*.py)
WEBHOOK_TABLES = ("webhook_delivery", "webhook_endpoint")
TABLES = (
    "runtime_proposal",  # a host's --runtime reports fill it (tests/app/test_runtime_proposals.py)
    *WEBHOOK_TABLES,
    *ADVISORY_TABLES,
    *POLICY_TABLES,
    *PROVENANCE_TABLES,
    "artifact",
    "package",
    "raw_bom",
    "asset_library",
    "library_digest",
    "library_version",
    "asset_file_verdicts",
    "node_container",
    "node_gpu",
    "node_injected",
    "asset_condition",
    "asset_label",
    "asset_scope_label",
    "scan",
    "asset",
    "audit_event",
    "api_token",
    "team",
    "ci_trust_rule",
    "ci_token_use",
    "oidc_group_mapping",
)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh, migrated PostgreSQL database for this test session, dropped at the end."""
    name = f"gpuprov_test_{uuid.uuid4().hex[:12]}"
    try:
        admin = psycopg.connect(PG_ADMIN, autocommit=True)
    except psycopg.OperationalError as e:
        # PostgreSQL is the production store: its tests never pass by being skipped.
        pytest.fail(
            f"PostgreSQL at 127.0.0.1:5432 (user postgres) is required by the storage and API "
            f"tests: {e}"
        )
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
        try:
            upgrade(url)
            yield url
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A migrated SQLite database file for this test session."""
    url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'gpuprov.db'}"
    upgrade(url)
    return url


@pytest.fixture(scope="session", params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest) -> str:
    """Each backend's migrated database URL in turn."""
    fixture = "sqlite_url" if request.param == "sqlite" else "postgres_url"
    url: str = request.getfixturevalue(fixture)
    return url


@dataclass
class Service:
    """A running app (in-process) on one backend."""

    client: TestClient
    db: Database
    url: str
    settings: Settings

    @property
    def backend(self) -> str:
        return "sqlite" if self.url.startswith("sqlite") else "postgresql"

    def token(self, *scopes: str, assets: list[str] | None = None, name: str = "t") -> str:
        """Create a token directly in the database and return its secret."""
        with self.db.transaction(write=True) as session:
            return create_token(session, name, list(scopes), assets).secret

    def count(self, table: str) -> int:
        """Rows in a table."""
        with self.db.session() as session:
            return int(session.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())

    def stored(self) -> dict[str, int]:
        """Row counts of every table that a report fills."""
        return {
            t: self.count(t)
            for t in TABLES
            if t
            not in (
                "api_token",
                "audit_event",
                "team",
                "asset_scope_label",  # admins assign these (a team token's new asset too)
                "ci_trust_rule",
                "ci_token_use",
                "runtime_proposal",  # needs an advisory feed, as the advisory tables
                "oidc_group_mapping",
                *PROVENANCE_TABLES,
                *POLICY_TABLES,
            )
            and t not in ADVISORY_TABLES
            and t not in WEBHOOK_TABLES
        }

    def truncate(self) -> None:
        with self.db.transaction(write=True) as session:
            if self.backend == "postgresql":
                session.execute(text(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE"))
            else:
                session.execute(text("UPDATE asset SET latest_scan_id = NULL"))
                for table in TABLES:
                    session.execute(text(f"DELETE FROM {table}"))


@pytest.fixture(scope="session")
def _service(database_url: str) -> Iterator[Service]:
    # dashboard_cache_seconds=0: each test sees the overview of its own data; a CI audience so
    # CI trust rules can be stored (tests/app/test_ci_oidc.py makes an app with loopback issuers);
    # no in-process webhook worker: the webhook tests run deliveries themselves, at their times;
    # receivers on loopback allowed (GPUPROV_WEBHOOK_ALLOW_LOOPBACK, the tests' setting)
    settings = Settings(
        database_url=database_url,
        environment="test",
        dashboard_cache_seconds=0,
        ci_audience="gpuprov-test",
        webhook_worker_seconds=0,
        webhook_allow_loopback=True,
    )
    app = create_app(settings)
    with TestClient(app) as client:
        yield Service(client, app.state.db, database_url, settings)


@pytest.fixture
def service(_service: Service) -> Service:
    """The backend's app with empty tables."""
    _service.truncate()
    _service.client.app.state.auth_limiter.reset()  # type: ignore[attr-defined]
    return _service


def auth(token: str, **headers: str) -> dict[str, str]:
    """Request headers with a bearer token."""
    return {"Authorization": f"Bearer {token}", **headers}


JSON_HEADERS = {"Content-Type": "application/vnd.cyclonedx+json"}


@pytest.fixture
def post_report(service: Service) -> Callable[..., Any]:
    """POST a report with a fresh report:write token (or the given one)."""
    writer = service.token("report:write", name="writer")

    def post(body: bytes, token: str | None = None, **params: Any) -> Any:
        return service.client.post(
            "/api/v1/reports",
            content=body,
            params=params,
            headers=auth(token or writer, **JSON_HEADERS),
        )

    return post


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveServer:
    """uvicorn serving the app on a loopback port, in a thread."""

    def __init__(self, settings: Settings, port: int, app: Any = None, **overrides: Any) -> None:
        import uvicorn

        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        from app.http.server import uvicorn_options

        # as `gpuprov serve` runs it, less the logging set-up (pytest captures the logs); a test
        # of the connection's deadlines overrides `http` with shorter ones
        options = {**uvicorn_options(), "log_config": None, **overrides}
        config = uvicorn.Config(
            app or create_app(settings),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            **options,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *_: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=20)
