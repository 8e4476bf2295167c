"""Containers running on hosts and the image assets they link to."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, delete, insert, or_, select
from sqlalchemy.orm import Session, aliased

from app.storage.base import table
from app.storage.tables import Asset, NodeContainer


def replace_for_host(
    session: Session, host_id: int, rows: Sequence[dict[str, Any]], *, replace: bool = True
) -> None:
    """Set the host's running containers to exactly ``rows`` (its latest report's)."""
    conn = session.connection()
    if replace:
        conn.execute(delete(NodeContainer).where(NodeContainer.host_id == host_id))
    if rows:
        conn.execute(insert(table(NodeContainer)), [{"host_id": host_id, **r} for r in rows])


def of_host(session: Session, host_id: int) -> list[tuple[NodeContainer, int | None]]:
    """The host's containers, each with the id of the image asset it runs (None if unknown)."""
    image = aliased(Asset)
    linked = and_(
        image.kind == "image",
        or_(
            image.identity == NodeContainer.image_digest,
            image.identity == "config:" + NodeContainer.image_config,
        ),
    )
    rows = session.execute(
        select(NodeContainer, image.id)
        .outerjoin(image, linked)
        .where(NodeContainer.host_id == host_id)
        .order_by(NodeContainer.engine, NodeContainer.namespace, NodeContainer.container_id)
    ).all()
    out: dict[tuple[str, str, str], tuple[NodeContainer, int | None]] = {}
    for container, image_id in rows:
        key = (container.engine, container.namespace, container.container_id)
        if key not in out or out[key][1] is None:
            out[key] = (container, image_id)
    return list(out.values())


def running_image(
    session: Session, digest: str | None, config: str | None, limit: int
) -> list[tuple[NodeContainer, Asset]]:
    """Containers running the image (by manifest or config digest) with their hosts."""
    match = []
    if digest:
        match.append(NodeContainer.image_digest == digest)
    if config:
        match.append(NodeContainer.image_config == config)
    if not match:
        return []
    rows = session.execute(
        select(NodeContainer, Asset)
        .join(Asset, Asset.id == NodeContainer.host_id)
        .where(or_(*match))
        .order_by(Asset.name, NodeContainer.container_id)
        .limit(limit)
    ).all()
    return [(c, a) for c, a in rows]
