"""Advisory storage on SQLite and PostgreSQL: the shared bulletins imported and reimported,
and the revision rules (idempotent, newer replaces older, draft never replaces final, dropped
products closed with the reason, documents identified with their publisher namespace)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select

from app.domain.advisories import ImportResult, get_advisory, import_advisory, list_advisories
from app.storage.tables import AdvisoryDocument, AdvisoryProductStatus, AdvisoryVulnerability
from scanner.advisories.feed import read_document
from tests.app.conftest import Service
from tests.scanner.advisories.documents import NS, PSIRT, csaf, encode

NOW = datetime(2026, 12, 7, tzinfo=UTC)


def store(service: Service, doc: dict[str, Any], *, mismatch: bool = False) -> ImportResult:
    data = encode(doc)
    with service.db.transaction(write=True) as session:
        return import_advisory(
            session, read_document(data), data, source="test", digest_mismatch=mismatch, now=NOW
        )


def statuses(service: Service) -> list[tuple[str, str, str | None]]:
    with service.db.session() as session:
        rows = session.scalars(select(AdvisoryProductStatus).order_by(AdvisoryProductStatus.id))
        return [(r.product_id, r.status, r.closed_reason) for r in rows]


def test_revision_rules(service: Service) -> None:
    first = store(service, csaf(version="1"))
    assert first.outcome == "imported" and first.vulnerabilities == ["CVE-2026-0001", "EX-BUG-7"]
    assert store(service, csaf(version="1")).outcome == "unchanged"
    assert service.count("advisory_document") == 1
    before = service.count("advisory_product_status")
    # revision 2 drops DRV-535 from the affected list and raises WT-123's score
    newer = csaf(version="2")
    vuln = newer["vulnerabilities"][0]
    vuln["product_status"]["known_affected"].remove("DRV-535")
    vuln["scores"][1]["products"] = ["WT-124"]
    second = store(service, newer)
    assert second.outcome == "replaced"
    rows = statuses(service)
    closed = [r for r in rows if r[2] is not None]
    assert closed == [
        ("DRV-535", "known_affected", "dropped by revision 2 of EX-2026-0001 (was 1)")
    ]
    assert len(rows) == before  # restated statuses replaced, the dropped one kept and closed
    # an older revision, a draft over a final: nothing changes
    assert store(service, csaf(version="1")).outcome == "older"
    draft = store(service, csaf(version="3", status="draft"))
    assert draft.outcome == "kept_final" and "never replaces the final 2" in (draft.note or "")
    with service.db.session() as session:
        doc = session.scalars(select(AdvisoryDocument)).one()
        assert (doc.version, doc.status, doc.previous_version) == ("2", "final", "1")
    # the same tracking id from another publisher is another document, replacing nothing
    other = store(service, csaf(version="9", namespace="https://attacker.example"))
    assert other.outcome == "imported"
    assert service.count("advisory_document") == 2
    with service.db.session() as session:
        mine = session.scalars(
            select(AdvisoryDocument).where(AdvisoryDocument.publisher_namespace == NS)
        ).one()
        assert mine.version == "2"


def test_draft_is_flagged_then_replaced_by_final(service: Service) -> None:
    assert store(service, csaf(version="1.0.0-rc1", status="draft")).outcome == "imported"
    assert store(service, csaf(version="1.0.0")).outcome == "replaced"
    with service.db.session() as session:
        assert session.scalars(select(AdvisoryDocument.status)).one() == "final"


def test_semver_orders_numerically(service: Service) -> None:
    store(service, csaf(version="1.10.0"))
    assert store(service, csaf(version="1.9.0")).outcome == "older"


def test_dropped_vulnerability_is_withdrawn_with_reason(service: Service) -> None:
    store(service, csaf(version="1"))
    doc = csaf(version="2")
    doc["vulnerabilities"] = doc["vulnerabilities"][:1]
    store(service, doc)
    with service.db.session() as session:
        row = session.scalars(
            select(AdvisoryVulnerability).where(AdvisoryVulnerability.cve == "EX-BUG-7")
        ).one()
        assert row.withdrawn_reason == "dropped by revision 2 of EX-2026-0001 (was 1)"
    closed = [r for r in statuses(service) if r[0] == "WT-124" and r[1] == "under_investigation"]
    assert closed and closed[0][2] is not None


def test_severity_from_the_matching_products_scores(service: Service) -> None:
    doc = copy.deepcopy(csaf())
    store(service, doc)
    with service.db.session() as session:
        by = {
            (r.product_id, r.status): (r.severity, r.cvss)
            for r in session.scalars(select(AdvisoryProductStatus))
        }
        vuln = session.scalars(
            select(AdvisoryVulnerability).where(AdvisoryVulnerability.cve == "CVE-2026-0001")
        ).one()
    assert by[("DRV-535", "known_affected")] == ("MEDIUM", 5.5)
    assert by[("WT-123", "known_affected")] == ("HIGH", 7.8)
    assert by[("WT-124", "fixed")] == (None, None)
    assert (vuln.severity, vuln.cvss) == ("HIGH", 7.8)


@pytest.mark.skipif(not PSIRT.is_dir(), reason="../shared/fixtures absent")
def test_shared_bulletins_a_cve_in_several_bulletins(service: Service) -> None:
    from app.cli_advisories import import_paths

    summary = import_paths(service.db, [PSIRT], strict=False, max_bytes=32 << 20)
    assert (summary.imported, summary.unchanged, summary.refused) == (131, 0, [])
    assert len(summary.vulnerabilities) == 455 and len(summary.digest_mismatches) == 4
    again = import_paths(service.db, [PSIRT], strict=False, max_bytes=32 << 20)
    assert (again.imported, again.unchanged) == (0, 131)
    with service.db.session() as session:
        page = list_advisories(
            session, cve="CVE-2022-42274", severity=None, product=None, limit=10, offset=0
        )
        (item,) = page["items"]
        assert item["bulletins"] == ["5435", "5449", "5513"]
        # 5449's published .sha256 does not match: the advisory says so
        assert item["digest_mismatch"] is True and item["affected_assets"] == 0  # no asset stored
        detail = get_advisory(session, "CVE-2025-23280")
        (doc,) = detail["documents"]
        assert doc["bulletin"] == "5703" and doc["digest_mismatch"] is True
        r535 = [
            p
            for p in doc["products"]
            if p["platform"] == "Linux(R535)" and p["status"] == "known_affected"
        ]
        assert r535 and all(p["branch"] == "R535" for p in r535)
        assert r535[0]["ranges"] == ["vers:generic/<535.274.02"]
        unparsed = {(u["cve"], u["text"]) for u in summary.unparsed_versions}
        assert ("CVE-2022-34671", "Available the week of June 29, 2023") in unparsed
        stored = session.scalars(
            select(AdvisoryProductStatus).where(
                AdvisoryProductStatus.version_text == "Available the week of June 29, 2023"
            )
        ).all()
        assert stored and all(s.needs_review for s in stored)
        draft = session.scalars(
            select(AdvisoryDocument).where(AdvisoryDocument.tracking_id == "5708")
        ).one()
        assert draft.status == "draft"


def test_concurrent_imports_of_one_document_store_it_once(service: Service) -> None:
    import threading

    data = encode(csaf())
    outcomes: list[str] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def one() -> None:
        try:
            start.wait(timeout=10)
            with service.db.transaction(write=True) as session:
                result = import_advisory(
                    session, read_document(data), data, source="t", digest_mismatch=False, now=NOW
                )
            outcomes.append(result.outcome)
        except BaseException as e:  # reported by the assertion below, never swallowed
            errors.append(e)

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert sorted(outcomes) == ["imported", "unchanged", "unchanged", "unchanged"]
    assert service.count("advisory_document") == 1
