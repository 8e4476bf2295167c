"""50 agents report the same asset at once (a first report included: the asset row is created
by the race): one asset, every report stored once, and one consistent latest scan, with the
current state and the asset's compliance following it."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import httpx
import psycopg

from tests.faults.conftest import ApiProcess, make_token
from tests.faults.fleet import (
    Agent,
    check_consistent,
    only_unavailable,
    report,
    serial_of,
    stored_serials,
)

AGENTS = 50
POLICY = """apiVersion: gpuprov.dev/v1
kind: PromotionPolicy
name: prod
rules:
  integrity: {forbid: [modified]}
  cuda_pairing: {}
"""


def test_fifty_agents_one_asset(fault_db: str, tmp_path: Path) -> None:
    dsn = fault_db.replace("postgresql+psycopg://", "postgresql://")
    writer = make_token(fault_db, "report:write")
    admin = make_token(fault_db, "admin")
    api = ApiProcess(
        fault_db,
        tmp_path / "api.log",
        max_concurrent_ingests=AGENTS,
        max_concurrent_ingests_per_token=AGENTS,  # one token for all: all race at once
        database_pool_size=20,
        database_max_overflow=40,
    ).start()
    try:
        stored = httpx.put(
            f"{api.url}/api/v1/policies/prod",
            content=POLICY.encode(),
            headers={"Authorization": f"Bearer {admin}", "Content-Type": "application/yaml"},
        )
        assert stored.status_code in (200, 201), stored.text
        # the same host (name, machine id) scanned at different times; two share the newest
        # timestamp (the one stored last wins the tie)
        minutes = [*range(AGENTS - 1), AGENTS - 2]
        random.Random(7).shuffle(minutes)
        reports = [report("gpu-node-shared", minutes=m, files=3) for m in minutes]
        agents = [Agent(api.url, writer, tmp_path / f"spool{i}") for i in range(AGENTS)]
        barrier = threading.Barrier(AGENTS)

        def deliver(agent: Agent, data: bytes) -> None:
            barrier.wait()
            agent.push(data, attempts=5)

        threads = [
            threading.Thread(target=deliver, args=pair)
            for pair in zip(agents, reports, strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        for agent in agents:
            agent.drain()
    finally:
        api.stop()
    assert stored_serials(dsn) == {serial_of(b): 1 for b in reports}
    counts = check_consistent(dsn)  # latest = newest (scanned_at, id); current state follows
    assert counts["asset"] == 1 and counts["scan"] == AGENTS
    only_unavailable(agents)
    assert sum(len(a.acknowledged) for a in agents) == AGENTS
    assert all(d.created for a in agents for d in a.acknowledged)
    with psycopg.connect(dsn) as conn:
        latest, newest = conn.execute(
            "SELECT a.latest_scan_id, max(s.scanned_at) FROM asset a JOIN scan s "
            "ON s.asset_id = a.id GROUP BY a.latest_scan_id"
        ).fetchone()  # type: ignore[misc]
        tied = conn.execute("SELECT max(id) FROM scan WHERE scanned_at = %s", (newest,)).fetchone()
        assert tied is not None and latest == tied[0]
        evaluated = conn.execute("SELECT scan_id FROM compliance_asset").fetchall()
        assert evaluated == [(latest,)]  # compliance follows the latest scan
