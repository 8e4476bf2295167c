"""Queries behind the dashboard's libraries, drift and policy pages: current files by name or
digest, environment parity between two label values, and the assets that changed between
their last two scans. Each reads current state through its indexes (partial indexes on
``artifact.is_current``, the `AssetLibrary` summary, labels by (key, value))."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Row,
    RowMapping,
    Select,
    and_,
    distinct,
    exists,
    func,
    or_,
    select,
)
from sqlalchemy.orm import Session, aliased

from app.storage.repositories import fleet, scopes
from app.storage.repositories.scopes import AssetScope
from app.storage.tables import (
    Artifact,
    Asset,
    AssetLabel,
    AssetLibrary,
    GateDecision,
    PromotionPolicyVersion,
    Scan,
)

_FILE_COLUMNS = (
    Artifact.asset_id,
    Asset.kind.label("asset_kind"),
    Asset.name.label("asset_name"),
    Artifact.path,
    Artifact.name,
    Artifact.family,
    Artifact.component,
    Artifact.version,
    Artifact.cuda_major,
    Artifact.sha256,
    Artifact.integrity,
    Artifact.provenance,
)


def _visible(asset_id: Any, scope: AssetScope | None) -> list[ColumnElement[bool]]:
    """The scope's condition on an asset id column, as a list to splat into ``where``."""
    condition = scopes.in_scope(asset_id, scope)
    return [] if condition is None else [condition]


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def current_files(
    session: Session,
    *,
    name: str | None = None,
    sha256: str | None = None,
    limit: int,
    offset: int,
    scope: AssetScope | None = None,
) -> tuple[Sequence[RowMapping], int]:
    """A page of current library files with this file name (exact, or a glob with ``*``) or
    this SHA-256, with their assets, and how many there are. The digest is read from the
    partial digest index, an exact name from the partial name index."""
    conds = [Artifact.is_current.expression]
    if sha256 is not None:
        conds.append(Artifact.sha256 == sha256)
    if name is not None:
        if "*" in name:
            pattern = "%".join(_escape_like(p) for p in name.split("*"))
            conds.append(Artifact.name.like(pattern, escape="\\"))
        else:
            conds.append(Artifact.name == name)
    conds.extend(_visible(Artifact.asset_id, scope))
    total = session.scalar(select(func.count()).select_from(Artifact).where(*conds)) or 0
    rows = (
        session.execute(
            select(*_FILE_COLUMNS)
            .join(Asset, Asset.id == Artifact.asset_id)
            .where(*conds)
            .order_by(Artifact.asset_id, Artifact.path, Artifact.id)
            .limit(limit)
            .offset(offset)
        )
        .mappings()
        .all()
    )
    return rows, int(total)


def _labelled(key: str, value: str, scope: AssetScope | None = None) -> Select[int]:
    return select(AssetLabel.asset_id).where(
        AssetLabel.key == key, AssetLabel.value == value, *_visible(AssetLabel.asset_id, scope)
    )


def labelled_count(session: Session, key: str, value: str, scope: AssetScope | None = None) -> int:
    """How many assets (of the scope) carry the label ``key=value``."""
    labelled = _labelled(key, value, scope).subquery()
    return session.scalar(select(func.count()).select_from(labelled)) or 0


def parity_gaps(
    session: Session,
    key: str,
    target: str,
    baseline: str,
    family: str | None,
    limit: int,
    offset: int,
    scope: AssetScope | None = None,
) -> tuple[Sequence[Row[str, str | None, int]], int]:
    """(family, version, assets) run by assets labelled ``key=target`` that no asset labelled
    ``key=baseline`` runs (both of the scope), a page of them by family and version, and how
    many there are."""
    base = aliased(AssetLibrary)
    missing = ~exists().where(
        base.asset_id.in_(_labelled(key, baseline, scope)),
        base.family == AssetLibrary.family,
        base.version.is_not_distinct_from(AssetLibrary.version),
    )
    conds = [AssetLibrary.asset_id.in_(_labelled(key, target, scope)), missing]
    if family:
        conds.append(AssetLibrary.family == family)
    grouped = (
        select(
            AssetLibrary.family,
            AssetLibrary.version,
            func.count(distinct(AssetLibrary.asset_id)).label("assets"),
            func.count().over().label("total"),
        )
        .where(*conds)
        .group_by(AssetLibrary.family, AssetLibrary.version)
        .order_by(AssetLibrary.family, func.max(AssetLibrary.version_key), AssetLibrary.version)
        .limit(limit)
        .offset(offset)
    )
    rows = session.execute(grouped).all()
    if rows:
        return [(r[0], r[1], int(r[2])) for r in rows], int(rows[0][3])  # type: ignore[misc]
    if not offset:
        return [], 0
    total = session.scalar(
        select(func.count()).select_from(
            select(AssetLibrary.family)
            .where(*conds)
            .group_by(AssetLibrary.family, AssetLibrary.version)
            .subquery()
        )
    )
    return [], int(total or 0)


def rescanned_assets(
    session: Session, limit: int, offset: int, scope: AssetScope | None = None
) -> tuple[Sequence[Row[int, str, str, int]], int]:
    """A page of the assets (of the scope) that have an earlier scan than their latest, most
    recently scanned first: (id, kind, name, latest scan id), and how many there are."""
    earlier = exists().where(Scan.asset_id == Asset.id, Scan.id != Asset.latest_scan_id)
    conds = [Asset.latest_scan_id.is_not(None), earlier]
    if scope is not None:
        conds.append(scopes.asset_condition(scope))
    total = session.scalar(select(func.count()).select_from(Asset).where(*conds)) or 0
    rows = session.execute(
        select(Asset.id, Asset.kind, Asset.name, Asset.latest_scan_id)
        .where(*conds)
        .order_by(Asset.latest_scanned_at.desc(), Asset.id.desc())
        .limit(limit)
        .offset(offset)
    ).all()
    return rows, int(total)  # type: ignore[return-value]


def asset_names(session: Session, asset_ids: Sequence[int]) -> dict[int, tuple[str, str]]:
    """(kind, name) of each asset."""
    if not asset_ids:
        return {}
    rows = session.execute(select(Asset.id, Asset.kind, Asset.name).where(Asset.id.in_(asset_ids)))
    return {r[0]: (r[1], r[2]) for r in rows}


def decision_by_id(
    session: Session, decision_id: int, scope: AssetScope | None = None
) -> GateDecision | None:
    """One recorded gate decision (None outside the scope: one on another team's asset)."""
    row = session.get(GateDecision, decision_id)
    if row is None or scope is None:
        return row
    if row.asset_id is None or not scopes.asset_visible(session, row.asset_id, scope):
        return None
    return row


def policy_names(session: Session) -> list[str]:
    """The names of the stored promotion policies."""
    return list(
        session.scalars(
            select(PromotionPolicyVersion.name)
            .group_by(PromotionPolicyVersion.name)
            .order_by(PromotionPolicyVersion.name)
        )
    )


_GROUP = (Artifact.family, Artifact.component, Artifact.version, Artifact.cuda_major, Artifact.arch)
#: the current files a digest conflict is judged on (the overview's covering index predicate)
_CONFLICT_FILES = (
    Artifact.is_current.expression,
    Artifact.kind == "file",
    Artifact.sha256.is_not(None),
    Artifact.version.is_not(None),
)


def conflicting_groups(
    session: Session, family: str | None, limit: int, scope: AssetScope | None = None
) -> Sequence[Row[str, str | None, str | None, int | None, str | None]]:
    """The first ``limit`` (family, component, version, CUDA major, arch) of current files seen
    with more than one digest, from the (library, digest) pairs kept at ingest (reading the
    current files' covering index instead took 150-300 ms at 20,000 assets); for a scoped
    caller, over the scope's current files (the kept pairs are the whole fleet's)."""
    if scope is None:
        return fleet.conflicting_groups(session, family, limit)
    conds = [*_CONFLICT_FILES, scopes.asset_condition(scope)]
    if family:
        conds.append(Artifact.family == family)
    pairs = (
        select(*_GROUP, Artifact.sha256)
        .join(Asset, Asset.id == Artifact.asset_id)
        .where(*conds)
        .distinct()
        .subquery()
    )
    columns = [pairs.c[c.key] for c in _GROUP]
    return session.execute(
        select(*columns).group_by(*columns).having(func.count() > 1).order_by(*columns).limit(limit)
    ).all()


def conflict_digests(
    session: Session,
    groups: Sequence[Row[str, str | None, str | None, int | None, str | None]],
    scope: AssetScope | None = None,
) -> Sequence[Row[str, str | None, str | None, int | None, str | None, str, int, str]]:
    """For these groups, each digest with how many assets (of the scope) hold it and an
    example path."""
    if not groups:
        return []
    same = or_(
        *(
            and_(
                *(
                    column.is_not_distinct_from(value)
                    for column, value in zip(_GROUP, group, strict=True)
                )
            )
            for group in groups
        )
    )
    return session.execute(  # type: ignore[return-value]
        select(
            *_GROUP,
            Artifact.sha256,
            func.count(distinct(Artifact.asset_id)),
            func.min(Artifact.path),
        )
        .where(*_CONFLICT_FILES, same, *_visible(Artifact.asset_id, scope))
        .group_by(*_GROUP, Artifact.sha256)
        .order_by(*_GROUP, Artifact.sha256)
    ).all()


def decision_counts(session: Session, since: datetime) -> dict[str, int]:
    """How many gate decisions each policy name has had since ``since`` (index on
    (policy_name, decided_at))."""
    rows = session.execute(
        select(GateDecision.policy_name, func.count())
        .where(GateDecision.decided_at >= since)
        .group_by(GateDecision.policy_name)
    )
    return {name: int(count) for name, count in rows}
