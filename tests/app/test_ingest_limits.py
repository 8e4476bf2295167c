"""Issue 7, section 5: what one report may cost and when it may claim to be an asset's latest.

Future-dated reports are refused (a report dated 9999 used to hold its asset forever), the
component and property caps answer 413 naming the limit before any schema work, and a process
ingests a bounded number of reports at once (503 with Retry-After beyond). Each runs on both
databases and checks that a refused report stores nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.domain.ingest import RawReport, ingest
from app.domain.report_parser import ReportLimits, parse_report
from app.domain.tokens import authenticate
from app.http.body import IngestGate
from app.http.metrics import Metrics
from app.main import create_app
from app.settings import Settings
from tests.app import boms
from tests.app.conftest import JSON_HEADERS, Service, auth
from tests.app.test_bad_input import NOTHING

Post = Callable[..., Any]


def _at(offset: timedelta) -> str:
    return (datetime.now(UTC) + offset).isoformat(timespec="seconds")


def _asset(service: Service, url: str) -> dict[str, Any]:
    reader = service.token("inventory:read", name="reader")
    answer: dict[str, Any] = service.client.get(url, headers=auth(reader)).json()
    return answer


def test_future_dated_report_is_refused_and_later_reports_are_latest(
    service: Service, post_report: Post
) -> None:
    future = boms.gpuprov_bom(timestamp="9999-12-30T00:00:00Z")
    answer = post_report(boms.encode(future))
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert "clock skew of 300 s" in error["message"]
    assert error["details"][0]["pointer"] == "/metadata/timestamp"
    assert service.stored() == NOTHING
    first = post_report(boms.encode(boms.gpuprov_bom(timestamp=_at(-timedelta(hours=1)))))
    second = post_report(boms.encode(boms.gpuprov_bom(timestamp=_at(timedelta()))))
    assert first.json()["latest"] and second.json()["latest"]
    assert (
        _asset(service, second.json()["asset_url"])["latest_scan"]["id"]
        == (second.json()["scan_id"])
    )


def test_clock_skew_within_the_setting_is_accepted(service: Service, post_report: Post) -> None:
    ahead = boms.gpuprov_bom(timestamp=_at(timedelta(minutes=2)))
    assert post_report(boms.encode(ahead)).status_code == 201
    too_far = boms.gpuprov_bom(timestamp=_at(timedelta(minutes=10)))
    assert post_report(boms.encode(too_far)).status_code == 422


def test_equal_timestamps_the_last_stored_is_latest(service: Service, post_report: Post) -> None:
    stamp = "2026-11-30T12:00:00Z"
    first = post_report(boms.encode(boms.gpuprov_bom(timestamp=stamp))).json()
    second = post_report(boms.encode(boms.gpuprov_bom(timestamp=stamp))).json()
    assert first["latest"] and second["latest"]
    assert _asset(service, second["asset_url"])["latest_scan"]["id"] == second["scan_id"]


def test_report_from_1970_joins_the_history(service: Service, post_report: Post) -> None:
    current = post_report(boms.encode(boms.gpuprov_bom())).json()
    epoch = post_report(boms.encode(boms.gpuprov_bom(timestamp="1970-01-01T00:00:00Z")))
    assert epoch.status_code == 201 and not epoch.json()["latest"]
    assert _asset(service, current["asset_url"])["latest_scan"]["id"] == current["scan_id"]


def test_future_latest_stored_before_the_limit_gives_way(
    service: Service, post_report: Post
) -> None:
    # a database written before future timestamps were refused: its latest scan is in 9999
    stuck = parse_report(boms.encode(boms.gpuprov_bom(timestamp="9999-12-30T00:00:00Z")))
    secret = service.token("report:write", name="old-agent")
    with service.db.transaction(write=True) as session:
        principal = authenticate(session, secret)
        raw = RawReport("application/json", 1, b"")
        ingest(session, stuck, raw, principal, {}, datetime.now(UTC))
    answer = post_report(boms.encode(boms.gpuprov_bom(timestamp=_at(timedelta()))))
    assert answer.status_code == 201 and answer.json()["latest"]
    latest = _asset(service, answer.json()["asset_url"])["latest_scan"]
    assert latest["id"] == answer.json()["scan_id"]


@pytest.fixture
def app_with(service: Service) -> Iterator[Callable[..., tuple[FastAPI, TestClient]]]:
    """Another app on the service's (emptied) database, with other settings."""
    opened: list[TestClient] = []

    def make(**overrides: Any) -> tuple[FastAPI, TestClient]:
        app = create_app(Settings(database_url=service.url, environment="test", **overrides))
        client = TestClient(app)
        client.__enter__()
        opened.append(client)
        return app, client

    yield make
    for client in opened:
        client.__exit__(None, None, None)


def _post(client: TestClient, token: str | None, body: bytes) -> Any:
    headers = auth(token, **JSON_HEADERS) if token else JSON_HEADERS
    return client.post("/api/v1/reports", content=body, headers=headers)


def test_component_cap(service: Service, app_with: Callable[..., Any]) -> None:
    _, client = app_with(max_report_components=16)
    writer = service.token("report:write")
    bom = boms.gpuprov_bom()
    assert len(bom["components"]) == 16
    assert _post(client, writer, boms.encode(bom)).status_code == 201
    service.truncate()
    writer = service.token("report:write")
    # nested components count too, wherever they are
    bom["metadata"]["component"]["components"] = [
        {"type": "library", "name": "nested", "bom-ref": "nested"}
    ]
    answer = _post(client, writer, boms.encode(bom))
    assert answer.status_code == 413
    error = answer.json()["error"]
    assert "more than 16 components" in error["message"]
    assert "GPUPROV_MAX_REPORT_COMPONENTS" in error["message"]
    assert error["details"][0]["pointer"] == "/metadata/component/components/0"
    assert service.stored() == NOTHING


def test_property_cap(service: Service, app_with: Callable[..., Any]) -> None:
    _, client = app_with(max_component_properties=20)
    writer = service.token("report:write")
    bom = boms.gpuprov_bom()
    bom["components"][3]["properties"] += [
        {"name": "gpuprov:note", "value": f"n{i}"} for i in range(20)
    ]
    answer = _post(client, writer, boms.encode(bom))
    assert answer.status_code == 413
    error = answer.json()["error"]
    assert (
        "limit of 20" in error["message"]
        and "GPUPROV_MAX_COMPONENT_PROPERTIES" in (error["message"])
    )
    assert error["details"][0]["pointer"] == "/components/3/properties"
    assert service.stored() == NOTHING


def test_concurrent_ingests_are_bounded(service: Service, app_with: Callable[..., Any]) -> None:
    app, client = app_with(max_concurrent_ingests=1, retry_after_seconds=7)
    writer = service.token("report:write")
    gate = app.state.ingest_gate
    assert gate.enter("token:0") is None  # another token's report in flight holds the only slot
    try:
        answer = _post(client, writer, boms.encode(boms.gpuprov_bom()))
        assert answer.status_code == 503
        assert answer.headers["Retry-After"] == "7"
        assert "GPUPROV_MAX_CONCURRENT_INGESTS" in answer.json()["error"]["message"]
        # authentication comes first: a stranger cannot take or probe the slots
        assert _post(client, None, boms.encode(boms.gpuprov_bom())).status_code == 401
        assert service.stored() == NOTHING
    finally:
        gate.leave("token:0")
    # every way out of an ingest gives the slot back: refused, duplicate, stored
    assert _post(client, writer, b"{").status_code == 422
    body = boms.encode(boms.gpuprov_bom())
    assert _post(client, writer, body).status_code == 201
    assert _post(client, writer, body).status_code == 200
    assert _post(client, writer, boms.encode(boms.gpuprov_bom())).status_code == 201


def test_limits_follow_the_settings() -> None:
    from app.http.api.reports import report_limits

    settings = Settings(
        max_json_depth=32,
        max_report_components=10,
        max_component_properties=5,
        max_clock_skew_seconds=60,
        max_asset_labels=7,
    )
    assert report_limits(settings) == ReportLimits(32, 10, 5, timedelta(seconds=60), 7)


def test_ingest_slots_are_shared_per_token() -> None:
    metrics = Metrics()
    gate = IngestGate(3, 2, metrics)
    assert gate.enter("t1") is None and gate.enter("t1") is None
    assert gate.enter("t1") == "share"  # a third for token 1: its share is 2
    assert gate.enter("t2") is None  # another token gets the last slot
    assert gate.enter("t3") == "busy"
    assert gate.held("t1") == 2 and gate.held("t2") == 1
    gate.leave("t1")
    assert gate.enter("t3") is None and gate.held("t1") == 1
    sample = metrics.registry.get_sample_value
    assert sample("gpuprov_ingests_refused_busy_total") == 1
    assert sample("gpuprov_ingests_refused_token_share_total") == 1
    assert sample("gpuprov_ingests_in_flight") == 3
    for token in ("t1", "t2", "t3"):
        gate.leave(token)
    assert sample("gpuprov_ingests_in_flight") == 0
    assert gate.held("t1") == 0 and gate.enter("t1") is None
