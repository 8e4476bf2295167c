"""CSAF 2.0 reader: NVIDIA's 131 real bulletins, every product_status list and product-tree
form of the spec on hand-made documents, the mandatory tests 6.1.1/6.1.2/6.1.6, and refusals."""

from __future__ import annotations

import json

import pytest

from scanner.advisories.csaf import read_csaf
from scanner.advisories.document import DocumentRefused
from tests.scanner.advisories.documents import PSIRT, csaf, encode, mutated

pytestmark = pytest.mark.skipif(not PSIRT.is_dir(), reason="../shared/fixtures absent")


def test_every_shared_bulletin_reads_with_its_products() -> None:
    bulletins = sorted(p for p in PSIRT.rglob("*.json") if not p.name.startswith("CVE-"))
    assert len(bulletins) == 131
    texts, parsed = set(), set()
    for path in bulletins:
        adv = read_csaf(path.read_bytes())
        assert adv.publisher_namespace == "https://www.nvidia.com/security"
        assert adv.tracking_id == path.stem
        # NVIDIA published one bulletin as a draft (2025/5708); the rest are final
        assert adv.status == ("draft" if path.stem == "5708" else "final")
        for vuln in adv.vulnerabilities:
            assert vuln.id.startswith("CVE-")
            assert vuln.statuses, vuln.id
            for s in vuln.statuses:
                assert s.version_text and s.parsed is not None
                texts.add(s.version_text)
                if s.parsed["parsed"]:
                    parsed.add(s.version_text)
    assert len(parsed) / len(texts) >= 0.98


def test_driver_bulletin_keeps_text_platform_branch_and_score() -> None:
    adv = read_csaf((PSIRT / "2025/5703/5703.json").read_bytes())
    vuln = next(v for v in adv.vulnerabilities if v.id == "CVE-2025-23280")
    s = next(
        s
        for s in vuln.statuses
        if s.platform == "Linux(R535)" and s.product == "GeForce" and s.status == "known_affected"
    )
    assert s.version_text == "All driver versions prior to 535.274.02"
    assert s.parsed is not None and s.parsed["branch"] == "R535"
    assert s.parsed["ranges"][0]["vers"] == "vers:generic/<535.274.02"
    assert s.cpe is not None and s.cpe.startswith("cpe:2.3:a:nvidia:")
    assert s.score is not None and s.score.severity == vuln.scores[0].severity
    fixed = [x for x in vuln.statuses if x.status == "fixed" and x.platform == "Linux(R535)"]
    assert {x.version_text for x in fixed} == {"535.274.02"}


def test_every_status_list_and_product_form_of_the_spec() -> None:
    adv = read_csaf(encode(csaf()))
    assert (adv.tracking_id, adv.version, adv.status) == ("EX-2026-0001", "1", "final")
    first, second = adv.vulnerabilities
    by = {(s.status, s.product_id): s for s in first.statuses}
    assert set(by) == {
        ("first_fixed", "LIB-1"),
        ("fixed", "WT-124"),
        ("known_affected", "WT-123"),
        ("known_affected", "WT-RANGE"),
        ("known_affected", "DRV-535"),
        ("known_affected", "WT-123-ON-OS"),
        ("known_not_affected", "OS-1"),
        ("recommended", "WT-124"),
    }
    assert by[("known_not_affected", "OS-1")].justification == "component_not_present"
    assert by[("known_affected", "WT-RANGE")].vers == ("vers:generic/>=1.0|<1.2.4",)
    lib = by[("first_fixed", "LIB-1")]
    assert lib.purls == ("pkg:pypi/widget@1.2.3",)
    assert lib.hashes == (("sha256", "ab" * 32, "libwidget.so.1"),)
    # a group's remediation reaches each of its products
    assert lib.remediations[0]["category"] == "vendor_fix"
    assert by[("fixed", "WT-124")].remediations[0]["url"] == "https://example.com/fix"
    # the spec's product_version: the version is the branch name, the line its product_name
    wt = by[("known_affected", "WT-123")]
    assert (wt.product, wt.version_text) == ("Widget Toolkit", "1.2.3")
    assert wt.cpe and wt.score is not None and wt.score.base_score == 7.8
    # a relationship takes its referenced product's version
    assert by[("known_affected", "WT-123-ON-OS")].version_text == "1.2.3"
    drv = by[("known_affected", "DRV-535")]
    assert drv.platform == "Linux(R535)" and drv.parsed and drv.parsed["branch"] == "R535"
    assert drv.score is not None and drv.score.severity == "MEDIUM"
    assert first.description == "A <b>heap</b> overflow." and first.title == "Widget overflow"
    assert second.id == "EX-BUG-7"
    assert [s.status for s in second.statuses] == ["under_investigation"]


def test_6_1_1_missing_definition_of_product_id() -> None:
    doc = mutated(csaf())
    doc["vulnerabilities"][0]["product_status"]["fixed"].append("NOPE")
    with pytest.raises(DocumentRefused, match=r"6\.1\.1 .*'NOPE' at /vulnerabilities/0/"):
        read_csaf(encode(doc))
    doc = mutated(csaf())
    doc["vulnerabilities"][0]["scores"][0]["products"].append("GONE")
    with pytest.raises(DocumentRefused, match=r"6\.1\.1 .*'GONE'.*scores"):
        read_csaf(encode(doc))


def test_6_1_2_multiple_definition_of_product_id() -> None:
    doc = mutated(csaf())
    doc["product_tree"]["full_product_names"].append({"name": "again", "product_id": "WT-124"})
    with pytest.raises(DocumentRefused, match=r"6\.1\.2 .*WT-124"):
        read_csaf(encode(doc))


def test_6_1_6_contradicting_product_status() -> None:
    doc = mutated(csaf())
    doc["vulnerabilities"][0]["product_status"]["fixed"].append("WT-123")
    with pytest.raises(DocumentRefused, match=r"6\.1\.6 .*'WT-123' is both affected and fixed"):
        read_csaf(encode(doc))
    # recommended is no status of its own: a fixed product may be recommended
    doc = mutated(csaf())
    assert "WT-124" in doc["vulnerabilities"][0]["product_status"]["recommended"]
    read_csaf(encode(doc))


@pytest.mark.parametrize(
    ("data", "reason", "message"),
    [
        (b"{not json", "not_json", "not JSON"),
        (b'{"a": "\xc3\x28"}', "not_json", "UTF-8"),
        (b"[]", "not_csaf", "no /document"),
        (encode({"document": {"csaf_version": "2.1"}}), "not_csaf", "'2.1' is not 2.0"),
        (encode({"document": {"csaf_version": "2.0"}}), "not_csaf", "CSAF 2.0 schema"),
    ],
)
def test_refused_by_name(data: bytes, reason: str, message: str) -> None:
    with pytest.raises(DocumentRefused) as info:
        read_csaf(data)
    assert info.value.reason == reason and message in info.value.message


def test_large_documents_read_and_a_configured_limit_refuses() -> None:
    doc = mutated(csaf())
    # pad to more than 15 MB with notes (CSAF documents of big vendors run to megabytes)
    doc["document"]["notes"].append({"category": "details", "text": "x" * 16_000_000})
    data = encode(doc)
    assert len(data) > 15_000_000
    assert read_csaf(data).tracking_id == "EX-2026-0001"
    with pytest.raises(DocumentRefused) as info:
        read_csaf(data, max_bytes=1_000_000)
    assert info.value.reason == "too_large" and "1000000-byte limit" in info.value.message


def test_schema_errors_name_the_field() -> None:
    doc = mutated(csaf())
    doc["document"]["tracking"]["status"] = "published"
    with pytest.raises(DocumentRefused, match="/document/tracking/status"):
        read_csaf(encode(doc))
    assert json.loads(encode(csaf()))  # the builder's document itself is valid
