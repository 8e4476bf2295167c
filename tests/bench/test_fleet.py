"""bench/fleet.py at a tiny scale (20 assets, one API process), so the fleet benchmark cannot
rot: it seeds, serves, ingests, reads, prunes and drops its database on the real PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg

from tests.app.conftest import PG_ADMIN

ROOT = Path(__file__).resolve().parents[2]


def test_fleet_bench_tiny() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "fleet.py"), "--assets", "20", "--processes", "1"]
        + ["--reports", "6", "--agents", "2", "--queries", "3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout)
    assert out["seed"]["asset"] == 20
    assert out["seed"]["artifact"] == 20 * 60
    assert out["policy_store"]["assets_evaluated"] == 20
    ingest = out["processes"]["1"]["ingest"]
    assert ingest["statuses"] == {"201": 6}
    # where the ingest's CPU went: the service it started did work, so did PostgreSQL
    used = ingest["cpu"]["cores_used"]
    assert used["service"] > 0 and used["postgres"] > 0 and used["clients"] > 0
    assert 0 < ingest["cpu"]["machine_busy_share"] <= 1
    # the agents' reports landed on the seeded assets: seeding gave them ingest's identities
    assert out["assets_after"] == 20
    reads = out["processes"]["1"]["reads"]
    for name in ("where_used_by_version", "compliance", "gate_by_digest", "dashboard_overview"):
        assert reads[name]["n"] == 3 and reads[name]["p95_ms"] > 0
    assert out["history"]["before"]["scans"] == 26
    assert out["history"]["after_prune_vacuum"]["scans"] == 20
    assert out["machine_at_start"]["cpus"] >= 1
    with psycopg.connect(PG_ADMIN) as admin:
        left = admin.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (out["database_name"],)
        ).fetchall()
    assert left == [], "the benchmark's database was not dropped"
