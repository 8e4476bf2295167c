"""The GPUs of hosts (their latest reports' ``device`` components)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from app.storage.base import table
from app.storage.tables import NodeGpu


def replace_for_host(
    session: Session, host_id: int, rows: Sequence[dict[str, Any]], *, replace: bool = True
) -> None:
    """Set the host's GPUs to exactly ``rows`` (its latest report's)."""
    conn = session.connection()
    if replace:
        conn.execute(delete(NodeGpu).where(NodeGpu.host_id == host_id))
    if rows:
        conn.execute(insert(table(NodeGpu)), [{"host_id": host_id, **r} for r in rows])


def of_host(session: Session, host_id: int) -> list[NodeGpu]:
    """The host's GPUs, by PCI bus id."""
    return list(
        session.scalars(select(NodeGpu).where(NodeGpu.host_id == host_id).order_by(NodeGpu.bus_id))
    )
