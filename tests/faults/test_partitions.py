"""The time-partitioning plan (deploy/postgres/partition-history.sql) on a real PostgreSQL
database: a populated database with four months of history is copied, the script converts
the copy's history tables to monthly partitions (the original untouched), migrations still
apply, the service works on the copy as before (ingest, idempotency, reads), and `prune` drops
the months that hold only prunable rows while a month that holds an asset's latest scan
stays."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from alembic import command
from fastapi.testclient import TestClient

from app.domain.retention import RetentionPolicy, prune
from app.main import create_app
from app.settings import Settings
from app.storage.migrate import alembic_config, schema_state, upgrade
from app.storage.session import Database
from tests.app.conftest import JSON_HEADERS, auth
from tests.faults.conftest import ROOT, make_token
from tests.faults.fleet import check_consistent, report
from tests.faults.pgcluster import PgCluster

SCRIPT = ROOT / "deploy" / "postgres" / "partition-history.sql"
HISTORY = ("artifact", "package", "raw_bom")


def _month(months_ago: int) -> datetime:
    """The second day of a month before this one (UTC), noon."""
    start = datetime.now(UTC).replace(day=1, hour=12, minute=0, second=0, microsecond=0)
    for _ in range(months_ago):
        start = (start - timedelta(days=1)).replace(day=1)
    return start + timedelta(days=1)


def _partitions(dsn: str) -> dict[str, list[str]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT p.relname, c.relname FROM pg_inherits i "
            "JOIN pg_class p ON p.oid = i.inhparent JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE c.relkind = 'r' ORDER BY 1, 2"
        ).fetchall()
    found: dict[str, list[str]] = {}
    for parent, child in rows:
        found.setdefault(parent, []).append(child)
    return found


def _counts(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        return {
            t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0])  # type: ignore[index]
            for t in ("scan", *HISTORY)
        }


def test_partition_plan_on_a_copy(pg_cluster: PgCluster, fault_db: str, tmp_path: Path) -> None:
    original = fault_db.replace("postgresql+psycopg://", "postgresql://")
    writer = make_token(fault_db, "report:write")
    reader = make_token(fault_db, "inventory:read")
    # node-x reports monthly (its latest is this month's); node-y last reported 3 months ago
    history = [("node-x", 3), ("node-x", 2), ("node-x", 1), ("node-x", 0), ("node-y", 3)]
    with TestClient(create_app(Settings(database_url=fault_db))) as client:
        for i, (name, _) in enumerate(history):
            answer = client.post(
                "/api/v1/reports",
                content=report(name, minutes=i, files=2),
                headers=auth(writer, **JSON_HEADERS),
            )
            assert answer.status_code == 201, answer.text
    with psycopg.connect(original) as conn:  # as if each report had arrived in its month
        for i, (_, months_ago) in enumerate(history, start=1):
            conn.execute("UPDATE scan SET received_at = %s WHERE id = %s", (_month(months_ago), i))
    before = _counts(original)

    copy_name = "rehearsal_" + fault_db.rsplit("/", 1)[1]
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{copy_name}" TEMPLATE "{fault_db.rsplit("/", 1)[1]}"')
    try:
        copy_url = pg_cluster.url(copy_name)
        copy = pg_cluster.dsn(copy_name)
        with psycopg.connect(copy, autocommit=True) as conn:
            conn.execute(SCRIPT.read_text())  # type: ignore[arg-type]
            conn.execute(SCRIPT.read_text())  # type: ignore[arg-type]  # a second run: no-op
        parts = _partitions(copy)
        months = [f"_p{_month(m):%Y%m}" for m in (3, 2, 1, 0)]
        for table in HISTORY:
            names = parts[table]
            assert all(table + m in names for m in months), names
            assert f"{table}_pdefault" in names and len(names) == 4 + 3 + 1  # 3 months ahead
        assert _partitions(original) == {}  # the original is untouched
        assert _counts(copy) == before
        with psycopg.connect(copy) as conn:  # every row in its month, none in the default
            for table in HISTORY:
                default = conn.execute(f"SELECT count(*) FROM {table}_pdefault").fetchone()
                assert default == (0,)
        check_consistent(copy)

        # migrations keep working on the partitioned tables: the latest one down and up again
        command.downgrade(alembic_config(copy_url), "-1")
        upgrade(copy_url)
        assert set(_partitions(copy)) == set(HISTORY)

        settings = Settings(database_url=copy_url)
        db = Database(settings)
        try:
            assert schema_state(db.engine).up_to_date
        finally:
            db.dispose()
        with TestClient(create_app(settings)) as client:
            headers = auth(writer, **JSON_HEADERS)
            fresh = report("node-z", minutes=60, files=2)
            assert client.post("/api/v1/reports", content=fresh, headers=headers).status_code == 201
            assert client.post("/api/v1/reports", content=fresh, headers=headers).status_code == 200
            assets = client.get("/api/v1/assets", headers=auth(reader)).json()["items"]
            assert sorted(a["name"] for a in assets) == ["node-x", "node-y", "node-z"]
            x = next(a for a in assets if a["name"] == "node-x")
            detail = client.get(f"/api/v1/assets/{x['id']}", headers=auth(reader))
            assert detail.status_code == 200 and detail.json()["libraries"], detail.text

        db = Database(settings)
        try:
            dry = prune(db, RetentionPolicy(keep_scans=1), datetime.now(UTC), dry_run=True)
            done = prune(db, RetentionPolicy(keep_scans=1), datetime.now(UTC))
        finally:
            db.dispose()
        # node-x's months -2 and -1 hold only prunable rows: dropped whole; month -3 also
        # holds node-y's latest scan: its node-x rows are deleted, the partition stays
        gone = sorted(f"{t}{m}" for t in HISTORY for m in months[1:3])
        assert sorted(dry.partitions) == sorted(done.partitions) == gone
        assert done.rows.scan == dry.rows.scan == 3
        assert done.rows.raw_bom == dry.rows.raw_bom == 3
        after = _partitions(copy)
        assert not set(gone) & {p for ps in after.values() for p in ps}
        assert all(t + months[0] in after[t] for t in HISTORY)
        counts = check_consistent(copy)
        assert counts["scan"] == counts["raw_bom"] == 3  # node-x's latest, node-y, node-z
    finally:
        pg_cluster.drop_database(copy_name)
