"""PostgreSQL restarted under load: the API answers 503 with Retry-After while the server is
down, recovers by itself (no API restart), and every report the agents hold is stored once."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import httpx

from tests.faults.conftest import ApiProcess, make_token
from tests.faults.fleet import (
    Agent,
    check_consistent,
    only_unavailable,
    report,
    serial_of,
    stored_serials,
)
from tests.faults.pgcluster import PgCluster

AGENTS = 4
REPORTS_EACH = 6


def test_postgres_restart_under_load(pg_cluster: PgCluster, fault_db: str, tmp_path: Path) -> None:
    dsn = fault_db.replace("postgresql+psycopg://", "postgresql://")
    writer = make_token(fault_db, "report:write")
    reader = make_token(fault_db, "inventory:read")
    settings = {"retry_after_seconds": 1, "database_connect_timeout": 2}
    api = ApiProcess(fault_db, tmp_path / "api.log", **settings).start()
    agents = [Agent(api.url, writer, tmp_path / f"spool{i}") for i in range(AGENTS)]
    sent = [
        [report(f"node-{a}-{i}", minutes=i, files=20) for i in range(REPORTS_EACH)]
        for a in range(AGENTS)
    ]
    # (sent, answered, status, Retry-After): a probe belongs to the outage only if it was both
    # sent after the stop and answered before the restart began, since the server accepts
    # connections a moment before pg_ctl's start returns.
    probes: list[tuple[float, float, int, str | None]] = []
    stop = threading.Event()

    def agent_loop(agent: Agent, reports: list[bytes]) -> None:
        for data in reports:
            agent.push(data, attempts=2)
            time.sleep(0.1)

    def probe() -> None:
        with httpx.Client(base_url=api.url, timeout=30) as client:
            while not stop.is_set():
                sent_at = time.monotonic()
                answer = client.get("/api/v1/assets", headers={"Authorization": f"Bearer {reader}"})
                probes.append(
                    (
                        sent_at,
                        time.monotonic(),
                        answer.status_code,
                        answer.headers.get("retry-after"),
                    )
                )
                time.sleep(0.05)

    threads = [
        threading.Thread(target=agent_loop, args=pair) for pair in zip(agents, sent, strict=True)
    ]
    prober = threading.Thread(target=probe)
    try:
        for thread in (*threads, prober):
            thread.start()
        while sum(stored_serials(dsn).values()) < 6:  # under load
            time.sleep(0.1)
        pg_cluster.stop("fast")  # every session ended, the server gone
        down_at = time.monotonic()
        time.sleep(2)
        restart_at = time.monotonic()
        pg_cluster.start()
        up_at = time.monotonic()
        for thread in threads:
            thread.join(timeout=120)
        time.sleep(1.5)  # the prober sees the service after the restart
    finally:
        stop.set()
        prober.join(timeout=60)
    try:
        for agent in agents:
            agent.drain()
        outage = [
            (code, ra)
            for sent_at, t, code, ra in probes
            if down_at + 0.3 < sent_at and t < restart_at
        ]
        after = [code for sent_at, _, code, _ in probes if sent_at > up_at + 1]
        statuses = Counter(code for _, _, code, _ in probes)
        assert outage and all(code == 503 and ra == "1" for code, ra in outage), outage
        assert set(statuses) <= {200, 503}, statuses  # never a 500 or a hang
        assert after and after[-5:] == [200] * 5, after  # recovered by itself
        assert api.process is not None and api.process.poll() is None
    finally:
        api.stop()
    everything = [b for reports in sent for b in reports]
    assert stored_serials(dsn) == {serial_of(b): 1 for b in everything}
    assert check_consistent(dsn)["scan"] == len(everything)
    only_unavailable(agents)
    acknowledged = [d for a in agents for d in a.acknowledged]
    assert len(acknowledged) == len(everything)
    assert all(not a.spool.entries() and not a.spool.rejected() for a in agents)
