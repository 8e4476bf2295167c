"""Queries of the gate: an image asset by digest, a scan's GPU libraries, the libraries a
labelled part of the fleet runs (parity baseline), and the decision audit records."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Row, func, or_, select
from sqlalchemy.orm import Session

from app.storage.repositories import scopes
from app.storage.repositories.scopes import AssetScope
from app.storage.tables import Artifact, Asset, AssetLabel, AssetLibrary, GateDecision, Scan


def visible(session: Session, asset_id: int, scope: AssetScope | None) -> bool:
    """Whether the asset lies in the scope."""
    return scopes.asset_visible(session, asset_id, scope)


def image_by_digest(session: Session, digest: str) -> Asset | None:
    """The image asset whose manifest digest is ``digest`` (index of (kind, identity))."""
    return session.scalars(
        select(Asset).where(Asset.kind == "image", Asset.identity == digest)
    ).first()


def replaced_image(
    session: Session, repository: str, key: str, value: str, exclude: int
) -> Asset | None:
    """The most recently scanned image of ``repository`` (any tag or digest) labelled
    ``key=value``: the image a candidate of that repository replaces."""
    labelled = select(AssetLabel.asset_id).where(AssetLabel.key == key, AssetLabel.value == value)
    return session.scalars(
        select(Asset)
        .where(
            Asset.kind == "image",
            Asset.id != exclude,
            Asset.latest_scan_id.is_not(None),
            Asset.id.in_(labelled),
            or_(
                Asset.name == repository,
                Asset.name.startswith(repository + ":", autoescape=True),
                Asset.name.startswith(repository + "@", autoescape=True),
            ),
        )
        .order_by(Asset.latest_scanned_at.desc(), Asset.id.desc())
        .limit(1)
    ).first()


def asset_by_id(session: Session, asset_id: int, *, lock: bool = False) -> Asset | None:
    """One asset; ``lock`` holds its row until the transaction ends (one writer per asset)."""
    if lock:
        return session.scalars(select(Asset).where(Asset.id == asset_id).with_for_update()).first()
    return session.get(Asset, asset_id)


def scan_by_id(session: Session, scan_id: int) -> Scan | None:
    """One scan."""
    return session.get(Scan, scan_id)


def scans_by_id(session: Session, scan_ids: Sequence[int]) -> dict[int, Scan]:
    """Scans by id."""
    if not scan_ids:
        return {}
    return {s.id: s for s in session.scalars(select(Scan).where(Scan.id.in_(scan_ids)))}


def artifacts_of(session: Session, scan_ids: Sequence[int]) -> dict[int, list[Artifact]]:
    """The GPU libraries of each scan, in stored order."""
    out: dict[int, list[Artifact]] = {i: [] for i in scan_ids}
    if not scan_ids:
        return out
    rows = session.scalars(
        select(Artifact).where(Artifact.scan_id.in_(scan_ids)).order_by(Artifact.id)
    )
    for row in rows:
        out[row.scan_id].append(row)
    return out


#: the columns a rule reads from a stored GPU library (`app.domain.gate.facts_of`)
_FACT_COLUMNS = (
    Artifact.scan_id,
    Artifact.name,
    Artifact.path,
    Artifact.family,
    Artifact.component,
    Artifact.version,
    Artifact.cuda_major,
    Artifact.sha256,
    Artifact.layer,
    Artifact.integrity,
    Artifact.integrity_reason,
    Artifact.provenance,
    Artifact.provenance_signer,
    Artifact.provenance_reason,
    Artifact.owner_purl,
    Artifact.loaded_processes,
    Artifact.loaded_containers,
    Artifact.loaded_deleted,
    Artifact.loaded_copy,
    Artifact.disk_sha256,
)


def library_facts_of(
    session: Session, scan_ids: Sequence[int]
) -> dict[int, list[Row[*tuple[Any, ...]]]]:
    """The fact columns of each scan's GPU libraries, in stored order: plain rows of one query
    for a whole batch of scans (fleet re-evaluation reads tens of rows per asset, and ORM
    objects of every column cost several times what the rules need)."""
    out: dict[int, list[Row[*tuple[Any, ...]]]] = {i: [] for i in scan_ids}
    if not scan_ids:
        return out
    rows = session.execute(
        select(*_FACT_COLUMNS).where(Artifact.scan_id.in_(scan_ids)).order_by(Artifact.id)
    )
    for row in rows:
        out[row.scan_id].append(row)
    return out


def labelled_libraries(
    session: Session, key: str, value: str
) -> tuple[int, Sequence[Row[int, str, str | None, int | None]]]:
    """How many assets carry the label, and the (asset, family, version, CUDA major) rows of
    their latest scans (the current-state summary)."""
    labelled = select(AssetLabel.asset_id).where(AssetLabel.key == key, AssetLabel.value == value)
    count = session.scalar(select(func.count()).select_from(labelled.subquery())) or 0
    rows = session.execute(
        select(
            AssetLibrary.asset_id,
            AssetLibrary.family,
            AssetLibrary.version,
            AssetLibrary.cuda_major,
        ).where(AssetLibrary.asset_id.in_(labelled))
    ).all()
    return count, rows


def add_decision(session: Session, values: Mapping[str, Any]) -> GateDecision:
    """Record a decision."""
    row = GateDecision(**values)
    session.add(row)
    session.flush()
    return row


@dataclass(frozen=True, slots=True)
class DecisionQuery:
    """Filters of the decision list (all optional, all must match)."""

    policy: str | None = None
    decision: str | None = None
    subject: str | None = None  # a digest (sha256:...) or an exact subject name
    since: datetime | None = None
    asset_id: int | None = None
    #: the caller's asset scope: only decisions on its assets (None: all)
    scope: AssetScope | None = None


def _conditions(query: DecisionQuery) -> list[ColumnElement[bool]]:
    out: list[ColumnElement[bool]] = []
    visible = scopes.in_scope(GateDecision.asset_id, query.scope)
    if visible is not None:
        out.append(visible)
    if query.policy is not None:
        out.append(GateDecision.policy_name == query.policy)
    if query.decision is not None:
        out.append(GateDecision.decision == query.decision)
    if query.subject is not None:
        out.append(
            GateDecision.subject_digest == query.subject
            if query.subject.startswith("sha256:")
            else GateDecision.subject_name == query.subject
        )
    if query.since is not None:
        out.append(GateDecision.decided_at >= query.since)
    if query.asset_id is not None:
        out.append(GateDecision.asset_id == query.asset_id)
    return out


def decisions(
    session: Session, query: DecisionQuery, limit: int, offset: int
) -> tuple[Sequence[GateDecision], int]:
    """A page of decisions, newest first, and how many match."""
    where = _conditions(query)
    total = session.scalar(select(func.count()).select_from(GateDecision).where(*where)) or 0
    rows = session.scalars(
        select(GateDecision)
        .where(*where)
        .order_by(GateDecision.decided_at.desc(), GateDecision.id.desc())
        .limit(limit)
        .offset(offset)
    ).all()
    return rows, total


def latest_decisions(session: Session, asset_ids: Sequence[int]) -> Sequence[GateDecision]:
    """The latest decision under each policy for each of the assets (the highest id per asset
    and policy: ids grow with the time of the decision), by asset then policy name."""
    if not asset_ids:
        return []
    latest = (
        select(func.max(GateDecision.id))
        .where(GateDecision.asset_id.in_(asset_ids))
        .group_by(GateDecision.asset_id, GateDecision.policy_name)
    )
    return session.scalars(
        select(GateDecision)
        .where(GateDecision.id.in_(latest))
        .order_by(GateDecision.asset_id, GateDecision.policy_name)
    ).all()
