"""Queries on stored advisories: a document by its identity, its vulnerabilities and statuses,
and the CVE-level list (every bulletin naming a CVE joined by the CVE index)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, exists, func, select, text
from sqlalchemy.orm import Session

from app.storage.base import table
from app.storage.tables import AdvisoryDocument as Doc
from app.storage.tables import AdvisoryProductStatus as Status
from app.storage.tables import AdvisoryVulnerability as Vuln

#: PostgreSQL advisory lock key serializing advisory imports ("gadv")
_LOCK_KEY = 0x67616476


def lock(session: Session) -> None:
    """Serialize imports for the rest of the transaction (two revisions of one document never
    interleave); SQLite write transactions already run one at a time."""
    conn = session.connection()
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})


def document(session: Session, namespace: str, tracking_id: str) -> Doc | None:
    """The stored revision of a publisher's document."""
    return session.scalars(
        select(Doc).where(Doc.publisher_namespace == namespace, Doc.tracking_id == tracking_id)
    ).first()


def vulnerabilities(session: Session, document_id: int) -> Sequence[Vuln]:
    """A document's vulnerabilities."""
    return session.scalars(select(Vuln).where(Vuln.document_id == document_id)).all()


def open_statuses(session: Session, vulnerability_ids: Sequence[int]) -> Sequence[Status]:
    """The statuses no revision has closed, of these vulnerabilities."""
    if not vulnerability_ids:
        return []
    return session.scalars(
        select(Status).where(
            Status.vulnerability_id.in_(vulnerability_ids), Status.closed_at.is_(None)
        )
    ).all()


def delete_statuses(session: Session, ids: Sequence[int]) -> None:
    """Remove statuses a new revision states again (it inserts its own)."""
    if ids:
        session.execute(table(Status).delete().where(Status.id.in_(ids)))


def add_statuses(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Insert status rows in one statement."""
    if rows:
        session.execute(table(Status).insert(), list(rows))


def _filters(cve: str | None, severity: str | None, product: str | None) -> list[Any]:
    where: list[Any] = []
    if cve:
        where.append(Vuln.cve == cve)
    if severity:
        where.append(func.upper(Vuln.severity) == severity.upper())
    if product:
        pattern = (
            "%"
            + product.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            + "%"
        )
        where.append(
            exists().where(
                and_(
                    Status.vulnerability_id == Vuln.id,
                    Status.closed_at.is_(None),
                    func.lower(Status.product).like(pattern, escape="\\"),
                )
            )
        )
    return where


def cve_page(
    session: Session,
    *,
    cve: str | None,
    severity: str | None,
    product: str | None,
    limit: int,
    offset: int,
) -> tuple[list[str], int]:
    """A page of the CVEs matching the filters (newest published first) and their number."""
    where = _filters(cve, severity, product)
    total = session.scalar(select(func.count(func.distinct(Vuln.cve))).where(*where)) or 0
    newest = func.max(Vuln.published_at)
    rows = session.execute(
        select(Vuln.cve)
        .where(*where)
        .group_by(Vuln.cve)
        .order_by(newest.desc().nulls_last(), Vuln.cve)
        .limit(limit)
        .offset(offset)
    ).all()
    return [r[0] for r in rows], int(total)


def by_cves(session: Session, cves: Sequence[str]) -> Sequence[tuple[Vuln, Doc]]:
    """Every (vulnerability, document) of these CVEs."""
    if not cves:
        return []
    return (
        session.execute(
            select(Vuln, Doc)
            .join(Doc, Doc.id == Vuln.document_id)
            .where(Vuln.cve.in_(cves))
            .order_by(Vuln.cve, Doc.tracking_id)
        )
        .tuples()
        .all()
    )


def statuses_of(session: Session, vulnerability_ids: Sequence[int]) -> Sequence[Status]:
    """Every status (open and closed) of these vulnerabilities, in a stable order."""
    if not vulnerability_ids:
        return []
    return session.scalars(
        select(Status)
        .where(Status.vulnerability_id.in_(vulnerability_ids))
        .order_by(Status.vulnerability_id, Status.id)
    ).all()
