"""Stored advisory findings (both databases): one evaluation per stack shared by the assets
holding it, reused while the feed is unchanged, matched again when it changes, and written once
when reports of one new stack are matched concurrently."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest

from app.cli_advisories import import_paths
from app.domain.report_parser import ReportProduct
from app.domain.vulnerabilities import rematch, store_products
from app.storage.tables import Asset
from scanner.advisories.document import DEFAULT_MAX_BYTES
from tests.app.conftest import Service
from tests.scanner.advisories.documents import PSIRT

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
R535 = ReportProduct("driver", "535.129.03", branch="R535", paths=("/usr/lib/libcuda.so.1",))


@pytest.fixture(autouse=True)
def _need_psirt() -> None:
    if not PSIRT.is_dir():
        pytest.fail("../shared/fixtures/nvidia-psirt is absent: these tests need its bulletins")


def _assets(service: Service, n: int, product: ReportProduct = R535) -> list[int]:
    ids = []
    with service.db.transaction(write=True) as session:
        for i in range(n):
            asset = Asset(
                kind="host",
                identity=f"machine-{i}",
                name=f"node-{i}",
                labels={},
                details={},
                first_seen=NOW,
                last_seen=NOW,
            )
            session.add(asset)
            session.flush()
            store_products(session, asset.id, [product], replace=False)
            ids.append(asset.id)
    return ids


def _import(service: Service, bulletin: str) -> None:
    summary = import_paths(
        service.db, [PSIRT / bulletin], strict=False, max_bytes=DEFAULT_MAX_BYTES
    )
    assert summary.refused == [] and summary.imported == 1


def test_one_stack_is_matched_once_and_shared(service: Service) -> None:
    ids = _assets(service, 3)
    _import(service, "2025/5703")  # the import matches the fleet
    assert service.count("advisory_stack") == 1
    per_stack = service.count("advisory_finding")
    assert per_stack > 0
    with service.db.transaction(write=True) as session:
        again = rematch(session, NOW, [ids[0]])  # a report of an unchanged stack
    assert (again.distinct, again.findings) == (0, 0)
    assert service.count("advisory_finding") == per_stack
    # the feed changes: every stack in use is matched again against it
    _import(service, "2024/5551")
    assert service.count("advisory_stack") == 1
    assert service.count("advisory_finding") > per_stack


def test_a_stack_no_asset_holds_is_forgotten(service: Service) -> None:
    (one,) = _assets(service, 1)
    _import(service, "2025/5703")
    with service.db.transaction(write=True) as session:
        store_products(session, one, [], replace=True)
        rematch(session, NOW)
    assert service.count("advisory_stack") == 1  # the empty stack
    assert service.count("advisory_finding") == 0


def test_concurrent_reports_of_one_new_stack_write_it_once(service: Service) -> None:
    _import(service, "2025/5703")
    ids = _assets(service, 4)
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def one(asset_id: int) -> None:
        try:
            start.wait(timeout=10)
            with service.db.transaction(write=True) as session:
                rematch(session, NOW, [asset_id])
        except BaseException as e:  # reported by the assertion below, never swallowed
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert service.count("advisory_stack") == 1
    assert service.count("asset_advisory_match") == 4
    with service.db.transaction(write=True) as session:
        single = rematch(session, NOW, [ids[0]])
    assert single.distinct == 0
    with service.db.transaction(write=True) as session:
        full = rematch(session, NOW)
    assert (full.assets, full.distinct) == (4, 1)
    assert service.count("advisory_finding") == full.findings
