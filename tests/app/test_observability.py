"""Operations: request ids, JSON logs, Prometheus metrics (one process and multi-process mode),
security headers on every answer, and no token or report content in any log line."""

from __future__ import annotations

import gzip
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.domain.tokens import Scope
from app.http.server import log_config
from app.logs import REQUEST_ID, JsonFormatter
from app.main import create_app
from app.settings import Settings
from tests.app import boms, catalogs
from tests.app.conftest import JSON_HEADERS, Service, auth
from tests.app.test_auth import Walk
from tests.app.test_authz_matrix import classify
from tests.fixtures import keys

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def json_lines() -> Iterator[list[str]]:
    """Every line the service's loggers write while the test runs, in the JSON format."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Collect(logging.DEBUG)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield lines
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


def test_request_ids(service: Service, json_lines: list[str]) -> None:
    given = service.client.get("/healthz", headers={"X-Request-ID": "ci-run-42.7:a_b"})
    assert given.headers["x-request-id"] == "ci-run-42.7:a_b"
    made = service.client.get("/healthz")
    assert len(made.headers["x-request-id"]) == 32
    for bad in ("x" * 129, "a b", "<script>", "%C3%A9"):
        answer = service.client.get("/healthz", headers={"X-Request-ID": bad})
        assert answer.headers["x-request-id"] != bad and len(answer.headers["x-request-id"]) == 32
    missing = service.client.get("/api/v1/nowhere", headers={"X-Request-ID": "r-404"})
    assert missing.status_code == 404 and missing.headers["x-request-id"] == "r-404"
    access = [json.loads(line) for line in json_lines if '"app.access"' in line]
    first = next(e for e in access if e.get("request_id") == "ci-run-42.7:a_b")
    assert first["route"] == "/healthz" and first["status"] == 200 and first["method"] == "GET"
    assert first["level"] == "INFO" and first["time"].endswith("Z")
    assert isinstance(first["duration_ms"], float)
    assert any(e.get("request_id") == "r-404" and e["route"] == "unmatched" for e in access)
    assert REQUEST_ID.get() is None  # nothing leaks out of a request


def test_json_log_config() -> None:
    config = log_config("json")
    assert config["formatters"]["default"] == {"()": "app.logs.JsonFormatter"}
    assert config["formatters"]["access"] == {"()": "app.logs.JsonFormatter"}
    formatter = JsonFormatter(fmt="ignored", use_colors=None)
    token = REQUEST_ID.set("rid-1")
    try:
        record = logging.LogRecord("app.x", logging.WARNING, __file__, 1, "a %s", ("b",), None)
        record.extra_field = {"k": 1}
        entry = json.loads(formatter.format(record))
    finally:
        REQUEST_ID.reset(token)
    assert entry["message"] == "a b" and entry["request_id"] == "rid-1"
    assert entry["logger"] == "app.x" and entry["level"] == "WARNING"
    assert entry["extra_field"] == "{'k': 1}"
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("app", logging.ERROR, __file__, 1, "x", None, sys.exc_info())
    assert "ValueError: boom" in json.loads(formatter.format(record))["exception"]
    assert log_config()["formatters"]["default"]["fmt"].startswith("%(asctime)s")


def _metric(text: str, name: str, default: float | None = None) -> float:
    """The value of one sample (its name with its labels, as exposed)."""
    for line in text.splitlines():
        if line.rsplit(" ", 1)[0] == name:
            return float(line.rsplit(" ", 1)[1])
    if default is not None:
        return default
    raise AssertionError(f"{name} not in the metrics")


def _delta(text: str, baseline: str, name: str) -> float:
    return _metric(text, name) - _metric(baseline, name, default=0)


def _http(route: str, status: int) -> str:
    labels = f'method="GET",route="{route}",status="{status}"'
    return "gpuprov_http_request_duration_seconds_count{" + labels + "}"


def test_metrics(service: Service, post_report: Callable[..., Any]) -> None:
    # the app (and its counters) is shared by the session's tests: compare with a baseline
    baseline = service.client.app.state.metrics.exposition().decode()  # type: ignore[attr-defined]
    walk = Walk(service, post_report)  # one report stored, a trust policy and a policy "prod"
    reader = service.token("inventory:read")
    gate = service.token("gate")
    client = service.client
    tampered = [
        boms.Lib("/opt/x/libcudart.so.12", "cudart", "cudart", "12.4.127", integrity="modified"),
        boms.Lib("/opt/y/libcudart.so.12", "cudart", "cudart", "12.4.99", provenance="conflict"),
    ]
    again = boms.encode(boms.gpuprov_bom(name="registry.example/other:1", extra_libs=tampered))
    assert post_report(again).status_code == 201
    assert post_report(again).status_code == 200  # a duplicate
    assert post_report(b"{}").status_code == 422
    decided = client.post(
        "/api/v1/gate", json={"policy": "prod", "image": walk.digest}, headers=auth(gate)
    )
    assert decided.status_code == 200
    decision = decided.json()["decision"]
    untrusted = catalogs.signed(
        catalogs.catalog_from_bom(boms.gpuprov_bom(), "rogue"), keys.shared("ed25519")
    )
    admin = service.token("admin")
    refused = client.post(
        "/api/v1/catalogs", content=untrusted, headers=auth(admin, **JSON_HEADERS)
    )
    assert refused.status_code == 422, refused.text
    client.get("/api/v1/assets", headers=auth("gpv_wrong"))
    answer = client.get("/metrics", headers=auth(reader))
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = answer.text
    assert _delta(text, baseline, 'gpuprov_reports_received_total{outcome="created"}') == 2
    assert _delta(text, baseline, 'gpuprov_reports_received_total{outcome="duplicate"}') == 1
    assert _delta(text, baseline, 'gpuprov_reports_received_total{outcome="refused"}') == 1
    assert _delta(text, baseline, "gpuprov_ingest_duration_seconds_count") == 3
    assert _delta(text, baseline, "gpuprov_report_bytes_count") == 3
    assert _metric(text, "gpuprov_ingests_in_flight") == 0
    assert _delta(text, baseline, f'gpuprov_gate_decisions_total{{decision="{decision}"}}') == 1
    assert _delta(text, baseline, 'gpuprov_verification_failures_total{kind="catalog"}') == 1
    # counted once: the duplicate delivery of the tampered report adds nothing
    assert _delta(text, baseline, 'gpuprov_verification_failures_total{kind="file_integrity"}') == 1
    assert (
        _delta(text, baseline, 'gpuprov_verification_failures_total{kind="file_provenance"}') == 1
    )
    assert _delta(text, baseline, 'gpuprov_auth_failures_total{reason="invalid"}') == 1
    assert _metric(text, 'gpuprov_assets{kind="image"}') == 2
    client.get(f"/api/v1/assets/{walk.asset_id}", headers=auth(reader))
    client.get("/api/v1/assets/999999", headers=auth(reader))
    text = client.get("/metrics", headers=auth(reader)).text
    for status in (200, 404):
        assert _metric(text, _http("/api/v1/assets/{asset_id}", status)) >= 1
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers=auth(gate)).status_code == 403


def test_metrics_without_token(database_url: str) -> None:
    settings = Settings(database_url=database_url, environment="test", metrics_auth="none")
    with TestClient(create_app(settings)) as client:
        answer = client.get("/metrics")
        assert answer.status_code == 200 and "gpuprov_assets" in answer.text
        assert "security" not in client.get("/openapi.json").json()["paths"]["/metrics"]["get"]


_WORKER = """
from app.http.metrics import Metrics
m = Metrics()
m.reports.labels("created").inc({n})
m.requests.labels("GET", "/healthz", "200").observe(0.01)
m.ingests_in_flight.inc()
"""


def test_metrics_multiprocess_mode(tmp_path: Path) -> None:
    """Two worker processes count; a scrape in a third sums them (PROMETHEUS_MULTIPROC_DIR)."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    for n in (2, 3):
        code = _WORKER.format(n=n)
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True)
    scrape = "from app.http.metrics import Metrics; print(Metrics().exposition().decode())"
    out = subprocess.run(
        [sys.executable, "-c", scrape], cwd=ROOT, env=env, check=True, capture_output=True
    ).stdout.decode()
    assert _metric(out, 'gpuprov_reports_received_total{outcome="created"}') == 5
    assert _metric(out, _http("/healthz", 200)) == 2


_HEADERS = ("x-content-type-options", "x-frame-options", "referrer-policy")


def _check_headers(answer: Any, where: str) -> None:
    headers = answer.headers
    for name in _HEADERS:
        assert name in headers, f"{where}: no {name}"
    assert headers["x-content-type-options"] == "nosniff"
    assert "frame-ancestors 'none'" in headers["content-security-policy"], where
    assert "x-request-id" in headers, where
    if "/docs/static/" not in where and not where.startswith("GET /favicon.ico"):
        assert headers["cache-control"] == "no-store", where


def test_security_headers_on_every_answer(
    service: Service, post_report: Callable[..., Any]
) -> None:
    app: Any = service.client.app
    walk = Walk(service, post_report)
    admin = service.token(*(s.value for s in Scope))
    found, _ = classify(app)
    for (method, path), kind in sorted(found.items()):
        if kind == "static":
            continue
        for token in (None, admin, "gpv_wrong"):
            app.state.auth_limiter.reset()
            answer = walk.request(method.lower(), path, token)
            _check_headers(answer, f"{method} {path} {answer.status_code}")
    for answer in (
        service.client.get("/nowhere"),  # 404
        service.client.delete("/healthz"),  # 405
        service.client.get("/docs/static/swagger-ui.css"),
        service.client.get("/api/v1/assets?limit=0", headers=auth(admin)),  # 400
        service.client.post("/api/v1/reports", content=b"[", headers=auth(admin, **JSON_HEADERS)),
    ):
        _check_headers(answer, f"{answer.request.url.path} {answer.status_code}")
    docs = service.client.get("/docs")
    assert "script-src 'self' 'unsafe-inline'" in docs.headers["content-security-policy"]
    api = service.client.get("/healthz")
    assert api.headers["content-security-policy"].startswith("default-src 'none'")


def test_error_answers_carry_the_headers(database_url: str) -> None:
    settings = Settings(database_url=database_url, environment="test")
    app = create_app(settings)

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("a bug")

    with TestClient(app, raise_server_exceptions=False) as client:
        answer = client.get("/boom")
        assert answer.status_code == 500
        _check_headers(answer, "/boom 500")


MARKER = "Zq7-report-content-marker"


def test_no_token_or_report_content_in_logs(
    service: Service, post_report: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    client = service.client
    admin = service.token("admin")
    writer = service.token("report:write", assets=["elsewhere"])
    bom = boms.gpuprov_bom(name=f"registry.example/{MARKER.lower()}:1")
    bom["components"][0]["name"] = MARKER
    body = boms.encode(bom)
    secrets = [admin, writer]
    with caplog.at_level(logging.DEBUG):
        assert post_report(body).status_code == 201
        assert post_report(body, token=writer).status_code == 403  # another asset
        assert post_report(body.replace(b"{", b'{"x":', 1)[:-3]).status_code == 422
        assert post_report(gzip.compress(body)[:-9]).status_code in (400, 415, 422)
        bad = json.loads(body)
        bad["metadata"]["timestamp"] = f"{MARKER}-not-a-time"
        assert post_report(json.dumps(bad).encode()).status_code == 422
        created = client.post(
            "/api/v1/tokens", json={"name": "ci", "scopes": ["gate"]}, headers=auth(admin)
        )
        secrets.append(created.json()["token"])
        rotated = client.post(f"/api/v1/tokens/{created.json()['id']}/rotate", headers=auth(admin))
        secrets.append(rotated.json()["token"])
        secrets.append("gpv_" + MARKER)
        client.get("/api/v1/assets", headers=auth(secrets[-1]))
        client.get("/api/v1/assets", headers=auth(secrets[2]))  # revoked by the rotation
        client.post(
            "/api/v1/gate",
            json={"policy": "none", "bom": bom},
            headers=auth(admin),
        )
    logged = caplog.text + "".join(str(r.args) + str(vars(r)) for r in caplog.records)
    assert "app.access" in caplog.text  # the capture saw the service's lines
    for secret in secrets:
        assert secret not in logged
        assert secret[:12] not in logged or secret[:12] == "gpv_" + MARKER[:8]
    assert MARKER not in logged and MARKER.lower() not in logged
