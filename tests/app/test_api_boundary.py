"""The HTTP boundary on both databases: every query parameter is applied or refused (unknown,
repeated, NUL, over its column, over the filter cap), integers beyond BIGINT are 400s that keep
the connection usable, a statement past the statement timeout is interrupted, a database
without the schema answers 503, and the headers, readiness text and offline docs pages."""

from __future__ import annotations

import http.client
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.exc import TimeoutError as PoolTimeout

from app.domain.tokens import Scope, create_token
from app.http.server import log_config
from app.main import create_app
from app.settings import Settings
from app.storage.migrate import upgrade
from app.storage.session import Database
from tests.app import boms
from tests.app.conftest import PG_ADMIN, LiveServer, Service, auth, free_port

BIG = 2**63  # one past the largest BIGINT


def _operations(app: Any) -> list[tuple[str, str]]:
    return [
        (method, path)
        for path, item in app.openapi()["paths"].items()
        for method in item
        if method in ("get", "post", "put", "delete")
    ]


@pytest.fixture
def every_scope(service: Service) -> str:
    return service.token(*(s.value for s in Scope), name="all")


def _get(service: Service, token: str, path: str, **params: Any) -> Any:
    return service.client.get(path, params=params, headers=auth(token))


def _refused(answer: Any, *fragments: str) -> None:
    assert answer.status_code == 400, answer.text
    message = answer.json()["error"]["message"]
    for fragment in fragments:
        assert fragment in message, message


def test_unknown_query_parameters_are_refused_everywhere(
    service: Service, every_scope: str
) -> None:
    operations = _operations(service.client.app)
    assert len(operations) >= 19
    for method, path in operations:
        concrete = path.replace("{asset_id}", "1").replace("{token_id}", "1")
        answer = service.client.request(
            method.upper(), concrete, params={"familly": "cudnn"}, headers=auth(every_scope)
        )
        _refused(answer, "unknown query parameter familly")
        assert answer.headers["x-content-type-options"] == "nosniff"
    # the message names what the endpoint accepts
    _refused(_get(service, every_scope, "/api/v1/libraries", limt=5), "accepts: family, limit")


@pytest.mark.parametrize(
    ("path", "params", "fragment"),
    [
        ("/api/v1/assets", [("kind", "image"), ("kind", "host")], "kind may be given once"),
        ("/api/v1/where-used", [("family", "a"), ("family", "b")], "family may be given once"),
        ("/api/v1/libraries", [("limit", "1"), ("limit", "2")], "limit may be given once"),
        ("/api/v1/assets", [("name", "a\x00b")], "name holds a NUL"),
        ("/api/v1/assets", [("label", "env=pr\x00od")], "label holds a NUL"),
        ("/api/v1/where-used", [("family", "cud\x00nn")], "family holds a NUL"),
        ("/api/v1/drift", [("family", "\x00")], "NUL"),
        ("/api/v1/assets", [("family", "x" * 65)], "/query/family"),
        ("/api/v1/assets", [("family", "")], "/query/family"),
        ("/api/v1/libraries", [("family", "")], "/query/family"),
        ("/api/v1/assets", [("name", "")], "/query/name"),
        ("/api/v1/where-used", [("version", "")], "empty version"),
        ("/api/v1/where-used", [("sha256", "")], "64 hexadecimal"),
        ("/api/v1/assets", [("verdict", "")], "verdict must be one of"),
        ("/api/v1/assets", [("kind", "")], "/query/kind"),
        ("/api/v1/assets", [("name", "x" * 1025)], "/query/name"),
        ("/api/v1/where-used", [("version", "9" * 129)], "/query/version"),
        ("/api/v1/assets", [("label", "k" * 129 + "=v")], "label key"),
        ("/api/v1/assets", [("label", "k=" + "v" * 257)], "longer than 256"),
        ("/api/v1/drift", [("label", "bad key=x")], "label key"),
        ("/api/v1/assets", [("label", "noequals")], "KEY=VALUE"),
        ("/api/v1/assets", [("integrity", "conflict")], "integrity must be one of"),
    ],
)
def test_parameters_that_cannot_match_are_400(
    service: Service, every_scope: str, path: str, params: list[tuple[str, str]], fragment: str
) -> None:
    answer = service.client.get(path, params=params, headers=auth(every_scope))
    _refused(answer)
    body = answer.json()["error"]
    assert fragment in body["message"] + str(body["details"]), body


def test_a_nul_label_on_a_report_is_refused(
    service: Service, post_report: Callable[..., Any]
) -> None:
    """SQLite stored it while the docs said NUL is refused; PostgreSQL answered 500."""
    for label in ("env=pr\x00od", "e\x00nv=prod"):
        answer = post_report(boms.encode(boms.gpuprov_bom()), label=[label])
        _refused(answer, "label holds a NUL")
    assert service.count("asset_label") == 0 and service.count("scan") == 0


def test_label_filters_are_capped(service: Service, every_scope: str) -> None:
    cap = service.settings.max_filter_values
    labels = [f"k{i}=v" for i in range(cap)]
    for path in ("/api/v1/assets", "/api/v1/where-used", "/api/v1/drift"):
        params = {"label": labels, **({"family": "cudnn"} if "where" in path else {})}
        assert _get(service, every_scope, path, **params).status_code == 200
        params["label"] = [*labels, "one=more"]
        _refused(_get(service, every_scope, path, **params), f"at most {cap} values", "label")


def test_integers_beyond_bigint_are_400(service: Service, every_scope: str) -> None:
    for path, params in (
        (f"/api/v1/assets/{BIG}", {}),
        (f"/api/v1/assets/{BIG}/sbom", {}),
        ("/api/v1/assets/1/sbom", {"scan_id": BIG}),
        ("/api/v1/assets", {"offset": BIG}),
        ("/api/v1/where-used", {"family": "cudnn", "offset": BIG}),
        ("/api/v1/catalogs", {"offset": BIG}),
        ("/api/v1/assets/0", {}),
    ):
        _refused(_get(service, every_scope, path, **params))
    _refused(service.client.delete(f"/api/v1/tokens/{BIG}", headers=auth(every_scope)))
    # the largest BIGINT itself is a valid id and offset: an empty answer, not an error
    assert _get(service, every_scope, f"/api/v1/assets/{BIG - 1}").status_code == 404
    assert _get(service, every_scope, "/api/v1/assets", offset=BIG - 1).json()["items"] == []


def test_bad_integers_keep_the_connection_usable(database_url: str) -> None:
    """A 500 used to close the keep-alive connection under the client's next request."""
    settings = Settings(database_url=database_url, environment="test")
    with LiveServer(settings, free_port()) as server:
        with Database(settings).transaction(write=True) as session:
            token = create_token(session, f"ka-{uuid.uuid4().hex[:6]}", ["admin"], None).secret
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        headers = auth(token)
        for path in (
            f"/api/v1/assets/{BIG}",
            f"/api/v1/assets?offset={BIG}",
            f"/api/v1/assets/1/sbom?scan_id={BIG}",
            "/api/v1/assets?name=a%00b",
        ):
            conn.request("GET", path, headers=headers)
            answer = conn.getresponse()
            answer.read()
            assert answer.status == 400, path
            assert answer.getheader("connection") != "close"
        conn.request("DELETE", f"/api/v1/tokens/{BIG}", headers=headers)
        deleted = conn.getresponse()
        assert deleted.status == 400 and b"/path/token_id" in deleted.read()
        conn.request("GET", "/api/v1/assets", headers=headers)  # same connection
        last = conn.getresponse()
        assert last.status == 200 and b'"items"' in last.read()
        assert last.getheader("server") is None
        conn.close()


def test_an_unexpected_error_keeps_the_connection_usable(sqlite_url: str) -> None:
    settings = Settings(database_url=sqlite_url, environment="test")
    app = create_app(settings)

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("a bug")

    with LiveServer(settings, free_port(), app) as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("GET", "/boom")
        answer = conn.getresponse()
        assert answer.status == 500
        assert b'"internal error"' in answer.read()
        assert answer.getheader("x-content-type-options") == "nosniff"
        conn.request("GET", "/healthz")  # the same connection
        assert conn.getresponse().status == 200
        conn.close()


def test_security_headers(service: Service, every_scope: str) -> None:
    for answer in (
        service.client.get("/healthz"),
        service.client.get("/api/v1/assets"),  # 401
        _get(service, every_scope, "/api/v1/assets"),
        _get(service, every_scope, "/api/v1/assets", bogus="1"),
    ):
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["cache-control"] == "no-store"
    created = service.client.post(
        "/api/v1/tokens", json={"name": "ci", "scopes": ["gate"]}, headers=auth(every_scope)
    )
    assert created.status_code == 201 and "token" in created.json()
    assert created.headers["cache-control"] == "no-store"


def test_docs_pages_work_offline(service: Service) -> None:
    for page in ("/docs", "/redoc"):
        html = service.client.get(page)
        assert html.status_code == 200
        assert "://" not in html.text, "the page loads something from another host"
        assets = re.findall(r'(?:src|href)="([^"]+)"', html.text)
        assert assets and all(a.startswith("/docs/static/") for a in assets), assets
        for asset in assets:
            served = service.client.get(asset)
            assert served.status_code == 200 and len(served.content) > 1000, asset
            # ReDoc's bundle shows a logo from its CDN whatever its options (issue 18 §6)
            assert b"cdn.redoc.ly" not in served.content, asset


def test_openapi_documents_what_operations_answer(service: Service, every_scope: str) -> None:
    document = service.client.get("/openapi.json").json()
    assert "HTTPValidationError" not in str(document)
    for path, item in document["paths"].items():
        for method, operation in item.items():
            codes = set(operation["responses"])
            assert {"400", "431"} <= codes, (method, path)
            if operation.get("security"):
                assert {"401", "403", "503"} <= codes, (method, path)
            if "requestBody" in operation:  # too slow, too large, not acceptable
                assert {"408", "413", "422"} <= codes, (method, path)
    # the token request, read by hand after the admin check, keeps its documented schema
    token = document["paths"]["/api/v1/tokens"]["post"]["requestBody"]
    schema = token["content"]["application/json"]["schema"]
    assert schema["required"] == ["name", "scopes"]
    assert schema["properties"]["assets"]["maxItems"] == 100
    report = document["paths"]["/api/v1/reports"]["post"]
    assert set(report["requestBody"]["content"]) == {
        "application/vnd.cyclonedx+json",
        "application/json",
        "application/spdx+json",  # SPDX 2.2/2.3 JSON and tag-value (issue 21)
        "text/spdx",
    }
    # the documented trust policy example is a policy the service accepts
    put = document["paths"]["/api/v1/trust-policy"]["put"]
    example = put["requestBody"]["content"]["application/yaml"]["example"]
    answer = service.client.put(
        "/api/v1/trust-policy",
        content=example,
        headers=auth(every_scope, **{"Content-Type": "application/yaml"}),
    )
    assert answer.status_code == 201, answer.text


def _unreachable_settings() -> Settings:
    return Settings(
        database_url=f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/secretdb",
        database_connect_timeout=2,
    )


def test_readiness_does_not_reveal_the_database() -> None:
    with TestClient(create_app(_unreachable_settings())) as client:
        ready = client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json() == {"status": "unavailable", "database": "unreachable"}


@pytest.fixture(params=["sqlite", "postgresql"])
def schemaless(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """A migrated database (URL) and a function that drops its schema."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'gone.db'}"
        upgrade(url)

        def drop() -> None:
            (tmp_path / "gone.db").unlink()
            for suffix in ("-wal", "-shm"):
                (tmp_path / f"gone.db{suffix}").unlink(missing_ok=True)

        yield url, drop
        return
    name = f"gpuprov_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    upgrade(url)

    def drop_schema() -> None:
        dsn = PG_ADMIN.replace("dbname=postgres", f"dbname={name}")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")

    try:
        yield url, drop_schema
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_database_without_schema_answers_503(schemaless: tuple[str, Callable[[], None]]) -> None:
    url, drop = schemaless
    settings = Settings(database_url=url, retry_after_seconds=9)
    with TestClient(create_app(settings)) as client:
        drop()
        client.app.state.db.dispose()  # type: ignore[attr-defined]
        for method, path in (("GET", "/api/v1/assets"), ("POST", "/api/v1/reports")):
            answer = client.request(
                method,
                path,
                content=boms.encode(boms.gpuprov_bom()),
                headers=auth("gpv_anything", **{"Content-Type": "application/json"}),
            )
            assert answer.status_code == 503, answer.text
            assert answer.headers["retry-after"] == "9"
            assert "no gpuprov schema; run `gpuprov db upgrade`" in answer.text
        ready = client.get("/readyz")
        assert ready.status_code == 503 and "gpuprov db upgrade" in ready.json()["database"]


def _slow_query(backend: str) -> str:
    if backend == "postgresql":
        return "SELECT pg_sleep(30)"
    # a billion-row recursive count: minutes of work unless interrupted
    return (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) "
        "SELECT count(*) FROM c"
    )


def test_statement_timeout_interrupts_a_slow_query(database_url: str) -> None:
    backend = "sqlite" if database_url.startswith("sqlite") else "postgresql"
    settings = Settings(
        database_url=database_url, database_statement_timeout=0.2, retry_after_seconds=4
    )
    app = create_app(settings)

    @app.get("/slow")
    def slow() -> dict[str, int]:
        with app.state.db.session() as session:
            return {"count": session.execute(text(_slow_query(backend))).scalar_one()}

    with TestClient(app) as client:
        answer = client.get("/slow")
        assert answer.status_code == 503, answer.text
        assert "statement timeout of 0.2 s" in answer.json()["error"]["message"]
        assert answer.headers["retry-after"] == "4"
        # the connection goes back to the pool usable: the next query runs
        assert client.get("/readyz").status_code == 200


def test_an_exhausted_pool_answers_503_after_the_pool_timeout(database_url: str) -> None:
    settings = Settings(database_url=database_url, database_pool_size=1, database_pool_timeout=0.2)
    with TestClient(create_app(settings)) as client:
        engine = client.app.state.db.engine  # type: ignore[attr-defined]
        held = []
        try:
            while True:  # take every connection the pool will give
                try:
                    held.append(engine.connect())
                except PoolTimeout:
                    break
            answer = client.get("/api/v1/assets", headers=auth("gpv_anything"))
            assert answer.status_code == 503, answer.text
            assert "retry later" in answer.json()["error"]["message"]
        finally:
            for conn in held:
                conn.close()
        assert client.get("/readyz").status_code == 200


def test_streamed_rows_are_not_cut_by_the_deadline(sqlite_url: str) -> None:
    """The export streams rows at the client's pace: its deadline ends with its execution."""
    db = Database(Settings(database_url=sqlite_url, database_statement_timeout=0.05))
    query = text("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c")
    with db.session() as session:
        rows = session.execute(query.execution_options(yield_per=10))
        first = rows.fetchmany(5)
        time.sleep(0.1)  # a slow client: past the statement's deadline
        assert [r[0] for r in first + rows.fetchmany(5)] == list(range(1, 11))
    db.dispose()


def test_database_errors_never_log_parameters(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A database error (a 500) is logged without the values it was given: the driver's message
    quotes them, and they can be token hashes."""
    app = create_app(Settings(database_url=database_url))
    secret = "token-hash-" + "ab" * 20
    cast = "CAST(:p AS integer)" if "postgresql" in database_url else "json_extract(:p, '$')"

    @app.get("/failing")
    def failing() -> None:
        with app.state.db.session() as session:
            session.execute(text(f"SELECT {cast}"), {"p": secret})

    with TestClient(app, raise_server_exceptions=False) as client:
        with caplog.at_level(logging.INFO):
            answer = client.get("/failing")
    assert answer.status_code in (500, 503)  # SQLite calls malformed JSON an OperationalError
    assert secret not in answer.text
    assert "database" in caplog.text and secret not in caplog.text
    if "postgresql" in database_url:  # a DataError: the statement is logged, not the message
        assert "InvalidTextRepresentation (SQLSTATE 22P02) in: SELECT CAST" in caplog.text


def test_log_lines_carry_a_timestamp() -> None:
    config = log_config()
    assert {"app", "gpuprov", "uvicorn"} <= set(config["loggers"])
    formatter = logging.Formatter(
        config["formatters"]["default"]["fmt"].replace("levelprefix", "levelname")
    )
    record = logging.LogRecord("app.http.errors", logging.ERROR, __file__, 1, "boom", None, None)
    assert re.match(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ERROR app.http.errors: boom$",
        formatter.format(record),
    )
