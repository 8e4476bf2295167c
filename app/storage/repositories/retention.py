"""Queries of scan-history retention: which scans a rule lets go, what they hold, deleting
them in batches, and the month partitions of the history tables on PostgreSQL.

An asset's latest scan is never selected, whatever the rules say. Children go first and by
statement (not by cascade) so each table's count is known and SQLite needs no cascade work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, Select, delete, func, select, text

from app.storage.base import table
from app.storage.tables import Artifact, Asset, Package, RawBom, Scan

#: the tables holding a scan's rows, children first; each has a ``scan_id`` column
HISTORY_TABLES = ("artifact", "package", "raw_bom")
_CHILDREN = {"artifact": table(Artifact), "package": table(Package), "raw_bom": table(RawBom)}


def prunable(
    keep_scans: int | None,
    cutoff: datetime | None,
    *,
    asset_id: int | None = None,
    spare: int | None = None,
) -> Select[int]:
    """The ids of the scans the rules let go: beyond an asset's ``keep_scans`` newest and, when
    both are given, also scanned before ``cutoff`` (a scan is kept while either rule keeps it).
    Never an asset's latest scan, nor ``spare``; only ``asset_id``'s scans when given."""
    scan, asset = table(Scan), table(Asset)
    rank = (
        func.row_number()
        .over(partition_by=scan.c.asset_id, order_by=(scan.c.scanned_at.desc(), scan.c.id.desc()))
        .label("rank")
    )
    ranked_query = select(scan.c.id, scan.c.asset_id, scan.c.scanned_at, rank)
    if asset_id is not None:
        ranked_query = ranked_query.where(scan.c.asset_id == asset_id)
    ranked = ranked_query.subquery("ranked")
    query = (
        select(ranked.c.id)
        .join(asset, asset.c.id == ranked.c.asset_id)
        # a NULL latest compares unknown: such an asset's scans are all kept
        .where(ranked.c.id != asset.c.latest_scan_id)
    )
    if keep_scans is not None:
        query = query.where(ranked.c.rank > keep_scans)
    if cutoff is not None:
        query = query.where(ranked.c.scanned_at < cutoff)
    if spare is not None:
        query = query.where(ranked.c.id != spare)
    return query


@dataclass(frozen=True, slots=True)
class Rows:
    """Rows of each history table (scans, and their children)."""

    scan: int = 0
    asset: int = 0  # assets whose history loses scans
    artifact: int = 0
    package: int = 0
    raw_bom: int = 0

    def __add__(self, other: Rows) -> Rows:
        return Rows(
            self.scan + other.scan,
            self.asset + other.asset,
            self.artifact + other.artifact,
            self.package + other.package,
            self.raw_bom + other.raw_bom,
        )


def count(conn: Connection, ids: Select[int]) -> Rows:
    """What the selected scans hold, counted without deleting anything."""
    scan = table(Scan)
    chosen = ids.subquery("chosen")
    scans, assets = conn.execute(
        select(func.count(), func.count(scan.c.asset_id.distinct())).where(
            scan.c.id.in_(select(chosen.c.id))
        )
    ).one()
    children = {
        name: int(
            conn.execute(
                select(func.count()).where(child.c.scan_id.in_(select(chosen.c.id)))
            ).scalar_one()
        )
        for name, child in _CHILDREN.items()
    }
    return Rows(int(scans), int(assets), **children)


def next_batch(conn: Connection, ids: Select[int], size: int | None) -> list[int]:
    """Up to ``size`` (None: all) of the selected scan ids, oldest first."""
    query = ids.order_by(text("1"))
    if size is not None:
        query = query.limit(size)
    return [int(i) for i in conn.execute(query).scalars()]


def delete_scans(conn: Connection, ids: Sequence[int]) -> Rows:
    """Delete these scans and their rows; what was deleted. Gate decisions and compliance rows
    that named them keep their record with ``scan_id`` NULL (their foreign keys)."""
    if not ids:
        return Rows()
    scan = table(Scan)
    assets = conn.execute(
        select(func.count(scan.c.asset_id.distinct())).where(scan.c.id.in_(ids))
    ).scalar_one()
    deleted = {
        name: conn.execute(delete(child).where(child.c.scan_id.in_(ids))).rowcount
        for name, child in _CHILDREN.items()
    }
    scans = conn.execute(delete(scan).where(scan.c.id.in_(ids))).rowcount
    return Rows(scans, int(assets), **deleted)


# ------------------------------------------------------------------ PostgreSQL partitions


@dataclass(frozen=True, slots=True)
class Partition:
    """One partition of a history table."""

    parent: str
    name: str
    default: bool
    #: its range ended before now: no new row can land in it (rows are stamped when stored)
    closed: bool


def partitions(conn: Connection) -> list[Partition]:
    """The partitions of the history tables (none unless they were converted to range
    partitions, docs/operations.md), oldest bound first."""
    if conn.dialect.name != "postgresql":
        return []
    rows = conn.execute(
        text(
            "SELECT parent.relname, child.relname, "
            "  pg_get_expr(child.relpartbound, child.oid) = 'DEFAULT', "
            "  coalesce((regexp_match(pg_get_expr(child.relpartbound, child.oid),"
            "    'TO \\(''([^'']+)''\\)'))[1]::timestamptz <= now(), false) "
            "FROM pg_inherits i "
            "JOIN pg_class parent ON parent.oid = i.inhparent "
            "JOIN pg_class child ON child.oid = i.inhrelid "
            "JOIN pg_namespace n ON n.oid = parent.relnamespace "
            "WHERE n.nspname = current_schema() AND parent.relname = ANY(:tables) "
            "ORDER BY parent.relname, child.relname"
        ),
        {"tables": list(HISTORY_TABLES)},
    ).all()
    return [Partition(str(p), str(c), bool(d), bool(closed)) for p, c, d, closed in rows]


def ensure_partitions(conn: Connection, months_ahead: int = 3) -> int | None:
    """Create the coming months' partitions with the function the partitioning script installs
    (deploy/postgres/partition-history.sql); None where it is not installed."""
    if conn.dialect.name != "postgresql":
        return None
    installed = conn.execute(
        text("SELECT to_regprocedure('gpuprov_ensure_partitions(integer)') IS NOT NULL")
    ).scalar_one()
    if not installed:
        return None
    created = conn.execute(
        text("SELECT gpuprov_ensure_partitions(:ahead)"), {"ahead": months_ahead}
    ).scalar_one()
    return int(created)


def partition_droppable(conn: Connection, partition: Partition, ids: Select[int]) -> bool:
    """Whether every row of a partition belongs to a selected scan: only a past month's (not
    this month's, where an ingest may be adding rows, nor the default), and not an empty one."""
    if partition.default or not partition.closed:
        return False
    chosen = ids.subquery("chosen")
    quoted = conn.dialect.identifier_preparer.quote(partition.name)
    rows = text(f"SELECT scan_id FROM {quoted}").columns(scan_id=Scan.__table__.c.id.type)
    part = rows.subquery("part")
    any_row = conn.execute(select(part.c.scan_id).limit(1)).first()
    if any_row is None:
        return False  # an empty partition (this month's, or one ahead) stays
    kept = conn.execute(
        select(part.c.scan_id).where(part.c.scan_id.not_in(select(chosen.c.id))).limit(1)
    ).first()
    return kept is None


def partition_rows(conn: Connection, partition: Partition) -> int:
    """Rows in one partition."""
    quoted = conn.dialect.identifier_preparer.quote(partition.name)
    return int(conn.execute(text(f"SELECT count(*) FROM {quoted}")).scalar_one())  # noqa: S608


def drop_partition(conn: Connection, partition: Partition) -> None:
    """Detach and drop a partition (its rows go with it, without a row-by-row delete)."""
    prep = conn.dialect.identifier_preparer
    parent, name = prep.quote(partition.parent), prep.quote(partition.name)
    conn.execute(text(f"ALTER TABLE {parent} DETACH PARTITION {name}"))
    conn.execute(text(f"DROP TABLE {name}"))
