"""OSV reader: PyPI, Go and Debian records to vers ranges; other ecosystems and bad records
refused by name."""

from __future__ import annotations

import pytest

from scanner.advisories.document import DocumentRefused
from scanner.advisories.osv import read_osv
from tests.scanner.advisories.documents import encode, osv


@pytest.mark.parametrize(
    ("ecosystem", "name", "scheme"),
    [
        ("PyPI", "nvidia-cudnn-cu12", "pypi"),
        ("Go", "github.com/NVIDIA/nvidia-container-toolkit", "golang"),
        ("Debian:12", "nvidia-graphics-drivers", "deb"),
    ],
)
def test_ecosystems_read_to_vers(ecosystem: str, name: str, scheme: str) -> None:
    adv = read_osv(encode(osv(ecosystem, name)))
    assert (adv.format, adv.tracking_id, adv.publisher_namespace) == (
        "osv",
        "GHSA-aaaa-bbbb-cccc",
        "osv:GHSA",
    )
    (vuln,) = adv.vulnerabilities
    assert vuln.id == "CVE-2026-1111" and "GHSA-aaaa-bbbb-cccc" in vuln.aliases
    (s,) = vuln.statuses
    assert s.product == name and s.status == "known_affected" and s.platform == ecosystem
    assert s.vers == (f"vers:{scheme}/<9.1.0", f"vers:{scheme}/9.0.0")
    assert not s.needs_review
    assert s.score is not None and s.score.severity == "HIGH" and s.score.base_score is None


def test_git_only_range_needs_review_and_withdrawn_has_no_status() -> None:
    doc = osv()
    doc["affected"][0]["ranges"] = [
        {"type": "GIT", "repo": "https://e.com/r", "events": [{"introduced": "0"}]}
    ]
    doc["affected"][0]["versions"] = []
    (s,) = read_osv(encode(doc)).vulnerabilities[0].statuses
    assert s.needs_review and s.parsed and "GIT" in s.parsed["reason"]
    withdrawn = osv(withdrawn="2026-03-01T00:00:00Z")
    assert read_osv(encode(withdrawn)).vulnerabilities[0].statuses == ()


def test_other_ecosystem_and_invalid_records_are_refused() -> None:
    with pytest.raises(DocumentRefused, match="'npm' is not one this reader takes"):
        read_osv(encode(osv("npm", "left-pad")))
    with pytest.raises(DocumentRefused) as info:
        read_osv(encode({"id": "X-1", "modified": 3}))
    assert info.value.reason == "not_osv" and "/modified" in info.value.message
    with pytest.raises(DocumentRefused) as info:
        read_osv(b"{}")
    assert info.value.reason == "not_osv"
