"""Queries on assets and their labels."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Insert, Update, bindparam, delete, insert, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.storage.base import table
from app.storage.tables import Asset, AssetLabel


@dataclass(frozen=True, slots=True)
class LockedAsset:
    """An asset row held locked by the current transaction."""

    id: int
    name: str
    latest_scan_id: int | None
    latest_scanned_at: datetime | None
    labels: Mapping[str, str]


def upsert_locked(session: Session, values: Mapping[str, Any]) -> LockedAsset:
    """Insert the asset unless it exists, and lock its row until the transaction ends.

    One statement either way: ``ON CONFLICT DO UPDATE`` takes the row lock on PostgreSQL (SQLite
    write transactions hold the database lock already), so reports for one asset serialize here.
    """
    conn = session.connection()
    row = conn.execute(_upsert(conn.dialect.name), dict(values)).one()
    return LockedAsset(row[0], row[1], row[2], row[3], dict(row[4] or {}))


@cache
def _upsert(dialect: str) -> Insert:
    # built once per dialect; the values come as parameters, so every report reuses its
    # compiled form
    module: Any = postgresql if dialect == "postgresql" else sqlite
    asset = table(Asset)
    statement = module.insert(asset)
    upsert: Insert = statement.on_conflict_do_update(
        index_elements=["kind", "identity"], set_={"kind": statement.excluded.kind}
    ).returning(
        asset.c.id, asset.c.name, asset.c.latest_scan_id, asset.c.latest_scanned_at, asset.c.labels
    )
    return upsert


_SET_LATEST: Update = update(table(Asset)).where(table(Asset).c.id == bindparam("locked_asset_id"))


def set_latest(session: Session, asset_id: int, values: Mapping[str, Any]) -> None:
    """Point the asset at its new latest scan and refresh what the report said about it."""
    # the SET clause follows the parameters' keys
    session.connection().execute(_SET_LATEST, {"locked_asset_id": asset_id, **values})


def replace_labels(
    session: Session, asset_id: int, labels: Mapping[str, str], *, replace: bool = True
) -> None:
    """Set the asset's labels to exactly ``labels`` (``replace=False``: it has none yet)."""
    conn = session.connection()
    if replace:
        conn.execute(delete(AssetLabel).where(AssetLabel.asset_id == asset_id))
    if labels:
        conn.execute(
            insert(table(AssetLabel)),
            [{"asset_id": asset_id, "key": k, "value": val} for k, val in labels.items()],
        )


def by_id(session: Session, asset_id: int) -> Asset | None:
    """The asset with this id."""
    return session.get(Asset, asset_id)
