"""Queries on stored advisories: a document by its identity, its vulnerabilities and statuses,
and the CVE-level list (every bulletin naming a CVE joined by the CVE index)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, case, exists, func, select, text
from sqlalchemy.orm import Session

from app.storage.base import table
from app.storage.repositories import scopes
from app.storage.repositories.scopes import AssetScope
from app.storage.tables import AdvisoryDocument as Doc
from app.storage.tables import AdvisoryFinding as Finding
from app.storage.tables import AdvisoryProductStatus as Status
from app.storage.tables import AdvisoryVulnerability as Vuln
from app.storage.tables import AssetAdvisoryMatch as Match

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


def _severity_rank(column: Any) -> Any:
    """LOW 1 … CRITICAL 4 (0: none), so the worst statement of a CVE is its maximum."""
    return case(
        {"CRITICAL": 4, "HIGH": 3, "MEDIUM": 2, "LOW": 1}, value=func.upper(column), else_=0
    )


def _held(scope: AssetScope | None) -> list[Any]:
    """Conditions on ``Match``: its asset lies in the caller's scope (none: the whole fleet)."""
    visible = scopes.in_scope(Match.asset_id, scope)
    return [] if visible is None else [visible]


def affected_somewhere(scope: AssetScope | None = None) -> Any:
    """A condition on ``Vuln``: some asset (of the scope) holds a stack with an ``affected``
    finding of it."""
    return exists().where(
        Finding.cve == Vuln.cve,
        Finding.status == "affected",
        exists().where(Match.stack == Finding.stack, *_held(scope)),
    )


def _filters(
    cve: str | None,
    severity: str | None,
    product: str | None,
    affected: bool | None,
    scope: AssetScope | None = None,
) -> list[Any]:
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
    if affected is not None:
        somewhere = affected_somewhere(scope)
        where.append(somewhere if affected else ~somewhere)
    return where


def affected_counts_query(
    cves: Sequence[str] | None = None, scope: AssetScope | None = None
) -> Any:
    """(cve, n) of the assets holding an ``affected`` finding of each CVE: each asset holds one
    stack, so the sum of the sizes of the distinct stacks with such a finding (the where-used
    rows are counted per stack, never joined per finding)."""
    pairs = select(Finding.cve, Finding.stack).where(Finding.status == "affected")
    if cves is not None:
        pairs = pairs.where(Finding.cve.in_(cves))
    distinct_pairs = pairs.distinct().subquery()
    sizes = (
        select(Match.stack, func.count().label("n"))
        .where(*_held(scope))
        .group_by(Match.stack)
        .subquery()
    )
    return (
        select(distinct_pairs.c.cve, func.sum(sizes.c.n).label("n"))
        .join(sizes, sizes.c.stack == distinct_pairs.c.stack)
        .group_by(distinct_pairs.c.cve)
    )


def affected_counts(
    session: Session, cves: Sequence[str], scope: AssetScope | None = None
) -> dict[str, int]:
    """Per CVE, the number of assets (of the scope) with an ``affected`` finding (absent:
    none)."""
    if not cves:
        return {}
    rows = session.execute(affected_counts_query(cves, scope)).all()
    return {str(c): int(n) for c, n in rows}


#: the list's orders: newest published first (default), worst severity first, most affected
#: assets first; each then by CVE id for a stable page
SORTS = ("newest", "severity", "affected")


def cve_page(
    session: Session,
    *,
    cve: str | None,
    severity: str | None,
    product: str | None,
    affected: bool | None = None,
    sort: str = "newest",
    limit: int,
    offset: int,
    scope: AssetScope | None = None,
) -> tuple[list[str], int]:
    """A page of the CVEs matching the filters in the order ``sort`` names, and their number
    (``affected`` and its order: of the assets of the scope)."""
    where = _filters(cve, severity, product, affected, scope)
    total = session.scalar(select(func.count(func.distinct(Vuln.cve))).where(*where)) or 0
    newest = func.max(Vuln.published_at).desc().nulls_last()
    query = select(Vuln.cve).where(*where).group_by(Vuln.cve)
    if sort == "severity":
        order = [
            func.max(_severity_rank(Vuln.severity)).desc(),
            func.max(Vuln.cvss).desc().nulls_last(),
            newest,
        ]
    elif sort == "affected":
        counts = affected_counts_query(None, scope).subquery()
        query = query.outerjoin(counts, counts.c.cve == Vuln.cve)
        order = [func.max(func.coalesce(counts.c.n, 0)).desc(), newest]
    else:
        order = [newest]
    rows = session.execute(query.order_by(*order, Vuln.cve).limit(limit).offset(offset)).all()
    return [r[0] for r in rows], int(total)


def severity_counts(
    session: Session,
    *,
    cve: str | None,
    product: str | None,
    affected: bool | None,
    scope: AssetScope | None = None,
) -> dict[str, int]:
    """Per severity (as the list's filter reads it: some bulletin states it), the CVEs
    matching the other filters."""
    where = _filters(cve, None, product, affected, scope)
    rows = session.execute(
        select(func.upper(Vuln.severity), func.count(func.distinct(Vuln.cve)))
        .where(*where, Vuln.severity.is_not(None))
        .group_by(func.upper(Vuln.severity))
    ).all()
    return {str(s): int(n) for s, n in rows}


def assets_affected_at(
    session: Session, severities: Sequence[str], scope: AssetScope | None = None
) -> int:
    """The assets holding an ``affected`` finding of a CVE some bulletin rates at one of
    ``severities`` (each asset counted once: it holds one stack)."""
    rated = select(Vuln.cve).where(func.upper(Vuln.severity).in_([s.upper() for s in severities]))
    stacks = (
        select(Finding.stack)
        .where(Finding.status == "affected", Finding.cve.in_(rated))
        .distinct()
        .subquery()
    )
    total = session.scalar(
        select(func.count())
        .select_from(Match)
        .where(Match.stack.in_(select(stacks.c.stack)), *_held(scope))
    )
    return int(total or 0)


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
