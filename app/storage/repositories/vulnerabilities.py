"""Queries for advisory matching: each asset's products, the feed's open product statuses,
the findings per (asset, CVE, product) and when each asset was matched."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session

from app.storage.base import table
from app.storage.tables import AdvisoryDocument as Doc
from app.storage.tables import AdvisoryFinding as Finding
from app.storage.tables import AdvisoryProductStatus as Status
from app.storage.tables import AdvisoryVulnerability as Vuln
from app.storage.tables import Asset, AssetAdvisoryMatch, AssetLibrary, AssetProduct

_CHUNK = 500


def replace_products(
    session: Session, asset_id: int, rows: Sequence[dict[str, Any]], *, replace: bool = True
) -> None:
    """Set the asset's products to exactly ``rows`` (its latest report's)."""
    conn = session.connection()
    if replace:
        conn.execute(delete(AssetProduct).where(AssetProduct.asset_id == asset_id))
    if rows:
        conn.execute(insert(table(AssetProduct)), [{"asset_id": asset_id, **r} for r in rows])


def _chunks(ids: Sequence[int]) -> Iterable[Sequence[int]]:
    for i in range(0, len(ids), _CHUNK):
        yield ids[i : i + _CHUNK]


def asset_ids(session: Session) -> list[int]:
    """Every asset id, ascending."""
    return list(session.scalars(select(Asset.id).order_by(Asset.id)))


def products_of(session: Session, ids: Sequence[int]) -> Sequence[AssetProduct]:
    """The products of these assets."""
    out: list[AssetProduct] = []
    for chunk in _chunks(ids):
        out += session.scalars(
            select(AssetProduct)
            .where(AssetProduct.asset_id.in_(chunk))
            .order_by(AssetProduct.asset_id, AssetProduct.id)
        ).all()
    return out


def libraries_of(
    session: Session, ids: Sequence[int], families: Iterable[str]
) -> list[tuple[int, str, str | None]]:
    """(asset id, family, version) of these assets' current libraries of these families."""
    fams = sorted(families)
    out: list[tuple[int, str, str | None]] = []
    for chunk in _chunks(ids):
        out += [
            (int(a), str(f), v)
            for a, f, v in session.execute(
                select(AssetLibrary.asset_id, AssetLibrary.family, AssetLibrary.version).where(
                    AssetLibrary.asset_id.in_(chunk), AssetLibrary.family.in_(fams)
                )
            ).tuples()
        ]
    return out


def product_names(session: Session) -> list[str]:
    """The distinct product names of the stored statuses (their index alone)."""
    return list(session.scalars(select(Status.product).distinct()))


def open_statuses(session: Session, products: Sequence[str]) -> Sequence[tuple[str, Status]]:
    """(CVE, status) of every product status of these products that no revision closed, of
    vulnerabilities no revision withdrew."""
    if not products:
        return []
    return (
        session.execute(
            select(Vuln.cve, Status)
            .join(Vuln, Vuln.id == Status.vulnerability_id)
            .where(
                Status.product.in_(products),
                Status.closed_at.is_(None),
                Vuln.withdrawn_reason.is_(None),
            )
            .order_by(Vuln.cve, Status.id)
        )
        .tuples()
        .all()
    )


def feed_state(session: Session) -> tuple[datetime | None, int]:
    """(newest import, number of documents) of the stored feed."""
    row = session.execute(select(func.max(Doc.imported_at), func.count(Doc.id))).one()
    return row[0], int(row[1] or 0)


def replace_findings(
    session: Session,
    ids: Sequence[int],
    rows: Sequence[dict[str, Any]],
    matched: Sequence[dict[str, Any]],
) -> None:
    """Set these assets' findings to exactly ``rows`` and their match state to ``matched``."""
    conn = session.connection()
    for chunk in _chunks(ids):
        conn.execute(delete(Finding).where(Finding.asset_id.in_(chunk)))
        conn.execute(delete(AssetAdvisoryMatch).where(AssetAdvisoryMatch.asset_id.in_(chunk)))
    for i in range(0, len(rows), 5000):
        conn.execute(insert(table(Finding)), list(rows[i : i + 5000]))
    for i in range(0, len(matched), 5000):
        conn.execute(insert(table(AssetAdvisoryMatch)), list(matched[i : i + 5000]))


def findings_of(
    session: Session, asset_id: int, status: str | None, limit: int, offset: int
) -> tuple[Sequence[Finding], int]:
    """A page of one asset's findings (by CVE) and their number."""
    where = [Finding.asset_id == asset_id]
    if status is not None:
        where.append(Finding.status == status)
    total = session.scalar(select(func.count()).select_from(Finding).where(*where)) or 0
    rows = session.scalars(
        select(Finding)
        .where(*where)
        .order_by(Finding.cve.desc(), Finding.id)
        .limit(limit)
        .offset(offset)
    ).all()
    return rows, int(total)


def match_state(session: Session, asset_id: int) -> AssetAdvisoryMatch | None:
    """When the asset was last matched, against which feed."""
    return session.get(AssetAdvisoryMatch, asset_id)


def affected_by_cve(
    session: Session, cve: str, status: str | None, limit: int, offset: int
) -> tuple[Sequence[tuple[Finding, Asset]], int]:
    """A page of the findings of one CVE with their assets, and their number."""
    where = [Finding.cve == cve]
    if status is not None:
        where.append(Finding.status == status)
    total = session.scalar(select(func.count()).select_from(Finding).where(*where)) or 0
    rows = (
        session.execute(
            select(Finding, Asset)
            .join(Asset, Asset.id == Finding.asset_id)
            .where(*where)
            .order_by(Finding.asset_id, Finding.id)
            .limit(limit)
            .offset(offset)
        )
        .tuples()
        .all()
    )
    return rows, int(total)


def affected_counts(session: Session, cves: Sequence[str]) -> dict[str, int]:
    """Per CVE, the number of distinct assets with an ``affected`` finding."""
    if not cves:
        return {}
    rows = session.execute(
        select(Finding.cve, func.count(func.distinct(Finding.asset_id)))
        .where(Finding.cve.in_(cves), Finding.status == "affected")
        .group_by(Finding.cve)
    ).tuples()
    return {str(c): int(n) for c, n in rows}


def vulnerability_facts(session: Session, cves: Sequence[str]) -> Sequence[tuple[Vuln, Doc]]:
    """Every (vulnerability, document) of these CVEs (severity, score, bulletin)."""
    if not cves:
        return []
    return (
        session.execute(
            select(Vuln, Doc).join(Doc, Doc.id == Vuln.document_id).where(Vuln.cve.in_(cves))
        )
        .tuples()
        .all()
    )
