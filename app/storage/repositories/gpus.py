"""The GPUs of hosts (their latest reports' ``device`` components) and the host files the
container toolkit injects into their containers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from app.storage.base import table
from app.storage.tables import NodeGpu, NodeInjected


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


def replace_injected(
    session: Session, host_id: int, rows: Sequence[dict[str, Any]], *, replace: bool = True
) -> None:
    """Set the host's injected files to exactly ``rows`` (its latest report's)."""
    conn = session.connection()
    if replace:
        conn.execute(delete(NodeInjected).where(NodeInjected.host_id == host_id))
    if rows:
        conn.execute(insert(table(NodeInjected)), [{"host_id": host_id, **r} for r in rows])


def injected_of_host(session: Session, host_id: int) -> list[NodeInjected]:
    """The files the host injects into its containers, by host path."""
    return list(
        session.scalars(
            select(NodeInjected)
            .where(NodeInjected.host_id == host_id)
            .order_by(NodeInjected.host_path)
        )
    )
