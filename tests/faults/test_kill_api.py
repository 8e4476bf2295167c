"""`kill -9` of the API in the middle of ingests, on a private PostgreSQL cluster.

Two ingests are caught at known points by table locks the test holds: one before its commit
(blocked inserting its raw report), one after it (blocked in the compliance step that follows
the commit, so its answer never leaves). The API process is then killed. Afterwards no partial
scan is visible, and the agents' retries (their real spools) store every report exactly once:
the committed one is answered "already stored".
"""

from __future__ import annotations

import os
import signal
import threading
import time
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
from tests.faults.test_same_asset import POLICY


def _wait_for_lock_waiters(dsn: str, table: str, count: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            waiting = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = %s::regclass",
                (table,),
            ).fetchone()
            if waiting and waiting[0] >= count:
                return
            assert time.monotonic() < deadline, f"no ingest reached the lock on {table}"
            time.sleep(0.05)


def test_kill_9_mid_ingest_leaves_no_partial_scan_and_retries_land_once(
    fault_db: str, tmp_path: Path
) -> None:
    dsn = fault_db.replace("postgresql+psycopg://", "postgresql://")
    token = make_token(fault_db, "report:write")
    admin = make_token(fault_db, "admin")
    api = ApiProcess(fault_db, tmp_path / "api.log").start()
    stored = httpx.put(  # compliance is evaluated after each ingest's commit
        f"{api.url}/api/v1/policies/prod",
        content=POLICY.encode(),
        headers={"Authorization": f"Bearer {admin}", "Content-Type": "application/yaml"},
    )
    assert stored.status_code in (200, 201), stored.text
    agents = [Agent(api.url, token, tmp_path / f"spool{i}") for i in range(4)]
    committed = report("node-committed", files=60)  # answer lost after the commit
    uncommitted = [report(f"node-mid-{i}", files=60) for i in range(2)]  # cut before it
    later = [report(f"node-later-{i}") for i in range(4)]  # pushed while the API is down
    warmup = report("node-warmup")
    agents[3].push(warmup)  # one normal delivery first
    assert len(agents[3].acknowledged) == 1

    after_commit = psycopg.connect(dsn)
    after_commit.execute("LOCK TABLE promotion_policy IN ACCESS EXCLUSIVE MODE")
    first = threading.Thread(target=agents[0].push, args=(committed,))
    first.start()
    _wait_for_lock_waiters(dsn, "promotion_policy", 1)
    before_commit = psycopg.connect(dsn)
    before_commit.execute("LOCK TABLE raw_bom IN ACCESS EXCLUSIVE MODE")
    mid = [
        threading.Thread(target=agents[i + 1].push, args=(b,)) for i, b in enumerate(uncommitted)
    ]
    for thread in mid:
        thread.start()
    _wait_for_lock_waiters(dsn, "raw_bom", 2)

    api.kill()
    for thread in (first, *mid):
        thread.join(timeout=60)
        assert not thread.is_alive()
    for i, data in enumerate(later):  # the API is down: these are spooled behind the others
        agents[i].push(data)
    before_commit.close()  # the killed process's transactions roll back; the locks go
    after_commit.close()

    assert stored_serials(dsn) == {serial_of(warmup): 1, serial_of(committed): 1}
    assert check_consistent(dsn)["scan"] == 2
    spooled = sum(len(a.spool.entries()) for a in agents)
    assert spooled == 1 + len(uncommitted) + len(later)  # nothing lost, nothing delivered

    api.start()  # the same port: the agents retry where they delivered
    try:
        for agent in agents:
            agent.drain()
    finally:
        api.stop()
    sent = [warmup, committed, *uncommitted, *later]
    assert stored_serials(dsn) == {serial_of(b): 1 for b in sent}
    counts = check_consistent(dsn)
    assert counts["scan"] == counts["raw_bom"] == counts["asset"] == len(sent)
    only_unavailable(agents)
    acknowledged = [d for a in agents for d in a.acknowledged]
    assert len(acknowledged) == len(sent)  # every report acknowledged once, none twice
    assert sum(not d.created for d in acknowledged) == 1  # the committed one: "already stored"
    assert all(not a.spool.entries() and not a.spool.rejected() for a in agents)
    # the compliance the kill cut short after the commit: evaluated when the API came back
    with psycopg.connect(dsn) as conn:
        stale = conn.execute(
            "SELECT a.name FROM asset a LEFT JOIN compliance_asset c ON c.asset_id = a.id "
            "WHERE c.scan_id IS DISTINCT FROM a.latest_scan_id"
        ).fetchall()
    assert stale == []


def test_kill_9_of_the_workers_is_survived_without_an_operator(
    fault_db: str, tmp_path: Path
) -> None:
    """As deployed (two workers): both workers killed while ingests are inside their
    transactions; uvicorn's supervisor starts new ones and the agents' retries land once."""
    dsn = fault_db.replace("postgresql+psycopg://", "postgresql://")
    token = make_token(fault_db, "report:write")
    api = ApiProcess(fault_db, tmp_path / "api.log", workers=2).start()
    try:
        workers = api.worker_pids()
        assert len(workers) == 2, workers
        agents = [Agent(api.url, token, tmp_path / f"spool{i}") for i in range(2)]
        sent = [report(f"node-w{i}", files=60) for i in range(2)]
        lock = psycopg.connect(dsn)
        lock.execute("LOCK TABLE raw_bom IN ACCESS EXCLUSIVE MODE")
        threads = [
            threading.Thread(target=a.push, args=(b,)) for a, b in zip(agents, sent, strict=True)
        ]
        for thread in threads:
            thread.start()
        _wait_for_lock_waiters(dsn, "raw_bom", 2)
        for pid in workers:
            os.kill(pid, signal.SIGKILL)
        for thread in threads:
            thread.join(timeout=60)
            assert not thread.is_alive()
        lock.close()
        assert sum(len(a.spool.entries()) for a in agents) == 2 and stored_serials(dsn) == {}
        deadline = time.monotonic() + 180  # new workers, started by the supervisor alone
        while not (set(api.worker_pids()) - set(workers)) or not _healthy(api.url):
            assert time.monotonic() < deadline, "no new worker answered"
            time.sleep(0.2)
        for agent in agents:
            agent.drain()
        assert api.process is not None and api.process.poll() is None
    finally:
        api.stop()
    assert stored_serials(dsn) == {serial_of(b): 1 for b in sent}
    assert check_consistent(dsn)["scan"] == 2
    only_unavailable(agents)
    assert sorted(d.created for a in agents for d in a.acknowledged) == [True, True]


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False
