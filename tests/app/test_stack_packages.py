"""An OSV record of torch judges the torch each image holds, end to end (SQLite and
PostgreSQL): images with torch wheels installed (no GPU file of their own) are scanned and
pushed, a hand-made OSV record (the shape of CVE-2025-32434's: torch before 2.6.0) is imported,
and each image's answer follows its torch version (docs/advisories.md, "OSV records against
packages")."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scanner.advisories.document import schema_errors
from scanner.bom.cyclonedx import to_json
from scanner.pipeline import ScanOptions, run_scan
from tests.app.conftest import Service, auth
from tests.fixtures import images as im
from tests.fixtures.packages import write_dist_info
from tests.scanner import scenarios as sc

CVE = "CVE-2026-3243"
SITE = "usr/local/lib/python3.11/site-packages"


def _record() -> dict[str, Any]:
    return {
        "schema_version": "1.6.0",
        "id": "GHSA-3243-3243-3243",
        "modified": "2026-11-01T00:00:00Z",
        "published": "2026-10-20T00:00:00Z",
        "aliases": [CVE],
        "summary": "torch.load with weights_only=True can still run code",
        "details": "A hand-made record of the shape of PyTorch's CVE-2025-32434.",
        "affected": [
            {
                "package": {"ecosystem": "PyPI", "name": "torch", "purl": "pkg:pypi/torch"},
                "ranges": [
                    {"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "2.6.0"}]}
                ],
            }
        ],
        "database_specific": {"severity": "CRITICAL"},
    }


def _image(base: Path, tag: str, torch: str | None) -> str:
    root = base / f"root-{tag}"
    site = root / SITE
    site.mkdir(parents=True)
    if torch is not None:
        write_dist_info(site, "torch", torch, {"torch/__init__.py": b""})
    write_dist_info(site, "numpy", "2.1.3", {"numpy/__init__.py": b""})
    image = im.Image([im.Layer(sc.members_of(root), compression="gzip")])
    return im.write_image(base / f"img-{tag}", image, "oci", tag=tag)


def test_an_osv_record_of_torch_judges_the_torch_each_image_holds(
    service: Service, post_report: Callable[..., Any], tmp_path: Path
) -> None:
    record = _record()
    assert schema_errors("osv", record) == []
    imported = service.client.post(
        "/api/v1/advisories",
        content=json.dumps(record).encode(),
        headers=auth(service.token("admin"), **{"Content-Type": "application/vnd.osv+json"}),
    )
    assert imported.status_code == 201, imported.text
    for tag, torch in (("old", "2.5.1+cu121"), ("new", "2.6.0+cu124"), ("none", None)):
        doc = to_json(run_scan(_image(tmp_path, tag, torch), ScanOptions(use_cache=False)))
        answer = post_report(doc.encode())
        assert answer.status_code in (200, 201), answer.text
    reader = auth(service.token("inventory:read"))
    items = service.client.get("/api/v1/assets", headers=reader, params={"limit": 100}).json()
    ids = {a["name"].rsplit(":", 1)[-1]: a["id"] for a in items["items"]}

    def findings(tag: str) -> list[dict[str, Any]]:
        page = service.client.get(f"/api/v1/assets/{ids[tag]}/vulnerabilities", headers=reader)
        assert page.status_code == 200, page.text
        return list(page.json()["items"])

    (old,) = findings("old")
    assert (old["cve"], old["status"], old["product"], old["installed"]) == (
        CVE,
        "affected",
        "PyPI/torch",
        "2.5.1+cu121",
    )
    assert old["severity"].lower() == "critical"
    assert old["evidence"]["package"] == "pkg:pypi/torch@2.5.1%2Bcu121"
    (new,) = findings("new")
    assert (new["status"], new["installed"]) == ("fixed", "2.6.0+cu124")
    assert findings("none") == []  # numpy is no package of the stack: nothing to judge
    affected = service.client.get(f"/api/v1/advisories/{CVE}/affected", headers=reader)
    assert affected.status_code == 200, affected.text
    listed = {a["asset"]["id"]: a["status"] for a in affected.json()["items"]}
    assert listed == {ids["old"]: "affected", ids["new"]: "fixed"}
