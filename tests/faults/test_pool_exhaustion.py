"""Pool exhaustion: every pooled connection is held by a request blocked on a lock; the
requests behind them wait at most the pool timeout and answer 503 with Retry-After, the held
ones end at the statement timeout, and the process keeps answering (nothing hangs)."""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psycopg

from tests.faults.conftest import ApiProcess, make_token

POOL, OVERFLOW, POOL_TIMEOUT, STATEMENT_TIMEOUT = 2, 1, 1, 3
REQUESTS = 60  # more than the API's worker threads (40): some queue for a thread first


def test_pool_exhaustion_answers_503_in_bounded_time(fault_db: str, tmp_path: Path) -> None:
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

    def get(_: int) -> tuple[int, str | None, float]:
        started = time.monotonic()
        answer = httpx.get(f"{api.url}/api/v1/assets", headers=headers, timeout=60)
        return answer.status_code, answer.headers.get("retry-after"), time.monotonic() - started

    try:
        assert get(0)[0] == 200
        blocker = psycopg.connect(dsn)
        blocker.execute("LOCK TABLE asset IN ACCESS EXCLUSIVE MODE")  # every listing waits
        try:
            started = time.monotonic()
            with ThreadPoolExecutor(REQUESTS) as pool:
                pending = [pool.submit(get, i) for i in range(REQUESTS)]
                time.sleep(0.5)
                # the event loop is free while the pool is exhausted
                health = httpx.get(f"{api.url}/healthz", timeout=5)
                answers = [f.result(timeout=60) for f in pending]
            elapsed = time.monotonic() - started
        finally:
            blocker.close()
        assert health.status_code == 200
        statuses = Counter(code for code, _, _ in answers)
        assert statuses == {503: REQUESTS}, statuses
        assert {ra for _, ra, _ in answers} == {"2"}
        # the held connections end at the statement timeout, the rest after at most two pool
        # timeouts (one queued for a worker thread, one for a connection), plus the start-up
        slowest = max(seconds for _, _, seconds in answers)
        assert slowest < STATEMENT_TIMEOUT + 2 * POOL_TIMEOUT + 4, (slowest, elapsed)
        assert get(0)[0] == 200  # the lock gone, it answers again
    finally:
        api.stop()
