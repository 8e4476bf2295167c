"""Pool exhaustion: every pooled connection is held by a request blocked on a lock; the
requests behind them wait at most the pool timeout and answer 503 with Retry-After while the
lock is still held, the process keeps answering /healthz, and the held ones finish once the
lock goes (nothing hangs)."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import httpx
import psycopg

from tests.faults.conftest import ApiProcess, make_token

POOL, OVERFLOW, POOL_TIMEOUT, STATEMENT_TIMEOUT = 2, 1, 1, 60
HELD = POOL + OVERFLOW  # requests that get a connection and wait on the lock
REQUESTS = 60  # more than the API's worker threads (40): some queue for a thread first


def test_pool_exhaustion_answers_503_and_never_hangs(fault_db: str, tmp_path: Path) -> None:
    dsn = fault_db.replace("postgresql+psycopg://", "postgresql://")
    reader = make_token(fault_db, "inventory:read")
    api = ApiProcess(
        fault_db,
        tmp_path / "api.log",
        database_pool_size=POOL,
        database_max_overflow=OVERFLOW,
        database_pool_timeout=POOL_TIMEOUT,
        database_statement_timeout=STATEMENT_TIMEOUT,
        retry_after_seconds=2,
    ).start()
    headers = {"Authorization": f"Bearer {reader}"}

    def get(_: int) -> httpx.Response:
        return httpx.get(f"{api.url}/api/v1/assets", headers=headers, timeout=STATEMENT_TIMEOUT)

    try:
        assert get(0).status_code == 200
        blocker = psycopg.connect(dsn)
        blocker.execute("LOCK TABLE asset IN ACCESS EXCLUSIVE MODE")  # every listing waits
        with ThreadPoolExecutor(REQUESTS) as pool:
            pending = [pool.submit(get, i) for i in range(REQUESTS)]
            # while the lock is held (well before the statement timeout), every request that
            # found no free connection has its answer: 503 after the pool timeout
            refused = []
            for future in as_completed(pending, timeout=STATEMENT_TIMEOUT / 2):
                refused.append(future.result())
                if len(refused) == REQUESTS - HELD:
                    break
            health = httpx.get(f"{api.url}/healthz", timeout=5)  # the event loop is free
            blocker.close()  # the held requests go on
            answers = [f.result() for f in pending]
        assert health.status_code == 200
        assert {(r.status_code, r.headers.get("retry-after")) for r in refused} == {(503, "2")}
        assert all("database is unavailable" in r.json()["error"]["message"] for r in refused)
        statuses = Counter(r.status_code for r in answers)
        assert statuses == {503: REQUESTS - HELD, 200: HELD}, statuses
        assert get(0).status_code == 200
    finally:
        api.stop()
