"""Queries on webhook endpoints and their outbox of deliveries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete as sa_delete
from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from app.storage.tables import ApiToken, Asset, WebhookDelivery, WebhookEndpoint

PENDING = "pending"


def by_name(session: Session, name: str) -> WebhookEndpoint | None:
    """The endpoint of this name."""
    return session.scalars(select(WebhookEndpoint).where(WebhookEndpoint.name == name)).first()


def endpoints(session: Session) -> Sequence[WebhookEndpoint]:
    """Every endpoint, by name."""
    return session.scalars(select(WebhookEndpoint).order_by(WebhookEndpoint.name)).all()


@dataclass(frozen=True, slots=True)
class EndpointRoute:
    """What routing an event needs of an enabled endpoint."""

    id: int
    events: tuple[str, ...]
    filter: dict[str, Any]


def enabled_routes(session: Session) -> list[EndpointRoute]:
    """The endpoints deliveries are made to (not disabled), by id: one light query."""
    rows = session.execute(
        select(WebhookEndpoint.id, WebhookEndpoint.events, WebhookEndpoint.filter)
        .where(WebhookEndpoint.disabled_at.is_(None))
        .order_by(WebhookEndpoint.id)
    ).all()
    return [EndpointRoute(int(i), tuple(e or ()), dict(f or {})) for i, e, f in rows]


def add(session: Session, endpoint: WebhookEndpoint) -> WebhookEndpoint:
    """Insert an endpoint."""
    session.add(endpoint)
    session.flush()
    return endpoint


def delete(session: Session, endpoint: WebhookEndpoint) -> None:
    """Remove an endpoint with its deliveries."""
    session.execute(sa_delete(WebhookDelivery).where(WebhookDelivery.endpoint_id == endpoint.id))
    session.delete(endpoint)
    session.flush()


def enqueue(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Add deliveries to the outbox; one already there (same endpoint and message id) stays."""
    if not rows:
        return
    conn = session.connection()
    dialect = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
    conn.execute(
        dialect(WebhookDelivery).on_conflict_do_nothing(
            index_elements=[WebhookDelivery.endpoint_id, WebhookDelivery.message_id]
        ),
        list(rows),
    )


def any_due(session: Session, now: datetime) -> bool:
    """Whether a delivery of an enabled endpoint is due (one index probe)."""
    due = (
        select(WebhookDelivery.id)
        .join(WebhookEndpoint, WebhookEndpoint.id == WebhookDelivery.endpoint_id)
        .where(
            WebhookDelivery.status == PENDING,
            WebhookDelivery.next_attempt_at <= now,
            WebhookEndpoint.disabled_at.is_(None),
        )
        .limit(1)
    )
    return session.scalar(due) is not None


def claim_due(
    session: Session, now: datetime, lease_until: datetime, limit: int
) -> list[tuple[WebhookDelivery, WebhookEndpoint]]:
    """Take up to ``limit`` due deliveries of enabled endpoints: each is due again only at
    ``lease_until`` (so a worker that dies mid-delivery leaves it to the next). Concurrent
    workers on PostgreSQL skip each other's rows; SQLite writers run one at a time."""
    query = (
        select(WebhookDelivery.id)
        .join(WebhookEndpoint, WebhookEndpoint.id == WebhookDelivery.endpoint_id)
        .where(
            WebhookDelivery.status == PENDING,
            WebhookDelivery.next_attempt_at <= now,
            WebhookEndpoint.disabled_at.is_(None),
        )
        .order_by(WebhookDelivery.next_attempt_at, WebhookDelivery.id)
        .limit(limit)
    )
    if session.connection().dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True, of=WebhookDelivery)
    ids = list(session.scalars(query))
    if not ids:
        return []
    session.execute(
        update(WebhookDelivery)
        .where(WebhookDelivery.id.in_(ids))
        .values(next_attempt_at=lease_until)
    )
    rows = session.execute(
        select(WebhookDelivery, WebhookEndpoint)
        .join(WebhookEndpoint, WebhookEndpoint.id == WebhookDelivery.endpoint_id)
        .where(WebhookDelivery.id.in_(ids))
        .order_by(WebhookDelivery.id)
        .execution_options(populate_existing=True)
    ).all()
    return [(d, e) for d, e in rows]


def update_delivery(session: Session, delivery_id: int, values: dict[str, Any]) -> None:
    """Record an attempt's outcome."""
    session.execute(
        update(WebhookDelivery).where(WebhookDelivery.id == delivery_id).values(**values)
    )


def disable(session: Session, endpoint_id: int, now: datetime, reason: str) -> int:
    """Stop delivering to an endpoint: its pending deliveries are cancelled (their number)."""
    session.execute(
        update(WebhookEndpoint)
        .where(WebhookEndpoint.id == endpoint_id)
        .values(disabled_at=now, disabled_reason=reason)
    )
    result = session.execute(
        update(WebhookDelivery)
        .where(WebhookDelivery.endpoint_id == endpoint_id, WebhookDelivery.status == PENDING)
        .values(status="cancelled", last_error=reason)
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def deliveries_page(
    session: Session, endpoint_id: int, status: str | None, limit: int, offset: int
) -> tuple[Sequence[WebhookDelivery], int]:
    """A page of an endpoint's deliveries, newest first, and their number."""
    where = [WebhookDelivery.endpoint_id == endpoint_id]
    if status is not None:
        where.append(WebhookDelivery.status == status)
    total = session.scalar(select(func.count()).select_from(WebhookDelivery).where(*where)) or 0
    rows = session.scalars(
        select(WebhookDelivery)
        .where(*where)
        .order_by(WebhookDelivery.id.desc())
        .limit(limit)
        .offset(offset)
    ).all()
    return rows, int(total)


def status_counts(session: Session, endpoint_ids: Sequence[int]) -> dict[int, dict[str, int]]:
    """Per endpoint, its deliveries counted by status."""
    if not endpoint_ids:
        return {}
    out: dict[int, dict[str, int]] = {}
    for endpoint_id, status, count in session.execute(
        select(WebhookDelivery.endpoint_id, WebhookDelivery.status, func.count())
        .where(WebhookDelivery.endpoint_id.in_(endpoint_ids))
        .group_by(WebhookDelivery.endpoint_id, WebhookDelivery.status)
    ).all():
        out.setdefault(int(endpoint_id), {})[str(status)] = int(count)
    return out


def assets_by_id(session: Session, ids: Sequence[int]) -> dict[int, Asset]:
    """These assets, by id."""
    out: dict[int, Asset] = {}
    for i in range(0, len(ids), 500):
        for asset in session.scalars(select(Asset).where(Asset.id.in_(ids[i : i + 500]))):
            out[asset.id] = asset
    return out


def tokens_expiring(session: Session, now: datetime, until: datetime) -> Sequence[ApiToken]:
    """Tokens in use that expire after ``now`` and by ``until``."""
    return session.scalars(
        select(ApiToken)
        .where(
            ApiToken.revoked_at.is_(None),
            ApiToken.expires_at.is_not(None),
            ApiToken.expires_at > now,
            ApiToken.expires_at <= until,
        )
        .order_by(ApiToken.expires_at, ApiToken.id)
    ).all()
