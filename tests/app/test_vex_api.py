"""VEX out of the service (SQLite and PostgreSQL): real NVIDIA bulletins imported, real scanner
output pushed, and ``GET /api/v1/assets/{id}/vex`` checked against the OpenVEX v0.2.0 schema
and cyclonedx-python-lib's CycloneDX 1.6 validator, statement by statement against the stored
findings; ``POST /api/v1/vex`` reads them back (dry run).

Bulletins: 2025/5703 (CVE-2025-23280, Linux R535 drivers prior to 535.274.02), 2023/5446
(CVE-2023-0193, cuobjdump prior to 12.1) and 2022/5373 (CVE-2022-34667, fixed in 11.8).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from app.cli_advisories import import_paths
from scanner.advisories.document import DEFAULT_MAX_BYTES
from scanner.advisories.vex_in import read_vex
from scanner.bom.cyclonedx import validate_json
from tests.app.conftest import Service, auth
from tests.app.test_advisory_matching import _assets, _cudnn_only, _host, _image, _push
from tests.app.test_advisory_matching import _toolkit_118 as toolkit_118
from tests.scanner.advisories.documents import PSIRT
from tests.scanner.advisories.test_vex import openvex_errors

BULLETINS = ("2025/5703", "2023/5446", "2022/5373")


@pytest.fixture(autouse=True)
def _need_psirt() -> None:
    if not PSIRT.is_dir():
        pytest.fail("../shared/fixtures/nvidia-psirt is absent: these tests need its bulletins")


def _fleet(service: Service, post_report: Callable[..., Any], tmp_path: Path) -> dict[str, int]:
    summary = import_paths(
        service.db, [PSIRT / b for b in BULLETINS], strict=False, max_bytes=DEFAULT_MAX_BYTES
    )
    assert summary.refused == [] and summary.imported == 3
    cache = tmp_path / "cache"
    _push(post_report, _host(tmp_path, "535.129.03", "a"), cache)
    _push(post_report, _image(tmp_path, "toolkit", toolkit_118), cache)
    _push(post_report, _image(tmp_path, "cudnn", _cudnn_only), cache)
    reader = auth(service.token("inventory:read"))
    ids = _assets(service, reader)
    return {
        "host": ids["gpu-535.129.03"],
        "toolkit": ids["layout:toolkit"],
        "cudnn": ids["layout:cudnn"],
    }


def _get(service: Service, token: str, asset_id: int, fmt: str) -> Any:
    return service.client.get(
        f"/api/v1/assets/{asset_id}/vex", headers=auth(token), params={"format": fmt}
    )


def _by_cve(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for st in doc["statements"]:
        out.setdefault(st["vulnerability"]["name"], []).append(st)
    return out


def _neutral(data: bytes) -> list[Any]:
    """The statements read back, without what only says which format they came from."""
    return sorted(
        (
            msgspec.structs.replace(s, format="openvex", source_state="", source_justification=None)
            for s in read_vex(data).statements
        ),
        key=repr,
    )


def test_vex_of_real_assets_is_valid_and_states_the_findings(
    service: Service, post_report: Callable[..., Any], tmp_path: Path
) -> None:
    ids = _fleet(service, post_report, tmp_path)
    reader = service.token("inventory:read")

    # the host: its R535 driver is affected by CVE-2025-23280, fixed in 535.274.02
    response = _get(service, reader, ids["host"], "openvex")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    host = response.json()
    assert openvex_errors(host) == []
    assert host["@context"] == "https://openvex.dev/ns/v0.2.0"
    assert host["author"] == "gpuprov" and host["version"] == 1
    assert host["@id"].startswith("urn:uuid:")
    (driver,) = _by_cve(host)["CVE-2025-23280"]
    assert driver["status"] == "affected"
    assert "535.274.02" in driver["action_statement"]
    assert "All driver versions prior to 535.274.02" in driver["status_notes"]
    (product,) = driver["products"]
    assert product["@id"] == "urn:gpuprov:host:" + "a" * 32
    (sub,) = product["subcomponents"]
    assert sub["@id"] == "pkg:generic/nvidia/driver@535.129.03"
    assert sub["identifiers"]["cpe23"].startswith("cpe:2.3:a:nvidia:gpu_display_driver:535.129.03")

    # the CUDA 11.8 image: its cuobjdump is affected by CVE-2023-0193; 11.8 fixed CVE-2022-34667
    image = _get(service, reader, ids["toolkit"], "openvex").json()
    assert openvex_errors(image) == []
    stated = _by_cve(image)
    (cuobjdump,) = stated["CVE-2023-0193"]
    assert cuobjdump["status"] == "affected" and "12.1" in cuobjdump["action_statement"]
    (product,) = cuobjdump["products"]
    digest = product["hashes"]["sha-256"]
    assert len(digest) == 64
    assert product["@id"].startswith("pkg:oci/") and f"@sha256:{digest}?" in product["@id"]
    assert "tag=toolkit" in product["@id"] and product["identifiers"]["purl"] == product["@id"]
    (sub,) = product["subcomponents"]
    assert sub["@id"] == "pkg:generic/nvidia/cuobjdump@11.8.86"
    assert sub["identifiers"]["cpe23"] == "cpe:2.3:a:nvidia:cuda_toolkit:11.8.0:*:*:*:*:*:*:*"
    assert len(sub["hashes"]["sha-256"]) == 64
    (fixed,) = stated["CVE-2022-34667"]
    assert fixed["status"] == "fixed" and "action_statement" not in fixed

    # every statement is a stored finding, and every finding a statement
    findings = service.client.get(
        f"/api/v1/assets/{ids['toolkit']}/vulnerabilities",
        headers=auth(reader),
        params={"limit": 1000},
    ).json()["items"]
    assert sorted(
        (s["vulnerability"]["name"], s["status"], s.get("justification"))
        for s in image["statements"]
    ) == sorted((f["cve"], f["status"], f["justification"]) for f in findings)

    # CycloneDX 1.6 VEX of the same facts: valid, the same statements once read back
    cdx = _get(service, reader, ids["toolkit"], "cyclonedx")
    assert cdx.status_code == 200
    assert cdx.headers["content-type"].startswith("application/vnd.cyclonedx+json")
    assert validate_json(cdx.text) is None
    bom = json.loads(cdx.text)
    analysis = {
        v["id"]: v["analysis"] for v in bom["vulnerabilities"] if v["id"] == "CVE-2023-0193"
    }
    assert analysis["CVE-2023-0193"]["state"] == "exploitable"
    assert analysis["CVE-2023-0193"]["response"] == ["update"]
    assert {v["analysis"]["state"] for v in bom["vulnerabilities"]} <= {
        "exploitable",
        "resolved",
        "not_affected",
        "in_triage",
    }
    openvex_bytes = _get(service, reader, ids["toolkit"], "openvex").content
    assert _neutral(openvex_bytes) == _neutral(cdx.content)
    assert len(_neutral(openvex_bytes)) == len(findings)

    # the same facts give the same bytes (timestamp and id included)
    assert _get(service, reader, ids["toolkit"], "openvex").content == openvex_bytes
    assert _get(service, reader, ids["toolkit"], "cyclonedx").content == cdx.content


def test_vex_refusals_and_the_author(
    service: Service,
    post_report: Callable[..., Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ids = _fleet(service, post_report, tmp_path)
    reader = service.token("inventory:read")
    # a cuDNN-only image: no bulletin names it; OpenVEX cannot say nothing, CycloneDX can
    empty = _get(service, reader, ids["cudnn"], "openvex")
    assert empty.status_code == 404
    assert "needs at least one statement" in empty.json()["error"]["message"]
    cdx = _get(service, reader, ids["cudnn"], "cyclonedx")
    assert cdx.status_code == 200 and validate_json(cdx.text) is None
    assert "vulnerabilities" not in json.loads(cdx.text)
    assert _get(service, reader, 999_999, "openvex").status_code == 404
    bad = _get(service, reader, ids["host"], "spdx")
    assert bad.status_code == 400 and "format" in bad.text
    assert service.client.get(f"/api/v1/assets/{ids['host']}/vex").status_code == 401  # no token
    # the configured author is the document's, and a new author is a new document
    before = _get(service, reader, ids["host"], "openvex").json()
    monkeypatch.setattr(service.settings, "vex_author", "Example Corp PSIRT")
    after = _get(service, reader, ids["host"], "openvex").json()
    assert after["author"] == "Example Corp PSIRT" and after["@id"] != before["@id"]
    assert openvex_errors(after) == []


def test_post_vex_is_a_dry_run_for_admins(
    service: Service, post_report: Callable[..., Any], tmp_path: Path
) -> None:
    ids = _fleet(service, post_report, tmp_path)
    reader = service.token("inventory:read")
    admin = service.token("admin")
    doc = _get(service, reader, ids["toolkit"], "openvex").content
    stored = (service.stored(), service.count("audit_event"))
    headers = auth(admin, **{"Content-Type": "application/json"})
    answer = service.client.post("/api/v1/vex", content=doc, headers=headers)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["dry_run"] is True and body["recorded"] is False
    assert body["format"] == "openvex" and body["author"] == "gpuprov"
    assert len(body["statements"]) == len(json.loads(doc)["statements"])
    (st,) = [s for s in body["statements"] if s["cve"] == "CVE-2023-0193"]
    assert st["state"] == "affected"
    assert st["component"]["purl"] == "pkg:generic/nvidia/cuobjdump@11.8.86"
    cdx = _get(service, reader, ids["toolkit"], "cyclonedx").content
    cdx_headers = auth(admin, **{"Content-Type": "application/vnd.cyclonedx+json"})
    answer = service.client.post("/api/v1/vex", content=cdx, headers=cdx_headers)
    assert answer.status_code == 200 and answer.json()["format"] == "cyclonedx"
    # nothing was recorded
    assert (service.stored(), service.count("audit_event")) == stored

    refused = service.client.post(
        "/api/v1/vex", content=doc.replace(b'"affected"', b'"exploitable"', 1), headers=headers
    )
    assert refused.status_code == 422
    assert "'exploitable' is not an OpenVEX status" in refused.json()["error"]["message"]
    not_now = service.client.post(
        "/api/v1/vex", content=doc, headers=headers, params={"dry_run": "false"}
    )
    assert not_now.status_code == 400 and "dry_run" in not_now.text
    forbidden = service.client.post(
        "/api/v1/vex", content=doc, headers=auth(reader, **{"Content-Type": "application/json"})
    )
    assert forbidden.status_code == 403
    wrong_type = service.client.post(
        "/api/v1/vex", content=doc, headers=auth(admin, **{"Content-Type": "text/plain"})
    )
    assert wrong_type.status_code == 415
