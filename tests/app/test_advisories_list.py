"""``GET /api/v1/advisories`` as issue 19 §4 names it, on both databases, with NVIDIA's real
bulletins matched against real scanner output: the ``affected`` filter and the
``affected_assets`` counts follow the stored findings, the orders (newest, severity, affected),
the per-severity counts and the overview's affected-asset figures agree with the list.

Bulletins (../shared/fixtures/nvidia-psirt): 2025/5703 (October 2025 driver: CVE-2025-23280
HIGH, R535 prior to 535.274.02), 2023/5446 (cuobjdump prior to 12.1: CVE-2023-0193 MEDIUM,
CVE-2023-0196 LOW) and 2022/5373 (cuobjdump prior to 11.8).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.cli_advisories import import_paths
from app.domain import advisories
from scanner.advisories.document import DEFAULT_MAX_BYTES
from tests.app.conftest import Service, auth
from tests.app.test_advisory_matching import _assets, _host, _image, _push, _toolkit_118
from tests.scanner.advisories.documents import PSIRT

BULLETINS = ("2025/5703", "2023/5446", "2022/5373")
ITEM_KEYS = {"cve", "bulletin", "title", "severity", "cvss", "published", "affected_assets"}
FINDING_KEYS = {
    "cve",
    "bulletin",
    "severity",
    "cvss",
    "status",
    "justification",
    "product",
    "component",
    "installed",
    "affected_text",
    "fixed_in",
    "evidence",
}


@pytest.fixture
def fleet(service: Service, post_report: Callable[..., Any], tmp_path: Path) -> dict[str, int]:
    """Two R535 hosts (one vulnerable, one patched) and a CUDA 11.8 image with cuobjdump,
    matched against the three bulletins."""
    if not PSIRT.is_dir():
        pytest.fail("../shared/fixtures/nvidia-psirt is absent: these tests need its bulletins")
    summary = import_paths(
        service.db, [PSIRT / b for b in BULLETINS], strict=False, max_bytes=DEFAULT_MAX_BYTES
    )
    assert summary.refused == [] and summary.imported == len(BULLETINS)
    cache = tmp_path / "cache"
    _push(post_report, _host(tmp_path, "535.129.03", "a"), cache)
    _push(post_report, _host(tmp_path, "535.274.02", "b"), cache)
    _push(post_report, _image(tmp_path, "toolkit", _toolkit_118), cache)
    reader = auth(service.token("inventory:read"))
    return _assets(service, reader)


def _list(service: Service, **params: Any) -> dict[str, Any]:
    answer = service.client.get(
        "/api/v1/advisories",
        params={"limit": 200, **params},
        headers=auth(service.token("inventory:read")),
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_items_carry_the_fields_and_counts(service: Service, fleet: dict[str, int]) -> None:
    page = _list(service)
    assert page["total"] == len(page["items"]) > 10
    for item in page["items"]:
        assert ITEM_KEYS <= set(item)
    counts = {i["cve"]: i["affected_assets"] for i in page["items"]}
    # one vulnerable driver host; the patched one is fixed; the image's cuobjdump 11.8
    assert counts["CVE-2025-23280"] == 1
    assert counts["CVE-2023-0193"] == 1
    assert counts["CVE-2022-34667"] == 0  # prior to 11.8: 11.8 is fixed
    (driver,) = [i for i in page["items"] if i["cve"] == "CVE-2025-23280"]
    assert (driver["bulletin"], driver["severity"], driver["cvss"]) == ("5703", "HIGH", 7.0)
    assert driver["published"].startswith("2025-")


def test_the_affected_filter_follows_the_findings(service: Service, fleet: dict[str, int]) -> None:
    everything = {i["cve"] for i in _list(service)["items"]}
    hit = _list(service, affected="true")
    assert hit["total"] == len(hit["items"])
    assert all(i["affected_assets"] > 0 for i in hit["items"])
    assert {"CVE-2025-23280", "CVE-2023-0193"} <= {i["cve"] for i in hit["items"]}
    missed = _list(service, affected="false")
    assert all(i["affected_assets"] == 0 for i in missed["items"])
    assert {i["cve"] for i in hit["items"]} | {i["cve"] for i in missed["items"]} == everything
    assert not {i["cve"] for i in hit["items"]} & {i["cve"] for i in missed["items"]}
    # combined with the other filters
    high = _list(service, affected="true", severity="high", product="geforce")
    assert "CVE-2025-23280" in {i["cve"] for i in high["items"]}
    assert all(i["severity"] == "HIGH" for i in high["items"])
    (one,) = _list(service, affected="true", cve="CVE-2023-0193")["items"]
    assert one["affected_assets"] == 1
    assert _list(service, affected="true", cve="CVE-2022-34667")["items"] == []
    bad = service.client.get(
        "/api/v1/advisories",
        params={"affected": "maybe"},
        headers=auth(service.token("inventory:read")),
    )
    assert bad.status_code == 400 and "affected" in bad.text


def test_a_second_vulnerable_asset_is_counted_once_per_asset(
    service: Service, fleet: dict[str, int], post_report: Callable[..., Any], tmp_path: Path
) -> None:
    # another host of the same stack: its findings are shared, the count is per asset
    _push(post_report, _host(tmp_path / "again", "535.129.03", "c"), tmp_path / "cache")
    (item,) = _list(service, cve="CVE-2025-23280")["items"]
    assert item["affected_assets"] == 2
    reader = auth(service.token("inventory:read"))
    path = "/api/v1/advisories/CVE-2025-23280/affected"
    every = service.client.get(path, headers=reader).json()
    assert every["total"] == len(every["items"]) == 3  # two vulnerable hosts, one patched
    assert [i["status"] for i in every["items"]] == ["affected", "affected", "fixed"]
    page = service.client.get(path, params={"limit": 1, "offset": 1}, headers=reader).json()
    assert page["total"] == 3 and page["items"][0]["asset"] == every["items"][1]["asset"]
    fixed = service.client.get(path, params={"status": "fixed"}, headers=reader).json()
    assert fixed["total"] == 1


def test_orders(service: Service, fleet: dict[str, int]) -> None:
    newest = _list(service)["items"]
    dates = [i["published"] for i in newest]
    assert dates == sorted(dates, reverse=True)
    rank = {"CRITICAL": 4, "HIGH": 3, "MEDIUM": 2, "LOW": 1, None: 0}
    worst = _list(service, sort="severity")["items"]
    keys = [(rank[i["severity"]], i["cvss"] or 0) for i in worst]
    assert keys == sorted(keys, reverse=True)
    assert worst[-1]["severity"] in ("LOW", None)
    most = _list(service, sort="affected")["items"]
    counts = [i["affected_assets"] for i in most]
    assert counts == sorted(counts, reverse=True) and counts[0] == 1
    assert {i["cve"] for i in most[: counts.count(1)]} == {
        i["cve"] for i in _list(service, affected="true")["items"]
    }
    # a page of an order is a slice of it
    second = _list(service, sort="severity", limit=3, offset=3)["items"]
    assert [i["cve"] for i in second] == [i["cve"] for i in worst[3:6]]
    bad = service.client.get(
        "/api/v1/advisories",
        params={"sort": "random"},
        headers=auth(service.token("inventory:read")),
    )
    assert bad.status_code == 400


def test_severity_counts_and_overview_figures_agree_with_the_list(
    service: Service, fleet: dict[str, int]
) -> None:
    with service.db.session() as session:
        counts = advisories.severity_counts(session, cve=None, product=None, affected=None)
        affected = advisories.severity_counts(session, cve=None, product=None, affected=True)
        figures = advisories.assets_affected_by_severity(session)
    assert list(counts) == ["critical", "high", "medium", "low"]
    for severity, n in counts.items():
        assert _list(service, severity=severity)["total"] == n
    for severity, n in affected.items():
        assert _list(service, severity=severity, affected="true")["total"] == n
    # the vulnerable host (HIGH driver CVEs); the image's cuobjdump CVEs are MEDIUM and LOW
    assert figures == {"critical": 0, "high": 1}


def test_asset_findings_and_affected_carry_the_fields(
    service: Service, fleet: dict[str, int]
) -> None:
    reader = auth(service.token("inventory:read"))
    for asset_id in fleet.values():
        page = service.client.get(f"/api/v1/assets/{asset_id}/vulnerabilities", headers=reader)
        assert page.status_code == 200
        for item in page.json()["items"]:
            assert FINDING_KEYS <= set(item)
    affected = service.client.get(
        "/api/v1/advisories/CVE-2023-0193/affected", headers=reader
    ).json()
    assert affected["total"] == len(affected["items"]) == 1  # the one image with cuobjdump
    (item,) = [i for i in affected["items"] if i["status"] == "affected"]
    assert item["asset"]["name"] == "layout:toolkit"
    assert item["files"] == ["/usr/local/cuda-11.8/bin/cuobjdump"]
    assert item["installed"] and item["fixed_in"] == "12.1"
