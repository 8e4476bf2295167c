"""Database size per 1,000 scans before and after retention, on PostgreSQL; prints JSON.

A private PostgreSQL cluster (tests/faults/pgcluster.py: initdb + pg_ctl on a free loopback
port; nothing else shares it, so sizes are the fleet's alone) gets a fleet of ASSETS assets with
SCANS reports each (60 GPU library files per report, the ingest benchmark's reports), ingested
through the service's own write path (`app.domain.ingest.ingest`, COPY and all). The history is
spread over four months (received_at), the newest KEEP scans of each asset in this month.

1. Sizes after `VACUUM ANALYZE`: the database, and each history table (bytes per 1,000 scans).
2. Plain tables: `prune --keep-scans KEEP` (row deletes), sizes right after, after `VACUUM`
   (space reusable, files as large) and after `VACUUM FULL` (space given back).
3. A copy of the same database converted by deploy/postgres/partition-history.sql (timed), then
   the same prune: the old months' partitions dropped whole, sizes right after (no vacuum).

    .venv/bin/python bench/retention.py [--assets 50] [--scans 20] [--keep 5]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.domain.ingest import RawReport, ingest  # noqa: E402
from app.domain.report_parser import ReportLimits, parse_report  # noqa: E402
from app.domain.retention import RetentionPolicy, prune  # noqa: E402
from app.domain.tokens import authenticate, create_token  # noqa: E402
from app.settings import Settings  # noqa: E402
from app.storage.migrate import upgrade  # noqa: E402
from app.storage.session import Database  # noqa: E402
from bench.ingest import report_for  # noqa: E402
from tests.faults.pgcluster import PgCluster  # noqa: E402

HISTORY = ("scan", "raw_bom", "artifact", "package")
SCRIPT = ROOT / "deploy" / "postgres" / "partition-history.sql"


def populate(url: str, assets: int, scans: int) -> None:
    """ASSETS x SCANS distinct reports, scanned an hour apart per asset."""
    db = Database(Settings(database_url=url))
    rng = random.Random(11)
    limits = ReportLimits(64, 100_000, 1_000, timedelta(minutes=5))
    start = datetime.now(UTC) - timedelta(hours=scans + 1)
    try:
        with db.transaction(write=True) as session:
            secret = create_token(session, "bench", ["report:write"], None).secret
        with db.transaction() as session:
            principal = authenticate(session, secret)
        for j in range(scans):
            for i in range(assets):
                bom = json.loads(report_for(i, rng))
                bom["metadata"]["timestamp"] = (start + timedelta(hours=j)).strftime(
                    "%Y-%m-%dT%H:%M:%SZ"
                )
                data = json.dumps(bom).encode()
                now = datetime.now(UTC)
                report = parse_report(data, limits, now=now)
                raw = RawReport("application/vnd.cyclonedx+json", len(data), gzip.compress(data, 1))
                with db.transaction(write=True) as session:
                    ingest(session, report, raw, principal, {}, now)
    finally:
        db.dispose()


def spread_over_months(dsn: str, scans: int, keep: int) -> None:
    """received_at: the newest `keep` scans of each asset this month, older ones 1-3 months
    back (as if the history had been collected over four months)."""
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "WITH ranked AS (SELECT id, row_number() OVER (PARTITION BY asset_id "
            "  ORDER BY scanned_at DESC, id DESC) - 1 AS age FROM scan) "
            "UPDATE scan s SET received_at = date_trunc('month', now()) + interval '1 day' "
            "  - make_interval(months => LEAST(3, (r.age / %s)::int)) "
            "FROM ranked r WHERE r.id = s.id",
            (keep,),
        )


def sizes(dsn: str, *, vacuum: str | None = None) -> dict[str, Any]:
    """Database and history-table sizes (bytes), after an optional VACUUM variant."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        if vacuum:
            conn.execute(vacuum)  # type: ignore[arg-type]
        scans = int(conn.execute("SELECT count(*) FROM scan").fetchone()[0])  # type: ignore[index]
        tables = {
            t: int(conn.execute("SELECT pg_total_relation_size(%s)", (t,)).fetchone()[0])  # type: ignore[index]
            for t in HISTORY
        }
        # a partitioned table's own size is 0: add its partitions
        for t in HISTORY:
            parts = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0) FROM pg_inherits "
                "WHERE inhparent = %s::regclass",
                (t,),
            ).fetchone()
            tables[t] += int(parts[0])  # type: ignore[index]
        database = int(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0])  # type: ignore[index]
    history = sum(tables.values())
    per_1000 = (lambda b: round(b * 1000 / scans)) if scans else (lambda b: 0)
    return {
        "scans": scans,
        "database_mb": round(database / 2**20, 1),
        "history_mb": round(history / 2**20, 1),
        "history_bytes_per_1000_scans_mb": round(per_1000(history) / 2**20, 2),
        "per_table_mb": {t: round(b / 2**20, 2) for t, b in tables.items()},
        "share_of_history": {t: round(b / history, 3) for t, b in tables.items()},
    }


def timed_prune(url: str, keep: int) -> dict[str, Any]:
    db = Database(Settings(database_url=url))
    try:
        started = time.perf_counter()
        result = prune(db, RetentionPolicy(keep_scans=keep), datetime.now(UTC))
        seconds = time.perf_counter() - started
    finally:
        db.dispose()
    return {
        "seconds": round(seconds, 2),
        "scans_pruned": result.rows.scan,
        "library_rows_pruned": result.rows.artifact,
        "partitions_dropped": len(result.partitions),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--assets", type=int, default=50)
    parser.add_argument("--scans", type=int, default=20, help="reports per asset")
    parser.add_argument("--keep", type=int, default=5, help="--keep-scans of the prune")
    args = parser.parse_args()
    cluster = PgCluster()
    out: dict[str, Any] = {"assets": args.assets, "scans_per_asset": args.scans, "keep": args.keep}
    try:
        cluster.start()
        url = cluster.create_database("fleet")
        upgrade(url)
        started = time.perf_counter()
        populate(url, args.assets, args.scans)
        out["ingest_seconds"] = round(time.perf_counter() - started, 1)
        spread_over_months(cluster.dsn("fleet"), args.scans, args.keep)
        out["before"] = sizes(cluster.dsn("fleet"), vacuum="VACUUM ANALYZE")
        with psycopg.connect(cluster.dsn(), autocommit=True) as admin:
            admin.execute('CREATE DATABASE "partitioned" TEMPLATE "fleet"')

        plain = cluster.dsn("fleet")
        out["plain"] = {"prune": timed_prune(url, args.keep)}
        out["plain"]["after_prune"] = sizes(plain)
        out["plain"]["after_vacuum"] = sizes(plain, vacuum="VACUUM ANALYZE")
        out["plain"]["after_vacuum_full"] = sizes(plain, vacuum="VACUUM FULL ANALYZE")

        part = cluster.dsn("partitioned")
        started = time.perf_counter()
        with psycopg.connect(part, autocommit=True) as conn:
            conn.execute(SCRIPT.read_text())  # type: ignore[arg-type]
        out["partitioned"] = {"convert_seconds": round(time.perf_counter() - started, 2)}
        out["partitioned"]["after_convert"] = sizes(part, vacuum="VACUUM ANALYZE")
        out["partitioned"]["prune"] = timed_prune(cluster.url("partitioned"), args.keep)
        out["partitioned"]["after_prune"] = sizes(part)
    finally:
        cluster.destroy()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
