"""Queries on advisory analyses (triage decisions per CVE and asset or label selector)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from app.storage.repositories import scopes
from app.storage.repositories.scopes import AssetScope
from app.storage.tables import AdvisoryAnalysis as Analysis
from app.storage.tables import Asset, AssetProduct

_CHUNK = 500


def add(session: Session, row: Analysis) -> Analysis:
    """Store a new analysis (its id assigned)."""
    session.add(row)
    session.flush()
    return row


def by_id(session: Session, analysis_id: int) -> Analysis | None:
    """One analysis."""
    return session.get(Analysis, analysis_id)


def remove(session: Session, row: Analysis) -> None:
    """Delete one analysis."""
    session.delete(row)
    session.flush()


def page(
    session: Session,
    cve: str | None,
    asset_id: int | None,
    limit: int,
    offset: int,
    scope: AssetScope | None = None,
) -> tuple[Sequence[Analysis], int]:
    """A page of analyses, newest first, and their number; ``asset_id`` keeps those written for
    that asset (not the selectors naming it); a caller's ``scope`` sees those of its assets and
    the selectors'."""
    where = []
    visible = scopes.in_scope(Analysis.asset_id, scope)
    if visible is not None:
        where.append(or_(Analysis.asset_id.is_(None), visible))
    if cve is not None:
        where.append(Analysis.cve == cve)
    if asset_id is not None:
        where.append(Analysis.asset_id == asset_id)
    total = session.scalar(select(func.count()).select_from(Analysis).where(*where)) or 0
    rows = session.scalars(
        select(Analysis)
        .where(*where)
        .order_by(Analysis.created_at.desc(), Analysis.id.desc())
        .limit(limit)
        .offset(offset)
    ).all()
    return rows, int(total)


def in_force(session: Session, asset_ids: Sequence[int], now: datetime) -> Sequence[Analysis]:
    """The analyses not expired at ``now`` that may concern these assets: those written for one
    of them, and every selector (matched against labels by the caller)."""
    out: list[Analysis] = []
    live = or_(Analysis.expires_at.is_(None), Analysis.expires_at > now)
    out += session.scalars(select(Analysis).where(live, Analysis.selector.is_not(None))).all()
    for i in range(0, len(asset_ids), _CHUNK):
        chunk = asset_ids[i : i + _CHUNK]
        out += session.scalars(select(Analysis).where(live, Analysis.asset_id.in_(chunk))).all()
    return out


def labels_of(session: Session, asset_ids: Sequence[int]) -> dict[int, dict[str, str]]:
    """Each asset's labels."""
    out: dict[int, dict[str, str]] = {}
    for i in range(0, len(asset_ids), _CHUNK):
        chunk = asset_ids[i : i + _CHUNK]
        for asset_id, labels in session.execute(
            select(Asset.id, Asset.labels).where(Asset.id.in_(chunk))
        ):
            out[int(asset_id)] = dict(labels or {})
    return out


def assets_by_identity(session: Session, kind: str, identities: Sequence[str]) -> dict[str, int]:
    """The ids of the assets of ``kind`` with these identities (a digest, a machine id), by
    identity."""
    out: dict[str, int] = {}
    wanted = sorted(set(identities))
    for i in range(0, len(wanted), _CHUNK):
        chunk = wanted[i : i + _CHUNK]
        query = select(Asset.identity, Asset.id).where(
            Asset.kind == kind, Asset.identity.in_(chunk)
        )
        out.update({str(identity): int(asset_id) for identity, asset_id in session.execute(query)})
    return out


def assets_with_product(session: Session, sha256: Sequence[str]) -> dict[str, list[int]]:
    """The assets whose latest scan holds a product (a toolkit tool, a driver library, ...)
    with one of these SHA-256 digests (hex), by digest."""
    out: dict[str, list[int]] = {}
    wanted = sorted(set(sha256))
    for i in range(0, len(wanted), _CHUNK):
        chunk = wanted[i : i + _CHUNK]
        query = (
            select(AssetProduct.sha256, AssetProduct.asset_id)
            .where(AssetProduct.sha256.in_(chunk))
            .distinct()
            .order_by(AssetProduct.asset_id)
        )
        for digest, asset_id in session.execute(query):
            out.setdefault(str(digest), []).append(int(asset_id))
    return out
