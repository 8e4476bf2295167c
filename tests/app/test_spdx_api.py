"""SPDX through the service (issue 21): POST /reports and POST /gate read SPDX 2 by content,
refuse hostile SPDX with 4xx naming the SPDX field, and GET /assets/{id}/sbom?format=spdx writes
SPDX 2.3 that spdx-tools' full validator accepts; gpuprov's SPDX of an image stores the same
inventory rows as its CycloneDX."""

from __future__ import annotations

import json
from typing import Any

import pytest
from spdx_tools.spdx.parser.jsonlikedict.json_like_dict_parser import JsonLikeDictParser
from spdx_tools.spdx.validation.document_validator import validate_full_spdx_document

from scanner.bom import spdx_writer
from scanner.bom.cyclonedx import to_json as cyclonedx_json
from scanner.model import ScanResult
from scanner.pipeline import ScanOptions, run_scan
from tests.app.conftest import Service, auth
from tests.app.test_gate_api import POLICY, gate, put_policy
from tests.scanner import scenarios as sc
from tests.scanner.bom.test_spdx import DIGEST, TAG_VALUE, syft_like

SPDX_JSON = {"Content-Type": "application/spdx+json"}


@pytest.fixture(scope="module")
def image_scan(tmp_path_factory: pytest.TempPathFactory) -> ScanResult:
    world = sc.world_at(tmp_path_factory.getbasetemp() / "spdx-api-world")
    target, _ = world.image_target("oci-archive")
    return run_scan(target, ScanOptions(use_cache=False))


def post(service: Service, body: bytes, content_type: str = "application/spdx+json") -> Any:
    token = service.token("report:write", name="writer")
    return service.client.post(
        "/api/v1/reports", content=body, headers=auth(token, **{"Content-Type": content_type})
    )


def rows(service: Service, asset_id: int) -> list[tuple[Any, ...]]:
    token = service.token("inventory:read", name="reader")
    detail = service.client.get(f"/api/v1/assets/{asset_id}", headers=auth(token)).json()
    libraries = detail["libraries"]
    return sorted(
        (lib["path"], lib["sha256"], lib["family"], lib["version"], lib.get("owner_purl"))
        for lib in libraries
    )


def test_syft_shaped_spdx_is_stored_and_handed_back(service: Service) -> None:
    answer = post(service, json.dumps(syft_like()).encode())
    assert answer.status_code == 201, answer.text
    asset_id = answer.json()["asset_id"]
    ((path, sha, family, version, owner),) = rows(service, asset_id)
    assert (path, family) == ("/usr/lib/x86_64-linux-gnu/libcudnn.so.9.1.0", "cudnn")
    reader = auth(service.token("inventory:read", name="r2"))
    original = service.client.get(f"/api/v1/assets/{asset_id}/sbom", headers=reader)
    assert original.headers["content-type"].startswith("application/spdx+json")
    assert json.loads(original.content) == syft_like()
    rebuilt = service.client.get(f"/api/v1/assets/{asset_id}/sbom?format=spdx", headers=reader)
    assert rebuilt.status_code == 200
    document = JsonLikeDictParser().parse(rebuilt.json())
    assert validate_full_spdx_document(document) == []
    assert document.packages[0].version == DIGEST


def test_tag_value_is_accepted(service: Service) -> None:
    answer = post(service, TAG_VALUE.encode(), "text/spdx")
    assert answer.status_code == 201, answer.text


def _dup(doc: dict[str, Any]) -> None:
    doc["files"][0]["SPDXID"] = "SPDXRef-Package-deb-libcudnn9"
    doc["relationships"] = doc["relationships"][:2]


def _cycle(doc: dict[str, Any]) -> None:
    doc["relationships"].append(
        {
            "spdxElementId": "SPDXRef-File-0",
            "relationshipType": "CONTAINS",
            "relatedSpdxElement": "SPDXRef-Package-deb-libcudnn9",
        }
    )


def _bad_sum(doc: dict[str, Any]) -> None:
    doc["files"][0]["checksums"][1]["checksumValue"] = "0" * 63


@pytest.mark.parametrize(
    ("change", "status", "field"),
    [
        (_dup, 422, "SPDXID"),
        (_bad_sum, 422, "SPDXRef-File-0 checksum"),
        (lambda d: d.update(spdxVersion="SPDX-3.0"), 422, "spdxVersion"),
        (lambda d: d["packages"][0].update(name="x" * 2000), 422, None),
        (_cycle, 201, None),
    ],
    ids=["duplicated-spdxid", "wrong-checksum", "spdx3", "name-too-long", "cycle"],
)
def test_hostile_spdx_is_answered_4xx(
    service: Service, change: Any, status: int, field: str | None
) -> None:
    doc = syft_like()
    change(doc)
    answer = post(service, json.dumps(doc).encode())
    assert answer.status_code == status, answer.text
    if status == 422:
        error = answer.json()["error"]
        assert error["message"].startswith("SPDX")
        if field is not None:
            assert error["details"][0]["spdx"] == field
        else:  # a value no column holds: named by its SPDX element, not a CycloneDX pointer
            assert "described package SPDXRef-DocumentRoot-Image-app" in error["message"]
            assert "/metadata" not in error["message"], error["message"]


def test_too_many_packages_is_413(service: Service) -> None:
    doc = syft_like(files=0)
    doc["packages"] += [
        dict(doc["packages"][1], SPDXID=f"SPDXRef-P{i}")
        for i in range(service.settings.max_report_components)
    ]
    answer = post(service, json.dumps(doc).encode())
    assert answer.status_code == 413, answer.text[:300]


def test_gate_reads_an_spdx_bom(service: Service) -> None:
    put_policy(service, POLICY)
    token = service.token("gate", "report:write", name="ci")
    answer = gate(service, token, policy="prod", bom=syft_like())
    assert answer.status_code == 200, answer.text
    doc = answer.json()
    integrity = next(r for r in doc["reasons"] if r["rule"] == "integrity")
    assert integrity["missing_input"] is True and doc["decision"] == "deny"
    assert doc["subject"]["digest"] == DIGEST
    # the gated BOM is kept as sent, under its own media type (never labelled CycloneDX)
    reader = auth(service.token("inventory:read", name="r3"))
    (item,) = service.client.get("/api/v1/assets", headers=reader).json()["items"]
    original = service.client.get(f"/api/v1/assets/{item['id']}/sbom", headers=reader)
    assert original.headers["content-type"].startswith("application/spdx+json")
    assert json.loads(original.content) == syft_like()


def test_round_trip_stores_the_rows_of_the_cyclonedx(
    service: Service, image_scan: ScanResult
) -> None:
    from_cdx = post(service, cyclonedx_json(image_scan).encode(), "application/json")
    assert from_cdx.status_code == 201, from_cdx.text
    cdx_rows = rows(service, from_cdx.json()["asset_id"])
    service.truncate()
    from_spdx = post(service, spdx_writer.to_json(image_scan).encode())
    assert from_spdx.status_code == 201, from_spdx.text
    assert rows(service, from_spdx.json()["asset_id"]) == cdx_rows
    assert len(cdx_rows) == len(image_scan.libraries) > 0
