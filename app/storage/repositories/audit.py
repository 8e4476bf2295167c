"""Queries on the audit log."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.storage.tables import AuditEvent


def add(session: Session, event: AuditEvent) -> AuditEvent:
    """Insert an audit event."""
    session.add(event)
    session.flush()
    return event


def page(
    session: Session,
    limit: int,
    offset: int,
    *,
    action: str | None = None,
    actor: str | None = None,
    target: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> tuple[Sequence[AuditEvent], int]:
    """A page of events matching every filter given, newest first, and their number."""
    query = select(AuditEvent)
    if action is not None:
        query = query.where(AuditEvent.action == action)
    if actor is not None:
        query = query.where(AuditEvent.actor == actor)
    if target is not None:
        query = query.where(AuditEvent.target == target)
    if since is not None:
        query = query.where(AuditEvent.at >= since)
    if until is not None:
        query = query.where(AuditEvent.at < until)
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    ordered = query.order_by(AuditEvent.at.desc(), AuditEvent.id.desc())
    return session.scalars(ordered.limit(limit).offset(offset)).all(), total
