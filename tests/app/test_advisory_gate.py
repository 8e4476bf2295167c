"""The advisories rule in the service and analyses (triage), on SQLite and PostgreSQL: NVIDIA's
shared bulletins imported, real scanner output of GPU hosts pushed, the gate deciding from the
stored findings and the stored feed only, analyses by trusted and untrusted authors, expiries,
and the rule's controls in fleet compliance (issue 19 §4).

2025/5703 (October 2025 driver bulletin): Linux R535 drivers prior to 535.274.02 are affected by
CVE-2025-23280 and CVE-2025-23282 (both HIGH); 535.274.02 is the R535 fix.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, text

from app.cli_advisories import import_paths
from app.clock import utcnow
from app.domain import analyses
from app.main import create_app
from app.storage.tables import AdvisoryDocument, Asset
from scanner.advisories.document import DEFAULT_MAX_BYTES
from scanner.bom.cyclonedx import to_json
from scanner.node.inputs import NodeInputs
from scanner.pipeline import ScanOptions, run_scan
from tests.app.conftest import Service, auth
from tests.app.test_gate_api import HEAD, put_policy
from tests.app.test_gate_facts import scan_ids_past_256
from tests.scanner.advisories.documents import PSIRT
from tests.scanner.node import nodetree as nt

HIGH_CVES = {"CVE-2025-23280", "CVE-2025-23282"}
POLICY = HEAD + "rules:\n  advisories: {min_severity: high}\n"


@pytest.fixture(autouse=True)
def _need_psirt() -> None:
    if not PSIRT.is_dir():
        pytest.fail("../shared/fixtures/nvidia-psirt is absent: these tests need its bulletins")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """BOMs of two bare-metal GPU hosts (their saved nvidia-smi says so) scanned by gpuprov:
    an R535 driver before and at the fix."""
    base = tmp_path_factory.mktemp("hosts")
    out = {}
    for key, driver, machine in (("old", "535.129.03", "a"), ("patched", "535.274.02", "b")):
        root = nt.gpu_node(base / key, driver=driver)
        (root / "etc/machine-id").write_text(machine * 32 + "\n")
        (root / "etc/hostname").write_text(f"gpu-{key}\n")
        smi = nt.write(
            base, f"/{key}.smi.xml", nt.nvidia_smi_xml("None").replace(nt.DRIVER, driver)
        )
        node = NodeInputs(nvidia_smi_xml=str(smi))
        doc = to_json(run_scan(str(root), ScanOptions(cache_dir=base / "cache", node=node)))
        out[key] = json.loads(doc)
    return out


def _import(service: Service, *paths: Path) -> None:
    summary = import_paths(service.db, list(paths), strict=False, max_bytes=DEFAULT_MAX_BYTES)
    assert summary.refused == [] and summary.imported == len(paths)


def _gate(client: TestClient, token: str, bom: dict[str, Any]) -> dict[str, Any]:
    answer = client.post("/api/v1/gate", json={"policy": "prod", "bom": bom}, headers=auth(token))
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _rule(answer: dict[str, Any]) -> dict[str, Any]:
    (result,) = [r for r in answer["rules"] if r["rule"] == "advisories"]
    return dict(result)


def _asset_id(service: Service, name: str) -> int:
    reader = auth(service.token("inventory:read"))
    items = service.client.get("/api/v1/assets", headers=reader, params={"limit": 100}).json()
    (found,) = [a["id"] for a in items["items"] if a["name"] == name]
    return int(found)


@pytest.fixture
def trusting(service: Service) -> Iterator[TestClient]:
    """The same database served by an app that trusts the analyses of ``alice`` only."""
    settings = service.settings.model_copy(update={"vex_trusted_authors": "alice, sec-bot"})
    with TestClient(create_app(settings)) as client:
        yield client


def test_the_gate_decides_from_the_stored_findings(
    service: Service, hosts: dict[str, dict[str, Any]]
) -> None:
    put_policy(service, POLICY)
    ci = service.token("gate", "report:write", name="ci")
    # no feed imported yet: a missing input, never a pass
    answer = _gate(service.client, ci, hosts["patched"])
    result = _rule(answer)
    assert answer["decision"] == "deny"
    assert (result["status"], result["missing_input"]) == ("fail", True)
    assert result["message"] == "the advisory feed (the service's stored feed) holds no document"

    _import(service, PSIRT / "2025/5703")
    answer = _gate(service.client, ci, hosts["old"])
    result = _rule(answer)
    assert answer["decision"] == "deny" and not result["missing_input"]
    assert set(result["evidence"]["affected"].split(",")) == HIGH_CVES
    assert "CVE-2025-23280 (high, driver 535.129.03)" in result["message"]
    assert result["evidence"]["feed_documents"] == "1"
    assert result["controls"] == ["ID.RA-01", "ID.RA-08", "PR.PS-02", "CIS-7.5", "CIS-7.7"]
    assert answer["controls"]["ID.RA-01"] == "fail"
    answer = _gate(service.client, ci, hosts["patched"])
    assert answer["decision"] == "allow", _rule(answer)
    # the feed comes from storage, never from the request
    smuggled = service.client.post(
        "/api/v1/gate",
        json={"policy": "prod", "bom": hosts["old"], "advisories": []},
        headers=auth(ci),
    )
    assert smuggled.status_code == 422


def test_a_scan_with_a_large_id_is_gated_on_its_stored_findings(
    service: Service, hosts: dict[str, dict[str, Any]], post_report: Callable[..., Any]
) -> None:
    # ids past 256 are distinct int objects when read apart: the scan is recognised as the
    # asset's latest by value, or its findings would not be read and the feed look absent
    scan_ids_past_256(service, post_report)
    put_policy(service, POLICY)
    _import(service, PSIRT / "2025/5703")
    answer = _gate(
        service.client, service.token("gate", "report:write", name="ci"), hosts["patched"]
    )
    assert answer["decision"] == "allow", _rule(answer)
    assert _rule(answer)["evidence"]["feed_documents"] == "1"


def _ra01(service: Service, reader: dict[str, str]) -> tuple[int, int]:
    summary = service.client.get("/api/v1/compliance?policy=prod", headers=reader)
    assert summary.status_code == 200, summary.text
    counts = {c["id"]: c for c in summary.json()["controls"]}
    assert set(counts) == {"ID.RA-01", "ID.RA-08", "PR.PS-02", "CIS-7.5", "CIS-7.7"}
    assert counts["ID.RA-01"]["title"] == (
        "Vulnerabilities in assets are identified, validated, and recorded"
    )
    return counts["ID.RA-01"]["pass"], counts["ID.RA-01"]["fail"]


def test_compliance_shows_the_rules_controls(
    service: Service,
    trusting: TestClient,
    post_report: Callable[..., Any],
    hosts: dict[str, dict[str, Any]],
) -> None:
    for bom in hosts.values():
        assert post_report(json.dumps(bom).encode()).status_code in (200, 201)
    assert put_policy(service, POLICY).json()["compliance_evaluated"] == 2
    reader = auth(service.token("inventory:read"))
    assert _ra01(service, reader) == (0, 2)  # no feed yet: a missing input on both
    _import(service, PSIRT / "2025/5703")  # compliance follows the feed
    assert _ra01(service, reader) == (1, 1)
    # ... and a trusted author's analyses, not an untrusted one's
    old = _asset_id(service, "gpu-old")
    for author in ("mallory", "alice"):
        headers = auth(service.token("admin", name=author))
        for cve in sorted(HIGH_CVES):
            body = {"cve": cve, "asset_id": old, "state": "fixed", "detail": "patched in place"}
            answer = trusting.post("/api/v1/analyses", json=body, headers=headers)
            assert answer.status_code == 201, answer.text
        assert _ra01(service, reader) == ((1, 1) if author == "mallory" else (2, 0))
    (last,) = trusting.get(
        "/api/v1/analyses", params={"cve": "CVE-2025-23282", "limit": 1}, headers=reader
    ).json()["items"]
    alice = auth(service.token("admin", name="alice"))
    assert trusting.delete(f"/api/v1/analyses/{last['id']}", headers=alice).status_code == 200
    assert _ra01(service, reader) == (1, 1)
    detail = service.client.get(
        "/api/v1/compliance/controls/ID.RA-01", params={"policy": "prod"}, headers=reader
    )
    assert detail.status_code == 200, detail.text
    export = service.client.get(
        "/api/v1/compliance/export", params={"policy": "prod", "format": "csv"}, headers=reader
    )
    assert export.status_code == 200 and "ID.RA-01" in export.text
    controls = service.client.get("/api/v1/controls", headers=reader).json()
    assert "ID.RA-08" in json.dumps(controls)


def test_trusted_and_untrusted_analyses(
    service: Service, trusting: TestClient, hosts: dict[str, dict[str, Any]]
) -> None:
    _import(service, PSIRT / "2025/5703")
    put_policy(service, POLICY)
    ci = service.token("gate", "report:write", name="ci")
    assert _gate(trusting, ci, hosts["old"])["decision"] == "deny"
    asset = _asset_id(service, "gpu-old")
    mallory = auth(service.token("admin", name="mallory"))
    alice = auth(service.token("admin", name="alice"))
    reader = auth(service.token("inventory:read"))

    def post(headers: dict[str, str], cve: str, **body: Any) -> Any:
        document = {
            "cve": cve,
            "asset_id": asset,
            "state": "not_affected",
            "justification": "vulnerable_code_not_in_execute_path",
            "detail": "no untrusted process reaches the device node",
            **body,
        }
        return trusting.post("/api/v1/analyses", json=document, headers=headers)

    # an untrusted author's analyses are shown, never counted
    for cve in sorted(HIGH_CVES):
        answer = post(mallory, cve)
        assert answer.status_code == 201, answer.text
        assert (answer.json()["author"], answer.json()["trusted"]) == ("mallory", False)
    page = trusting.get(f"/api/v1/assets/{asset}/vulnerabilities", headers=reader).json()
    shown = {i["cve"]: i["analysis"] for i in page["items"] if i["cve"] in HIGH_CVES}
    assert {a["author"] for a in shown.values()} == {"mallory"}
    assert {a["trusted"] for a in shown.values()} == {False}
    assert {i["status"] for i in page["items"] if i["cve"] in HIGH_CVES} == {"affected"}
    assert _gate(trusting, ci, hosts["old"])["decision"] == "deny"

    # a trusted author's count, and are the ones shown
    ids = {}
    for cve in sorted(HIGH_CVES):
        answer = post(alice, cve, expires=(utcnow() + timedelta(days=30)).isoformat())
        assert answer.status_code == 201, answer.text
        ids[cve] = answer.json()["id"]
    page = trusting.get(f"/api/v1/assets/{asset}/vulnerabilities", headers=reader).json()
    shown = {i["cve"]: i["analysis"] for i in page["items"] if i["cve"] in HIGH_CVES}
    assert {(a["author"], a["trusted"]) for a in shown.values()} == {("alice", True)}
    answer = _gate(trusting, ci, hosts["old"])
    assert answer["decision"] == "allow", _rule(answer)
    assert (
        "CVE-2025-23280: not_affected by alice (vulnerable_code_not_in_execute_path)"
        in _rule(answer)["evidence"]["analysed"]
    )
    # the shared app trusts nobody: the same analyses change nothing there
    assert _gate(service.client, ci, hosts["old"])["decision"] == "deny"

    # an expired analysis stops applying
    with service.db.transaction(write=True) as session:
        session.execute(
            text("UPDATE advisory_analysis SET expires_at = :t WHERE id = :i"),
            {"t": utcnow() - timedelta(seconds=1), "i": ids["CVE-2025-23280"]},
        )
    result = _rule(_gate(trusting, ci, hosts["old"]))
    assert result["status"] == "fail" and result["evidence"]["affected"] == "CVE-2025-23280"

    # a withdrawn one too; both audited with the principal that acted
    gone = trusting.delete(f"/api/v1/analyses/{ids['CVE-2025-23282']}", headers=alice)
    assert gone.status_code == 200 and gone.json()["cve"] == "CVE-2025-23282"
    assert (
        trusting.delete(f"/api/v1/analyses/{ids['CVE-2025-23282']}", headers=alice).status_code
        == 404
    )
    result = _rule(_gate(trusting, ci, hosts["old"]))
    assert set(result["evidence"]["affected"].split(",")) == HIGH_CVES
    events = trusting.get("/api/v1/audit", params={"action": "analysis.put"}, headers=alice).json()[
        "items"
    ]
    assert sorted(e["actor"] for e in events) == ["alice", "alice", "mallory", "mallory"]
    deleted = trusting.get(
        "/api/v1/audit", params={"action": "analysis.delete"}, headers=alice
    ).json()["items"]
    assert [(e["actor"], e["target"]) for e in deleted] == [
        ("alice", f"analysis:{ids['CVE-2025-23282']}")
    ]
    listed = trusting.get("/api/v1/analyses", params={"cve": "CVE-2025-23282"}, headers=reader)
    assert [(a["author"], a["trusted"]) for a in listed.json()["items"]] == [("mallory", False)]


def test_an_analysis_never_hides_a_finding_without_a_reason(
    service: Service, hosts: dict[str, dict[str, Any]]
) -> None:
    ci = service.token("gate", "report:write", name="ci")
    put_policy(service, POLICY)
    _gate(service.client, ci, hosts["old"])
    asset = _asset_id(service, "gpu-old")
    admin = auth(service.token("admin", name="alice"))
    base = {"cve": "CVE-2025-23280", "asset_id": asset, "state": "not_affected"}

    def refused(body: dict[str, Any], status: int, says: str) -> None:
        answer = service.client.post("/api/v1/analyses", json=body, headers=admin)
        assert answer.status_code == status, answer.text
        assert says in answer.text, answer.text

    refused(base, 422, "a not_affected analysis needs a justification or a detail")
    refused({**base, "detail": "   "}, 422, "needs a justification or a detail")
    refused({**base, "state": "fixed"}, 422, "a fixed analysis needs a detail")
    refused({**base, "justification": "trust_me"}, 422, "justification")
    refused(
        {**base, "state": "affected", "justification": "component_not_present"},
        422,
        "only a not_affected analysis has one",
    )
    refused({**base, "detail": "x", "author": "alice"}, 422, "author")  # never from the body
    refused({**base, "detail": "x", "source": "vex"}, 422, "source")
    refused({**base, "detail": "x", "selector": {"env": "prod"}}, 422, "exactly one of")
    refused({**base, "detail": "x", "asset_id": None}, 422, "exactly one of")
    refused({**base, "detail": "x", "asset_id": 999999}, 404, "no asset 999999")
    refused({**base, "detail": "x", "cve": "not a cve"}, 422, "cve")
    refused({**base, "detail": "x", "state": "maybe"}, 422, "state")
    refused({**base, "detail": "x", "expires": "2020-01-01T00:00:00Z"}, 422, "not in the future")
    refused({**base, "detail": "x", "expires": "2999-01-01T00:00:00"}, 422, "expires")
    reader = auth(service.token("inventory:read"))
    answer = service.client.post("/api/v1/analyses", json={**base, "detail": "x"}, headers=reader)
    assert answer.status_code == 403
    assert service.count("advisory_analysis") == 0
    assert service.client.get("/api/v1/analyses/1", headers=reader).status_code == 404
    # an analyst's token: triage without admin
    analyst = auth(service.token("triage", name="analyst-bot"))
    accepted = service.client.post(
        "/api/v1/analyses",
        json={**base, "detail": "the device node is not exposed"},
        headers=analyst,
    )
    assert accepted.status_code == 201, accepted.text
    assert accepted.json()["author"] == "analyst-bot"
    assert service.client.get("/api/v1/tokens", headers=analyst).status_code == 403
    assert accepted.headers["Location"] == f"/api/v1/analyses/{accepted.json()['id']}"
    one = service.client.get(f"/api/v1/analyses/{accepted.json()['id']}", headers=reader).json()
    assert (one["author"], one["source"], one["trusted"]) == ("analyst-bot", "api", False)


def test_a_selector_analysis_and_the_domain_function(
    service: Service, hosts: dict[str, dict[str, Any]]
) -> None:
    """What a VEX importer calls: `record_analysis` with an author and a source, for the assets
    a label selector names; an asset-specific analysis wins over a selector's."""
    _import(service, PSIRT / "2025/5703")
    put_policy(service, POLICY)
    ci = service.token("gate", "report:write", name="ci")
    _gate(service.client, ci, hosts["old"])
    _gate(service.client, ci, hosts["patched"])
    old, patched = _asset_id(service, "gpu-old"), _asset_id(service, "gpu-patched")
    now = utcnow()
    with service.db.transaction(write=True) as session:
        asset = session.get(Asset, old)
        assert asset is not None
        asset.labels = {"env": "prod", "team": "ml"}
        stored = analyses.record_analysis(
            session,
            cve="CVE-2025-23280",
            selector={"env": "prod"},
            state="not_affected",
            justification="vulnerable_code_cannot_be_controlled_by_adversary",
            author="sec-bot",
            source="vex:openvex:https://example.com/vex/1",
            now=now,
        )
    assert stored["selector"] == {"env": "prod"} and stored["asset_id"] is None
    with service.db.session() as session:
        found = analyses.applied(session, [old, patched], now, {"sec-bot"})
    assert set(found) == {(old, "CVE-2025-23280")}
    assert found[(old, "CVE-2025-23280")].trusted
    with service.db.transaction(write=True) as session:
        analyses.record_analysis(
            session,
            cve="CVE-2025-23280",
            asset_id=old,
            state="affected",
            author="sec-bot",
            source="api",
            now=now,
        )
    with service.db.session() as session:
        found = analyses.applied(session, [old], now, {"sec-bot"})
        assert found[(old, "CVE-2025-23280")].row.state == "affected"
        # an untrusted author's newer analysis never displaces a trusted one
        untrusted = analyses.applied(session, [old], now, set())
        assert untrusted[(old, "CVE-2025-23280")].row.state == "affected"
    events = service.client.get(
        "/api/v1/audit",
        params={"action": "analysis.put"},
        headers=auth(service.token("admin")),
    ).json()["items"]
    assert {(e["source"], e["actor"]) for e in events} == {("service", "sec-bot")}


def test_ignores_and_the_feed_age_in_the_service(
    service: Service, hosts: dict[str, dict[str, Any]]
) -> None:
    _import(service, PSIRT / "2025/5703")
    ci = service.token("gate", "report:write", name="ci")
    ignore = "".join(
        f"      - {{cve: {cve}, reason: isolated test host, expires: EXPIRES}}\n"
        for cve in sorted(HIGH_CVES)
    )
    rule = "rules:\n  advisories:\n    min_severity: high\n    ignore:\n" + ignore
    put_policy(service, HEAD + rule.replace("EXPIRES", "2999-01-01"))
    answer = _gate(service.client, ci, hosts["old"])
    assert answer["decision"] == "allow", _rule(answer)
    put_policy(service, HEAD + rule.replace("EXPIRES", "2020-01-01"))
    result = _rule(_gate(service.client, ci, hosts["old"]))
    assert result["status"] == "fail"
    assert set(result["evidence"]["ignores_expired"].split(",")) == HIGH_CVES

    put_policy(
        service, HEAD + "rules:\n  advisories: {min_severity: critical, max_feed_age_hours: 24}\n"
    )
    assert _gate(service.client, ci, hosts["patched"])["decision"] == "allow"
    # the stored feed (and the findings matched against it) imported two days ago
    two_days = utcnow() - timedelta(days=2)
    with service.db.transaction(write=True) as session:
        session.execute(
            text("UPDATE advisory_document SET imported_at = :t, checked_at = :t"),
            {"t": two_days},
        )
        session.execute(text("UPDATE advisory_stack SET feed_imported_at = :t"), {"t": two_days})
    result = _rule(_gate(service.client, ci, hosts["patched"]))
    assert (result["status"], result["missing_input"]) == ("fail", True)
    assert "more than max_feed_age_hours 24" in result["message"]
    # a scheduled sync that finds nothing new: the feed was read from its publisher just now,
    # so it is fresh again, and the findings still speak for it (nothing changed)
    again = import_paths(
        service.db, [PSIRT / "2025/5703"], strict=False, max_bytes=DEFAULT_MAX_BYTES
    )
    assert (again.imported, again.unchanged, again.refused) == (0, 1, [])
    with service.db.transaction() as session:
        (imported,) = session.scalars(select(AdvisoryDocument.imported_at)).all()
    assert imported < utcnow() - timedelta(days=1)
    assert _gate(service.client, ci, hosts["patched"])["decision"] == "allow"
    # findings matched against another feed than the one stored now: a missing input
    with service.db.transaction(write=True) as session:
        session.execute(text("UPDATE advisory_document SET imported_at = :t"), {"t": utcnow()})
    result = _rule(_gate(service.client, ci, hosts["patched"]))
    assert (result["status"], result["missing_input"]) == ("fail", True)
    assert "not the feed stored now" in result["message"]


def test_under_investigation_in_the_service_is_a_missing_input(
    service: Service, hosts: dict[str, dict[str, Any]]
) -> None:
    """5703 as NVIDIA would publish it before knowing which versions are affected (no shared
    bulletin states under_investigation), imported through the API."""
    doc = json.loads((PSIRT / "2025/5703/5703.json").read_text())
    doc["document"]["tracking"]["id"] = "5703-investigation"
    for vuln in doc["vulnerabilities"]:
        status = vuln["product_status"]
        status["under_investigation"] = status.pop("known_affected")
        status.pop("fixed", None)
        vuln.pop("remediations", None)
    admin = auth(service.token("admin"), **{"Content-Type": "application/json"})
    stored = service.client.post("/api/v1/advisories", content=json.dumps(doc), headers=admin)
    assert stored.status_code == 201, stored.text
    put_policy(service, POLICY)
    ci = service.token("gate", "report:write", name="ci")
    answer = _gate(service.client, ci, hosts["old"])
    result = _rule(answer)
    assert answer["decision"] == "deny"
    assert (result["status"], result["missing_input"]) == ("fail", True)
    assert "under investigation by the vendor" in result["message"]
