"""Queries that write and read scans, raw BOMs, packages, artifacts and current summaries.

Bulk rows go through Core table inserts (one executemany each), not the ORM unit of work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.storage.base import table
from app.storage.tables import Artifact, AssetLibrary, Package, RawBom, Scan


def _core(session: Session) -> Connection:
    # the write path runs Core statements on the session's connection: same transaction,
    # without the ORM execution layer's per-statement overhead
    return session.connection()


def by_dedup_key(session: Session, dedup_key: str) -> Scan | None:
    """The scan stored for this idempotency key."""
    return session.scalars(select(Scan).where(Scan.dedup_key == dedup_key)).first()


def by_id(session: Session, scan_id: int) -> Scan | None:
    """The scan with this id."""
    return session.get(Scan, scan_id)


def insert_if_new(session: Session, values: Mapping[str, Any]) -> int | None:
    """Insert a scan and return its id, or None when its dedup key is already stored."""
    module: Any = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    statement = (
        module.insert(Scan)
        .values(**values)
        .on_conflict_do_nothing(index_elements=["dedup_key"])
        .returning(Scan.id)
    )
    scan_id = _core(session).execute(statement).scalar_one_or_none()
    return int(scan_id) if scan_id is not None else None


def add_contents(
    session: Session,
    raw: Mapping[str, Any],
    packages: Sequence[Mapping[str, Any]],
    artifacts: Sequence[Mapping[str, Any]],
) -> None:
    """Insert a scan's raw BOM, packages and artifacts in bulk."""
    conn = _core(session)
    conn.execute(insert(table(RawBom)), [raw])
    if packages:
        conn.execute(insert(table(Package)), list(packages))
    if artifacts:
        conn.execute(insert(table(Artifact)), list(artifacts))


def retire_current(session: Session, scan_id: int) -> None:
    """The scan is no longer its asset's latest: drop its artifacts from current state."""
    _core(session).execute(
        update(table(Artifact))
        .where(Artifact.scan_id == scan_id, Artifact.is_current)
        .values(is_current=False)
    )


def replace_summary(
    session: Session, asset_id: int, rows: Sequence[Mapping[str, Any]], *, replace: bool = True
) -> None:
    """Replace the asset's current-state summary rows (``replace=False``: it has none yet)."""
    if replace:
        _core(session).execute(delete(AssetLibrary).where(AssetLibrary.asset_id == asset_id))
    if rows:
        _core(session).execute(insert(table(AssetLibrary)), list(rows))


def raw_bom(session: Session, scan_id: int) -> RawBom | None:
    """The stored raw BOM of a scan."""
    return session.get(RawBom, scan_id)
