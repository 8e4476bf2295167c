"""``/api/v1/advisories`` on both databases: an admin imports one document (201, then 200 for
the same bytes), bad documents answer 413/415/422 with the reason, and readers list advisories
by CVE with the filters and read one CVE's bulletins and product statuses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import select

from app.storage.tables import AuditEvent
from tests.app.conftest import Service, auth
from tests.scanner.advisories.documents import csaf, encode, osv

JSON = {"Content-Type": "application/json"}


def post(service: Service, body: bytes, token: str | None = None) -> Any:
    token = token or service.token("admin")
    return service.client.post("/api/v1/advisories", content=body, headers=auth(token, **JSON))


def test_the_documented_example_imports(service: Service) -> None:
    document = service.client.app.openapi()  # type: ignore[attr-defined]
    content = document["paths"]["/api/v1/advisories"]["post"]["requestBody"]["content"]
    answer = post(service, json.dumps(content["application/json"]["example"]).encode())
    assert answer.status_code == 201 and answer.json()["vulnerabilities"] == ["CVE-2026-1111"]


def test_import_one_document(service: Service) -> None:
    first = post(service, encode(csaf()))
    assert first.status_code == 201, first.text
    assert first.json() == {
        "outcome": "imported",
        "bulletin": "EX-2026-0001",
        "version": "1",
        "vulnerabilities": ["CVE-2026-0001", "EX-BUG-7"],
        "unparsed_versions": [],
        "note": None,
    }
    again = post(service, encode(csaf()))
    assert again.status_code == 200 and again.json()["outcome"] == "unchanged"
    draft = post(service, encode(csaf(version="2", status="draft")))
    assert draft.status_code == 200 and draft.json()["outcome"] == "kept_final"
    with service.db.session() as session:
        events = session.scalars(select(AuditEvent).where(AuditEvent.action == "advisory.import"))
        (event,) = events.all()
        assert event.target == "advisory:https://example.com/security#EX-2026-0001"
        assert event.details == {"version": "1", "outcome": "imported"}


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (b"{oops", 422, "not_json: "),
        (encode({"hello": 1}), 422, "unknown_format: "),
        (encode(osv("npm", "left-pad")), 422, "not_osv: "),
        (b"", 422, "request body is empty"),
    ],
)
def test_bad_documents_answer_with_the_reason(
    service: Service, body: bytes, status: int, message: str
) -> None:
    answer = post(service, body)
    assert answer.status_code == status and message in answer.json()["error"]["message"]
    assert service.count("advisory_document") == 0


def test_mandatory_test_failure_is_422(service: Service) -> None:
    doc = csaf()
    doc["vulnerabilities"][0]["product_status"]["fixed"].append("WT-123")
    answer = post(service, encode(doc))
    assert answer.status_code == 422
    assert "6.1.6 contradicting product status" in answer.json()["error"]["message"]


@pytest.fixture
def small_limit(service: Service) -> Iterator[None]:
    settings = service.client.app.state.settings  # type: ignore[attr-defined]
    before = settings.max_advisory_bytes
    settings.max_advisory_bytes = 2048
    try:
        yield
    finally:
        settings.max_advisory_bytes = before


def test_too_large_and_wrong_media_type(service: Service, small_limit: None) -> None:
    answer = post(service, encode(csaf()))
    assert answer.status_code == 413
    token = service.token("admin")
    answer = service.client.post(
        "/api/v1/advisories", content=b"{}", headers=auth(token, **{"Content-Type": "text/html"})
    )
    assert answer.status_code == 415


def test_list_filters_and_detail(service: Service) -> None:
    assert post(service, encode(csaf())).status_code == 201
    assert post(service, encode(csaf(tracking_id="EX-2026-0002"))).status_code == 201
    assert post(service, encode(osv())).status_code == 201
    reader = auth(service.token("inventory:read"))
    get = service.client.get
    page = get("/api/v1/advisories", headers=reader).json()
    assert page["total"] == 3 and {i["cve"] for i in page["items"]} == {
        "CVE-2026-0001",
        "EX-BUG-7",
        "CVE-2026-1111",
    }
    (item,) = get("/api/v1/advisories", params={"cve": "CVE-2026-0001"}, headers=reader).json()[
        "items"
    ]
    assert item == {
        "cve": "CVE-2026-0001",
        "bulletin": "EX-2026-0002",  # the same date: the one stored last
        "bulletins": ["EX-2026-0001", "EX-2026-0002"],
        "title": "Widget overflow",
        "severity": "HIGH",
        "cvss": 7.8,
        "published": "2026-01-01T00:00:00Z",
        "digest_mismatch": False,
        "affected_assets": 0,  # no asset matched: none affected
    }
    high = get("/api/v1/advisories", params={"severity": "high"}, headers=reader).json()
    assert {i["cve"] for i in high["items"]} == {"CVE-2026-0001", "CVE-2026-1111"}
    widget = get("/api/v1/advisories", params={"product": "widget"}, headers=reader).json()
    assert {i["cve"] for i in widget["items"]} == {"CVE-2026-0001", "EX-BUG-7"}
    cudnn = get("/api/v1/advisories", params={"product": "CUDNN"}, headers=reader).json()
    assert [i["cve"] for i in cudnn["items"]] == ["CVE-2026-1111"]
    # newest first, an advisory with no date last (on both databases)
    undated = osv(id="GHSA-undated-1", aliases=["CVE-2026-2222"])
    del undated["published"]
    assert post(service, encode(undated)).status_code == 201
    order = [i["cve"] for i in get("/api/v1/advisories", headers=reader).json()["items"]]
    assert order == ["CVE-2026-1111", "CVE-2026-0001", "EX-BUG-7", "CVE-2026-2222"]
    bad = get("/api/v1/advisories", params={"severity": "urgent"}, headers=reader)
    assert bad.status_code == 400 and "severity" in json.dumps(bad.json()["error"])
    detail = get("/api/v1/advisories/CVE-2026-0001", headers=reader)
    assert detail.status_code == 200
    body = detail.json()
    assert [d["bulletin"] for d in body["documents"]] == ["EX-2026-0001", "EX-2026-0002"]
    drv = next(p for p in body["documents"][0]["products"] if p["product_id"] == "DRV-535")
    assert drv["branch"] == "R535" and drv["ranges"] == ["vers:generic/<535.274.02"]
    assert drv["version_text"] == "All driver versions prior to 535.274.02"
    assert body["documents"][0]["source"].startswith("api:")
    missing = get("/api/v1/advisories/CVE-1999-0001", headers=reader)
    assert missing.status_code == 404
