"""CVE Record 5.x reader: NVIDIA's records keep the version text and platform; other CNAs'
lessThan ranges; records that are not CVE 5 refused by name."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scanner.advisories.cve_record import read_cve_record
from scanner.advisories.document import DocumentRefused
from tests.scanner.advisories.documents import PSIRT, encode

pytestmark = pytest.mark.skipif(not PSIRT.is_dir(), reason="../shared/fixtures absent")


def test_every_shared_record_reads() -> None:
    records = sorted(PSIRT.rglob("CVE-*.json"))
    assert len(records) == 488
    for path in records:
        adv = read_cve_record(path.read_bytes())
        (vuln,) = adv.vulnerabilities
        assert vuln.id == path.stem and adv.publisher_name == "nvidia"
        assert all(s.version_text for s in vuln.statuses)


def test_driver_record_text_and_platform_give_the_branch() -> None:
    adv = read_cve_record((PSIRT / "2025/5703/CVE-2025-23280.json").read_bytes())
    (vuln,) = adv.vulnerabilities
    s = next(
        s
        for s in vuln.statuses
        if s.platform == "Linux(R580)" and s.version_text.startswith("All driver versions")
    )
    assert s.parsed is not None and s.parsed["branch"] == "R580"
    assert s.parsed["ranges"][0]["upper"]["version"] == "580.95.05"
    assert vuln.scores and vuln.scores[0].severity in ("HIGH", "MEDIUM", "CRITICAL", "LOW")


def _record(**versions: Any) -> dict[str, Any]:
    return {
        "dataType": "CVE_RECORD",
        "dataVersion": "5.1",
        "cveMetadata": {"cveId": "CVE-2026-9999", "assignerShortName": "x", "state": "PUBLISHED"},
        "containers": {
            "cna": {
                "affected": [{"product": "thing", "versions": [{"status": "affected", **versions}]}]
            }
        },
    }


def test_less_than_of_other_cnas() -> None:
    adv = read_cve_record(encode(_record(version="0", lessThan="2.4.1", versionType="semver")))
    (s,) = adv.vulnerabilities[0].statuses
    assert s.version_text == "All versions prior to 2.4.1"
    assert s.parsed is not None and s.parsed["parsed"]


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"dataType": "CVE_RECORD", "dataVersion": "4.0"}, "not 5.x"),
        ({**_record(version="1"), "cveMetadata": {"cveId": "NOPE"}}, "not a CVE id"),
        (_record(version=3), "/version is not a string"),
        (_record(version="1", status="broken"), "is unknown"),
    ],
)
def test_refused_by_name(doc: dict[str, Any], message: str) -> None:
    if doc.get("cveMetadata", {}).get("cveId") == "NOPE":
        doc = json.loads(json.dumps(doc))
    with pytest.raises(DocumentRefused) as info:
        read_cve_record(encode(doc))
    assert info.value.reason == "not_cve_record" and message in info.value.message


def test_odd_shapes_are_refused_or_skipped_never_raised() -> None:
    doc = _record(version="1.0")
    doc["containers"]["cna"]["descriptions"] = [3, {"value": "text"}]
    doc["containers"]["cna"]["problemTypes"] = [7, {"descriptions": [{"cweId": "CWE-1"}]}]
    vuln = read_cve_record(encode(doc)).vulnerabilities[0]
    assert (vuln.description, vuln.cwe) == ("text", "CWE-1")
    doc["containers"]["cna"]["problemTypes"] = [{"descriptions": "x"}]
    with pytest.raises(DocumentRefused, match="not a list"):
        read_cve_record(encode(doc))
