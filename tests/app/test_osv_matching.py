"""OSV documents matched against the packages of each asset's latest scan, end to end (SQLite and
PostgreSQL): a hand-made OSV record (valid against the vendored OSV schema) for the
``nvidia-cudnn-cu12`` wheel and Debian 12's ``nvidia-graphics-drivers`` source is imported, BOMs
holding the wheel at an affected and at a fixed version (and one without it, and a Debian host)
are pushed, and ``GET /api/v1/assets/{id}/vulnerabilities`` answers per asset.

Reports arrive before and after the import: the import re-matches every stack from storage, a
report after it is matched in its ingest; both must agree, and assets holding the same packages
share one stack (docs/advisories.md, "When it runs").
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from sqlalchemy import text

from scanner import vocabulary as v
from scanner.advisories.document import schema_errors
from tests.app.boms import Lib, Owner, cuda_wheels, cudnn_wheel, gpuprov_bom
from tests.app.conftest import Service, auth
from tests.scanner.advisories.test_vex import openvex_errors

CVE = "CVE-2026-4242"
LIBCUDA = "pkg:deb/debian/libcuda1@535.261.03-1?arch=amd64&distro=debian-12"
RANGE = "vers:pypi/>=9.0.0|<9.1.0.70"


def _record() -> dict[str, Any]:
    return {
        "schema_version": "1.6.0",
        "id": "GHSA-4242-4242-4242",
        "modified": "2026-11-01T00:00:00Z",
        "published": "2026-10-20T00:00:00Z",
        "aliases": [CVE],
        "summary": "cuDNN wheel and driver flaw",
        "details": "A hand-made record for the matcher's end-to-end test.",
        "affected": [
            {
                "package": {
                    "ecosystem": "PyPI",
                    "name": "nvidia-cudnn-cu12",
                    "purl": "pkg:pypi/nvidia-cudnn-cu12",
                },
                "ranges": [
                    {
                        "type": "ECOSYSTEM",
                        "events": [{"introduced": "9.0.0"}, {"fixed": "9.1.0.70"}],
                    }
                ],
            },
            {
                "package": {"ecosystem": "Debian:12", "name": "nvidia-graphics-drivers"},
                "ranges": [
                    {
                        "type": "ECOSYSTEM",
                        "events": [{"introduced": "0"}, {"fixed": "535.274.02-1~deb12u1"}],
                    }
                ],
            },
        ],
        "database_specific": {"severity": "HIGH"},
    }


def _driver_host(name: str, source: bool) -> dict[str, Any]:
    lib = Lib(
        path="/usr/lib/x86_64-linux-gnu/libcuda.so.535.261.03",
        family="libcuda",
        component="libcuda",
        version="535.261.03",
        cuda_major=None,
        owner_purl=LIBCUDA,
    )
    bom = gpuprov_bom(
        kind="host", name=name, owners=[Owner(LIBCUDA, "libcuda1", "535.261.03-1", [lib])]
    )
    if source:
        (pkg,) = [c for c in bom["components"] if c.get("purl") == LIBCUDA]
        pkg["properties"] = [
            {"name": v.PACKAGE_MANAGER, "value": "dpkg"},
            {"name": v.PACKAGE_SOURCE_NAME, "value": "nvidia-graphics-drivers"},
            {"name": v.PACKAGE_SOURCE_VERSION, "value": "535.261.03-1"},
        ]
    return bom


def _findings(service: Service, reader: dict[str, str], asset_id: int) -> dict[str, Any]:
    page = service.client.get(
        f"/api/v1/assets/{asset_id}/vulnerabilities", headers=reader, params={"limit": 100}
    )
    assert page.status_code == 200, page.text
    return dict(page.json())


def _ids(service: Service, reader: dict[str, str]) -> dict[str, int]:
    page = service.client.get("/api/v1/assets", headers=reader, params={"limit": 100}).json()
    return {a["name"]: a["id"] for a in page["items"]}


def _stacks(service: Service) -> dict[int, str]:
    with service.db.session() as session:
        rows = session.execute(text("SELECT asset_id, stack FROM asset_advisory_match")).all()
    return {int(a): str(s) for a, s in rows}


def test_osv_record_matches_the_packages_each_asset_holds(
    service: Service, post_report: Callable[..., Any]
) -> None:
    reader = auth(service.token("inventory:read"))
    admin = service.token("admin")

    def push(bom: dict[str, Any]) -> None:
        answer = post_report(json.dumps(bom).encode())
        assert answer.status_code in (200, 201), answer.text

    # before the record exists: an affected wheel and a Debian host
    push(gpuprov_bom(name="reg.example/ml/old:1", owners=[cudnn_wheel("9.0.0.312")]))
    push(_driver_host("gpu-a", source=True))

    record = _record()
    assert schema_errors("osv", record) == []  # the vendored OSV schema
    imported = service.client.post(
        "/api/v1/advisories",
        content=json.dumps(record).encode(),
        headers=auth(admin, **{"Content-Type": "application/vnd.osv+json"}),
    )
    assert imported.status_code == 201, imported.text
    assert imported.json()["vulnerabilities"] == [CVE]

    # after it: the same wheel version again, the fixed one, none, a host without Source:
    push(gpuprov_bom(name="reg.example/ml/old:2", owners=[cudnn_wheel("9.0.0.312")]))
    push(gpuprov_bom(name="reg.example/ml/new:1", owners=[cudnn_wheel("9.1.0.70")]))
    push(gpuprov_bom(name="reg.example/ml/nocudnn:1", owners=cuda_wheels()))
    push(gpuprov_bom(name="reg.example/ml/nocudnn:2", owners=cuda_wheels("12.6.77")))
    push(_driver_host("gpu-b", source=False))
    ids = _ids(service, reader)

    old = _findings(service, reader, ids["reg.example/ml/old:1"])
    (f,) = old["items"]
    assert (f["cve"], f["status"], f["installed"], f["fixed_in"]) == (
        CVE,
        "affected",
        "9.0.0.312",
        "9.1.0.70",
    )
    assert f["product"] == "PyPI/nvidia-cudnn-cu12" and f["severity"] == "HIGH"
    assert f["bulletin"] == "GHSA-4242-4242-4242" and f["review"] is None
    assert f["affected_text"] == RANGE
    assert f["evidence"] == {
        "package": "pkg:pypi/nvidia-cudnn-cu12@9.0.0.312",
        "version": "9.0.0.312",
        "range": [RANGE],
    }
    assert old["feed"]["documents"] == 1

    # matched at the import (from storage) and at ingest (from the report): one stack
    again = _findings(service, reader, ids["reg.example/ml/old:2"])
    assert [(g["cve"], g["status"], g["evidence"]) for g in again["items"]] == [
        (CVE, "affected", f["evidence"])
    ]
    stacks = _stacks(service)
    assert stacks[ids["reg.example/ml/old:1"]] == stacks[ids["reg.example/ml/old:2"]]
    assert stacks[ids["reg.example/ml/new:1"]] != stacks[ids["reg.example/ml/old:1"]]
    # packages no statement names are no matcher input: these two still share one stack
    assert stacks[ids["reg.example/ml/nocudnn:1"]] == stacks[ids["reg.example/ml/nocudnn:2"]]

    (fixed,) = _findings(service, reader, ids["reg.example/ml/new:1"])["items"]
    assert (fixed["status"], fixed["installed"], fixed["fixed_in"]) == (
        "fixed",
        "9.1.0.70",
        "9.1.0.70",
    )

    # no cuDNN wheel: no finding at all (the feed it was matched against is named)
    none = _findings(service, reader, ids["reg.example/ml/nocudnn:1"])
    assert none["items"] == [] and none["feed"]["documents"] == 1

    # Debian: the source package named by the record, at the source's version
    (drv,) = _findings(service, reader, ids["gpu-a"])["items"]
    assert (drv["status"], drv["product"], drv["installed"], drv["fixed_in"]) == (
        "affected",
        "Debian:12/nvidia-graphics-drivers",
        "535.261.03-1",
        "535.274.02-1~deb12u1",
    )
    assert drv["evidence"]["package"] == LIBCUDA
    assert drv["evidence"]["source_package"] == "nvidia-graphics-drivers"
    # the BOM without the source package: libcuda1 is not what the record names
    assert _findings(service, reader, ids["gpu-b"])["items"] == []

    # the advisory's own views count the affected assets
    listed = service.client.get("/api/v1/advisories", headers=reader, params={"cve": CVE}).json()
    (item,) = listed["items"]
    assert item["affected_assets"] == 3
    affected = service.client.get(
        f"/api/v1/advisories/{CVE}/affected", headers=reader, params={"status": "affected"}
    ).json()
    assert sorted(a["asset"]["name"] for a in affected["items"]) == [
        "gpu-a",
        "reg.example/ml/old:1",
        "reg.example/ml/old:2",
    ]

    # VEX names the installed wheel as the subcomponent
    vex = service.client.get(
        f"/api/v1/assets/{ids['reg.example/ml/old:1']}/vex",
        headers=reader,
        params={"format": "openvex"},
    )
    assert vex.status_code == 200, vex.text
    assert openvex_errors(vex.json()) == []
    (statement,) = vex.json()["statements"]
    (sub,) = statement["products"][0]["subcomponents"]
    assert sub["@id"] == "pkg:pypi/nvidia-cudnn-cu12@9.0.0.312"
    assert "9.1.0.70" in statement["action_statement"]


def test_a_newer_wheel_reported_moves_the_asset_to_fixed(
    service: Service, post_report: Callable[..., Any]
) -> None:
    reader = auth(service.token("inventory:read"))
    imported = service.client.post(
        "/api/v1/advisories",
        content=json.dumps(_record()).encode(),
        headers=auth(service.token("admin"), **{"Content-Type": "application/json"}),
    )
    assert imported.status_code == 201, imported.text
    host = "gpu-train-1"
    for version, timestamp, status in (
        ("9.0.0.312", "2026-11-30T12:00:00Z", "affected"),
        ("9.1.0.70", "2026-11-30T13:00:00Z", "fixed"),
    ):
        bom = gpuprov_bom(
            kind="host", name=host, owners=[cudnn_wheel(version)], timestamp=timestamp
        )
        answer = post_report(json.dumps(bom).encode())
        assert answer.status_code in (200, 201), answer.text
        (asset_id,) = _ids(service, reader).values()
        (f,) = _findings(service, reader, asset_id)["items"]
        assert (f["status"], f["installed"]) == (status, version)
