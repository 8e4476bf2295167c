"""Queries on trust policy versions, reference catalogs and their entries, and the bulk reads
and writes that re-evaluate stored provenance verdicts."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Row,
    and_,
    delete,
    false,
    func,
    insert,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.orm import Session

from app.storage.base import table
from app.storage.tables import Artifact, CatalogEntryRow, ReferenceCatalog, TrustPolicyVersion

#: PostgreSQL advisory lock key guarding the provenance inputs ("gprv")
_LOCK_KEY = 0x67707276
_BATCH = 1000
_EXCLUSIVE = text("SELECT pg_advisory_xact_lock(:key)")
_SHARED = text("SELECT pg_advisory_xact_lock_shared(:key)")
_POLICY_DIGEST = (
    select(TrustPolicyVersion.content_sha256).order_by(TrustPolicyVersion.version.desc()).limit(1)
)
_CATALOG_STATE = select(
    ReferenceCatalog.id,
    ReferenceCatalog.content_sha256,
    ReferenceCatalog.active,
    _POLICY_DIGEST.scalar_subquery(),
).order_by(ReferenceCatalog.id)


def lock(session: Session, *, exclusive: bool) -> None:
    """Serialize provenance changes against ingest for the rest of the transaction.

    Ingest holds the lock shared while it reads the catalogs and stores verdicts; a policy or
    catalog change holds it exclusively while it re-evaluates stored rows, so no report can
    commit verdicts computed from catalogs that are being replaced. SQLite needs nothing: its
    write transactions already run one at a time.
    """
    conn = session.connection()
    if conn.dialect.name != "postgresql":
        return
    conn.execute(_EXCLUSIVE if exclusive else _SHARED, {"key": _LOCK_KEY})


def latest_policy(session: Session) -> TrustPolicyVersion | None:
    """The current (highest) trust policy version."""
    return session.scalars(
        select(TrustPolicyVersion).order_by(TrustPolicyVersion.version.desc()).limit(1)
    ).first()


def add_policy(session: Session, values: Mapping[str, Any]) -> TrustPolicyVersion:
    """Store a new policy version numbered one above the current one."""
    current = session.scalar(select(func.max(TrustPolicyVersion.version))) or 0
    row = TrustPolicyVersion(version=current + 1, **values)
    session.add(row)
    session.flush()
    return row


def policy_history(
    session: Session, limit: int, offset: int
) -> tuple[Sequence[TrustPolicyVersion], int]:
    """A page of policy versions, newest first, and their number."""
    total = session.scalar(select(func.count()).select_from(TrustPolicyVersion)) or 0
    rows = session.scalars(
        select(TrustPolicyVersion)
        .order_by(TrustPolicyVersion.version.desc())
        .limit(limit)
        .offset(offset)
    ).all()
    return rows, total


def catalog_state(session: Session) -> tuple[object, ...] | None:
    """What decides the set of trusted entries: the policy's digest and each catalog's id,
    digest and status. None when no catalog was ever imported."""
    # one plain Core statement on the session's connection: it runs on every ingest
    catalogs = session.connection().execute(_CATALOG_STATE).all()
    if not catalogs:
        return None
    return (catalogs[0][3], *(tuple(row[:3]) for row in catalogs))


def catalog_by_sha256(session: Session, content_sha256: str) -> ReferenceCatalog | None:
    """The catalog imported with exactly these bytes."""
    return session.scalars(
        select(ReferenceCatalog).where(ReferenceCatalog.content_sha256 == content_sha256)
    ).first()


def all_catalogs(session: Session) -> Sequence[ReferenceCatalog]:
    """Every stored catalog in import order (the order verdicts consult them in)."""
    return session.scalars(select(ReferenceCatalog).order_by(ReferenceCatalog.id)).all()


def list_catalogs(
    session: Session, limit: int, offset: int
) -> tuple[Sequence[ReferenceCatalog], int]:
    """A page of catalogs in import order, and their number."""
    total = session.scalar(select(func.count()).select_from(ReferenceCatalog)) or 0
    rows = session.scalars(
        select(ReferenceCatalog).order_by(ReferenceCatalog.id).limit(limit).offset(offset)
    ).all()
    return rows, total


def add_catalog(
    session: Session, values: Mapping[str, Any], entries: Sequence[Mapping[str, Any]]
) -> ReferenceCatalog:
    """Store a catalog and its entries."""
    row = ReferenceCatalog(**values)
    session.add(row)
    session.flush()
    replace_entries(session, row.id, entries, replace=False)
    return row


def replace_entries(
    session: Session,
    catalog_id: int,
    entries: Sequence[Mapping[str, Any]],
    *,
    replace: bool = True,
) -> None:
    """Set a catalog's entries (``position`` in each mapping keeps the catalog's order)."""
    conn = session.connection()
    if replace:
        conn.execute(delete(CatalogEntryRow).where(CatalogEntryRow.catalog_id == catalog_id))
    rows = [{**entry, "catalog_id": catalog_id} for entry in entries]
    for start in range(0, len(rows), _BATCH):
        conn.execute(insert(table(CatalogEntryRow)), rows[start : start + _BATCH])


def entries_of(session: Session, catalog_ids: Sequence[int]) -> Sequence[Row[*tuple[Any, ...]]]:
    """The entries of these catalogs, in catalog and position order, as plain rows."""
    if not catalog_ids:
        return []
    return session.execute(
        select(
            CatalogEntryRow.catalog_id,
            CatalogEntryRow.name,
            CatalogEntryRow.sha256,
            CatalogEntryRow.family,
            CatalogEntryRow.component,
            CatalogEntryRow.version,
            CatalogEntryRow.cuda_major,
            CatalogEntryRow.arch,
            CatalogEntryRow.package,
        )
        .where(CatalogEntryRow.catalog_id.in_(catalog_ids))
        .order_by(CatalogEntryRow.catalog_id, CatalogEntryRow.position)
    ).all()


def _current_files() -> list[ColumnElement[bool]]:
    return [Artifact.is_current.expression, Artifact.kind == "file", Artifact.sha256.is_not(None)]


def _may_match(catalog_ids: Sequence[int]) -> ColumnElement[bool]:
    """Current files that an entry of these catalogs could verify or contradict: same digest,
    same family (a file without a version cannot conflict by family), or, for a file with an
    owner package, an entry of the same file name that names a package. A superset of what
    `provenance_verdict` can match, so every file outside it is `unknown`."""
    if not catalog_ids:
        return false()
    entries = CatalogEntryRow.catalog_id.in_(catalog_ids)
    return or_(
        Artifact.sha256.in_(select(CatalogEntryRow.sha256).where(entries)),
        and_(
            Artifact.version.is_not(None),
            Artifact.family.in_(
                select(CatalogEntryRow.family).where(
                    entries,
                    CatalogEntryRow.family.is_not(None),
                    CatalogEntryRow.version.is_not(None),
                )
            ),
        ),
        and_(
            Artifact.owner_purl.is_not(None),
            Artifact.name.in_(
                select(CatalogEntryRow.basename).where(
                    entries, CatalogEntryRow.package.is_not(None)
                )
            ),
        ),
    )


_VERDICT_COLUMNS = (
    Artifact.id,
    Artifact.path,
    Artifact.name,
    Artifact.family,
    Artifact.version,
    Artifact.sha256,
    Artifact.cuda_major,
    Artifact.arch,
    Artifact.owner_purl,
    Artifact.provenance,
    Artifact.provenance_signer,
    Artifact.provenance_catalog,
    Artifact.provenance_reason,
)


def candidate_files(
    session: Session, catalog_ids: Sequence[int], *, skip_verified: bool = False
) -> Iterator[Row[*tuple[Any, ...]]]:
    """Current library files that these catalogs may give a verdict, streamed as plain rows
    (the filter runs in the database; only candidates reach Python)."""
    conds = [*_current_files(), _may_match(catalog_ids)]
    if skip_verified:
        conds.append(Artifact.provenance.is_distinct_from("verified"))
    result = session.execute(
        select(*_VERDICT_COLUMNS).where(*conds).execution_options(yield_per=_BATCH)
    )
    yield from result


def set_verdicts(session: Session, groups: Mapping[tuple[Any, ...], Sequence[int]]) -> None:
    """Write each (provenance, signer, catalog, reason) to its artifact ids."""
    conn = session.connection()
    for (provenance, signer, catalog, reason), ids in groups.items():
        for start in range(0, len(ids), _BATCH):
            conn.execute(
                update(table(Artifact))
                .where(Artifact.id.in_(ids[start : start + _BATCH]))
                .values(
                    provenance=provenance,
                    provenance_signer=signer,
                    provenance_catalog=catalog,
                    provenance_reason=reason,
                )
            )


def reset_unmatched(session: Session, catalog_ids: Sequence[int], reason: str) -> int:
    """Mark `unknown` every current file no entry of these catalogs may match, writing only the
    rows whose verdict differs; returns how many changed. One set-based statement."""
    differs = or_(
        Artifact.provenance.is_distinct_from("unknown"),
        Artifact.provenance_signer.is_not(None),
        Artifact.provenance_catalog.is_not(None),
        Artifact.provenance_reason.is_distinct_from(reason),
    )
    result = session.connection().execute(
        update(table(Artifact))
        .where(*_current_files(), ~_may_match(catalog_ids), differs)
        .values(
            provenance="unknown",
            provenance_signer=None,
            provenance_catalog=None,
            provenance_reason=reason,
        )
    )
    return int(result.rowcount)
