"""Fleet compliance: per-control counts under a stored policy checked against the inventory of a
small fleet, kept current at ingest and on policy change (not computed on read), scan_age judged
when read, drill-down, per-asset compliance, export, and the controls catalog."""

from __future__ import annotations

import csv
import io
import threading
import time
from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from app.domain import compliance
from app.main import create_app
from scanner.policy.controls import default_catalog
from scanner.policy.evaluate import evaluate
from tests.app import boms
from tests.app.conftest import Service, auth
from tests.app.test_gate_api import HEAD, _now, image_bom, put_policy, tampered

POLICY = (
    HEAD
    + """rules:
  integrity: {forbid: [modified]}
  cuda_pairing: {}
  scan_age: {max_hours: 24}
"""
)


def _fleet(post_report: Callable[..., Any]) -> dict[str, dict[str, Any]]:
    fleet = {
        "clean": image_bom("reg.example/clean:1", timestamp=_now(1)),
        "tampered": tampered("reg.example/tampered:1"),  # also scanned days ago: stale
        "mismatch": image_bom(
            "reg.example/mismatch:1",
            owners=[boms.cudnn_wheel(), *boms.cuda_wheels("11.8.89", cuda=11)],
            timestamp=_now(2),
        ),
    }
    for bom in fleet.values():
        assert post_report(boms.encode(bom)).status_code == 201
    return fleet


def _counts(service: Service, reader: dict[str, str], **params: Any) -> dict[str, dict[str, Any]]:
    answer = service.client.get(
        "/api/v1/compliance", params={"policy": "prod", **params}, headers=reader
    )
    assert answer.status_code == 200, answer.text
    return {c["id"]: c for c in answer.json()["controls"]}


def test_counts_per_control_follow_the_inventory(
    service: Service, post_report: Callable[..., Any]
) -> None:
    # two assets stored before the policy (evaluated when it is stored), one after (at ingest)
    fleet = _fleet(post_report)
    assert put_policy(service, POLICY).json()["compliance_evaluated"] == 3
    late = image_bom("reg.example/late:1", timestamp=_now(0.5))
    post_report(boms.encode(late))
    reader = auth(service.token("inventory:read"))
    summary = service.client.get("/api/v1/compliance?policy=prod", headers=reader).json()
    assert summary["assets"] == {"evaluated": 4, "outdated": 0, "not_evaluated": 0}
    counts = _counts(service, reader)
    # integrity: only the tampered image fails
    for cid in ("ID.RA-09", "PR.DS-01", "CIS-2.5"):
        assert (counts[cid]["pass"], counts[cid]["fail"]) == (3, 1), cid
    # CIS-2.6 is cited by integrity only here; PR.PS-01 by cuda_pairing: the CUDA 11 runtime
    assert (counts["PR.PS-01"]["pass"], counts["PR.PS-01"]["fail"]) == (3, 1)
    assert counts["CIS-4.1"]["fail"] == 1
    # scan_age, judged now: the tampered image's scan is days old
    assert (counts["ID.AM-02"]["pass"], counts["ID.AM-02"]["fail"]) == (3, 1)
    assert counts["CIS-2.1"]["title"] == "Establish and Maintain a Software Inventory"
    for c in counts.values():
        assert c["pass"] + c["fail"] + c["not_applicable"] == 4
    assert "PR.DS-10" not in counts and "PR.PS-03" not in counts
    # one framework
    cis = _counts(service, reader, framework="cis-v8")
    assert cis and all(c["framework"] == "cis-v8" for c in cis.values())
    assert set(cis) == {"CIS-2.5", "CIS-2.6", "CIS-4.1", "CIS-2.1", "CIS-2.4", "CIS-16.4"}

    # drill-down: the failing assets and the files behind the failure
    answer = service.client.get(
        "/api/v1/compliance/controls/CIS-2.5?policy=prod", headers=reader
    ).json()
    assert answer["total"] == 1 and answer["control"]["framework"] == "cis-v8"
    (item,) = answer["items"]
    assert item["asset"]["name"] == "reg.example/tampered:1"
    (reason,) = item["reasons"]
    assert reason["rule"] == "integrity"
    assert [f["path"] for f in reason["files"]] == [f"{boms.SITE}/cudnn/lib/libcudnn_ops.so.9"]
    stale = service.client.get(
        "/api/v1/compliance/controls/ID.AM-02?policy=prod", headers=reader
    ).json()
    assert [i["asset"]["name"] for i in stale["items"]] == ["reg.example/tampered:1"]
    assert stale["items"][0]["reasons"][0]["rule"] == "scan_age"
    for url in (
        "/api/v1/compliance/controls/PR.DS-10?policy=prod",
        "/api/v1/compliance/controls/CIS-2.5?policy=nope",
        "/api/v1/compliance?policy=nope",
    ):
        assert service.client.get(url, headers=reader).status_code == 404, url
    assert fleet


def test_a_new_scan_and_a_new_policy_version_update_compliance(
    service: Service, post_report: Callable[..., Any]
) -> None:
    put_policy(service, POLICY)
    bad = tampered("reg.example/fixme:1")
    post_report(boms.encode(bad))
    reader = auth(service.token("inventory:read"))
    assert _counts(service, reader)["PR.DS-01"]["fail"] == 1
    # the same image rescanned, fixed: its latest scan passes
    fixed = image_bom("reg.example/fixme:1", timestamp=_now(0.1))
    fixed["metadata"]["component"] = bad["metadata"]["component"]
    post_report(boms.encode(fixed))
    assert (_counts(service, reader)["PR.DS-01"]["fail"], service.count("asset")) == (0, 1)
    # an update after ingest that did not happen is shown, never hidden
    with service.db.transaction(write=True) as session:
        session.execute(text("UPDATE compliance_asset SET scan_id = (SELECT min(id) FROM scan)"))
    summary = service.client.get("/api/v1/compliance?policy=prod", headers=reader).json()
    assert summary["assets"] == {"evaluated": 0, "outdated": 1, "not_evaluated": 0}
    # a policy that forbids versions the asset runs: re-evaluated when stored
    stricter = POLICY + '  versions: {deny: {cudnn: ["9.1.*"]}}\n'
    assert put_policy(service, stricter).json()["compliance_evaluated"] == 1
    assert _counts(service, reader)["PR.PS-02"]["fail"] == 1
    assert service.count("compliance_asset") == 1


def test_asset_detail_carries_its_compliance(
    service: Service, post_report: Callable[..., Any]
) -> None:
    put_policy(service, POLICY)
    asset_id = post_report(boms.encode(tampered("reg.example/t:1"))).json()["asset_id"]
    reader = auth(service.token("inventory:read"))
    detail = service.client.get(f"/api/v1/assets/{asset_id}", headers=reader).json()
    (entry,) = detail["compliance"]
    assert entry["policy"] == {"name": "prod", "version": 1}
    assert entry["decision"] == "deny"
    assert {r["rule"] for r in entry["reasons"]} == {"integrity", "scan_age"}
    assert entry["controls"]["CIS-2.5"] == "fail" and entry["controls"]["PR.PS-01"] == "pass"


def test_compliance_export(service: Service, post_report: Callable[..., Any]) -> None:
    _fleet(post_report)
    put_policy(service, POLICY)
    reader = auth(service.token("inventory:read"))
    answer = service.client.get(
        "/api/v1/compliance/export?policy=prod&format=csv&framework=nist-csf-2.0", headers=reader
    )
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(answer.text)))
    assert {r["framework"] for r in rows} == {"nist-csf-2.0"}
    failing = {(r["asset_name"], r["control_id"]) for r in rows if r["status"] == "fail"}
    assert ("reg.example/tampered:1", "PR.DS-01") in failing
    assert ("reg.example/tampered:1", "ID.AM-02") in failing
    assert ("reg.example/clean:1", "ID.AM-02") not in failing
    as_json = service.client.get("/api/v1/compliance/export?policy=prod", headers=reader).json()
    assert len(as_json) == 3 * len(_counts(service, reader))
    missing = service.client.get("/api/v1/compliance/export?policy=nope", headers=reader)
    assert missing.status_code == 404


def test_controls_catalog_is_listed(service: Service) -> None:
    reader = auth(service.token("inventory:read"))
    answer = service.client.get("/api/v1/controls", headers=reader).json()
    catalog = default_catalog()
    assert answer["total"] == len(catalog.controls)
    by_id = {c["id"]: c for c in answer["items"]}
    assert by_id["CIS-2.6"]["implementation_groups"] == [2, 3]
    assert set(by_id["CIS-2.6"]["rules"]) >= {"integrity", "ownership"}
    assert by_id["SLSA_BUILD_LEVEL_2"]["level"] == 2
    assert {f["id"] for f in answer["frameworks"]} == {"slsa-v1.2", "cis-v8", "nist-csf-2.0"}
    assert "PR.DS-10" not in by_id and "PR.PS-03" not in by_id
    slsa = service.client.get("/api/v1/controls?framework=slsa-v1.2", headers=reader).json()
    assert [c["id"] for c in slsa["items"]] == [
        "SLSA_BUILD_LEVEL_1",
        "SLSA_BUILD_LEVEL_2",
        "SLSA_BUILD_LEVEL_3",
    ]
    assert service.client.get("/api/v1/controls").status_code == 401


def _catalog_fleet(
    service: Service, post_report: Callable[..., Any]
) -> tuple[dict[str, str], dict[str, str]]:
    """A trust policy trusting NVIDIA, a provenance policy, and two images, one with a graph
    library a cuDNN catalog contradicts; returns the admin and reader headers."""
    from tests.app import catalogs
    from tests.app.test_provenance_api import NVIDIA, tampered_graph

    admin = auth(service.token("admin"))
    trust = catalogs.policy_yaml(("nvidia", NVIDIA))
    put = service.client.put(
        "/api/v1/trust-policy", content=trust, headers={**admin, **catalogs.YAML}
    )
    assert put.status_code == 201, put.text
    put_policy(service, HEAD + "rules:\n  provenance: {}\n")
    wheel = boms.cudnn_wheel()
    wheel.libs = [lib for lib in wheel.libs if "graph" not in lib.path]
    post_report(
        boms.encode(image_bom("reg.example/p:1", owners=[wheel], extra_libs=[tampered_graph()]))
    )
    post_report(boms.encode(image_bom("reg.example/p:2")))
    reader = auth(service.token("inventory:read"))
    return admin, reader


def test_a_catalog_import_updates_compliance(
    service: Service, post_report: Callable[..., Any]
) -> None:
    """Provenance verdicts change without a report (a catalog is imported): the stored
    compliance follows them."""
    from tests.app import catalogs
    from tests.app.test_provenance_api import NVIDIA, golden_cudnn

    admin, reader = _catalog_fleet(service, post_report)
    assert _counts(service, reader)["GV.SC-09"]["fail"] == 0  # nothing contradicts them yet
    answer = service.client.post(
        "/api/v1/catalogs",
        content=catalogs.signed(golden_cudnn(), NVIDIA),
        headers={**admin, "Content-Type": "application/json"},
    )
    assert answer.status_code == 201, answer.text
    counts = _counts(service, reader)["GV.SC-09"]
    assert (counts["pass"], counts["fail"]) == (1, 1)
    failing = service.client.get(
        "/api/v1/compliance/controls/GV.SC-09?policy=prod", headers=reader
    ).json()
    assert [i["asset"]["name"] for i in failing["items"]] == ["reg.example/p:1"]
    assert failing["items"][0]["reasons"][0]["files"][0]["path"].endswith("libcudnn_graph.so.9")


def test_a_catalog_import_on_a_large_fleet_evaluates_compliance_after_the_answer(
    service: Service, post_report: Callable[..., Any], monkeypatch: Any
) -> None:
    """Above SYNC_ASSETS the import answers at once: the stored evaluations are forgotten in
    its transaction (never shown as current for facts that changed) and the fleet is evaluated
    again once it commits; a run cut short leaves the rest not evaluated, and a trust policy
    change starts it again."""
    from tests.app import catalogs
    from tests.app.test_provenance_api import NVIDIA, OTHER, golden_cudnn

    admin, reader = _catalog_fleet(service, post_report)
    assert _counts(service, reader)["GV.SC-09"]["fail"] == 0
    monkeypatch.setattr(compliance, "SYNC_ASSETS", 1)  # the fleet of 2 is "large"
    monkeypatch.setattr(compliance, "PENDING_BATCH", 1)
    calls: list[object] = []

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        raise OperationalError("INSERT", {}, ConnectionError("server closed the connection"))

    monkeypatch.setattr(compliance, "evaluate", failing)
    answer = service.client.post(
        "/api/v1/catalogs",
        content=catalogs.signed(golden_cudnn(), NVIDIA),
        headers={**admin, "Content-Type": "application/json"},
    )
    assert answer.status_code == 201, answer.text
    assert answer.json()["reevaluation"]["compliance_pending"] is True
    assert calls  # the background run started after the answer, and failed
    summary = service.client.get("/api/v1/compliance?policy=prod", headers=reader).json()
    assert summary["assets"] == {"evaluated": 0, "outdated": 0, "not_evaluated": 2}
    assert _counts(service, reader)["GV.SC-09"]["fail"] == 0  # nothing shown as current
    # a new promotion policy version evaluates the fleet (after its answer too)
    monkeypatch.setattr(compliance, "evaluate", evaluate)
    put_policy(service, HEAD + "rules:\n  provenance: {}\n  integrity: {}\n")
    counts = _counts(service, reader)["GV.SC-09"]
    assert (counts["pass"], counts["fail"]) == (1, 1)
    summary = service.client.get("/api/v1/compliance?policy=prod", headers=reader).json()
    assert summary["assets"] == {"evaluated": 2, "outdated": 0, "not_evaluated": 0}
    # a trust policy that no longer trusts the catalog's signer changes the verdicts: the
    # fleet is evaluated again after the answer, and nothing contradicts the files any more
    put = service.client.put(
        "/api/v1/trust-policy",
        content=catalogs.policy_yaml(("other", OTHER)),
        headers={**admin, **catalogs.YAML},
    )
    assert put.status_code == 201, put.text
    assert put.json()["reevaluation"]["compliance_pending"] is True
    assert _counts(service, reader)["GV.SC-09"]["fail"] == 0
    summary = service.client.get("/api/v1/compliance?policy=prod", headers=reader).json()
    assert summary["assets"] == {"evaluated": 2, "outdated": 0, "not_evaluated": 0}


def test_cdxa_attestation_export_is_valid_cyclonedx(
    service: Service, post_report: Callable[..., Any]
) -> None:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    _fleet(post_report)
    put_policy(service, POLICY)
    reader = auth(service.token("inventory:read"))
    answer = service.client.get(
        "/api/v1/compliance/attestation?policy=prod&framework=cis-v8", headers=reader
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/vnd.cyclonedx+json"
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(answer.text) is None
    doc = answer.json()
    (standard,) = doc["definitions"]["standards"]
    assert standard["name"] == "CIS Critical Security Controls v8"
    requirements = {r["identifier"] for r in standard["requirements"]}
    assert requirements == {"CIS-2.5", "CIS-2.6", "CIS-4.1", "CIS-2.1", "CIS-2.4", "CIS-16.4"}
    declarations = doc["declarations"]
    assert len(declarations["targets"]["components"]) == 3
    assert len(declarations["claims"]) == 3 * len(requirements)
    mapping = {m["requirement"]: m for m in declarations["attestations"][0]["map"]}
    cis25 = mapping["requirement:CIS-2.5"]
    names = {c["bom-ref"]: c["target"] for c in declarations["claims"]}
    tampered_id = next(
        t["bom-ref"]
        for t in declarations["targets"]["components"]
        if t["name"] == "reg.example/tampered:1"
    )
    assert [names[c] for c in cis25["counterClaims"]] == [tampered_id]
    assert len(cis25["claims"]) == 2 and cis25["conformance"]["score"] == round(2 / 3, 4)
    refs = {e["bom-ref"] for e in declarations["evidence"]}
    assert all(set(c["evidence"]) <= refs for c in declarations["claims"])
    missing = service.client.get("/api/v1/compliance/attestation?policy=nope", headers=reader)
    assert missing.status_code == 404


def test_a_policy_version_is_stored_with_its_compliance_or_not_at_all(
    service: Service, post_report: Callable[..., Any], monkeypatch: Any
) -> None:
    _fleet(post_report)
    reader = auth(service.token("inventory:read"))
    assert put_policy(service, POLICY).status_code == 201
    stricter = POLICY + '  versions: {deny: {cudnn: ["9.1.*"]}}\n'
    # the database fails after the first asset of the re-evaluation: nothing of it is kept
    evaluated: list[object] = []

    def failing(*args: Any, **kwargs: Any) -> Any:
        if evaluated:
            raise OperationalError("INSERT", {}, ConnectionError("server closed the connection"))
        evaluated.append(args)
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(compliance, "evaluate", failing)
    assert put_policy(service, stricter).status_code in (500, 503)
    summary = service.client.get("/api/v1/compliance?policy=prod", headers=reader).json()
    assert summary["policy"]["version"] == 1  # the failed version is not stored
    assert summary["assets"] == {"evaluated": 3, "outdated": 0, "not_evaluated": 0}
    monkeypatch.undo()
    # stored: every asset evaluated under the new version, none left from the old one
    answer = put_policy(service, stricter)
    assert (answer.status_code, answer.json()["compliance_evaluated"]) == (201, 3)
    summary = service.client.get("/api/v1/compliance?policy=prod", headers=reader).json()
    assert summary["policy"]["version"] == 2
    assert summary["assets"] == {"evaluated": 3, "outdated": 0, "not_evaluated": 0}
    assert service.count("compliance_asset") == 3
    # results of an older version are never counted as current
    with service.db.transaction(write=True) as session:
        session.execute(
            text(
                "UPDATE compliance_asset SET policy_version = 1 WHERE asset_id ="
                " (SELECT min(asset_id) FROM compliance_asset)"
            )
        )
    summary = service.client.get("/api/v1/compliance?policy=prod", headers=reader).json()
    assert summary["assets"] == {"evaluated": 2, "outdated": 1, "not_evaluated": 0}


def test_a_large_fleet_is_evaluated_after_the_answer_and_never_shown_as_current_before(
    service: Service, post_report: Callable[..., Any], monkeypatch: Any
) -> None:
    _fleet(post_report)
    reader = auth(service.token("inventory:read"))
    assert put_policy(service, POLICY).json()["compliance_evaluated"] == 3
    monkeypatch.setattr(compliance, "SYNC_ASSETS", 2)  # the fleet of 3 is "large"
    monkeypatch.setattr(compliance, "PENDING_BATCH", 1)
    evaluated: list[object] = []

    def failing(*args: Any, **kwargs: Any) -> Any:
        if evaluated:
            raise OperationalError("INSERT", {}, ConnectionError("server closed the connection"))
        evaluated.append(args)
        return evaluate(*args, **kwargs)

    # the version is stored and answered; its evaluation fails after the first batch
    stricter = POLICY + '  versions: {deny: {cudnn: ["9.1.*"]}}\n'
    monkeypatch.setattr(compliance, "evaluate", failing)
    answer = put_policy(service, stricter).json()
    assert (answer["version"], answer["compliance_evaluated"], answer["compliance_pending"]) == (
        2,
        None,
        True,
    )
    summary = service.client.get("/api/v1/compliance?policy=prod", headers=reader).json()
    assert summary["policy"]["version"] == 2
    assert summary["assets"] == {"evaluated": 1, "outdated": 2, "not_evaluated": 0}
    # the next version is evaluated in full after its answer (the test client runs the
    # background task before it returns), and what is left of older versions goes: here an
    # asset that no longer has a latest scan
    monkeypatch.setattr(compliance, "evaluate", evaluate)
    post_report(boms.encode(image_bom("reg.example/gone:1", timestamp=_now(1))))
    with service.db.transaction(write=True) as session:
        session.execute(text("UPDATE asset SET latest_scan_id = NULL WHERE name LIKE '%gone%'"))
    answer = put_policy(service, stricter + "  mixed_cudnn: {}\n").json()
    assert (answer["compliance_evaluated"], answer["compliance_pending"]) == (None, True)
    summary = service.client.get("/api/v1/compliance?policy=prod", headers=reader).json()
    assert summary["policy"]["version"] == 3
    assert summary["assets"] == {"evaluated": 3, "outdated": 0, "not_evaluated": 0}
    assert service.count("compliance_asset") == 3
    assert _counts(service, reader)["PR.PS-02"]["fail"] == 3
    # the planner's statistics describe the rows just written (ANALYZE at the end)
    stats = (
        "SELECT reltuples FROM pg_class WHERE relname = 'compliance_control'"
        if service.backend == "postgresql"
        else "SELECT CAST(stat AS INTEGER) FROM sqlite_stat1 WHERE tbl = 'compliance_control'"
        " LIMIT 1"
    )
    with service.db.session() as session:
        assert int(session.execute(text(stats)).scalar_one()) == service.count("compliance_control")


def test_a_restart_resumes_the_evaluation_that_an_earlier_process_left_unfinished(
    service: Service, post_report: Callable[..., Any], monkeypatch: Any
) -> None:
    _fleet(post_report)
    reader = auth(service.token("inventory:read"))
    put_policy(service, POLICY)
    # an earlier process stored version 2 and stopped after evaluating one asset
    monkeypatch.setattr(compliance, "SYNC_ASSETS", 2)
    monkeypatch.setattr(compliance, "PENDING_BATCH", 1)
    monkeypatch.setattr(compliance, "reevaluate_pending", lambda *a, **k: 0)
    put_policy(service, POLICY + '  versions: {deny: {cudnn: ["9.1.*"]}}\n')
    monkeypatch.undo()
    with service.db.transaction() as session:
        assert compliance.outdated_policies(session) == [("prod", 2)]
    before = service.client.get("/api/v1/compliance?policy=prod", headers=reader).json()
    assert before["assets"] == {"evaluated": 0, "outdated": 3, "not_evaluated": 0}
    # the next start of the service finishes it, off the request path
    with TestClient(create_app(service.settings)) as restarted:
        for _ in range(200):
            summary = restarted.get("/api/v1/compliance?policy=prod", headers=reader).json()
            if summary["assets"]["evaluated"] == 3:
                break
            time.sleep(0.05)
    assert summary["assets"] == {"evaluated": 3, "outdated": 0, "not_evaluated": 0}
    assert _counts(service, reader)["PR.PS-02"]["fail"] == 3
    with service.db.transaction() as session:
        assert compliance.outdated_policies(session) == []
    # nothing left to resume: a start does no work
    assert compliance.resume_pending(service.db, _now(0), threading.Event()) == 0


def test_compliance_csv_of_a_hostile_asset_name_reads_back(
    service: Service, post_report: Callable[..., Any]
) -> None:
    """Issue 17: an asset name holding CR split its rows in a spreadsheet, the next starting
    with a formula; the export reads back row for row, no cell a formula."""
    from tests.app.test_tabular import FORMULA_STARTS, spreadsheet_rows

    name = "x\r=1+2"
    bom = boms.gpuprov_bom(kind="host", name=name, timestamp=_now(1))
    assert post_report(boms.encode(bom)).status_code == 201
    put_policy(service, POLICY)
    reader = auth(service.token("inventory:read"))
    text = service.client.get(
        "/api/v1/compliance/export?policy=prod&format=csv", headers=reader
    ).text
    table = list(csv.DictReader(io.StringIO(text, newline="")))
    assert table and {r["asset_name"] for r in table} == {name}
    rows = spreadsheet_rows(text)
    assert len(rows) == 1 + len(table) and all(len(r) == len(rows[0]) for r in rows)
    assert [c for r in rows for c in r if c.startswith(FORMULA_STARTS)] == []


def _no_cudart(name: str) -> dict[str, Any]:
    """An image holding cuDNN but no CUDA runtime: cuda_pairing does not apply to it."""
    return image_bom(name, owners=[boms.cudnn_wheel()], timestamp=_now(1))


def test_every_read_of_compliance_tells_the_same_status(
    service: Service, post_report: Callable[..., Any]
) -> None:
    # The summary counts, the export rows, the drill-down and each asset's own compliance all
    # read the stored statuses with scan_age judged now: for every (asset, control) they agree,
    # also for a scan whose time is unknown (the stored rows allow it), which fails scan_age.
    fleet = _fleet(post_report)
    post_report(boms.encode(_no_cudart("reg.example/nocudart:1")))
    put_policy(service, POLICY)
    with service.db.transaction(write=True) as session:
        clean = session.execute(
            text("SELECT id FROM asset WHERE name = 'reg.example/clean:1'")
        ).scalar_one()
        for table in ("compliance_asset", "compliance_control"):
            session.execute(text(f"UPDATE {table} SET scanned_at = NULL WHERE asset_id = {clean}"))
    reader = auth(service.token("inventory:read"))
    exported = service.client.get("/api/v1/compliance/export?policy=prod", headers=reader).json()
    status = {(r["asset_id"], r["control_id"]): r["status"] for r in exported}
    assert len(status) == len(exported) == 4 * len(_counts(service, reader))
    assert status[(clean, "ID.AM-02")] == "fail"  # unknown scan time: never a pass
    ids = {a for a, _ in status}
    for cid, counted in _counts(service, reader).items():
        per_asset = [status[(a, cid)] for a in ids]
        assert {s: per_asset.count(s) for s in ("pass", "fail", "not_applicable")} == {
            s: counted[s] for s in ("pass", "fail", "not_applicable")
        }, cid
        failing = service.client.get(
            f"/api/v1/compliance/controls/{cid}?policy=prod", headers=reader
        ).json()
        assert sorted(i["asset"]["id"] for i in failing["items"]) == sorted(
            a for a in ids if status[(a, cid)] == "fail"
        ), cid
    for asset_id in ids:
        detail = service.client.get(f"/api/v1/assets/{asset_id}", headers=reader).json()
        (entry,) = detail["compliance"]
        assert entry["controls"] == {cid: s for (a, cid), s in status.items() if a == asset_id}, (
            detail["name"]
        )
    clean_entry = service.client.get(f"/api/v1/assets/{clean}", headers=reader).json()
    (entry,) = clean_entry["compliance"]
    (age,) = entry["reasons"]
    assert entry["decision"] == "deny" and age["rule"] == "scan_age" and age["missing_input"]
    assert "scan time is unknown" in age["message"]
    assert fleet


def test_an_asset_shows_its_decision_as_of_now(
    service: Service, post_report: Callable[..., Any], monkeypatch: Any
) -> None:
    # Evaluated allow when its report came; two days later its scan is stale: the asset's
    # compliance (API and dashboard page) says deny, never the decision stored back then.
    from datetime import timedelta

    from app.clock import utcnow
    from app.http.api import assets as api_assets
    from app.http.dashboard import assets as page_assets
    from tests.app.pages import login

    put_policy(service, POLICY)
    asset_id = post_report(boms.encode(image_bom("reg.example/fresh:1", timestamp=_now(1))))
    asset_id = asset_id.json()["asset_id"]
    reader = service.token("inventory:read")

    def compliance_now() -> dict[str, Any]:
        answer = service.client.get(f"/api/v1/assets/{asset_id}", headers=auth(reader))
        (entry,) = answer.json()["compliance"]
        return dict(entry)

    assert compliance_now()["decision"] == "allow"
    service.client.cookies.clear()
    assert login(service.client, reader).status_code == 303
    assert 'class="decision d-allow">allow<' in service.client.get(f"/assets/{asset_id}").text
    later = utcnow() + timedelta(days=2)
    for module in (api_assets, page_assets):
        monkeypatch.setattr(module, "utcnow", lambda: later)
    entry = compliance_now()
    assert entry["decision"] == "deny"
    assert [r["rule"] for r in entry["reasons"]] == ["scan_age"]
    assert entry["controls"]["ID.AM-02"] == "fail" and entry["controls"]["PR.DS-01"] == "pass"
    page = service.client.get(f"/assets/{asset_id}").text
    service.client.cookies.clear()
    assert 'class="decision d-deny">deny<' in page and "d-allow" not in page
    with service.db.session() as session:
        stored = session.execute(text("SELECT decision FROM compliance_asset")).scalar_one()
    assert stored == "allow"  # what was stored; the reads judge scan_age now


def test_cdxa_never_claims_a_not_applicable_control(
    service: Service, post_report: Callable[..., Any]
) -> None:
    # cuda_pairing does not apply to an image without cudart, the driver rule to no image:
    # their claims are neither passing claims nor counter claims, and a control that applies
    # to no asset gets no conformance score (1.0 would claim the fleet passes it)
    _fleet(post_report)
    post_report(boms.encode(_no_cudart("reg.example/nocudart:1")))
    put_policy(service, POLICY + "  driver: {}\n")
    reader = auth(service.token("inventory:read"))
    doc = service.client.get(
        "/api/v1/compliance/attestation?policy=prod&framework=cis-v8", headers=reader
    ).json()
    declarations = doc["declarations"]
    targets = {t["bom-ref"]: t["name"] for t in declarations["targets"]["components"]}
    claims = {c["bom-ref"]: c for c in declarations["claims"]}
    mapping = {m["requirement"]: m for m in declarations["attestations"][0]["map"]}
    for m in mapping.values():
        assert all(claims[c]["predicate"].endswith(": pass") for c in m["claims"])
        assert all(claims[c]["predicate"].endswith(": fail") for c in m["counterClaims"])
    pairing = mapping["requirement:CIS-4.1"]
    assert sorted(targets[claims[c]["target"]] for c in pairing["claims"]) == [
        "reg.example/clean:1",
        "reg.example/tampered:1",
    ]
    assert [targets[claims[c]["target"]] for c in pairing["counterClaims"]] == [
        "reg.example/mismatch:1"
    ]
    assert pairing["conformance"]["score"] == round(2 / 3, 4)
    assert "2 of 3 assets" in pairing["conformance"]["rationale"]
    driver = mapping["requirement:CIS-2.2"]
    assert driver["claims"] == [] and driver["counterClaims"] == []
    assert "score" not in driver["conformance"]
    assert "applies to none of the 4 assets" in driver["conformance"]["rationale"]
    nocudart = next(t for t, n in targets.items() if n == "reg.example/nocudart:1")
    (na,) = [c for c in claims.values() if c["target"] == nocudart and "CIS-4.1" in c["bom-ref"]]
    assert na["predicate"].endswith(": not_applicable")


def test_a_control_read_now_lists_only_the_failing_rules_that_cite_it(
    service: Service, post_report: Callable[..., Any]
) -> None:
    """versions fails and driver (no driver on an image) does not apply; both cite PR.PS-02.
    scan_age is judged when read: the other rules' stored results are left as they were."""
    policy = HEAD + (
        'rules:\n  versions: {allow: {cudnn: ">=9.2"}}\n  driver: {}\n  scan_age: {max_hours: 24}\n'
    )
    put_policy(service, policy)
    asset_id = post_report(boms.encode(image_bom("reg.example/old:1", timestamp=_now(1))))
    asset_id = asset_id.json()["asset_id"]
    reader = auth(service.token("inventory:read"))
    detail = service.client.get(
        "/api/v1/compliance/controls/PR.PS-02?policy=prod", headers=reader
    ).json()
    (item,) = detail["items"]
    assert [r["rule"] for r in item["reasons"]] == ["versions"]
    answer = service.client.get(f"/api/v1/assets/{asset_id}", headers=reader).json()
    (entry,) = answer["compliance"]
    assert entry["decision"] == "deny" and [r["rule"] for r in entry["reasons"]] == ["versions"]
    assert entry["controls"]["PR.PS-02"] == "fail" and entry["controls"]["ID.AM-02"] == "pass"
    # an export for one framework lists its controls only (CIS sorts before NIST)
    export = service.client.get(
        "/api/v1/compliance/export?policy=prod&format=csv&framework=cis-v8", headers=reader
    )
    controls = {row["control_id"] for row in csv.DictReader(io.StringIO(export.text))}
    assert controls and all(c.startswith("CIS-") for c in controls), controls


def test_a_scan_exactly_at_the_scan_age_limit_passes_in_every_read(
    service: Service, post_report: Callable[..., Any], monkeypatch: Any
) -> None:
    # scan_age fails a scan older than max_hours, not one exactly that old (as the gate's rule):
    # with the clock pinned to that instant the export, the summary, the drill-down and the
    # asset all say pass; a second later all say fail.
    from datetime import UTC, datetime, timedelta

    from app.http.api import assets as api_assets
    from app.http.api import compliance as api_compliance

    scanned = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    bom = image_bom("reg.example/edge:1", timestamp=scanned.strftime("%Y-%m-%dT%H:%M:%SZ"))
    put_policy(service, POLICY)
    asset_id = post_report(boms.encode(bom)).json()["asset_id"]
    reader = auth(service.token("inventory:read"))
    for seconds, expected in ((0, "pass"), (1, "fail")):
        now = scanned + timedelta(hours=24, seconds=seconds)
        for module in (api_assets, api_compliance):
            monkeypatch.setattr(module, "utcnow", lambda now=now: now)
        exported = service.client.get("/api/v1/compliance/export?policy=prod", headers=reader)
        (row,) = [r for r in exported.json() if r["control_id"] == "ID.AM-02"]
        assert row["status"] == expected, seconds
        assert _counts(service, reader)["ID.AM-02"][expected] == 1, seconds
        failing = service.client.get(
            "/api/v1/compliance/controls/ID.AM-02?policy=prod", headers=reader
        ).json()
        assert [i["asset"]["id"] for i in failing["items"]] == (
            [asset_id] if expected == "fail" else []
        ), seconds
        detail = service.client.get(f"/api/v1/assets/{asset_id}", headers=reader).json()
        (entry,) = detail["compliance"]
        assert entry["controls"]["ID.AM-02"] == expected, seconds


def test_the_summary_counts_each_control_of_one_framework_from_zero(
    service: Service, post_report: Callable[..., Any]
) -> None:
    # Before any report every control the policy cites is listed with no asset; a framework
    # filter keeps that framework's controls alone, also one sorting after another.
    put_policy(service, POLICY)
    reader = auth(service.token("inventory:read"))
    empty = _counts(service, reader)
    assert empty and all(
        (c["pass"], c["fail"], c["not_applicable"]) == (0, 0, 0) for c in empty.values()
    )
    _fleet(post_report)
    counts = _counts(service, reader)
    for framework in ("cis-v8", "nist-csf-2.0"):
        only = _counts(service, reader, framework=framework)
        assert only == {i: c for i, c in counts.items() if c["framework"] == framework}
        assert only, framework


def test_the_summary_tells_evaluated_outdated_and_not_evaluated_assets_apart(
    service: Service, post_report: Callable[..., Any]
) -> None:
    # Six assets scanned: two evaluated on their latest scan under the current version, one
    # under an older version, three whose evaluation was lost (an update after ingest that
    # failed). An asset whose latest scan went (a delete between the two counts on
    # PostgreSQL) never makes the not-evaluated count negative.
    for i in range(6):
        bom = image_bom(f"reg.example/count{i}:1", timestamp=_now(1))
        assert post_report(boms.encode(bom)).status_code == 201
    put_policy(service, POLICY)
    reader = auth(service.token("inventory:read"))
    with service.db.transaction(write=True) as session:
        ids = session.execute(text("SELECT id FROM asset ORDER BY id")).scalars().all()
        session.execute(
            text("UPDATE compliance_asset SET policy_version = 0 WHERE asset_id = :a"),
            {"a": ids[0]},
        )
        for table in ("compliance_control", "compliance_asset"):
            session.execute(
                text(f"DELETE FROM {table} WHERE asset_id IN ({ids[3]}, {ids[4]}, {ids[5]})")
            )
    summary = service.client.get("/api/v1/compliance?policy=prod", headers=reader).json()
    assert summary["assets"] == {"evaluated": 2, "outdated": 1, "not_evaluated": 3}
    with service.db.transaction(write=True) as session:
        session.execute(
            text(f"UPDATE asset SET latest_scan_id = NULL WHERE id IN {tuple(ids[:4])}")
        )
    summary = service.client.get("/api/v1/compliance?policy=prod", headers=reader).json()
    assert summary["assets"] == {"evaluated": 0, "outdated": 3, "not_evaluated": 0}


def test_the_cdxa_states_each_standard_target_and_score(
    service: Service, post_report: Callable[..., Any]
) -> None:
    # Each framework is one standard (its version, its URL, its own cited controls alone); an
    # image is a container, a host an operating system; a control's score is the share of the
    # assets it applies to that pass it (here 1 of 2 for the integrity controls).
    catalog = default_catalog()
    for bom in (image_bom("reg.example/clean:1", timestamp=_now(1)), tampered("reg.example/t:1")):
        assert post_report(boms.encode(bom)).status_code == 201
    put_policy(service, POLICY)
    reader = auth(service.token("inventory:read"))

    def cdxa(**params: str) -> dict[str, Any]:
        answer = service.client.get(
            "/api/v1/compliance/attestation", params={"policy": "prod", **params}, headers=reader
        )
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    doc = cdxa()
    assert doc["version"] == 1
    assert doc["declarations"]["assessors"] == [
        {"bom-ref": "assessor:gpuprov", "thirdParty": False, "organization": {"name": "gpuprov"}}
    ]
    standards = doc["definitions"]["standards"]
    versions = {"slsa-v1.2": "1.2", "cis-v8": "8", "nist-csf-2.0": "2.0"}
    urls = {
        "slsa-v1.2": "https://slsa.dev/spec/v1.2/",
        "cis-v8": "https://www.cisecurity.org/controls/v8",
        "nist-csf-2.0": "https://doi.org/10.6028/NIST.CSWP.29",
    }
    assert {"cis-v8", "nist-csf-2.0"} <= {s["bom-ref"].removeprefix("standard:") for s in standards}
    for standard in standards:
        fw = standard["bom-ref"].removeprefix("standard:")
        assert standard["version"] == versions[fw]
        assert standard["externalReferences"] == [{"type": "website", "url": urls[fw]}]
        ids = [r["identifier"] for r in standard["requirements"]]
        assert ids and all(catalog.controls[i].framework == fw for i in ids), fw
    mapping = doc["declarations"]["attestations"][0]["map"]
    even = 0
    for m in mapping:
        passing, failing = len(m["claims"]), len(m["counterClaims"])
        assert m["confidence"]["score"] == 1.0
        if passing + failing:
            assert m["conformance"]["score"] == round(passing / (passing + failing), 4)
            assert f"{passing} of {passing + failing} assets" in m["conformance"]["rationale"]
        even += (passing, failing) == (1, 1)
    assert even  # a control passed by one asset and failed by the other
    nist = cdxa(framework="nist-csf-2.0")
    assert [s["bom-ref"] for s in nist["definitions"]["standards"]] == ["standard:nist-csf-2.0"]
    assert all(
        catalog.controls[m["requirement"].removeprefix("requirement:")].framework == "nist-csf-2.0"
        for m in nist["declarations"]["attestations"][0]["map"]
    )
    host = boms.gpuprov_bom(kind="host", name="gpu-node-1", timestamp=_now(1))
    assert post_report(boms.encode(host)).status_code == 201
    targets = cdxa()["declarations"]["targets"]["components"]
    assert {t["name"]: t["type"] for t in targets} == {
        "reg.example/clean:1": "container",
        "reg.example/t:1": "container",
        "gpu-node-1": "operating-system",
    }


def test_the_cdxa_claims_nothing_of_a_rule_an_outdated_evaluation_lacks(
    service: Service, post_report: Callable[..., Any], monkeypatch: Any
) -> None:
    # An asset still evaluated under an older version (its update after the new one failed)
    # has no result of a rule the new version adds: that rule's controls are not applicable to
    # it in the CDXA, neither claimed passing nor failing.
    first = POLICY.replace("  cuda_pairing: {}\n", "")
    post_report(boms.encode(image_bom("reg.example/old:1", timestamp=_now(1))))
    assert put_policy(service, first).status_code == 201
    monkeypatch.setattr(compliance, "SYNC_ASSETS", 0)

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError("INSERT", {}, ConnectionError("server closed the connection"))

    monkeypatch.setattr(compliance, "evaluate", failing)
    assert put_policy(service, POLICY).json()["version"] == 2
    reader = auth(service.token("inventory:read"))
    answer = service.client.get(
        "/api/v1/compliance/attestation?policy=prod&framework=cis-v8", headers=reader
    )
    assert answer.status_code == 200, answer.text
    declarations = answer.json()["declarations"]
    (pairing,) = [c for c in declarations["claims"] if c["bom-ref"].endswith(":CIS-4.1")]
    assert pairing["predicate"].endswith("version 2: not_applicable")
    (entry,) = [
        m for m in declarations["attestations"][0]["map"] if m["requirement"].endswith("CIS-4.1")
    ]
    assert entry["claims"] == entry["counterClaims"] == []
