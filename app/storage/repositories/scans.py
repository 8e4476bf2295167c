"""Queries that write and read scans, raw BOMs, packages, artifacts and current summaries.

Bulk rows go through Core, not the ORM unit of work: on PostgreSQL one ``COPY`` per table (a
third of the client CPU of an executemany, and one command for the server), elsewhere one
executemany. The per-report statements are built once per dialect and take their values as
parameters, so each report reuses their compiled form instead of building a new statement.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from sqlalchemy import (
    JSON,
    Connection,
    Delete,
    Insert,
    RowMapping,
    Table,
    bindparam,
    delete,
    insert,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session
from sqlalchemy.sql.dml import ReturningUpdate

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


@cache
def _insert_scan(dialect: str) -> Insert:
    module: Any = postgresql if dialect == "postgresql" else sqlite
    scan = table(Scan)
    statement: Insert = (
        module.insert(scan)
        .on_conflict_do_nothing(index_elements=["dedup_key"])
        .returning(scan.c.id)
    )
    return statement


_RAW_INSERT = insert(table(RawBom))
_PACKAGE_INSERT = insert(table(Package))
_ARTIFACT_INSERT = insert(table(Artifact))
_SUMMARY_INSERT = insert(table(AssetLibrary))
_RETIRED = table(Artifact)
_RETIRE: ReturningUpdate[Any] = (
    update(_RETIRED)
    .where(_RETIRED.c.scan_id == bindparam("retired_scan_id"), _RETIRED.c.is_current)
    .values(is_current=False)
    .returning(
        _RETIRED.c.kind,
        _RETIRED.c.family,
        _RETIRED.c.component,
        _RETIRED.c.version,
        _RETIRED.c.cuda_major,
        _RETIRED.c.arch,
        _RETIRED.c.sha256,
        _RETIRED.c.integrity,
        _RETIRED.c.provenance,
    )
)
_SUMMARY_DELETE: Delete = delete(table(AssetLibrary)).where(
    table(AssetLibrary).c.asset_id == bindparam("summary_asset_id")
)


def insert_if_new(session: Session, values: Mapping[str, Any]) -> int | None:
    """Insert a scan and return its id, or None when its dedup key is already stored."""
    conn = _core(session)
    scan_id = conn.execute(_insert_scan(conn.dialect.name), dict(values)).scalar_one_or_none()
    return int(scan_id) if scan_id is not None else None


def add_contents(
    session: Session,
    raw: Mapping[str, Any],
    packages: Sequence[Mapping[str, Any]],
    artifacts: Sequence[Mapping[str, Any]],
) -> None:
    """Insert a scan's raw BOM, packages and artifacts in bulk."""
    conn = _core(session)
    conn.execute(_RAW_INSERT, dict(raw))
    if packages:
        _bulk_insert(conn, _PACKAGE_INSERT, packages)
    if artifacts:
        _bulk_insert(conn, _ARTIFACT_INSERT, artifacts)


def _bulk_insert(conn: Connection, statement: Insert, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert rows that all have the same keys: COPY on PostgreSQL, else an executemany."""
    if conn.dialect.name != "postgresql":
        conn.execute(statement, list(rows))
        return
    target = statement.table
    assert isinstance(target, Table)
    columns = tuple(rows[0])
    copy_sql, as_json = _copy_plan(target, columns, conn.dialect.identifier_preparer)
    dbapi = conn.dialect.loaded_dbapi
    # the driver connection is the one the transaction runs on: the rows join it
    driver: Any = conn.connection.dbapi_connection
    try:
        with driver.cursor() as cursor, cursor.copy(copy_sql) as copy:
            for row in rows:
                # JSON columns get the text an INSERT through the column type would store
                copy.write_row(
                    [
                        json.dumps(row[c]) if j else row[c]
                        for c, j in zip(columns, as_json, strict=True)
                    ]
                )
    except dbapi.Error as e:  # raised as SQLAlchemy raises driver errors (503 mapping, rollback)
        raise DBAPIError.instance(copy_sql, None, e, dbapi.Error) from e


@cache
def _copy_plan(
    target: Table, columns: tuple[str, ...], preparer: Any
) -> tuple[str, tuple[bool, ...]]:
    names = ", ".join(preparer.quote(c) for c in columns)
    as_json = tuple(isinstance(target.c[c].type, JSON) for c in columns)
    return f"COPY {preparer.quote(target.name)} ({names}) FROM STDIN", as_json


def retire_current(session: Session, scan_id: int) -> list[RowMapping]:
    """The scan is no longer its asset's latest: drop its artifacts from current state, and
    return what the fleet-wide counts need of them (kind, library, digest, verdicts)."""
    return list(_core(session).execute(_RETIRE, {"retired_scan_id": scan_id}).mappings())


def replace_summary(
    session: Session, asset_id: int, rows: Sequence[Mapping[str, Any]], *, replace: bool = True
) -> None:
    """Replace the asset's current-state summary rows (``replace=False``: it has none yet)."""
    conn = _core(session)
    if replace:
        conn.execute(_SUMMARY_DELETE, {"summary_asset_id": asset_id})
    if rows:
        _bulk_insert(conn, _SUMMARY_INSERT, rows)


def raw_bom(session: Session, scan_id: int) -> RawBom | None:
    """The stored raw BOM of a scan."""
    return session.get(RawBom, scan_id)
