"""Hand-made advisory documents (CSAF 2.0, OSV, CVE Record 5.x) for edge cases, built by code."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

#: ../shared/fixtures relative to the repository root (CI has it; a fresh clone does not).
PSIRT = Path(__file__).resolve().parents[3].parent / "shared" / "fixtures" / "nvidia-psirt"
#: the four bulletins whose published .sha256 does not match their JSON (fixture README)
MISMATCHES = (
    "2023/5449/5449.json",
    "2024/5586/5586.json",
    "2025/5703/5703.json",
    "2025/5708/5708.json",
)

NS = "https://example.com/security"


def _product(pid: str, name: str, **helper: Any) -> dict[str, Any]:
    p: dict[str, Any] = {"name": name, "product_id": pid}
    if helper:
        p["product_identification_helper"] = helper
    return p


def csaf(
    *,
    tracking_id: str = "EX-2026-0001",
    version: str = "1",
    status: str = "final",
    namespace: str = NS,
    vulnerabilities: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A CSAF 2.0 security advisory with a vendor > product > version/range tree, a
    relationship, a full product name with hashes and purl, a product group."""
    tree = {
        "branches": [
            {
                "category": "vendor",
                "name": "Example",
                "branches": [
                    {
                        "category": "product_name",
                        "name": "Widget Toolkit",
                        "branches": [
                            {
                                "category": "product_version",
                                "name": "1.2.3",
                                "product": _product(
                                    "WT-123",
                                    "Widget Toolkit 1.2.3",
                                    cpe="cpe:2.3:a:example:widget_toolkit:1.2.3:*:*:*:*:*:*:*",
                                ),
                            },
                            {
                                "category": "product_version",
                                "name": "1.2.4",
                                "product": _product("WT-124", "Widget Toolkit 1.2.4"),
                            },
                            {
                                "category": "product_version_range",
                                "name": "vers:generic/>=1.0|<1.2.4",
                                "product": _product("WT-RANGE", "Widget Toolkit < 1.2.4"),
                            },
                            {
                                "category": "architecture",
                                "name": "Linux(R535)",
                                "branches": [
                                    {
                                        "category": "product_version",
                                        "name": "All driver versions prior to 535.274.02",
                                        "product": _product("DRV-535", "Driver R535 < 535.274.02"),
                                    }
                                ],
                            },
                        ],
                    }
                ],
            }
        ],
        "full_product_names": [
            _product(
                "LIB-1",
                "libwidget.so.1",
                purl="pkg:pypi/widget@1.2.3",
                hashes=[
                    {
                        "filename": "libwidget.so.1",
                        "file_hashes": [{"algorithm": "sha256", "value": "ab" * 32}],
                    }
                ],
            ),
            _product("OS-1", "Example Linux 9"),
        ],
        "relationships": [
            {
                "category": "installed_on",
                "product_reference": "WT-123",
                "relates_to_product_reference": "OS-1",
                "full_product_name": _product("WT-123-ON-OS", "Widget 1.2.3 on Example Linux"),
            }
        ],
        "product_groups": [{"group_id": "G-FIXED", "product_ids": ["WT-124", "LIB-1"]}],
    }
    if vulnerabilities is None:
        vulnerabilities = [
            {
                "cve": "CVE-2026-0001",
                "title": "Widget overflow",
                "notes": [{"category": "description", "text": "A <b>heap</b> overflow."}],
                "product_status": {
                    "known_affected": ["WT-123", "WT-RANGE", "DRV-535", "WT-123-ON-OS"],
                    "fixed": ["WT-124"],
                    "first_fixed": ["LIB-1"],
                    "known_not_affected": ["OS-1"],
                    "recommended": ["WT-124"],
                },
                "flags": [{"label": "component_not_present", "product_ids": ["OS-1"]}],
                "remediations": [
                    {
                        "category": "vendor_fix",
                        "details": "Upgrade to 1.2.4",
                        "group_ids": ["G-FIXED"],
                        "url": "https://example.com/fix",
                    },
                    {"category": "vendor_fix", "details": "Upgrade", "product_ids": ["WT-123"]},
                ],
                "scores": [
                    {
                        "products": ["WT-123", "WT-RANGE", "WT-123-ON-OS"],
                        "cvss_v3": cvss3(7.8, "HIGH"),
                    },
                    {"products": ["DRV-535"], "cvss_v3": cvss3(5.5, "MEDIUM")},
                ],
            },
            {
                "ids": [{"system_name": "Example", "text": "EX-BUG-7"}],
                "product_status": {"under_investigation": ["WT-124"]},
            },
        ]
    return {
        "document": {
            "category": "csaf_security_advisory",
            "csaf_version": "2.0",
            "title": "Example advisory",
            "publisher": {"category": "vendor", "name": "Example PSIRT", "namespace": namespace},
            "tracking": {
                "id": tracking_id,
                "version": version,
                "status": status,
                "initial_release_date": "2026-01-01T00:00:00Z",
                "current_release_date": "2026-01-02T00:00:00Z",
                "revision_history": [
                    {"date": "2026-01-01T00:00:00Z", "number": version, "summary": "x"}
                ],
            },
            "references": [{"category": "self", "summary": "self", "url": "https://e.com/a"}],
            "notes": [{"category": "summary", "text": "Summary"}],
        },
        "product_tree": tree,
        "vulnerabilities": vulnerabilities,
    }


def cvss3(score: float, severity: str) -> dict[str, Any]:
    return {
        "version": "3.1",
        "vectorString": "CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:U/C:H/I:H/A:H",
        "baseScore": score,
        "baseSeverity": severity,
    }


def osv(ecosystem: str = "PyPI", name: str = "nvidia-cudnn-cu12", **extra: Any) -> dict[str, Any]:
    """An OSV record with an ECOSYSTEM range and a version list."""
    doc: dict[str, Any] = {
        "schema_version": "1.6.0",
        "id": "GHSA-aaaa-bbbb-cccc",
        "modified": "2026-02-01T00:00:00Z",
        "published": "2026-01-15T00:00:00Z",
        "aliases": ["CVE-2026-1111"],
        "summary": "cuDNN wheel issue",
        "details": "Details",
        "affected": [
            {
                "package": {"ecosystem": ecosystem, "name": name},
                "ranges": [
                    {"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "9.1.0"}]}
                ],
                "versions": ["9.0.0"],
            }
        ],
        "database_specific": {"severity": "HIGH"},
    }
    doc.update(extra)
    return doc


def encode(doc: Any) -> bytes:
    return json.dumps(doc).encode()


def mutated(doc: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(doc)
