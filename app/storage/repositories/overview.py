"""The dashboard overview's fleet figures, each one aggregate statement: assets per kind, the
current files' verdicts and digest conflicts (from the counts kept at ingest, `fleet`), recent
gate decisions, versions in use, and the current files that are findings (read through
`ix_artifact_current_findings`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Row, case, distinct, func, select, text
from sqlalchemy.orm import Session, aliased

from app.storage.repositories import fleet, scopes
from app.storage.repositories.scopes import AssetScope
from app.storage.tables import (
    FINDING_PREDICATE,
    Artifact,
    Asset,
    AssetFileVerdicts,
    AssetLibrary,
    GateDecision,
)


def _visible(asset_id: Any, scope: AssetScope | None) -> list[Any]:
    condition = scopes.in_scope(asset_id, scope)
    return [] if condition is None else [condition]


def asset_kinds(session: Session, scope: AssetScope | None = None) -> dict[str, int]:
    """Assets (of the scope) per kind."""
    conds = [] if scope is None else [scopes.asset_condition(scope)]
    rows = session.execute(
        select(Asset.kind, func.count()).where(*conds).group_by(Asset.kind)
    ).all()
    return {kind: int(count) for kind, count in rows}


def file_verdicts(
    session: Session, scope: AssetScope | None = None
) -> tuple[int, int, int, int, int, int]:
    """(files, integrity verified, provenance verified, modified, unowned, provenance conflict)
    over the current GPU library files (of the scope's assets): the sums of the per-asset
    counts kept at ingest."""
    if scope is None:
        totals = fleet.verdict_totals(session)
    else:
        v = AssetFileVerdicts
        columns = (
            "files",
            "integrity_verified",
            "provenance_verified",
            "modified",
            "unowned",
            "provenance_conflict",
        )
        row = session.execute(
            select(*(func.coalesce(func.sum(getattr(v, c)), 0) for c in columns)).where(
                *_visible(v.asset_id, scope)
            )
        ).one()
        totals = {c: int(n) for c, n in zip(columns, row, strict=True)}
    return (
        totals["files"],
        totals["integrity_verified"],
        totals["provenance_verified"],
        totals["modified"],
        totals["unowned"],
        totals["provenance_conflict"],
    )


def _findings() -> Any:
    return text(FINDING_PREDICATE)


def finding_assets(session: Session, scope: AssetScope | None = None) -> Row[int, int]:
    """(assets with a modified file, assets with an unowned file), of the scope."""
    row = session.execute(
        select(
            func.count(distinct(case((Artifact.integrity == "modified", Artifact.asset_id)))),
            func.count(distinct(case((Artifact.integrity == "unowned", Artifact.asset_id)))),
        ).where(Artifact.is_current, _findings(), *_visible(Artifact.asset_id, scope))
    ).one()
    return row


def digest_conflict_count(session: Session, scope: AssetScope | None = None) -> int:
    """How many (family, component, version, CUDA major, arch) of current files are seen with
    more than one digest across the fleet (from the pairs kept at ingest), or across the
    scope's assets (counted from their files)."""
    if scope is None:
        return fleet.conflicting_group_count(session)
    from app.storage.repositories import explore

    return len(explore.conflicting_groups(session, None, 1_000_000, scope))


def decisions_since(
    session: Session, since: datetime, scope: AssetScope | None = None
) -> dict[str, int]:
    """Gate decisions (on the scope's assets) per answer (allow, warn, deny) since ``since``."""
    rows = session.execute(
        select(GateDecision.decision, func.count())
        .where(GateDecision.decided_at >= since, *_visible(GateDecision.asset_id, scope))
        .group_by(GateDecision.decision)
    ).all()
    return {decision: int(count) for decision, count in rows}


def versions_in_use(
    session: Session, families: Sequence[str], scope: AssetScope | None = None
) -> Sequence[Row[str, str, int]]:
    """(family, version, assets) of the families' known versions in the latest scans (the
    counts kept at ingest; for a scope, its assets' summary rows counted)."""
    if scope is None:
        return fleet.version_assets(session, families, with_version=True)  # type: ignore[return-value]
    return session.execute(  # type: ignore[return-value]
        select(
            AssetLibrary.family, AssetLibrary.version, func.count(distinct(AssetLibrary.asset_id))
        )
        .where(
            AssetLibrary.family.in_(families),
            AssetLibrary.version.is_not(None),
            *_visible(AssetLibrary.asset_id, scope),
        )
        .group_by(AssetLibrary.family, AssetLibrary.version)
        .order_by(AssetLibrary.family, AssetLibrary.version)
    ).all()


def _rank_of(artifact: Any) -> Any:
    """How urgent a finding is: tampered bytes first, then changed files, then unowned ones."""
    return case(
        (artifact.provenance == "conflict", 3),
        (artifact.integrity == "modified", 2),
        else_=1,
    )


_RANK = _rank_of(Artifact)


def urgent_findings(
    session: Session, limit: int, scope: AssetScope | None = None
) -> Sequence[Row[*tuple[Any, ...]]]:
    """The ``limit`` most urgent (asset, kind of finding) pairs: rank, asset id, kind and name,
    the number of files, one example file's path, family and version, and the asset's last
    sighting; by rank, then the assets with most such files, then the newest assets. Ranked
    from the findings' index alone; only the chosen pairs are joined to their assets and to
    their example file."""
    rank = _RANK.label("rank")
    files = func.count().label("files")
    found = (
        select(Artifact.asset_id, rank, files)
        .where(Artifact.is_current, _findings(), *_visible(Artifact.asset_id, scope))
        .group_by(Artifact.asset_id, _RANK)
        .order_by(rank.desc(), files.desc(), Artifact.asset_id.desc())
        .limit(limit)
        .subquery()
    )
    # the example is one file, picked by path then id, and every fact shown beside it is read
    # from that row: separate MIN()s paired one file's path with another's library and version
    one = aliased(Artifact)
    example = (
        select(one.id)
        .where(
            one.asset_id == found.c.asset_id,
            one.is_current,
            _findings(),  # unqualified: the innermost FROM, this file
            _rank_of(one) == found.c.rank,
        )
        # a file without a path last on both databases (SQLite sorts NULL first, PostgreSQL last)
        .order_by(one.path.is_(None), one.path, one.id)
        .limit(1)
        .correlate(found)
        .scalar_subquery()
    )
    return session.execute(
        select(
            found.c.rank,
            Asset.id,
            Asset.kind,
            Asset.name,
            found.c.files,
            Artifact.path,
            Artifact.family,
            Artifact.version,
            Asset.last_seen,
        )
        .join(Asset, Asset.id == found.c.asset_id)
        .join(Artifact, Artifact.id == example)
        .order_by(found.c.rank.desc(), found.c.files.desc(), Asset.id.desc())
    ).all()
