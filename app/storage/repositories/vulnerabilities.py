"""Queries for advisory matching: each asset's products and condition facts, the feed's open
product statuses, the findings per (asset, CVE, product) and when each asset was matched."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import case, delete, exists, func, insert, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from app.storage.base import table
from app.storage.repositories import scopes
from app.storage.repositories.scopes import AssetScope
from app.storage.tables import AdvisoryDocument as Doc
from app.storage.tables import AdvisoryFinding as Finding
from app.storage.tables import AdvisoryProductStatus as Status
from app.storage.tables import AdvisoryStack as Stack
from app.storage.tables import AdvisoryVulnerability as Vuln
from app.storage.tables import Asset, AssetCondition, AssetLibrary, AssetProduct, Package
from app.storage.tables import AssetAdvisoryMatch as Match

_CHUNK = 500
#: findings in the order a person acts on them: affected, under investigation, fixed, not
STATUS_ORDER = case(
    {"affected": 0, "under_investigation": 1, "fixed": 2, "not_affected": 3},
    value=Finding.status,
    else_=4,
)


def replace_products(
    session: Session, asset_id: int, rows: Sequence[dict[str, Any]], *, replace: bool = True
) -> None:
    """Set the asset's products to exactly ``rows`` (its latest report's)."""
    conn = session.connection()
    if replace:
        conn.execute(delete(AssetProduct).where(AssetProduct.asset_id == asset_id))
    if rows:
        conn.execute(insert(table(AssetProduct)), [{"asset_id": asset_id, **r} for r in rows])


def replace_conditions(
    session: Session, asset_id: int, rows: Sequence[dict[str, Any]], *, replace: bool = True
) -> None:
    """Set the asset's condition facts to exactly ``rows`` (its latest report's)."""
    conn = session.connection()
    if replace:
        conn.execute(delete(AssetCondition).where(AssetCondition.asset_id == asset_id))
    if rows:
        conn.execute(insert(table(AssetCondition)), [{"asset_id": asset_id, **r} for r in rows])


def conditions_of(session: Session, ids: Sequence[int]) -> list[tuple[int, str, str]]:
    """(asset id, name, value) of these assets' condition facts."""
    out: list[tuple[int, str, str]] = []
    for chunk in _chunks(ids):
        out += [
            (int(a), str(n), str(v))
            for a, n, v in session.execute(
                select(AssetCondition.asset_id, AssetCondition.name, AssetCondition.value).where(
                    AssetCondition.asset_id.in_(chunk)
                )
            ).all()
        ]
    return out


def conditions_with_sources(session: Session, asset_id: int) -> list[AssetCondition]:
    """One asset's condition facts with where each was read, by name."""
    return list(
        session.scalars(
            select(AssetCondition)
            .where(AssetCondition.asset_id == asset_id)
            .order_by(AssetCondition.name)
        )
    )


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
            ).all()
        ]
    return out


def packages_of(
    session: Session, ids: Sequence[int]
) -> list[tuple[int, str, str | None, str | None, str | None]]:
    """(asset id, purl, version, source name, source version) of the packages of these assets'
    latest scans."""
    out: list[tuple[int, str, str | None, str | None, str | None]] = []
    for chunk in _chunks(ids):
        out += [
            (int(a), str(purl), version, source_name, source_version)
            for a, purl, version, source_name, source_version in session.execute(
                select(
                    Asset.id,
                    Package.purl,
                    Package.version,
                    Package.source_name,
                    Package.source_version,
                )
                .join(Package, Package.scan_id == Asset.latest_scan_id)
                .where(Asset.id.in_(chunk), Package.purl.is_not(None))
                .order_by(Asset.id, Package.id)
            ).all()
        ]
    return out


def product_names(session: Session) -> list[str]:
    """The distinct product names of the stored statuses (their index alone)."""
    return list(session.scalars(select(Status.product).distinct()))


def package_names(session: Session) -> list[tuple[str | None, str]]:
    """The distinct (ecosystem, package name) of the stored OSV statuses."""
    return [
        (platform, str(product))
        for platform, product in session.execute(
            select(Status.platform, Status.product)
            .join(Vuln, Vuln.id == Status.vulnerability_id)
            .join(Doc, Doc.id == Vuln.document_id)
            .where(Doc.format == "osv")
            .distinct()
        ).all()
    ]


def open_statuses(
    session: Session, products: Sequence[str], *, osv: bool = False
) -> Sequence[tuple[str, Status]]:
    """(CVE, status) of every product status of these products that no revision closed, of
    vulnerabilities no revision withdrew: of OSV documents (``osv``: their statements name
    packages), else of the others (bulletins naming products)."""
    if not products:
        return []
    fmt = Doc.format == "osv" if osv else Doc.format != "osv"
    return (
        session.execute(
            select(Vuln.cve, Status)
            .join(Vuln, Vuln.id == Status.vulnerability_id)
            .join(Doc, Doc.id == Vuln.document_id)
            .where(
                Status.product.in_(products),
                Status.closed_at.is_(None),
                Vuln.withdrawn_reason.is_(None),
                fmt,
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


def feed_checked_at(session: Session) -> datetime | None:
    """When an import last read a document of the stored feed (changed or not)."""
    newest = func.max(func.coalesce(Doc.checked_at, Doc.imported_at))
    found: datetime | None = session.execute(select(newest)).scalar_one()
    return found


def lock_stack(session: Session, key: str) -> None:
    """Serialize the matching of one stack for the rest of the transaction (two reports of
    one new stack never both write its findings); SQLite writers already run one at a time."""
    conn = session.connection()
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": key})


def current_stacks(session: Session, keys: Sequence[str]) -> set[str]:
    """The stacks of ``keys`` already matched against the feed as it is stored now."""
    newest = select(func.max(Doc.imported_at)).scalar_subquery()
    documents = select(func.count(Doc.id)).scalar_subquery()
    out: set[str] = set()
    for i in range(0, len(keys), _CHUNK):
        out |= {
            str(k)
            for k in session.scalars(
                select(Stack.key).where(
                    Stack.key.in_(keys[i : i + _CHUNK]),
                    Stack.feed_imported_at.is_not_distinct_from(newest),
                    Stack.feed_documents == documents,
                )
            )
        }
    return out


def asset_stack_state(session: Session, asset_id: int, key: str) -> tuple[str | None, bool]:
    """One query for a report: the asset's stored stack, and whether stack ``key`` is matched
    against the feed as it is stored now."""
    newest = select(func.max(Doc.imported_at)).scalar_subquery()
    documents = select(func.count(Doc.id)).scalar_subquery()
    held = select(Match.stack).where(Match.asset_id == asset_id).scalar_subquery()
    current = exists().where(
        Stack.key == key,
        Stack.feed_imported_at.is_not_distinct_from(newest),
        Stack.feed_documents == documents,
    )
    row = session.execute(select(held, current)).one()
    return (str(row[0]) if row[0] is not None else None), bool(row[1])


def replace_stack_findings(
    session: Session, keys: Sequence[str], rows: Sequence[dict[str, Any]], stack: dict[str, Any]
) -> None:
    """Set these stacks' findings to exactly ``rows``, each stack matched as ``stack`` says."""
    conn = session.connection()
    existing: set[str] = set()
    for i in range(0, len(keys), _CHUNK):
        chunk = keys[i : i + _CHUNK]
        conn.execute(delete(Finding).where(Finding.stack.in_(chunk)))
        conn.execute(update(Stack).where(Stack.key.in_(chunk)).values(**stack))
        existing |= set(session.scalars(select(Stack.key).where(Stack.key.in_(chunk))))
    new = [{"key": k, **stack} for k in keys if k not in existing]
    if new:
        conn.execute(insert(table(Stack)), new)
    for i in range(0, len(rows), 5000):
        conn.execute(insert(table(Finding)), list(rows[i : i + 5000]))


def set_asset_stacks(session: Session, pairs: Sequence[tuple[int, str]]) -> None:
    """Each asset's stack (its latest scan's); one statement for one asset (ingest)."""
    conn = session.connection()
    if len(pairs) == 1:
        ((asset_id, key),) = pairs
        dialect = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
        upsert = dialect(Match).values(asset_id=asset_id, stack=key)
        conn.execute(
            upsert.on_conflict_do_update(
                index_elements=[Match.asset_id], set_={"stack": upsert.excluded.stack}
            )
        )
        return
    ids = [a for a, _ in pairs]
    for chunk in _chunks(ids):
        conn.execute(delete(Match).where(Match.asset_id.in_(chunk)))
    rows = [{"asset_id": a, "stack": k} for a, k in pairs]
    for i in range(0, len(rows), 5000):
        conn.execute(insert(table(Match)), rows[i : i + 5000])


def drop_unused_stacks(session: Session) -> None:
    """Forget the stacks no asset holds any more, with their findings."""
    conn = session.connection()
    unused = select(Stack.key).where(~exists().where(Match.stack == Stack.key))
    conn.execute(delete(Finding).where(Finding.stack.in_(unused)))
    conn.execute(delete(Stack).where(Stack.key.in_(unused)))


def findings_of(
    session: Session,
    asset_id: int,
    status: str | Sequence[str] | None,
    limit: int,
    offset: int,
    *,
    by_status: bool = False,
) -> tuple[Sequence[Finding], int]:
    """A page of one asset's findings of this status (or these) — its stack's, newest CVE
    first; ``by_status``: affected ones first — and their number."""
    stack = select(Match.stack).where(Match.asset_id == asset_id).scalar_subquery()
    where = [Finding.stack == stack]
    if isinstance(status, str):
        where.append(Finding.status == status)
    elif status is not None:
        where.append(Finding.status.in_(status))
    total = session.scalar(select(func.count()).select_from(Finding).where(*where)) or 0
    rows = session.scalars(
        select(Finding)
        .where(*where)
        .order_by(*([STATUS_ORDER] if by_status else []), Finding.cve.desc(), Finding.id)
        .limit(limit)
        .offset(offset)
    ).all()
    return rows, int(total)


def match_state(session: Session, asset_id: int) -> Stack | None:
    """The stack the asset holds, with the feed it was matched against."""
    return session.scalars(
        select(Stack).join(Match, Match.stack == Stack.key).where(Match.asset_id == asset_id)
    ).first()


def affected_by_cve(
    session: Session,
    cve: str,
    status: str | None,
    limit: int,
    offset: int,
    scope: AssetScope | None = None,
) -> tuple[Sequence[tuple[Finding, Asset]], int]:
    """A page of the findings of one CVE with the assets (of the scope) holding them, and their
    number."""
    where = [Finding.cve == cve]
    if status is not None:
        where.append(Finding.status == status)
    if scope is not None:
        where.append(scopes.asset_condition(scope))
    joined = (
        select(Finding, Asset)
        .join(Match, Match.stack == Finding.stack)
        .join(Asset, Asset.id == Match.asset_id)
        .where(*where)
    )
    if scope is None:
        # each finding appears once per asset holding its stack: the number is the sum of
        # those stacks' sizes, counted per stack (never joined per asset)
        stacks = select(Finding.stack).where(*where)
        sizes = (
            select(Match.stack, func.count().label("n"))
            .where(Match.stack.in_(stacks))
            .group_by(Match.stack)
            .subquery()
        )
        total = session.scalar(
            select(func.coalesce(func.sum(sizes.c.n), 0))
            .select_from(Finding)
            .join(sizes, sizes.c.stack == Finding.stack)
            .where(*where)
        )
    else:  # the scope's assets only: counted on the join itself
        total = session.scalar(select(func.count()).select_from(joined.subquery()))
    rows = session.execute(
        joined.order_by(STATUS_ORDER, Asset.id, Finding.id).limit(limit).offset(offset)
    ).all()
    return [(f, a) for f, a in rows], int(total or 0)


def status_counts(session: Session, cve: str, scope: AssetScope | None = None) -> dict[str, int]:
    """Per status, the assets (of the scope) with a finding of one CVE in it (an asset with two
    products of one status counts once)."""
    where = [Finding.cve == cve]
    visible = scopes.in_scope(Match.asset_id, scope)
    if visible is not None:
        where.append(visible)
    rows = session.execute(
        select(Finding.status, func.count(func.distinct(Match.asset_id)))
        .join(Match, Match.stack == Finding.stack)
        .where(*where)
        .group_by(Finding.status)
    ).all()
    return {str(s): int(n) for s, n in rows}


def asset_status_counts(session: Session, asset_id: int) -> dict[str, int]:
    """Per status, the CVEs with a finding of that status on one asset."""
    stack = select(Match.stack).where(Match.asset_id == asset_id).scalar_subquery()
    rows = session.execute(
        select(Finding.status, func.count(func.distinct(Finding.cve)))
        .where(Finding.stack == stack)
        .group_by(Finding.status)
    ).all()
    return {str(s): int(n) for s, n in rows}


def worst_affected(session: Session, asset_ids: Sequence[int]) -> dict[int, str]:
    """Per asset, the highest severity (LOW … CRITICAL) among the CVEs it is affected by."""
    if not asset_ids:
        return {}
    rank = case(
        {"CRITICAL": 4, "HIGH": 3, "MEDIUM": 2, "LOW": 1}, value=func.upper(Vuln.severity), else_=0
    )
    rows = session.execute(
        select(Match.asset_id, func.max(rank))
        .join(Finding, Finding.stack == Match.stack)
        .join(Vuln, Vuln.cve == Finding.cve)
        .where(Match.asset_id.in_(asset_ids), Finding.status == "affected")
        .group_by(Match.asset_id)
    ).all()
    names = {4: "CRITICAL", 3: "HIGH", 2: "MEDIUM", 1: "LOW"}
    return {int(a): names[int(r)] for a, r in rows if int(r or 0) in names}


def vulnerability_facts(session: Session, cves: Sequence[str]) -> Sequence[tuple[Vuln, Doc]]:
    """Every (vulnerability, document) of these CVEs (severity, score, bulletin)."""
    if not cves:
        return []
    rows = session.execute(
        select(Vuln, Doc).join(Doc, Doc.id == Vuln.document_id).where(Vuln.cve.in_(cves))
    ).all()
    return [(v, d) for v, d in rows]


def stacks_of(session: Session, asset_ids: Sequence[int]) -> dict[int, Stack]:
    """The stack each of these assets holds (absent: never matched), with its feed."""
    out: dict[int, Stack] = {}
    for chunk in _chunks(list(asset_ids)):
        for asset_id, stack in session.execute(
            select(Match.asset_id, Stack)
            .join(Stack, Stack.key == Match.stack)
            .where(Match.asset_id.in_(chunk))
        ):
            out[int(asset_id)] = stack
    return out


def findings_of_stacks(session: Session, keys: Sequence[str]) -> Sequence[Finding]:
    """Every finding of these stacks."""
    out: list[Finding] = []
    for i in range(0, len(keys), _CHUNK):
        out += session.scalars(
            select(Finding).where(Finding.stack.in_(keys[i : i + _CHUNK])).order_by(Finding.id)
        ).all()
    return out


def affected_pairs(session: Session, asset_ids: Sequence[int] | None) -> set[tuple[int, str]]:
    """(asset id, CVE) of every ``affected`` finding of these assets (None: every asset)."""
    query = (
        select(Match.asset_id, Finding.cve)
        .join(Finding, Finding.stack == Match.stack)
        .where(Finding.status == "affected")
        .distinct()
    )
    if asset_ids is None:
        return {(int(a), str(c)) for a, c in session.execute(query).all()}
    out: set[tuple[int, str]] = set()
    for chunk in _chunks(list(asset_ids)):
        rows = session.execute(query.where(Match.asset_id.in_(chunk))).all()
        out |= {(int(a), str(c)) for a, c in rows}
    return out
