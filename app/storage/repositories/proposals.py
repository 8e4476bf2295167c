"""Queries on runtime proposals (an unloaded vulnerable library proposed as not in the execute
path) and the current library files of a host they are judged on."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.storage.tables import AdvisoryFinding as Finding
from app.storage.tables import Artifact, Asset
from app.storage.tables import AssetAdvisoryMatch as Match
from app.storage.tables import RuntimeProposal as Proposal

_CHUNK = 500


def add(session: Session, row: Proposal) -> Proposal:
    """Store a new proposal (its id assigned)."""
    session.add(row)
    session.flush()
    return row


def by_id(session: Session, proposal_id: int) -> Proposal | None:
    """One proposal."""
    return session.get(Proposal, proposal_id)


def lock_asset(session: Session, asset_id: int) -> bool:
    """Hold the asset's row until the transaction ends, as a report's ingest does (one writer
    per asset: a decision and a withdrawal never interleave); False when there is none."""
    query = select(Asset.id).where(Asset.id == asset_id).with_for_update()
    return session.execute(query).first() is not None


def live_of_asset(session: Session, asset_id: int) -> Sequence[Proposal]:
    """The asset's proposals that a report may still change or that stop one being made again:
    proposed, accepted and dismissed ones, oldest first."""
    return session.scalars(
        select(Proposal)
        .where(
            Proposal.asset_id == asset_id,
            Proposal.status.in_(("proposed", "accepted", "dismissed")),
        )
        .order_by(Proposal.id)
    ).all()


def page(
    session: Session,
    asset_id: int,
    status: str | None,
    limit: int,
    offset: int,
) -> tuple[Sequence[Proposal], int]:
    """A page of one asset's proposals (newest first) and their number."""
    where = [Proposal.asset_id == asset_id]
    if status is not None:
        where.append(Proposal.status == status)
    total = session.scalar(select(func.count()).select_from(Proposal).where(*where)) or 0
    rows = session.scalars(
        select(Proposal).where(*where).order_by(Proposal.id.desc()).limit(limit).offset(offset)
    ).all()
    return rows, int(total)


def open_findings(session: Session, asset_id: int) -> Sequence[Finding]:
    """The asset's findings a person must act on (affected, under investigation): its stack's."""
    stack = select(Match.stack).where(Match.asset_id == asset_id).scalar_subquery()
    return session.scalars(
        select(Finding)
        .where(Finding.stack == stack, Finding.status.in_(("affected", "under_investigation")))
        .order_by(Finding.cve, Finding.id)
    ).all()


def current_files(
    session: Session, asset_id: int, paths: Sequence[str], digests: Sequence[str]
) -> Sequence[Artifact]:
    """The asset's current file rows at these paths or with these SHA-256 digests (a library
    and every copy of its bytes, loaded ones included)."""
    out: dict[int, Artifact] = {}
    for column, values in ((Artifact.path, paths), (Artifact.sha256, digests)):
        wanted = sorted(set(values))
        for i in range(0, len(wanted), _CHUNK):
            chunk = wanted[i : i + _CHUNK]
            for row in session.scalars(
                select(Artifact).where(
                    Artifact.asset_id == asset_id,
                    Artifact.is_current,
                    Artifact.kind == "file",
                    column.in_(chunk),
                )
            ):
                out[row.id] = row
    return sorted(out.values(), key=lambda r: r.id)
