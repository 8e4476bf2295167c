"""Syft's own SPDX 2.3 of real NVIDIA wheels (recorded, tests/fixtures/spdx/) through the service
(issue 21): pushed and gated on both databases, it stores the inventory rows of Syft's CycloneDX
of the same image or directory."""

from __future__ import annotations

from typing import Any

import pytest

from tests.app.conftest import Service, auth
from tests.app.test_gate_api import POLICY, gate, put_policy
from tests.app.test_spdx_api import post, rows
from tests.scanner import syft_documents as sd

MEDIA = {"spdx-json": "application/spdx+json", "cyclonedx-json": "application/json"}


def push(service: Service, kind: str, fmt: str) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
    body = (sd.FIXTURES / sd.DOCUMENTS[kind, fmt]).read_bytes()
    answer = post(service, body, MEDIA[fmt])
    assert answer.status_code == 201, answer.text
    stored = answer.json()
    reader = auth(service.token("inventory:read", name="asset-reader"))
    asset = service.client.get(f"/api/v1/assets/{stored['asset_id']}", headers=reader).json()
    return asset, rows(service, stored["asset_id"])


@pytest.mark.parametrize("kind", ["image", "dir"])
def test_syft_spdx_stores_the_rows_of_its_cyclonedx(service: Service, kind: str) -> None:
    cdx_asset, cdx_rows = push(service, kind, "cyclonedx-json")
    service.truncate()
    spdx_asset, spdx_rows = push(service, kind, "spdx-json")
    assert spdx_rows == cdx_rows
    versions = {project: version for project, version, _ in sd.WHEELS}
    assert sorted((r[0], r[2], r[3]) for r in spdx_rows) == sorted(
        (
            f"{site}/{project.replace('-', '_')}-{version}.dist-info/METADATA",
            "cudart",
            versions[project],
        )
        for project, version, site in sd.WHEELS
    )
    for key in ("kind", "name", "identity", "details"):
        assert spdx_asset[key] == cdx_asset[key], key
    assert spdx_asset["kind"] == ("image" if kind == "image" else "host")


def test_gate_reads_syft_spdx_as_its_cyclonedx(service: Service) -> None:
    put_policy(service, POLICY)
    token = service.token("gate", "report:write", name="ci")
    answers = {}
    for fmt in ("spdx-json", "cyclonedx-json"):
        answer = gate(service, token, policy="prod", bom=sd.recorded("image", fmt))
        assert answer.status_code == 200, answer.text
        answers[fmt] = answer.json()
    spdx, cdx = answers["spdx-json"], answers["cyclonedx-json"]
    assert spdx["decision"] == cdx["decision"] == "deny"
    assert spdx["subject"]["digest"] == cdx["subject"]["digest"]
    assert (
        spdx["subject"]["digest"]
        == sd.recorded("image", "cyclonedx-json")["metadata"]["component"]["version"]
    )
    assert [(r["rule"], r["missing_input"]) for r in spdx["reasons"]] == [
        (r["rule"], r["missing_input"]) for r in cdx["reasons"]
    ]


@pytest.mark.parametrize(
    ("kind", "cdx_status"), [("bare-dir", 201), ("no-os-dir", 422)], ids=["bare", "no-os"]
)
def test_a_root_spdx_naming_no_os_is_refused_naming_why(
    service: Service, kind: str, cdx_status: int
) -> None:
    """Syft's SPDX of a root without an OS package database names no OS (anchore/syft#3012):
    422 naming the field and what to send; its CycloneDX is a host where Syft found os-release."""
    body = (sd.FIXTURES / sd.DOCUMENTS[kind, "spdx-json"]).read_bytes()
    answer = post(service, body)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["details"][0]["spdx"] == "primaryPackagePurpose"
    assert "anchore/syft#3012" in error["message"]
    cdx = (sd.FIXTURES / sd.DOCUMENTS[kind, "cyclonedx-json"]).read_bytes()
    assert post(service, cdx, MEDIA["cyclonedx-json"]).status_code == cdx_status
    assert service.count("asset") == (1 if cdx_status == 201 else 0)


def test_every_file_digested_stores_the_libraries_besides_the_packages(service: Service) -> None:
    """Syft's SPDX with every file digested: the CycloneDX's rows, and each wheel's libcudart
    with the SHA-256 the SPDX gives it (Syft's CycloneDX lists no files)."""
    _, cdx_rows = push(service, "image-files", "cyclonedx-json")
    service.truncate()
    _, spdx_rows = push(service, "image-files", "spdx-json")
    assert set(cdx_rows) < set(spdx_rows)
    doc = sd.recorded("image-files", "spdx-json")
    listed = sorted(
        ("/" + f["fileName"], c["checksumValue"])
        for f in doc["files"]
        if ".so." in f["fileName"]
        for c in f["checksums"]
        if c["algorithm"] == "SHA256"
    )
    extra = sorted(set(spdx_rows) - set(cdx_rows))
    assert [(r[0], r[1], r[2]) for r in extra] == [(p, s, "cudart") for p, s in listed]
    assert len(extra) == len(sd.WHEELS)
